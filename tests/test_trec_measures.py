"""Issue 13's measures: trec_eval's counts and set measures, relative_P, binG, RBP, DCG.

Checked four ways: trec_eval's own printed output (out.test.aq, out.test.aql
with -l 2) per query and in the "all" line; pytrec_eval (trec_eval itself)
on random collections with unjudged and unretrieved documents; ranx for RBP and DCG;
and the brute-force reference (tests/reference.py) over every order of
every tie group, under the four tie policies, in the dense and item-id layouts.
"""

from __future__ import annotations

import json
import math
import random
import re
from functools import cache
from pathlib import Path

import pytest
import reference
import torch
from reference import (
    ALWAYS_DEFINED,
    INTERPOLATED,
    R_MULTIPLES,
    RECALL_LEVELS,
    TIES,
    TREC_MEASURES,
    reference_trec_measure,
)
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
from ranking_plugins.cli import main, sample_path
from ranking_plugins.options import Options
from ranking_plugins.runs.names import TREC_EVAL_MEASURES

#: trec_eval measure (or family with cutoffs) -> (metric, takes a cutoff)
TREC_NAMES = {
    "num_ret": ("num_ret", False),
    "num_rel": ("num_rel", False),
    "num_rel_ret": ("num_rel_ret", False),
    "set_P": ("precision", False),
    "set_recall": ("recall", False),
    "set_F": ("f1", False),
    "set_relative_P": ("relative_precision", False),
    "set_map": ("set_map", False),
    "utility": ("utility", False),
    "binG": ("bin_g", False),
    "rbp": ("rbp", False),
    "relative_P": ("relative_precision", True),
    **{name: (name, False) for name in (*INTERPOLATED, *R_MULTIPLES)},
}
#: trec_eval's "all" line of these is the sum over the queries, not the mean
SUMMED = {"num_ret", "num_rel", "num_rel_ret"}
#: trec_eval's rbp reads the grades (scaled by the largest), not -l
UNTHRESHOLDED = {"rbp"}
TREC_EVAL_RBP_PERSISTENCE = 0.9


@cache
def _load(data_dir: str, case: str):
    qrels_file, out_file, level = CASES[case]
    d = Path(data_dir)
    out = read_trec_eval_output(d / out_file)
    qids = sorted(q for q in out if q != "all")
    qids, preds, target, mask = to_tensors(
        read_qrels(d / qrels_file), read_run(d / "results.test"), qids
    )
    return out, level, qids, preds, target, mask


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", list(TREC_NAMES))
def test_reproduces_trec_eval_output(trec_eval_dir, case, name):
    out, level, qids, preds, target, mask = _load(str(trec_eval_dir), case)
    metric, takes_k = TREC_NAMES[name]
    measures = sorted(
        (m for m in out["all"] if m == name or (takes_k and m.startswith(name + "_"))),
        key=lambda m: int(m.rpartition("_")[2]) if takes_k else 0,
    )
    assert measures, f"{name} is not in {CASES[case][1]}"
    ks = [int(m.rpartition("_")[2]) for m in measures] if takes_k else None
    per_query = {}
    for reduction in ("none", "mean"):
        per_query[reduction] = rank_metrics(
            preds,
            target,
            metrics=(metric,),
            top_k=ks,
            mask=mask,
            ties="first",
            gain="linear",
            relevance_threshold=None if name in UNTHRESHOLDED else level,
            rbp_persistence=TREC_EVAL_RBP_PERSISTENCE,
            reduction=reduction,
        )
    mismatches = []
    for measure in measures:
        key = f"{metric}@{measure.rpartition('_')[2]}" if takes_k else metric
        values = per_query["none"][key]
        for q, qid in enumerate(qids):
            if not abs(float(values[q]) - float(out[qid][measure])) <= TOL_PRINTED:
                mismatches.append(
                    f"{measure} {qid}: trec_eval {out[qid][measure]}, got {float(values[q])}"
                )
        summary = float(values.sum()) if name in SUMMED else float(per_query["mean"][key])
        if not abs(summary - float(out["all"][measure])) <= TOL_PRINTED:
            mismatches.append(f"{measure} all: trec_eval {out['all'][measure]}, got {summary}")
    assert not mismatches, "\n".join(mismatches)


# --------------------------------------------------------------------------- random collections


def _random_collection(seed: int):
    """Dense inputs with unjudged and unretrieved documents, no ties, graded 0..2."""
    return random_collection(seed, queries=20)[:5]


PYTREC_NAMES = {
    "num_ret": "num_ret",
    "num_rel": "num_rel",
    "num_rel_ret": "num_rel_ret",
    "set_P": "precision",
    "set_recall": "recall",
    "set_F": "f1",
    "set_relative_P": "relative_precision",
    "set_map": "set_map",
    "utility": "utility",
    "binG": "bin_g",
    **{name: name for name in (*INTERPOLATED, *R_MULTIPLES)},
}


def _same_recall_cut(name: str, relevant: int) -> bool:
    """Whether trec_eval's rounding of level · R (lround, since 10.0: out.test.aq) and
    pytrec_eval's older int(level · R + 0.9) reach the same number of hits."""
    levels = RECALL_LEVELS if name == "11pt_avg" else (float(name.rpartition("_")[2]),)
    return all(
        max(1, math.floor(x * relevant + 0.5)) == max(1, int(x * relevant + 0.9)) for x in levels
    )


@pytest.mark.parametrize("level", [None, 2])
def test_matches_pytrec_eval_on_random_collections(level):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    ks = [1, 3, 10, 50]
    qrels, run, preds, target, mask = _random_collection(seed=13 + (level or 0))
    measures = (
        {*PYTREC_NAMES, "relative_P.1,3,10,50", "iprec_at_recall", "Rprec_mult"}
        - set(R_MULTIPLES)
        - set(INTERPOLATED[:-1])
    )  # the iprec_at_recall family is asked by its name
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=level or 1)
    expected = evaluator.evaluate(run)
    # tie-free scores: every policy gives the same numbers, and interpolated
    # precision needs an ordered one
    options = {"mask": mask, "relevance_threshold": level, "reduction": "none", "ties": "first"}
    whole = rank_metrics(
        preds, target, metrics=sorted(set(PYTREC_NAMES.values())), top_k=None, **options
    )
    at_k = rank_metrics(preds, target, metrics=("relative_precision",), top_k=ks, **options)
    mismatches = []
    compared: set[str] = set()
    qids = sorted(qrels, key=lambda q: int(q[1:]))
    for q, qid in enumerate(qids):
        relevant = sum(1 for g in qrels[qid].values() if g >= (level or 1))
        for name, metric in PYTREC_NAMES.items():
            if name in INTERPOLATED and not _same_recall_cut(name, relevant):
                continue
            compared.add(name)
            if not math.isclose(float(whole[metric][q]), expected[qid][name], abs_tol=1e-9):
                mismatches.append(
                    f"{name} {qid}: {expected[qid][name]} vs {float(whole[metric][q])}"
                )
        for k in ks:
            name = f"relative_P_{k}"
            got = float(at_k[f"relative_precision@{k}"][q])
            if not math.isclose(got, expected[qid][name], abs_tol=1e-9):
                mismatches.append(f"{name} {qid}: {expected[qid][name]} vs {got}")
    assert not mismatches, "\n".join(mismatches[:20])
    assert compared == set(PYTREC_NAMES)  # every measure met at least one query


@pytest.mark.parametrize("persistence", [0.5, 0.8, 0.95])
def test_rbp_matches_ranx(persistence):
    ranx = pytest.importorskip("ranx")
    qrels, run, preds, target, mask = _random_collection(seed=31)
    binary = {q: {d: 1 for d, g in docs.items() if g > 0} for q, docs in qrels.items()}
    kept = [q for q in binary if binary[q]]  # ranx needs a relevant document per query
    name = f"rbp.{str(persistence)[2:]}"
    expected = ranx.evaluate(
        ranx.Qrels({q: binary[q] for q in kept}),
        ranx.Run({q: run[q] for q in kept}),
        name,
        return_mean=False,
    )
    got = rank_metrics(
        preds,
        target > 0,
        metrics=("rbp",),
        top_k=None,
        mask=mask,
        rbp_persistence=persistence,
        reduction="none",
    )["rbp"]
    qids = sorted(qrels, key=lambda q: int(q[1:]))
    for i, qid in enumerate(sorted(kept)):  # ranx reports queries sorted by id
        assert float(got[qids.index(qid)]) == pytest.approx(float(expected[i]), abs=1e-9), qid


@pytest.mark.parametrize(("gain", "ranx_name"), [("linear", "dcg"), ("exponential", "dcg_burges")])
@pytest.mark.parametrize("k", [1, 5, 30])
def test_dcg_matches_ranx(gain, ranx_name, k):
    ranx = pytest.importorskip("ranx")
    qrels, run, preds, target, mask = _random_collection(seed=37)
    graded = {q: {d: g for d, g in docs.items() if g > 0} for q, docs in qrels.items()}
    kept = [q for q in graded if graded[q]]  # ranx needs a relevant document per query
    expected = ranx.evaluate(
        ranx.Qrels({q: graded[q] for q in kept}),
        ranx.Run({q: run[q] for q in kept}),
        f"{ranx_name}@{k}",
        return_mean=False,
    )
    got = rank_metrics(
        preds, target, metrics=("dcg",), top_k=k, mask=mask, gain=gain, reduction="none"
    )[f"dcg@{k}"]
    qids = sorted(qrels, key=lambda q: int(q[1:]))
    assert len(kept) > 10 and any(float(v) > 0 for v in expected)
    for i, qid in enumerate(sorted(kept)):  # ranx reports queries sorted by id
        assert float(got[qids.index(qid)]) == pytest.approx(float(expected[i]), abs=1e-9), qid


# --------------------------------------------------------------------------- brute force under ties


def _tied_problem(seed: int, queries: int = 6, columns: int = 7):
    rng = random.Random(seed)
    preds = torch.tensor(
        [[rng.choice([0.0, 1.0, 2.0, 3.0]) for _ in range(columns)] for _ in range(queries)]
    )
    target = torch.tensor(
        [[rng.choice([0, 0, 1, 2]) for _ in range(columns)] for _ in range(queries)]
    )
    mask = torch.rand(queries, columns, generator=torch.Generator().manual_seed(seed)) < 0.8
    target[0] = 0  # a query without a relevant item
    return preds, target, mask


def _exact(ties: str) -> list[str]:
    """The measures exact under ``ties``: every one, under every policy (issue 13)."""
    return list(TREC_MEASURES)


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("seed", [0, 1])
def test_brute_force_dense(ties, seed):
    preds, target, mask = _tied_problem(seed)
    ks = [1, 2, 4, 9]
    k_metrics = ("relative_precision", "rbp", "dcg")
    options = {
        "mask": mask,
        "ties": ties,
        "gain": "linear",
        "empty_target_action": "skip",
        "reduction": "none",
    }
    whole = rank_metrics(
        preds, target, metrics=_exact(ties), top_k=None, rbp_persistence=0.7, **options
    )
    at_k = rank_metrics(preds, target, metrics=k_metrics, top_k=ks, rbp_persistence=0.7, **options)
    for q in range(preds.shape[0]):
        args = (preds[q].tolist(), target[q].tolist(), mask[q].tolist())
        cases = [(m, None, whole[m]) for m in _exact(ties)]
        cases += [(m, k, at_k[f"{m}@{k}"]) for m in k_metrics for k in ks]
        for metric, k, values in cases:
            expected = reference_trec_measure(
                *args, metric, k, ties=ties, gain="linear", persistence=0.7
            )
            got = float(values[q])
            if expected is None:
                assert metric not in ALWAYS_DEFINED and math.isnan(got), (metric, k, q, got)
            else:
                assert got == pytest.approx(expected, abs=1e-12), (metric, k, q, ties)


@pytest.mark.parametrize("ties", TIES)
def test_brute_force_item_ids(ties):
    """Item-id targets (counted, not ordered: CountStats) agree with the dense reference."""
    rng = random.Random(5)
    queries, items = 8, 9
    preds = torch.tensor(
        [[rng.choice([0.0, 1.0, 2.0]) for _ in range(items)] for _ in range(queries)]
    )
    ids = torch.tensor([rng.sample(range(items), 3) for _ in range(queries)])
    ids[:, 2] = -1  # padding
    ks = [1, 3, 20]
    metrics = ("relative_precision", "rbp", "dcg")
    options = {
        "ties": ties,
        "empty_target_action": "skip",
        "reduction": "none",
        "rbp_persistence": 0.6,
    }
    at_k = rank_metrics(preds, ids, metrics=metrics, top_k=ks, **options)
    whole = rank_metrics(preds, ids, metrics=_exact(ties), top_k=None, **options)
    for q in range(queries):
        grades = [1 if i in ids[q].tolist() else 0 for i in range(items)]
        args = (preds[q].tolist(), grades, [True] * items)
        cases = [(m, k, at_k[f"{m}@{k}"]) for m in metrics for k in ks]
        cases += [(m, None, whole[m]) for m in _exact(ties)]
        for metric, k, values in cases:
            expected = reference_trec_measure(*args, metric, k, ties=ties, persistence=0.6)
            assert expected is not None
            assert float(values[q]) == pytest.approx(expected, abs=1e-12), (metric, k, q, ties)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.2, math.nan])
def test_rbp_persistence_outside_unit_interval(bad):
    with pytest.raises(ValueError, match="`rbp_persistence` must be a number in \\(0, 1\\)"):
        rank_metrics(
            torch.rand(2, 3), torch.ones(2, 3), metrics=("rbp",), top_k=2, rbp_persistence=bad
        )


def test_rbp_persistence_type():
    with pytest.raises(TypeError, match="`rbp_persistence` must be a number"):
        Options(rbp_persistence="0.8")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the command


def _family(measure: str) -> str:
    return re.sub(r"_\d+(\.\d+)?$", "", measure)


@pytest.mark.parametrize("case", list(CASES))
def test_command_prints_trec_eval_lines(trec_eval_dir, case, capsys):
    """``-m all_trec --format trec_eval -q`` prints trec_eval's own lines, byte for byte."""
    qrels_file, out_file, level = CASES[case]
    argv = ["evaluate", str(trec_eval_dir / qrels_file), str(trec_eval_dir / "results.test")]
    argv += ["-m", "all_trec", "--format", "trec_eval", "-q"]
    if level is not None:
        argv += ["-l", str(level), "-m", "relstring.20"]  # as trec_eval's Makefile makes it
    assert main(argv) == 0
    ours = capsys.readouterr().out.splitlines()
    theirs = (trec_eval_dir / out_file).read_text().splitlines()
    computed = {_family(name) for name in TREC_EVAL_MEASURES} | {"num_q", "relstring"}
    expected = [line for line in theirs if _family(line.split("\t")[0].strip()) in computed]
    assert sorted(ours) == sorted(expected)
    # every family trec_eval prints is computed (the runid line names the run)
    missing = {_family(line.split("\t")[0].strip()) for line in theirs} - computed - {"runid"}
    assert missing == set()


def test_command_trec_eval_names_and_flags(tmp_path, capsys):
    qrels = tmp_path / "qrels"
    run = tmp_path / "run"
    qrels.write_text("1 0 a 1\n1 0 b 0\n1 0 c 2\n2 0 a 1\n3 0 z 1\n")
    run.write_text("1 Q0 a 1 2.0 r\n1 Q0 b 2 2.0 r\n1 Q0 d 3 1.0 r\n2 Q0 b 1 1.0 r\n")
    base = ["evaluate", str(qrels), str(run), "--format", "trec_eval"]
    assert main([*base, "-m", "P.1,2", "-m", "set_P,num_ret", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # --format trec_eval breaks ties as trec_eval does (docno descending: b before a)
    assert lines[:4] == ["P_1                   \t1\t0.0000", "P_2                   \t1\t0.5000",
                         "set_P                 \t1\t0.3333", "num_ret               \t1\t3"]  # fmt: skip
    assert "num_q                 \tall\t2" in lines
    assert "num_ret               \tall\t4" in lines  # counts are summed, as trec_eval does
    # -c counts the judged query the run has no line for (trec_eval -c)
    assert main([*base, "-m", "num_rel", "-c"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["num_q                 \tall\t3", "num_rel               \tall\t4"]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("P.x", "positive integers"),
        ("set_P.5", "takes no cutoff"),
        ("Pxx.5", "unknown metric"),
    ],
)
def test_command_bad_trec_eval_name(value, words, capsys):
    qrels, run = sample_path("sample.qrels"), sample_path("sample.run")
    with pytest.raises(SystemExit) as done:
        main(["evaluate", str(qrels), str(run), "-m", value])
    assert done.value.code == 2
    assert words in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["1", "0", "-0.5", "nan"])
def test_command_bad_persistence(bad, capsys):
    qrels, run = sample_path("sample.qrels"), sample_path("sample.run")
    with pytest.raises(SystemExit) as done:
        main(["evaluate", str(qrels), str(run), "-m", "rbp", "--rbp-persistence", bad])
    assert done.value.code == 2
    assert "--rbp-persistence must be a number in (0, 1)" in capsys.readouterr().err


# --------------------------------------------------------------------------- adapters


def test_adapters_report_the_new_measures():
    """Both adapters find the new metrics by name and agree with ``rank_metrics`` over batches."""
    pytest.importorskip("ignite")
    pytest.importorskip("torchmetrics")
    from ignite.engine import Engine

    import ranking_plugins.ignite as ignite_adapter
    import ranking_plugins.torchmetrics as torchmetrics_adapter

    names = ["num_rel_ret", "relative_precision", "rbp", "dcg", "bin_g", "Rprec_mult_1.00"]
    names += ["11pt_avg", "iprec_at_recall_0.50", "utility", "set_map"]
    g = torch.Generator().manual_seed(0)
    batches = [
        (torch.randint(0, 3, (4, 6), generator=g).float(), torch.randint(0, 3, (4, 6), generator=g))
        for _ in range(2)
    ]
    options = {"ties": "pessimistic", "rbp_persistence": 0.6, "empty_target_action": "skip"}
    expected = rank_metrics(
        torch.cat([p for p, _ in batches]),
        torch.cat([t for _, t in batches]),
        names,
        [2, 5],
        gain="linear",
        **options,
    )
    ignite_metric = ignite_adapter.RankingMetrics(
        names, [2, 5], gain_function="linear_rank", **options
    )
    engine = Engine(lambda engine, batch: batch)
    ignite_metric.attach(engine, "ranking")
    got = engine.run(batches).metrics
    tm_metric = torchmetrics_adapter.RankingMetrics(names, top_k=[2, 5], **options)
    for preds, target in batches:
        tm_metric.update(preds, target)
    tm_got = tm_metric.compute()
    for key, value in expected.items():
        assert float(got[key]) == pytest.approx(float(value), abs=1e-12), key
        assert float(tm_got[key]) == pytest.approx(float(value), abs=1e-12), key


@pytest.mark.parametrize("case", list(CASES))
def test_gm_map_is_the_geometric_mean_of_map(trec_eval_dir, case):
    """trec_eval's gm_map: an aggregation of the per-query map, not a new formula."""
    from ranking_plugins.totals import geometric_mean

    out, level, _qids, preds, target, mask = _load(str(trec_eval_dir), case)
    per_query = rank_metrics(
        preds,
        target,
        metrics=("map",),
        top_k=None,
        mask=mask,
        ties="first",
        relevance_threshold=level,
        reduction="none",
    )["map"]
    got = geometric_mean(per_query)
    assert abs(got - float(out["all"]["gm_map"])) <= TOL_PRINTED
    # the floor: a query with AP 0 counts as 1e-5, as trec_eval's MIN_GEO_MEAN
    zero = geometric_mean(torch.tensor([0.0, 1.0], dtype=torch.float64))
    assert zero == pytest.approx(math.sqrt(1e-5))


# --------------------------------------------------------------------------- ERR


def _err_reference(order: list[int], grades: list[float], k: int | None, gain: str) -> float:
    """ERR@k (Chapelle et al. 2009) of one order, written out: R = (2^g - 1) / 2^g_max."""
    g_max = max(max(grades), 0.0)
    if g_max <= 0:
        return math.nan
    total, reach = 0.0, 1.0
    for j, item in enumerate(order[:k] if k is not None else order, 1):
        g = max(grades[item], 0.0)
        stop = (2**g - 1) / 2**g_max
        total += reach * stop / j
        reach *= 1 - stop
    return total


@pytest.mark.parametrize("ties", ["first", "pessimistic", "optimistic"])
@pytest.mark.parametrize("gain", ["exponential", "linear"])
def test_err_against_a_per_query_reference(ties, gain):
    from reference import all_orders

    preds, target, mask = _tied_problem(seed=3, queries=8, columns=8)
    ks = [1, 3, 20]
    got = rank_metrics(
        preds,
        target,
        metrics=("err",),
        top_k=ks,
        mask=mask,
        ties=ties,
        gain=gain,
        empty_target_action="skip",
        reduction="none",
    )
    for q in range(preds.shape[0]):
        grades = [float(g) for g in target[q]]
        (order,) = all_orders(preds[q].tolist(), grades, mask[q].tolist(), ties, None)
        for k in ks:
            expected = _err_reference(order, grades, k, gain)
            value = float(got[f"err@{k}"][q])
            if math.isnan(expected):
                assert math.isnan(value)
            else:
                assert value == pytest.approx(expected, abs=1e-12), (q, k, ties)


@pytest.mark.parametrize("ties", ["first", "pessimistic", "optimistic"])
def test_err_item_ids_counted(ties):
    """Item-index targets (counted, CountStats): every listed item has grade 1."""
    from reference import all_orders

    rng = random.Random(9)
    preds = torch.tensor([[rng.choice([0.0, 1.0, 2.0]) for _ in range(9)] for _ in range(8)])
    ids = torch.tensor([rng.sample(range(9), 3) for _ in range(8)])
    ids[::2, 2] = -1
    got = rank_metrics(preds, ids, metrics=("err",), top_k=[1, 4, 20], ties=ties, reduction="none")
    for q in range(8):
        grades = [1.0 if i in ids[q].tolist() else 0.0 for i in range(9)]
        (order,) = all_orders(preds[q].tolist(), grades, [True] * 9, ties, None)
        for k in (1, 4, 20):
            expected = _err_reference(order, grades, k, "exponential")
            assert float(got[f"err@{k}"][q]) == pytest.approx(expected, abs=1e-12), (q, k)


def test_gm_map_in_the_command(trec_eval_dir, capsys):
    qrels, run = trec_eval_dir / "qrels.test", trec_eval_dir / "results.test"
    argv = ["evaluate", str(qrels), str(run), "-m", "gm_map", "--ties", "first"]
    assert main([*argv, "--format", "json", "--per-query"]) == 0
    document = json.loads(capsys.readouterr().out)
    expected = read_trec_eval_output(trec_eval_dir / "out.test.aq")["all"]["gm_map"]
    assert abs(document["metrics"]["gm_map"] - float(expected)) <= TOL_PRINTED
    assert all(row["gm_map"] is None for row in document["per_query"].values())
    with pytest.raises(SystemExit):
        main(["compare", str(qrels), str(run), str(run), "-m", "gm_map", "--ties", "first"])
    assert "gm_map is an aggregation" in capsys.readouterr().err


# --------------------------------------------------------------------------- G, ndcg_rel, Rndcg

#: trec_eval name -> the package's metric; graded measures: trec_eval's -l leaves them alone
GAIN_NAMES = {"G": "g", "ndcg_rel": "ndcg_rel", "Rndcg": "rndcg"}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", list(GAIN_NAMES))
def test_gain_measures_reproduce_trec_eval_output(trec_eval_dir, case, name):
    """G, ndcg_rel and Rndcg per query and in "all", to trec_eval's 4 decimals."""
    out, _, qids, preds, target, mask = _load(str(trec_eval_dir), case)
    metric = GAIN_NAMES[name]
    options = {"mask": mask, "ties": "first", "gain": "linear"}
    values = rank_metrics(preds, target, metrics=(metric,), reduction="none", **options)[metric]
    mean = rank_metrics(preds, target, metrics=(metric,), reduction="mean", **options)[metric]
    mismatches = [
        f"{name} {qid}: trec_eval {out[qid][name]}, got {float(values[q])}"
        for q, qid in enumerate(qids)
        if not abs(float(values[q]) - float(out[qid][name])) <= TOL_PRINTED
    ]
    if not abs(float(mean) - float(out["all"][name])) <= TOL_PRINTED:
        mismatches.append(f"{name} all: trec_eval {out['all'][name]}, got {float(mean)}")
    assert not mismatches, "\n".join(mismatches)


def _graded_tied_problem(seed: int, queries: int = 6, columns: int = 7):
    """Dense grades 0..3 with many ties (few distinct scores) and masked items."""
    rng = random.Random(seed)
    preds = torch.tensor(
        [[rng.choice([0.0, 1.0, 2.0]) for _ in range(columns)] for _ in range(queries)]
    )
    target = torch.tensor(
        [[rng.choice([0, 0, 1, 2, 3]) for _ in range(columns)] for _ in range(queries)]
    )
    mask = torch.rand(queries, columns, generator=torch.Generator().manual_seed(seed)) < 0.8
    target[0] = 0  # a query without a relevant item
    return preds, target, mask


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("gain", ["linear", "exponential"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gain_measures_brute_force_dense(ties, gain, seed):
    """Every order of every tie group (tests/reference.py), graded, under the four policies."""
    preds, target, mask = _graded_tied_problem(seed)
    metrics = list(GAIN_NAMES.values())
    options = {"mask": mask, "ties": ties, "gain": gain, "empty_target_action": "skip"}
    got = rank_metrics(preds, target, metrics=metrics, reduction="none", **options)
    for q in range(preds.shape[0]):
        args = (preds[q].tolist(), target[q].tolist(), mask[q].tolist())
        for metric in metrics:
            expected = reference_trec_measure(*args, metric, None, ties=ties, gain=gain)
            value = float(got[metric][q])
            if expected is None:
                assert math.isnan(value), (metric, q)
            else:
                assert value == pytest.approx(expected, abs=1e-12), (metric, q, ties, gain)


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize(
    "grades",
    [
        [-2.5, -2.5, -2.5, 0.25, 50.0],  # 2^50 - 1 and 2^0.25 - 1: their sum drops bits
        [0.0, 0.5, 51.0, 52.0, 1.0],
        [0.0, 0.0, 0.25, 49.5, 0.75],
    ],
)
def test_g_where_the_gains_before_a_place_lose_bits(ties, grades):
    """G reads the cost left after the gains placed before, which near 2^53 trec_eval's
    running sum rounds: under "average" the mean over every order of the tied group
    of what trec_eval computes for that order (as under the other policies)."""
    preds = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0], [0.0] * 5])
    target = torch.tensor([grades, grades], dtype=torch.float64)
    got = rank_metrics(preds, target, "g", ties=ties, gain="exponential", reduction="none")
    for q in range(2):
        args = (preds[q].tolist(), grades, [True] * 5)
        expected = reference_trec_measure(*args, "g", None, ties=ties, gain="exponential")
        assert float(got["g"][q]) == pytest.approx(expected, rel=1e-12, abs=1e-12), (q, ties)


@pytest.mark.parametrize("ties", TIES)
def test_gain_measures_brute_force_item_ids(ties):
    """Item-id targets (counted: CountStats, binary gains) agree with the dense reference."""
    rng = random.Random(7)
    queries, items = 10, 8
    preds = torch.tensor(
        [[rng.choice([0.0, 1.0, 2.0]) for _ in range(items)] for _ in range(queries)]
    )
    ids = torch.tensor([rng.sample(range(items), 4) for _ in range(queries)])
    ids[:, 3] = -1  # padding
    metrics = list(GAIN_NAMES.values())
    got = rank_metrics(
        preds, ids, metrics=metrics, ties=ties, empty_target_action="skip", reduction="none"
    )
    for q in range(queries):
        grades = [1 if i in ids[q].tolist() else 0 for i in range(items)]
        args = (preds[q].tolist(), grades, [True] * items)
        for metric in metrics:
            expected = reference_trec_measure(*args, metric, None, ties=ties)
            assert float(got[metric][q]) == pytest.approx(expected, abs=1e-12), (metric, q)


@pytest.mark.parametrize("seed", [3, 4])
def test_gain_measures_match_pytrec_eval(seed):
    """G, ndcg_rel and Rndcg against trec_eval itself, with unjudged and unretrieved documents."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run, preds, target, mask = _random_collection(seed=seed)
    expected = pytrec_eval.RelevanceEvaluator(qrels, set(GAIN_NAMES)).evaluate(run)
    metrics = list(GAIN_NAMES.values())
    options = {"mask": mask, "gain": "linear", "ties": "first", "empty_target_action": "neg"}
    got = rank_metrics(preds, target, metrics=metrics, reduction="none", **options)
    qids = sorted(qrels, key=lambda q: int(q[1:]))
    mismatches = [
        f"{name} {qid}: {expected[qid][name]} vs {float(got[metric][q])}"
        for q, qid in enumerate(qids)
        for name, metric in GAIN_NAMES.items()
        if not math.isclose(float(got[metric][q]), expected[qid][name], abs_tol=1e-9)
    ]
    assert not mismatches, "\n".join(mismatches[:20])


# --------------------------------------------------------------------------- ERR under "average"


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("gain", ["exponential", "linear"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_err_every_policy_against_every_order(ties, gain, seed):
    """ERR@k on graded data with ties: the mean over every order of every tie group.

    Two references: tests/reference.py's brute force, and the per-query
    ``_err_reference`` above averaged over the orders here. The cutoffs cut
    tie groups (their members past k still count in the order's chances).
    """
    from reference import all_orders

    preds, target, mask = _graded_tied_problem(seed, queries=8, columns=7)
    ks = [1, 2, 3, 5, 20]
    options = {"mask": mask, "ties": ties, "gain": gain, "empty_target_action": "skip"}
    at_k = rank_metrics(preds, target, metrics=("err",), top_k=ks, reduction="none", **options)
    whole = rank_metrics(preds, target, metrics=("err",), top_k=None, reduction="none", **options)[
        "err"
    ]
    for q in range(preds.shape[0]):
        args = (preds[q].tolist(), target[q].tolist(), mask[q].tolist())
        grades = [float(g) for g in target[q]]
        orders = all_orders(*args[:1], grades, args[2], ties, None)
        for k, value in [*((k, at_k[f"err@{k}"][q]) for k in ks), (None, whole[q])]:
            brute = reference_trec_measure(*args, "err", k, ties=ties, gain=gain)
            written = math.fsum(_err_reference(o, grades, k, gain) for o in orders) / len(orders)
            if brute is None:
                assert math.isnan(float(value)) and math.isnan(written)
                continue
            assert float(value) == pytest.approx(brute, abs=1e-12), (q, k)
            assert float(value) == pytest.approx(written, abs=1e-12), (q, k)


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("ids_per_query", [1, 4])
def test_err_item_ids_every_policy(ties, ids_per_query):
    """Item-id targets: counted whole lists (CountStats), and at k with one id per query
    (counted too); groups that mix relevant and other items under "average"."""
    rng = random.Random(11)
    queries, items = 10, 9
    preds = torch.tensor(
        [[rng.choice([0.0, 1.0, 2.0]) for _ in range(items)] for _ in range(queries)]
    )
    ids = torch.tensor([rng.sample(range(items), ids_per_query) for _ in range(queries)])
    if ids_per_query > 1:
        ids[::2, -1] = -1  # padding
    ks = [1, 3, 20]
    options = {"ties": ties, "reduction": "none"}
    at_k = rank_metrics(preds, ids, metrics=("err",), top_k=ks, **options)
    whole = rank_metrics(preds, ids, metrics=("err",), top_k=None, **options)["err"]
    for q in range(queries):
        grades = [1 if i in ids[q].tolist() else 0 for i in range(items)]
        args = (preds[q].tolist(), grades, [True] * items)
        for k, value in [*((k, at_k[f"err@{k}"][q]) for k in ks), (None, whole[q])]:
            expected = reference_trec_measure(*args, "err", k, ties=ties)
            assert float(value) == pytest.approx(expected, abs=1e-12), (q, k, ties)


def test_err_average_is_sound_on_large_tie_groups():
    """A group of 3,000 tied items with 40 relevant of several grades: no overflow of
    binomials, and the value agrees with the counted layout on its binary twin."""
    n = 3000
    scores = torch.zeros(1, n)
    grades = torch.zeros(1, n, dtype=torch.int64)
    grades[0, :40] = torch.arange(40) % 3 + 1
    value = rank_metrics(scores, grades, metrics=("err",), top_k=[10, 2500], reduction="none")
    for key in ("err@10", "err@2500"):
        assert math.isfinite(float(value[key][0])) and 0 < float(value[key][0]) < 1
    binary = (grades > 0).to(torch.int64)
    ids = torch.nonzero(binary[0]).T
    dense = rank_metrics(scores, binary, metrics=("err",), top_k=None, reduction="none")["err"]
    counted = rank_metrics(scores, ids, metrics=("err",), top_k=None, reduction="none")["err"]
    assert float(dense[0]) == pytest.approx(float(counted[0]), rel=1e-10)


# --------------------------------------------------------------------------- iprec under "average"


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("layout", ["dense", "item_ids"])
def test_interpolated_precision_average_against_every_order(seed, layout):
    """iprec_at_recall_* and 11pt_avg under "average": the mean over every order of every
    tie group (tests/reference.py), on lists whose tie groups mix relevant and other items."""
    rng = random.Random(seed)
    queries, columns = 6, 9
    preds = torch.tensor(
        [[rng.choice([0.0, 1.0, 2.0]) for _ in range(columns)] for _ in range(queries)]
    )
    grades = torch.tensor(
        [[rng.choice([0, 0, 1, 2]) for _ in range(columns)] for _ in range(queries)]
    )
    if layout == "item_ids":
        ids = torch.tensor([rng.sample(range(columns), 4) for _ in range(queries)])
        grades = torch.zeros_like(grades).scatter_(1, ids, 1)
    target = ids if layout == "item_ids" else grades
    got = rank_metrics(
        preds, target, metrics=INTERPOLATED, top_k=None, ties="average", reduction="none"
    )
    for q in range(queries):
        args = (preds[q].tolist(), grades[q].tolist(), [True] * columns)
        for name in INTERPOLATED:
            expected = reference_trec_measure(*args, name, None, ties="average")
            if expected is None:
                assert math.isnan(float(got[name][q]))
            else:
                assert float(got[name][q]) == pytest.approx(expected, abs=1e-12), (name, q)


def test_interpolated_precision_average_refuses_beyond_its_size(capsys):
    """A tie group too large for the exact expected maximum: a clear error, no number."""
    scores = torch.zeros(1, 1000)
    grades = torch.zeros(1, 1000, dtype=torch.int64)
    grades[0, :20] = 1
    with pytest.raises(ValueError, match=r"under `ties='average'`.*pass ties='first'"):
        rank_metrics(scores, grades, metrics=("11pt_avg",), top_k=None, ties="average")
    first = rank_metrics(scores, grades, metrics=("11pt_avg",), top_k=None, ties="first")
    assert float(first["11pt_avg"]) == pytest.approx(1.0)  # grades 1 first: every level at 1


# --------------------------------------------------------------------------- relstring


def test_relstring_lines_in_trec_eval_order(trec_eval_dir, capsys):
    """``-m relstring.N`` prints trec_eval's string per query, in its layout, after P_k."""
    argv = ["evaluate", str(trec_eval_dir / "qrels.test"), str(trec_eval_dir / "results.test")]
    argv += ["-m", "P.5", "-m", "relstring.3", "-m", "map", "--format", "trec_eval", "-q"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    theirs = {
        line.split("\t")[1]: line.split("\t")[2]
        for line in (trec_eval_dir / "out.test.aq").read_text().splitlines()
        if line.startswith("relstring ")
    }
    strings = [line.split("\t") for line in lines if line.startswith("relstring_3")]
    assert len(strings) == len(theirs)
    for _, qid, string in strings:  # the first 3 of trec_eval's first 10
        assert string == theirs[qid][:4] + "'"
    names = [line.split("\t")[0].strip() for line in lines]
    assert names[:3] == ["P_5", "relstring_3", "map"]
    assert not any(line.startswith("relstring") for line in lines if "\tall\t" in line)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["-m", "relstring", "-m", "map"], "printed with --format trec_eval -q only"),
        (["-m", "relstring.0", "-m", "map", "--format", "trec_eval", "-q"], "positive integer"),
        (["-m", "relstring.x", "-m", "map", "--format", "trec_eval", "-q"], "positive integer"),
        (["-m", "relstring", "--format", "trec_eval", "-q"], "ask for a measure beside it"),
    ],
)
def test_relstring_bad_requests(argv, words, capsys):
    qrels, run = sample_path("sample.qrels"), sample_path("sample.run")
    with pytest.raises(SystemExit) as exit_status:
        main(["evaluate", str(qrels), str(run), *argv])
    assert exit_status.value.code == 2
    assert words in capsys.readouterr().err


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("action", ["skip", "pos", "error"])
def test_gain_normalised_measures_without_a_positive_gain(ties, action):
    """A threshold <= 0 makes grades <= 0 relevant, with gain 0: rbp (scaled by the largest
    gain), err (by 2^g_max) and g (by the ideal gains) are then 0 / 0, undefined as ndcg
    with IDCG = 0 (SPEC 4), and follow empty_target_action (found by the differential
    fuzzer: they were 0 and counted). ndcg_rel and rndcg refuse such a threshold (below)."""
    preds = torch.tensor([[0.0, 1.0, 0.0, 2.0], [3.0, 2.0, 1.0, 0.0]])
    target = torch.tensor([[-3, 0, -1, -3], [0, 2, -1, 1]])
    names = ["rbp", "err", "g", "ndcg"]
    kw = {"ties": ties, "relevance_threshold": -2.0, "empty_target_action": action}
    if action == "error":
        for name in names:
            with pytest.raises(ValueError, match=name):
                rank_metrics(preds, target, [name], 3, **kw)
        return
    got = rank_metrics(preds, target, names, 3, reduction="none", **kw)
    for q in range(2):
        for name in names:
            key = f"{name}@3" if name in ("rbp", "err", "ndcg") else name
            args = (preds[q].tolist(), target[q].tolist(), [True] * 4)
            if name == "ndcg":
                expected = None if q == 0 else float(got[key][q])
            else:
                k = 3 if name in ("rbp", "err") else None
                expected = reference_trec_measure(
                    *args, name, k, ties=ties, relevance_threshold=-2.0
                )
            if expected is None:
                want = math.nan if action == "skip" else 1.0
                assert float(got[key][q]) == pytest.approx(want, nan_ok=True), (key, q)
            else:
                assert float(got[key][q]) == pytest.approx(expected, abs=1e-12), (key, q)


@pytest.mark.parametrize("name", ["ndcg_rel", "rndcg"])
@pytest.mark.parametrize("threshold", [0.0, -0.0, -2.0])
def test_ndcg_rel_refuses_a_threshold_that_makes_gain_0_relevant(threshold, name):
    """trec_eval's ndcg_rel and Rndcg (m_ndcg_rel.c, m_Rndcg.c) count the items of positive
    gain as relevant; under a threshold <= 0 R also counted relevant items of gain 0
    (found by the differential fuzzer: ndcg_rel 0.421 where it is 0.581 here). Refused,
    naming the threshold; a positive one is exact."""
    preds = torch.tensor([[3.0, 2.0, 1.0, 0.0]])
    target = torch.tensor([[0, 2, -1, 1]])
    with pytest.raises(ValueError, match=rf"relevance_threshold=.*{name} counts the items"):
        rank_metrics(preds, target, [name], None, relevance_threshold=threshold)
    got = rank_metrics(preds, target, [name], None, relevance_threshold=0.5, ties="first")
    expected = reference_trec_measure(
        preds[0].tolist(), target[0].tolist(), [True] * 4, name, None, ties="first",
        relevance_threshold=0.5,
    )  # fmt: skip
    assert float(got[name]) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("ties", TIES)
def test_err_linear_gain_of_a_grade_past_1023(ties):
    """ERR's R = (2^g - 1) / 2^g_max with linear gains read g itself: a grade of 1024 or
    more (a finite gain) was inf / inf, a NaN (found while widening the fuzzer)."""
    preds = torch.tensor([[3.0, 2.0, 2.0, 0.0]])
    for top in (1024.0, 2000.5, 1023.5):
        target = torch.tensor([[top, 1.0, top - 1, 0.0]], dtype=torch.float64)
        got = rank_metrics(preds, target, ["err"], [1, 3], gain="linear", ties=ties)
        for k in (1, 3):
            # the same, written with the exponents apart: 2^(g - g_max) - 2^-g_max
            expected = 0.0
            for order in reference.all_orders(
                preds[0].tolist(), target[0].tolist(), [True] * 4, ties, None
            ):
                total, reach = 0.0, 1.0
                for j, i in enumerate(order[:k], 1):
                    stop = 2.0 ** (float(target[0, i]) - top) - 2.0**-top
                    total += reach * stop / j
                    reach *= 1 - stop
                expected += total
            expected /= len(
                reference.all_orders(preds[0].tolist(), target[0].tolist(), [True] * 4, ties, None)
            )
            value = float(got[f"err@{k}"])
            assert value == pytest.approx(expected, rel=1e-12), (top, k, value)


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("grade", [53, 1023])
def test_g_refuses_gains_past_2_to_the_53(ties, grade):
    """Past 2^53 G's cost of 1 at a place of gain 0 vanishes (2^53 + 1 is 2^53): G of
    [2^g - 1 last among zeros] read log2(2) where it is log2(2 + 4). Refused, naming g
    (found by the differential fuzzer: 1.0 where G is 0.387, inf under "average"; and
    with (2 + cost) - gain, G of the ideal order of such gains was 0, or "average"
    raised ValueError("math domain error") from the host)."""
    target = torch.tensor([[0, 0, 0, 0, grade]])
    with pytest.raises(ValueError, match="`g`: a query's gains sum to 2"):
        rank_metrics(torch.zeros(1, 5), target, ["g"], None, ties=ties, gain="exponential")
    # linear gains of the same grades are small: G = (2^g... read as g) / log2(2 + 4)
    got = rank_metrics(torch.zeros(1, 5), target, ["g"], None, ties="first", gain="linear")
    assert float(got["g"]) == pytest.approx(1 / math.log2(6), rel=1e-12)


def test_mean_dcg_of_values_near_the_float64_limit():
    """dcg is not a ratio: two queries of dcg 2^1023 have the mean 2^1023, which a plain
    sum of the two would overflow to inf (found by the differential fuzzer)."""
    got = rank_metrics(
        torch.tensor([[1.0, 0.0], [1.0, 0.0]]),
        torch.tensor([[1023, 0], [1023, 0]]),
        ["dcg"],
        1,
        gain="exponential",
    )["dcg@1"]
    assert float(got) == pytest.approx(2.0**1023 - 1, rel=1e-12)


def test_command_refuses_ndcg_rel_at_level_0(capsys):
    """The command says so as a usage error (exit status 2), not a traceback."""
    qrels, run = sample_path("sample.qrels"), sample_path("sample.run")
    for name in ("ndcg_rel", "Rndcg"):
        with pytest.raises(SystemExit) as done:
            main(["evaluate", str(qrels), str(run), "-m", name, "-l", "0"])
        assert done.value.code == 2
        assert "counts the items of positive gain" in capsys.readouterr().err
    assert main(["evaluate", str(qrels), str(run), "-m", "ndcg_rel", "-l", "1"]) == 0


def test_trec_eval_layout_gives_ndcg_rel_at_level_0_as_trec_eval_does(capsys):
    """trec_eval's -l leaves its graded measures alone, so with --format trec_eval the
    command evaluates them without the level: ndcg_rel and Rndcg at -l 0 are those
    without -l (no refusal), while P_5 reads the level (grade 0 relevant)."""
    qrels, run = sample_path("sample.qrels"), sample_path("sample.run")

    def lines(*extra: str) -> dict[str, str]:
        args = ["evaluate", str(qrels), str(run), "--format", "trec_eval"]
        assert main([*args, "-m", "ndcg_rel", "-m", "Rndcg", "-m", "P.5", *extra]) == 0
        out = capsys.readouterr().out
        return {line.split()[0]: line.split()[2] for line in out.splitlines()}

    leveled, plain = lines("-l", "0"), lines()
    assert leveled["ndcg_rel"] == plain["ndcg_rel"] and leveled["Rndcg"] == plain["Rndcg"]
    assert list(leveled)[-3:] == ["ndcg_rel", "Rndcg", "P_5"]  # the order asked for
    assert float(leveled["P_5"]) >= float(plain["P_5"])


# --------------------------------------------------------------------------- issue 24: corner cases


def _command_lines(
    tmp_path, capsys, qrels: str, run: str, *argv: str
) -> dict[tuple[str, str], str]:
    """The command's ``--format trec_eval -q`` output on these files: (measure, query) -> value."""
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "run").write_text(run)
    files = [str(tmp_path / "qrels"), str(tmp_path / "run")]
    assert main(["evaluate", *files, "--format", "trec_eval", "-q", *argv]) == 0
    return {(f[0], f[1]): f[2] for f in map(str.split, capsys.readouterr().out.splitlines())}


def _pytrec_eval_lines(qrels: str, run: str, measures: set[str], **flags) -> dict:
    """pytrec_eval's values on the same files, printed to trec_eval's 4 decimals."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    judged: dict[str, dict[str, int]] = {}
    ranked: dict[str, dict[str, float]] = {}
    for q, _, d, g in map(str.split, qrels.splitlines()):
        judged.setdefault(q, {})[d] = int(g)
    for q, _, d, _, s, _ in map(str.split, run.splitlines()):
        ranked.setdefault(q, {})[d] = float(s)
    got = pytrec_eval.RelevanceEvaluator(judged, measures, **flags).evaluate(ranked)
    return {(name, q): f"{v:.4f}" for q, row in got.items() for name, v in row.items()}


#: lists of R, R + 1 and R + 2 documents (q1: the issue's, R = 1 and n = 2)
RNDCG_QRELS = "q1 0 d1 1\nq1 0 d2 0\n" + "".join(
    f"{q} 0 d1 1\n{q} 0 d2 0\n{q} 0 d3 2\n" for q in ("q2", "q3", "q4", "q5")
)
RNDCG_RUN = (
    "q1 Q0 d2 1 2 r\nq1 Q0 d1 2 1 r\n"  # R + 1: d2 (grade 0) first
    "q2 Q0 d3 1 3 r\nq2 Q0 d1 2 2 r\n"  # R = 2
    "q3 Q0 d2 1 3 r\nq3 Q0 d3 2 2 r\nq3 Q0 d1 3 1 r\n"  # R + 1
    "q4 Q0 d1 1 4 r\nq4 Q0 d2 2 3 r\nq4 Q0 d9 3 2 r\nq4 Q0 d3 4 1 r\n"  # R + 2, d9 unjudged
    "q5 Q0 d1 1 3 r\nq5 Q0 d3 2 2 r\nq5 Q0 d2 3 1 r\n"  # R + 1, the closing term would be 0.0
)


def test_rndcg_closing_term_needs_a_list_of_r_plus_2(tmp_path, capsys):
    """trec_eval's m_Rndcg.c adds DCG@n / IDCG at the end of the list only when its loop
    stopped before it (n >= R + 2): a list of R + 1 documents has no such term (issue 24:
    q1 was 0.3155 where trec_eval gives 0). Against pytrec_eval, per query and in "all"."""
    got = _command_lines(tmp_path, capsys, RNDCG_QRELS, RNDCG_RUN, "-m", "Rndcg")
    expected = _pytrec_eval_lines(RNDCG_QRELS, RNDCG_RUN, {"Rndcg"})
    assert got[("Rndcg", "q1")] == "0.0000"
    assert {key: got[key] for key in expected} == expected
    mean = sum(float(value) for value in expected.values()) / 5
    assert float(got[("Rndcg", "all")]) == pytest.approx(mean, abs=1e-4)
    # the library: the query, scored
    value = rank_metrics(torch.tensor([[2.0, 1.0]]), torch.tensor([[0, 1]]), ["rndcg"])["rndcg"]
    assert float(value) == 0.0


def test_rndcg_at_a_level_no_grade_reaches(tmp_path, capsys):
    """trec_eval's Rndcg is 0 for a query whose num_rel, counted at -l, is 0, though its
    gains ignore the level (issue 24: 0.7664 at -l 2 where trec_eval gives 0); the other
    graded measures keep their values."""
    qrels = "q1 0 d1 1\nq1 0 d2 0\nq1 0 d3 1\nq2 0 d1 2\nq2 0 d2 1\nq2 0 d4 1\n"
    run = "q1 Q0 d1 1 3 r\nq1 Q0 d2 2 2 r\nq1 Q0 d3 3 1 r\nq2 Q0 d2 1 3 r\nq2 Q0 d1 2 2 r\n"
    measures = {"Rndcg", "ndcg", "ndcg_rel", "G", "map"}
    got = _command_lines(tmp_path, capsys, qrels, run, "-l", "2", *(f"-m{m}" for m in measures))
    expected = _pytrec_eval_lines(qrels, run, measures, relevance_level=2)
    assert got[("Rndcg", "q1")] == "0.0000" and got[("ndcg", "q1")] != "0.0000"
    assert {key: got[key] for key in expected} == expected


def test_rndcg_at_a_level_at_or_below_0_without_a_positive_grade_is_nan(tmp_path, capsys):
    """m_Rndcg.c at -l <= 0: a query whose judged grades reach the level (num_rel > 0) but
    none is above 0 averages no ndcg, 0 / 0: nan, and so is the mean (the command printed
    0). pytrec_eval refuses -l 0 and reads -l -1 as counting nothing, so the C source is
    the oracle; a query with a positive grade keeps its value."""
    qrels = "q1 0 d1 0\nq1 0 d2 0\nq2 0 d1 1\nq2 0 d2 0\nq3 0 d1 -1\n"
    run = "q1 Q0 d1 1 1 r\nq1 Q0 d2 2 2 r\nq2 Q0 d1 1 2 r\nq2 Q0 d3 2 1 r\nq3 Q0 d1 1 1 r\n"
    at_0 = _command_lines(tmp_path, capsys, qrels, run, "-l", "0", "-m", "Rndcg", "-m", "ndcg")
    at_1 = _command_lines(tmp_path, capsys, qrels, run, "-l", "1", "-m", "Rndcg")
    assert at_0[("Rndcg", "q1")] == at_0[("Rndcg", "all")] == "nan"
    assert at_0[("Rndcg", "q2")] == at_1[("Rndcg", "q2")] == "1.0000"
    assert at_0[("Rndcg", "q3")] == "0.0000"  # -1 < 0: num_rel is 0 at -l 0
    assert at_0[("ndcg", "all")] != "nan"
    at_minus_1 = _command_lines(tmp_path, capsys, qrels, run, "-l", "-1", "-m", "Rndcg")
    assert at_minus_1[("Rndcg", "q3")] == "nan"  # grade -1 counts at -l -1, no gain
    assert at_1[("Rndcg", "q1")] == "0.0000"  # no grade at -l 1: num_rel 0, trec_eval's 0


def test_scores_equal_as_float32_tie_where_the_command_reproduces_trec_eval(tmp_path, capsys):
    """trec_eval holds a score as a C float: 0.30000001 and 0.3 tie, and the document id
    orders them (d2 first), so recip_rank is 0.5 (issue 24: 1.0). The command reads the
    scores so in trec_eval's layout and under --ties first; elsewhere float64's precision
    stays (d1 first)."""
    qrels, run = "q1 0 d1 1\nq1 0 d2 0\n", "q1 Q0 d1 1 0.30000001 r\nq1 Q0 d2 2 0.3 r\n"
    got = _command_lines(tmp_path, capsys, qrels, run, "-m", "recip_rank", "-m", "relstring")
    expected = _pytrec_eval_lines(qrels, run, {"recip_rank"})
    assert got[("recip_rank", "q1")] == expected[("recip_rank", "q1")] == "0.5000"
    assert got[("relstring", "q1")] == "'01'"  # trec_eval's order too
    files = [str(tmp_path / "qrels"), str(tmp_path / "run")]

    def mrr(*argv: str) -> float:
        assert main(["evaluate", *files, "--format", "json", "-m", "mrr", *argv]) == 0
        return json.loads(capsys.readouterr().out)["metrics"]["mrr"]

    assert mrr("--ties", "first") == 0.5
    assert mrr() == mrr("--ties", "pessimistic") == 1.0  # float64: no tie


def test_judged_only_query_left_with_no_ranked_document(tmp_path, capsys):
    """-J leaving a query no ranked document: trec_eval's interpolated precision is
    num_rel_ret / num_ret = 0 / 0, nan, at the recall levels whose cutoff lround(x · R)
    is 0 hits (m_iprec_at_recall.c), so 11pt_avg (m_11pt_avg.c) and the means are nan
    (issue 24: 0). pytrec_eval (trec_eval 9, cutoffs int(x · R + 0.9)) agrees at level
    0.00 and on 11pt_avg; trec_eval 10's lround cuts 0.10 and 0.20 at 0 hits too for R = 2."""
    qrels = "q1 0 d1 1\nq1 0 d2 0\nq1 0 d5 1\nq2 0 d1 1\nq3 0 d1 0\n"
    run = "q1 Q0 d3 1 1 r\nq1 Q0 d4 2 2 r\nq2 Q0 d1 1 1 r\nq3 Q0 d9 1 1 r\n"
    got = _command_lines(tmp_path, capsys, qrels, run, "-J", "-m", "iprec_at_recall,11pt_avg")
    expected = _pytrec_eval_lines(
        qrels, run, {"iprec_at_recall", "11pt_avg"}, judged_docs_only_flag=True
    )
    for name in ("11pt_avg", "iprec_at_recall_0.00"):
        for q in ("q1", "q2", "q3"):
            assert got[(name, q)] == expected[(name, q)], (name, q)
    levels = [f"iprec_at_recall_{x / 10:.2f}" for x in range(11)]
    assert [got[(name, "q1")] for name in levels] == ["nan"] * 3 + ["0.0000"] * 8  # R = 2
    assert [got[(name, "q3")] for name in levels] == ["nan"] * 11  # R = 0: every cut is 0
    assert [got[(name, "q2")] for name in levels] == ["1.0000"] * 11
    assert {got[(name, "all")] for name in [*levels, "11pt_avg"]} == {"nan"}
    # beside measures at a cutoff and geometric means, which stay numbers
    beside = _command_lines(
        tmp_path, capsys, qrels, run, "-J", "-m", "11pt_avg", "-m", "P.5", "-m", "gm_map"
    )
    assert beside[("11pt_avg", "all")] == "nan"
    assert beside[("P_5", "all")] != "nan" and beside[("gm_map", "all")] != "nan"
    # the package's own formats keep its value for an empty list, 0
    files = [str(tmp_path / "qrels"), str(tmp_path / "run")]
    assert main(["evaluate", *files, "--format", "json", "-J", "-m", "11pt_avg"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["11pt_avg"] == pytest.approx(1 / 3)
