"""Issue 13's judged items: the ``judged`` input and the measures that read it.

bpref, gm_bpref, infap, num_nonrel_judged_ret, unj, judged (Judged@k) and
rbp_resid, checked against trec_eval's printed output (out.test.aq,
out.test.aql with -l 2) through ``rank_metrics`` (the command's lines are
compared in tests/test_trec_measures.py::test_command_prints_trec_eval_lines);
against pytrec_eval (trec_eval itself) and ranx on random collections with
unjudged documents, and pytrec_eval's ``judged_docs_only_flag`` for ``-J``;
and against the brute-force reference (tests/reference.py) over every order a
tie policy stands for, in the dense, item-id and grouped layouts.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from functools import cache
from pathlib import Path

import pytest
import torch
from reference import JUDGED_ALWAYS_DEFINED, JUDGED_MEASURES, TIES, reference_judged_measure
from trec_files import (
    CASES,
    TOL_PRINTED,
    random_collection,
    read_qrels,
    read_run,
    read_trec_eval_output,
    to_tensors,
)

from ranking_plugins import rank_metrics
from ranking_plugins.cli import main
from ranking_plugins.embeddings import EmbeddingScores
from ranking_plugins.kernel.statistics.tie_orders import INFAP_EPSILON, expected_infap_terms
from ranking_plugins.totals import geometric_mean

#: trec_eval's name -> (the package's metric, its cutoff)
TREC_NAMES = {
    "bpref": ("bpref", None),
    "infAP": ("infap", None),
    "num_nonrel_judged_ret": ("num_nonrel_judged_ret", None),
    "rbp_resid": ("rbp_resid", None),
    "unj_5": ("unj", 5),
    "unj_10": ("unj", 10),
    "unj_20": ("unj", 20),
}


def _judged_columns(qrels, run, qids, width):
    """``judged`` (Q, width) in to_tensors' column order: the document is in the qrels."""
    judged = torch.zeros(len(qids), width, dtype=torch.bool)
    for q, qid in enumerate(qids):
        docnos = sorted(set(qrels.get(qid, {})) | set(run.get(qid, {})), reverse=True)
        for j, docno in enumerate(docnos):
            judged[q, j] = docno in qrels.get(qid, {})
    return judged


@cache
def _load(data_dir: str, case: str):
    qrels_file, out_file, level = CASES[case]
    d = Path(data_dir)
    out = read_trec_eval_output(d / out_file)
    qids = sorted(q for q in out if q != "all")
    qrels, run = read_qrels(d / qrels_file), read_run(d / "results.test")
    qids, preds, target, mask = to_tensors(qrels, run, qids)
    judged = _judged_columns(qrels, run, qids, preds.shape[1])
    return out, level, qids, preds, target, mask, judged


@pytest.mark.parametrize("case", list(CASES))
def test_reproduces_trec_eval_output(trec_eval_dir, case):
    out, level, qids, preds, target, mask, judged = _load(str(trec_eval_dir), case)
    options = {
        "mask": mask,
        "judged": judged,
        "ties": "first",
        "gain": "linear",
        "relevance_threshold": level,
        "rbp_persistence": 0.9,
    }
    whole = ["bpref", "infap", "num_nonrel_judged_ret", "rbp_resid"]
    per_query = rank_metrics(preds, target, whole, top_k=None, reduction="none", **options)
    per_query |= rank_metrics(
        preds, target, ["unj"], top_k=[5, 10, 20], reduction="none", **options
    )
    mean = rank_metrics(preds, target, whole, top_k=None, **options)
    mean |= rank_metrics(preds, target, ["unj"], top_k=[5, 10, 20], **options)
    mismatches = []
    for name, (metric, k) in TREC_NAMES.items():
        key = metric if k is None else f"{metric}@{k}"
        for q, qid in enumerate(qids):
            if not abs(float(per_query[key][q]) - float(out[qid][name])) <= TOL_PRINTED:
                mismatches.append(f"{name} {qid}: {out[qid][name]} vs {float(per_query[key][q])}")
        summary = (
            float(per_query[key].sum()) if name == "num_nonrel_judged_ret" else float(mean[key])
        )
        if not abs(summary - float(out["all"][name])) <= TOL_PRINTED:
            mismatches.append(f"{name} all: {out['all'][name]} vs {summary}")
    gm_bpref = geometric_mean(per_query["bpref"])
    if not abs(gm_bpref - float(out["all"]["gm_bpref"])) <= TOL_PRINTED:
        mismatches.append(f"gm_bpref all: {out['all']['gm_bpref']} vs {gm_bpref}")
    assert not mismatches, "\n".join(mismatches)


# --------------------------------------------------------------------------- brute force


def _judged_problem(seed: int, queries: int = 7, items: int = 7):
    """Dense scores with many ties, grades -1..2, unjudged and masked items."""
    rng = random.Random(seed)
    preds = torch.tensor(
        [[float(rng.choice([0, 1, 2, 3])) for _ in range(items)] for _ in range(queries)]
    )
    target = torch.tensor(
        [[rng.choice([-1, 0, 0, 1, 2]) for _ in range(items)] for _ in range(queries)]
    )
    judged = torch.rand(queries, items, generator=torch.Generator().manual_seed(seed)) < 0.7
    mask = torch.rand(queries, items, generator=torch.Generator().manual_seed(seed + 1)) < 0.85
    return preds, target, mask, judged


def _check_against_reference(preds, target, mask, judged_dense, ties, got, ks, persistence):
    for q in range(preds.shape[0]):
        args = (preds[q].tolist(), target[q].tolist(), mask[q].tolist(), judged_dense[q].tolist())
        for metric, takes_k in JUDGED_MEASURES.items():
            for k in ks if takes_k else [None]:
                key = metric if k is None else f"{metric}@{k}"
                expected = reference_judged_measure(
                    *args, metric, k, ties=ties, persistence=persistence
                )
                value = float(got[key][q])
                if expected is None:
                    assert metric not in JUDGED_ALWAYS_DEFINED and math.isnan(value), (key, q)
                else:
                    assert value == pytest.approx(expected, abs=1e-12), (key, q, ties)


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_brute_force_dense_and_grouped(ties, seed):
    preds, target, mask, judged = _judged_problem(seed)
    ks = [1, 3, 10]
    options = {
        "mask": mask,
        "judged": judged,
        "ties": ties,
        "empty_target_action": "skip",
        "reduction": "none",
        "rbp_persistence": 0.7,
    }
    got = rank_metrics(preds, target, list(JUDGED_MEASURES), top_k=ks, **options)
    _check_against_reference(preds, target, mask, judged, ties, got, ks, 0.7)
    # the grouped layout: one (M,) entry per item, judged (M,) bool
    indexes = torch.arange(preds.shape[0]).repeat_interleave(preds.shape[1])
    grouped = rank_metrics(
        preds.flatten(),
        target.flatten(),
        list(JUDGED_MEASURES),
        top_k=ks,
        indexes=indexes,
        **{**options, "mask": mask.flatten(), "judged": judged.flatten()},
    )
    for key, values in got.items():
        torch.testing.assert_close(grouped[key], values, equal_nan=True, rtol=0, atol=1e-12)


@pytest.mark.parametrize("ties", TIES)
def test_brute_force_item_ids(ties):
    """Item-id targets with judged ids (-1 padded): a listed relevant item is judged."""
    rng = random.Random(7)
    queries, items = 8, 7
    preds = torch.tensor(
        [[float(rng.choice([0, 1, 2])) for _ in range(items)] for _ in range(queries)]
    )
    ids = torch.tensor([rng.sample(range(items), 3) for _ in range(queries)])
    ids[:, 2] = -1
    judged_ids = torch.tensor([rng.sample(range(items), 4) for _ in range(queries)])
    judged_ids[::3, 3] = -1
    ks = [1, 2, 5, 9]
    options = {"ties": ties, "empty_target_action": "skip", "reduction": "none"}
    got = rank_metrics(preds, ids, list(JUDGED_MEASURES), top_k=ks, judged=judged_ids, **options)
    target = torch.zeros(queries, items, dtype=torch.int64)
    judged = torch.zeros(queries, items, dtype=torch.bool)
    for q in range(queries):
        for i in ids[q].tolist() + judged_ids[q].tolist():
            if i >= 0:
                judged[q, i] = True
        for i in ids[q].tolist():
            if i >= 0:
                target[q, i] = 1
    mask = torch.ones(queries, items, dtype=torch.bool)
    _check_against_reference(preds, target, mask, judged, ties, got, ks, 0.8)
    # without `judged`, every item is judged: as a dense all-True mask
    every = rank_metrics(preds, ids, list(JUDGED_MEASURES), top_k=ks, **options)
    dense = rank_metrics(preds, target, list(JUDGED_MEASURES), top_k=ks, **options)
    for key, values in every.items():
        torch.testing.assert_close(dense[key], values, equal_nan=True, rtol=0, atol=1e-12)


def _infap_group_by_composition(
    start, size, relevant, nonrelevant, pooled_only, rho0, n0, u0
) -> Fraction:
    """One relevant member's expected infAP term, summed over its place k in the group and
    the (multivariate hypergeometric) kinds of the k - 1 members before it, in fractions."""
    eps = Fraction(INFAP_EPSILON)
    others = size - relevant - nonrelevant - pooled_only  # not pooled
    total = Fraction(0)
    for k in range(1, size + 1):
        ways = math.comb(size - 1, k - 1)
        for a in range(relevant):
            for b in range(nonrelevant + 1):
                for c in range(pooled_only + 1):
                    rest = k - 1 - a - b - c
                    if rest < 0 or rest > others:
                        continue
                    chance = Fraction(
                        math.comb(relevant - 1, a)
                        * math.comb(nonrelevant, b)
                        * math.comb(pooled_only, c)
                        * math.comb(others, rest),
                        ways,
                    )
                    rho, n, u = rho0 + a, n0 + b, u0 + c
                    precision = (rho + eps) / (rho + n + 2 * eps)
                    total += chance * (1 + (rho + n + u) * precision) / (start + k)
    return total / size


def test_infap_average_group_expectation_by_composition():
    """Tie groups too large for every order (up to 16 members): the expectation by rank
    among the relevant and judged members equals the sum over places and compositions."""
    rng = random.Random(5)
    groups = [(0, 1, 1, 0, 0, 0, 0, 0), (0, 3, 1, 0, 0, 0, 0, 0), (0, 4, 4, 0, 0, 0, 0, 0)]
    for _ in range(25):
        size = rng.randint(2, 16)
        relevant = rng.randint(1, size)
        nonrelevant = rng.randint(0, size - relevant)
        pooled_only = rng.randint(0, size - relevant - nonrelevant)
        start = rng.randint(0, 30)
        rho0 = rng.randint(0, start)
        n0 = rng.randint(0, start - rho0)
        u0 = rng.randint(0, start - rho0 - n0)
        groups.append((start, size, relevant, nonrelevant, pooled_only, rho0, n0, u0))
    columns = torch.tensor(groups, dtype=torch.float64).T
    query = torch.arange(len(groups)) % 3
    got = expected_infap_terms(query, *columns)
    for g, group in enumerate(groups):
        expected = float(_infap_group_by_composition(*group))
        assert float(got[g]) == pytest.approx(expected, rel=1e-12, abs=0), group


def test_infap_average_refuses_beyond_its_size():
    """A tie group too large for the exact sum: a clear error naming the other policies."""
    scores = torch.zeros(1, 30000)
    grades = torch.zeros(1, 30000, dtype=torch.int64)
    judged = torch.zeros(1, 30000, dtype=torch.bool)
    grades[0, :5000] = 1
    judged[0, :10000] = True  # m = 10000 relevant or judged, z = 20000 others: 2e8 terms
    with pytest.raises(ValueError, match=r"infap.*under `ties='average'`.*pass ties='first'"):
        rank_metrics(scores, grades, ["infap"], top_k=None, judged=judged, ties="average")
    first = rank_metrics(scores, grades, ["infap"], top_k=None, judged=judged, ties="first")
    assert 0 < float(first["infap"]) <= 1


# --------------------------------------------------------------------------- pytrec_eval, ranx


def _random_collection(seed: int, queries: int = 25):
    """Dense inputs with unjudged, unretrieved and pooled-unjudged (-1) documents, no ties."""
    return random_collection(seed, queries, grades=(-1, 0, 0, 1, 2))


PYTREC_NAMES = {
    "bpref": "bpref",
    "infAP": "infap",
    "num_nonrel_judged_ret": "num_nonrel_judged_ret",
}


@pytest.mark.parametrize("judged_only", [False, True])
@pytest.mark.parametrize("level", [None, 2])
def test_matches_pytrec_eval_on_random_collections(level, judged_only):
    """pytrec_eval (trec_eval's code); ``judged_only``: its -J, our masking of unjudged docs."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run, preds, target, mask, judged = _random_collection(seed=31 + (level or 0))
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, set(PYTREC_NAMES), relevance_level=level or 1, judged_docs_only_flag=judged_only
    )
    expected = evaluator.evaluate(run)
    if judged_only:  # trec_eval -J keeps the documents judged with a grade >= 0
        mask = mask & judged & (target >= 0)
    got = rank_metrics(
        preds,
        target,
        sorted(PYTREC_NAMES.values()),
        top_k=None,
        mask=mask,
        judged=judged,
        relevance_threshold=level,
        reduction="none",
        ties="first",
    )
    mismatches = []
    for q, qid in enumerate(sorted(qrels, key=lambda q: int(q[1:]))):
        for name, metric in PYTREC_NAMES.items():
            if not math.isclose(float(got[metric][q]), expected[qid][name], abs_tol=1e-9):
                mismatches.append(f"{name} {qid}: {expected[qid][name]} vs {float(got[metric][q])}")
    assert not mismatches, "\n".join(mismatches[:20])


def test_bpref_matches_ranx():
    ranx = pytest.importorskip("ranx")
    qrels, run, preds, target, mask, judged = _random_collection(seed=77)
    # ranx reads its qrels as relevance grades; -1 would be a grade there
    for qid in qrels:
        qrels[qid] = {d: g for d, g in qrels[qid].items() if g >= 0}
    judged &= target >= 0
    qids = sorted(qrels, key=lambda q: int(q[1:]))
    scores = [
        float(ranx.evaluate(ranx.Qrels({q: qrels[q]}), ranx.Run({q: run[q]}), "bpref"))
        for q in qids
    ]
    got = rank_metrics(
        preds, target, ["bpref"], top_k=None, mask=mask, judged=judged, reduction="none"
    )["bpref"]
    torch.testing.assert_close(got, torch.tensor(scores, dtype=torch.float64), rtol=0, atol=1e-9)


# --------------------------------------------------------------------------- the command


def test_command_judged_only_matches_pytrec_eval(tmp_path, capsys):
    """``-J``: unjudged run documents leave the ranking before every measure (trec_eval -J)."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run, *_ = _random_collection(seed=5, queries=6)
    (tmp_path / "qrels").write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items())
    )
    (tmp_path / "run").write_text(
        "".join(f"{q} Q0 {d} 0 {s} r\n" for q, docs in run.items() for d, s in docs.items())
    )
    names = ["map", "P_5", "bpref", "num_ret", "num_nonrel_judged_ret"]
    expected = pytrec_eval.RelevanceEvaluator(
        qrels,
        {"map", "P.5", "bpref", "num_ret", "num_nonrel_judged_ret"},
        judged_docs_only_flag=True,
    ).evaluate(run)
    argv = ["evaluate", str(tmp_path / "qrels"), str(tmp_path / "run"), "-J", "-q"]
    argv += ["--format", "trec_eval", "-m", "map,P.5,bpref,num_ret,num_nonrel_judged_ret"]
    assert main(argv) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    seen = 0
    for name, qid, value in lines:
        if qid.strip() == "all" or name.strip() not in names:
            continue
        assert float(value) == pytest.approx(expected[qid][name.strip()], abs=1e-4), (name, qid)
        seen += 1
    assert seen == len(names) * len(qrels)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("layout", "judged", "error", "words"),
    [
        ("dense", torch.ones(2, 3, dtype=torch.bool), ValueError, "`judged` must have the shape"),
        ("dense", torch.ones(2, 4, dtype=torch.int64), TypeError, "`judged` must be a bool"),
        ("grouped", torch.ones(5, dtype=torch.bool), ValueError, "`judged` must have the shape"),
        ("grouped", torch.ones(8), TypeError, "`judged` must be a bool"),
        ("ids", torch.ones(2, 2, dtype=torch.bool), TypeError, "`judged` must be an integer"),
        ("ids", torch.ones(3, 2, dtype=torch.int64), ValueError, "`judged` must be \\(Q,\\)"),
        ("ids", torch.full((2, 2), 9), ValueError, "`judged` item indices must lie"),
        ("dense", [[True] * 4] * 2, TypeError, "`judged`"),
    ],
)
def test_bad_judged(layout, judged, error, words):
    preds = torch.rand(2, 4)
    if layout == "dense":
        args = (preds, torch.ones(2, 4))
        extra = {}
    elif layout == "grouped":
        args = (preds.flatten(), torch.ones(8))
        extra = {"indexes": torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])}
    else:
        args = (preds, torch.tensor([[0], [1]]))
        extra = {}
    with pytest.raises(error, match=words):
        rank_metrics(*args, ["bpref"], top_k=None, judged=judged, **extra)


@pytest.mark.parametrize("ties", TIES)
def test_embedding_scores_count_the_judged_items(ties):
    """EmbeddingScores (counted chunk by chunk) equal the dense score matrix (ranked),
    with judged ids, without (every item judged), and with excluded items."""
    g = torch.Generator().manual_seed(11)
    queries = torch.randint(-1, 2, (8, 2), generator=g).double()  # small integers: many ties
    items = torch.randint(-1, 2, (11, 2), generator=g).double()
    target = torch.randint(0, 11, (8, 2), generator=g)
    target[::3, 1] = -1
    judged = torch.randint(-1, 11, (8, 5), generator=g)
    exclude = torch.randint(0, 11, (8, 2), generator=g)
    mask = torch.ones(8, 11, dtype=torch.bool).scatter_(1, exclude, False)
    options = {"ties": ties, "reduction": "none", "empty_target_action": "skip"}
    for judged_ids in (judged, None):
        for excluded in (None, exclude):
            embedded = EmbeddingScores(queries, items, chunk_size=4, exclude=excluded)
            got = rank_metrics(
                embedded,
                target,
                list(JUDGED_MEASURES),
                top_k=[1, 3, 20],
                judged=judged_ids,
                **options,
            )
            expected = rank_metrics(
                queries @ items.T,
                target,
                list(JUDGED_MEASURES),
                top_k=[1, 3, 20],
                judged=judged_ids,
                mask=None if excluded is None else mask,
                **options,
            )
            for key, value in expected.items():
                torch.testing.assert_close(got[key], value, equal_nan=True, rtol=0, atol=1e-12)


def test_embedding_scores_bad_judged():
    scores = EmbeddingScores(torch.rand(2, 3), torch.rand(5, 3))
    with pytest.raises(TypeError, match="`judged` must be an integer"):
        rank_metrics(scores, torch.tensor([0, 1]), ["bpref"], top_k=None, judged=torch.ones(2, 5))
    with pytest.raises(ValueError, match="`judged` item indices must lie"):
        rank_metrics(
            scores, torch.tensor([0, 1]), ["bpref"], top_k=None, judged=torch.tensor([7, 1])
        )


# --------------------------------------------------------------------------- adapters


def test_adapters_take_judged():
    """Ignite (a dict output's "judged") and TorchMetrics (``update(judged=...)``) agree
    with rank_metrics, dense and grouped (``whole_queries=True`` or kept until compute)."""
    pytest.importorskip("ignite")
    pytest.importorskip("torchmetrics")
    from ranking_plugins.ignite import RankingMetrics as IgniteMetrics
    from ranking_plugins.torchmetrics import RankingMetrics as TorchMetricsMetrics

    preds, target, _, judged = _judged_problem(3, queries=6, items=6)
    metrics, ks = ["bpref", "unj", "judged", "rbp_resid"], [2, 4]
    options = {"ties": "first"}
    expected = rank_metrics(preds, target, metrics, top_k=ks, judged=judged, **options)
    ignite = IgniteMetrics(metrics, ks, **options)
    ignite.update({"y_pred": preds[:3], "y": target[:3], "judged": judged[:3]})
    ignite.update({"y_pred": preds[3:], "y": target[3:], "judged": judged[3:]})
    got = ignite.compute()
    for key, value in expected.items():
        assert float(got[key]) == pytest.approx(float(value), abs=1e-12), key
    dense = TorchMetricsMetrics(metrics, ks, **options)
    dense.update(preds, target, judged=judged)
    indexes = torch.arange(6).repeat_interleave(6)
    grouped = TorchMetricsMetrics(metrics, ks, whole_queries=True, **options)
    grouped.update(preds.flatten(), target.flatten(), indexes, judged=judged.flatten())
    for state in (dense, grouped):
        got = state.compute()
        for key, value in expected.items():
            assert float(got[key]) == pytest.approx(float(value), abs=1e-12), key
    # the default grouped layout keeps the judged flags until compute
    # (tests/test_torchmetrics_judged.py splits queries across updates)
    kept = TorchMetricsMetrics(metrics, ks, **options)
    kept.update(preds.flatten(), target.flatten(), indexes, judged=judged.flatten())
    got = kept.compute()
    for key, value in expected.items():
        assert float(got[key]) == pytest.approx(float(value), abs=1e-12), key


def test_lightning_callback_reads_judged(tmp_path):
    """The callback passes a step output's "judged" key to its TorchMetrics state."""
    pytest.importorskip("lightning")
    import lightning.pytorch as pl
    from lightning_helpers import NUM_ITEMS, NextItem, loader

    from ranking_plugins.lightning import RankingMetricsCallback

    seen: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    class JudgedIds(NextItem):
        def validation_step(self, batch, batch_idx, dataloader_idx=0):
            features, target, _ = batch
            preds = self(features)
            judged = torch.stack([target, (target + 1) % NUM_ITEMS, (target + 5) % NUM_ITEMS], 1)
            seen.append((preds.detach(), target, judged))
            return {"preds": preds, "target": target, "judged": judged}

    metrics, ks = ["bpref", "unj", "judged"], [1, 3]
    callback = RankingMetricsCallback(metrics=metrics, top_k=ks, ties="first")
    model = JudgedIds()
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        callbacks=[callback],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.validate(model, loader(seed=4, size=10, batch_size=4), verbose=False)
    preds, target, judged = (torch.cat(parts) for parts in zip(*seen, strict=True))
    expected = rank_metrics(preds, target, metrics, top_k=ks, judged=judged, ties="first")
    for key, value in expected.items():
        assert float(trainer.callback_metrics[f"val/{key}"]) == pytest.approx(float(value)), key


@pytest.mark.parametrize("ties", TIES)
def test_item_ids_ranked_and_counted_agree(ties):
    """Item ids are counted (CountedJudgedStats) unless ranked for another reason (an
    exposure metric): both ways give the same judged statistics."""
    from ranking_plugins.kernel import GainRule, normalize_input, rank_batch
    from ranking_plugins.metrics import get_metrics
    from ranking_plugins.options import Options
    from ranking_plugins.per_query import read_metrics

    g = torch.Generator().manual_seed(2)
    preds = torch.randint(0, 3, (9, 8), generator=g).float()
    ids = torch.randint(-1, 8, (9, 3), generator=g)
    judged = torch.randint(-1, 8, (9, 4), generator=g)
    rule = GainRule(None, "exponential")
    metrics = get_metrics(list(JUDGED_MEASURES))
    options = Options(ties=ties, empty_target_action="skip")
    values = []
    for method in ("count", "rank"):
        batch = normalize_input(
            preds,
            ids,
            indexes=None,
            mask=None,
            target_format=None,
            rule=rule,
            validate_args=True,
            judged=judged,
        )
        ranked = rank_batch(batch, ties, None, method=method, judgments=True)
        values.append(read_metrics(ranked, metrics, (1, 3, 9), options).results)
    for key, counted in values[0].items():
        torch.testing.assert_close(
            values[1][key].values, counted.values, equal_nan=True, rtol=0, atol=1e-12
        )


def test_ignite_refuses_a_judged_entry_that_is_not_a_tensor():
    pytest.importorskip("ignite")
    from ranking_plugins.ignite import RankingMetrics

    metric = RankingMetrics(["bpref"], None)
    with pytest.raises(TypeError, match=r"`judged` in the engine output must be a torch\.Tensor"):
        metric.update({"y_pred": torch.rand(2, 3), "y": torch.ones(2, 3), "judged": [[True] * 3]})


# --------------------------------------------------------------------------- short lists


def _trec_eval_unj(ranked_judged: list[bool], k: int) -> float:
    """trec_eval's unj_k (m_unjudged.c): the unjudged documents among the first
    min(k, retrieved), divided by k; a cutoff past the list is filled with
    documents that are *not* unjudged ("assumed irrelevant (not unjudged)")."""
    return sum(1 for judged in ranked_judged[:k] if not judged) / k


@pytest.mark.parametrize("ties", TIES)
def test_unj_of_a_list_shorter_than_k(ties):
    """A cutoff past the ranked list: the padding is not unjudged (found while
    widening the differential fuzzer; unj counted it as unjudged, 1 - judged@k)."""
    preds = torch.tensor([[3.0, 2.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    target = torch.tensor([[1, 0, 2, 0], [0, 1, 0, 0]])
    judged = torch.tensor([[True, False, True, True], [True, True, False, True]])
    mask = torch.tensor([[True, True, True, False], [True, True, True, True]])
    got = rank_metrics(
        preds, target, ["unj", "judged"], [2, 10], mask=mask, judged=judged, ties=ties,
        reduction="none",
    )  # fmt: skip
    # row 0: ranked a, b, c (b unjudged); row 1: every order of four items, one unjudged
    assert float(got["unj@10"][0]) == _trec_eval_unj([True, False, True], 10) == 0.1
    assert float(got["unj@2"][0]) == 0.5
    assert float(got["unj@10"][1]) == pytest.approx(0.1, abs=1e-12)
    # judged@k (ir_measures' Judged@k, P@k of the judged documents) divides by k as well
    assert float(got["judged@10"][0]) == pytest.approx(0.2, abs=1e-12)
    assert float(got["judged@10"][1]) == pytest.approx(0.3, abs=1e-12)


@pytest.mark.parametrize("ties", TIES)
def test_infap_of_relevant_items_with_a_negative_grade(ties):
    """A threshold below a negative grade makes that item relevant (SPEC 4): infAP counts
    it once, as relevant, not also as a pooled, unjudged item before the next relevant
    one (found by the differential fuzzer: infap was 1.27 here, above its bound 1)."""
    preds = torch.tensor([[0.0, 1.0, 0.0, 2.0], [3.0, 2.0, 1.0, 0.0]])
    target = torch.tensor([[-3, 0, -1, -3], [-1, 1, -2, 0]])
    judged = torch.tensor([[True, True, True, True], [True, True, True, False]])
    for threshold in (-5.0, -1.0, 0.0):
        got = rank_metrics(
            preds, target, ["infap"], None, judged=judged, ties=ties, reduction="none",
            relevance_threshold=threshold, empty_target_action="skip",
        )["infap"]  # fmt: skip
        for q in range(2):
            expected = reference_judged_measure(
                preds[q].tolist(), target[q].tolist(), [True] * 4, judged[q].tolist(),
                "infap", None, ties=ties, relevance_threshold=threshold,
            )  # fmt: skip
            assert float(got[q]) == pytest.approx(expected, abs=1e-12), (threshold, q)
            assert float(got[q]) <= 1.0
