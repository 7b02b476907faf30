"""The cross-library table of ``docs/metrics.rst``, checked against the libraries.

Every row of that table that says "the options X here reproduce library Y's
metric" and names a library installed in the test environment (trec_eval
through pytrec_eval, ranx, PyTorch-Ignite, TorchMetrics) is computed here both
ways on random inputs and compared per query (or per mean, where the library
only gives a mean) to float32 precision. Inputs are tie-free unless the claim
is about ties, in which case the scores are small integers and most items are
tied. Rows about metrax and RecBole are read from their sources and are not
checked here (neither is installed).
"""

from __future__ import annotations

import zlib

import pytest
import torch

from ranking_plugins import rank_metrics

ATOL = 1e-5
Q, N = 24, 12
KS = [1, 3, 5, 20]  # 20 is past the end of every list


def case(
    seed: int,
    *,
    tied: bool = False,
    graded: bool = False,
    every_query_relevant: bool = True,
    positive: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(Q, N) float32 scores and int64 grades.

    Tie-free scores are a permutation of distinct values (positive, or of both
    signs); tied scores are integers 0..3, so most rows hold several ties.
    """
    g = torch.Generator().manual_seed(seed)
    if tied:
        preds = torch.randint(0, 4, (Q, N), generator=g).float()
    else:
        preds = (torch.argsort(torch.rand(Q, N, generator=g), dim=1).float() + 1) / N
        if not positive:
            preds = preds - 0.5
    if graded:
        target = torch.multinomial(
            torch.tensor([0.55, 0.2, 0.15, 0.1]), Q * N, replacement=True, generator=g
        ).view(Q, N)
    else:
        target = (torch.rand(Q, N, generator=g) < 0.3).long()
    if every_query_relevant:
        rows, cols = torch.arange(Q), torch.randint(0, N, (Q,), generator=g)
        target[rows, cols] = target[rows, cols].clamp(min=1)
    else:
        target[:3] = 0  # three empty queries
    return preds, target


def per_query(metric: str, preds, target, top_k, **options) -> dict[str, torch.Tensor]:
    return rank_metrics(preds, target, [metric], top_k, reduction="none", **options)


def seed_of(*parts: object) -> int:
    return zlib.crc32(repr(parts).encode())


# --------------------------------------------------------------------------- trec_eval


def trec_inputs(preds: torch.Tensor, target: torch.Tensor):
    """qrels and run with every item judged and retrieved.

    Item j of a row gets docno ``d{N-1-j}``: item 0 has the largest docno.
    trec_eval orders tied documents by docno, descending, so its tie order is
    then the item order, which is ``ties="first"``.
    """
    docno = [f"d{N - 1 - j:02d}" for j in range(N)]
    qrels = {f"q{q:02d}": {docno[j]: int(target[q, j]) for j in range(N)} for q in range(Q)}
    run = {f"q{q:02d}": {docno[j]: float(preds[q, j]) for j in range(N)} for q in range(Q)}
    return qrels, run


# trec_eval measure family (with cutoffs) -> (metric here, options here)
TREC_CUT = {
    "success": ("hit_rate", {}),
    "P": ("precision", {}),
    "recall": ("recall", {}),
    "map_cut": ("map", {}),
    "ndcg_cut": ("ndcg", {"gain": "linear"}),
}
# trec_eval whole-list measure -> (metric here with top_k=None, options here)
TREC_WHOLE = {
    "recip_rank": ("mrr", {}),
    "map": ("map", {}),
    "ndcg": ("ndcg", {"gain": "linear"}),
    "Rprec": ("r_precision", {}),
    "set_P": ("precision", {}),
    "set_recall": ("recall", {}),
    "set_F": ("f1", {}),
}


@pytest.mark.parametrize("tied", [False, True], ids=["tie-free", "tied"])
@pytest.mark.parametrize("graded", [False, True], ids=["binary", "graded"])
def test_trec_eval(tied: bool, graded: bool) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    preds, target = case(seed_of("trec", tied, graded), tied=tied, graded=graded)
    qrels, run = trec_inputs(preds, target)
    cut = ",".join(map(str, KS))
    measures = {f"{family}.{cut}" for family in TREC_CUT} | set(TREC_WHOLE)
    theirs = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    checked = 0
    for family, (metric, options) in TREC_CUT.items():
        ours = per_query(metric, preds, target, KS, ties="first", **options)
        for k in KS:
            expected = torch.tensor([theirs[f"q{q:02d}"][f"{family}_{k}"] for q in range(Q)])
            torch.testing.assert_close(
                ours[f"{metric}@{k}"], expected.double(), atol=ATOL, rtol=0, msg=family
            )
            checked += 1
    for measure, (metric, options) in TREC_WHOLE.items():
        ours = per_query(metric, preds, target, None, ties="first", **options)
        expected = torch.tensor([theirs[f"q{q:02d}"][measure] for q in range(Q)])
        torch.testing.assert_close(ours[metric], expected.double(), atol=ATOL, rtol=0, msg=measure)
        checked += 1
    assert checked == len(TREC_CUT) * len(KS) + len(TREC_WHOLE)


def test_trec_eval_tie_order_is_docno_descending() -> None:
    """Without the docno trick the tied numbers differ: the order is trec_eval's, not ours."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    preds, target = case(seed_of("trec-order"), tied=True)
    qrels, run = trec_inputs(preds, target)
    # the same run with docnos ascending in item order
    flip = {f"d{N - 1 - j:02d}": f"d{j:02d}" for j in range(N)}
    qrels_up = {q: {flip[d]: g for d, g in docs.items()} for q, docs in qrels.items()}
    run_up = {q: {flip[d]: s for d, s in docs.items()} for q, docs in run.items()}
    evaluate = pytrec_eval.RelevanceEvaluator(qrels_up, {"recip_rank"}).evaluate
    theirs = torch.tensor([evaluate(run_up)[f"q{q:02d}"]["recip_rank"] for q in range(Q)])
    ours = per_query("mrr", preds, target, None, ties="first")["mrr"]
    assert not torch.allclose(ours, theirs.double(), atol=ATOL)
    # reversing the item order inside every row makes "first" match again
    ours_reversed = per_query("mrr", preds.flip(1), target.flip(1), None, ties="first")["mrr"]
    torch.testing.assert_close(ours_reversed, theirs.double(), atol=ATOL, rtol=0)


# --------------------------------------------------------------------------- ranx

# ranx metric name -> (metric here, options here)
RANX = {
    "hit_rate": ("hit_rate", {}),
    "mrr": ("mrr", {}),
    "precision": ("precision", {}),
    "recall": ("recall", {}),
    "f1": ("f1", {}),
    "map": ("map", {}),
    "ndcg": ("ndcg", {"gain": "linear"}),
    "ndcg_burges": ("ndcg", {"gain": "exponential"}),
}


@pytest.mark.parametrize("graded", [False, True], ids=["binary", "graded"])
def test_ranx(graded: bool) -> None:
    ranx = pytest.importorskip("ranx")
    preds, target = case(seed_of("ranx", graded), graded=graded)
    qids = [f"q{q:02d}" for q in range(Q)]  # ranx returns queries sorted by id
    qrels = ranx.Qrels(
        {
            qids[q]: {f"d{j}": int(target[q, j]) for j in range(N) if target[q, j] > 0}
            for q in range(Q)
        }
    )
    run = ranx.Run({qids[q]: {f"d{j}": float(preds[q, j]) for j in range(N)} for q in range(Q)})
    names = [f"{m}@{k}" for m in RANX for k in KS] + [*RANX, "r-precision"]
    theirs = ranx.evaluate(qrels, run, names, return_mean=False)
    for name in names:
        base, _, k = name.partition("@")
        metric, options = RANX.get(base, ("r_precision", {}))
        top_k = int(k) if k else None
        ours = per_query(metric, preds, target, top_k, ties="first", **options)
        key = f"{metric}@{k}" if k and metric != "r_precision" else metric
        torch.testing.assert_close(
            ours[key], torch.as_tensor(theirs[name]).double(), atol=ATOL, rtol=0, msg=name
        )


# --------------------------------------------------------------------------- Ignite


@pytest.mark.parametrize("ignore_zero_hits", [True, False])
def test_ignite_hit_rate(ignore_zero_hits: bool) -> None:
    rec_sys = pytest.importorskip("ignite.metrics.rec_sys")
    preds, target = case(seed_of("ignite-hr", ignore_zero_hits), every_query_relevant=False)
    ks = [1, 3, 5, N]  # Ignite's HitRate cannot take a k past the list
    theirs = rec_sys.HitRate(top_k=ks, ignore_zero_hits=ignore_zero_hits)
    theirs.update((preds, target))
    action = "skip" if ignore_zero_hits else "neg"
    ours = rank_metrics(preds, target, ["hit_rate"], ks, empty_target_action=action)
    torch.testing.assert_close(
        torch.stack([ours[f"hit_rate@{k}"] for k in ks]),
        torch.tensor(theirs.compute()).double(),
        atol=ATOL,
        rtol=0,
    )


@pytest.mark.parametrize("gain_function", ["exp_rank", "linear_rank"])
@pytest.mark.parametrize("ignore_zero_hits", [True, False])
@pytest.mark.parametrize("tied", [False, True], ids=["tie-free", "tied"])
def test_ignite_ndcg(gain_function: str, ignore_zero_hits: bool, tied: bool) -> None:
    """Ignite's NDCG sorts stably: ``ties="first"`` reproduces it on tied scores too."""
    rec_sys = pytest.importorskip("ignite.metrics.rec_sys")
    preds, target = case(
        seed_of("ignite-ndcg", gain_function, ignore_zero_hits, tied),
        tied=tied,
        graded=True,
        every_query_relevant=False,
    )
    theirs = rec_sys.NDCG(top_k=KS, ignore_zero_hits=ignore_zero_hits, gain_function=gain_function)
    theirs.update((preds, target))
    ours = rank_metrics(
        preds,
        target,
        ["ndcg"],
        KS,
        ties="first",
        gain="exponential" if gain_function == "exp_rank" else "linear",
        relevance_threshold=1,  # Ignite's NDCG default
        empty_target_action="skip" if ignore_zero_hits else "neg",
    )
    torch.testing.assert_close(
        torch.stack([ours[f"ndcg@{k}"] for k in KS]),
        torch.tensor(theirs.compute()).double(),
        atol=ATOL,
        rtol=0,
    )


def test_ignite_0_5_5_has_only_hit_rate_and_ndcg() -> None:
    rec_sys = pytest.importorskip("ignite.metrics.rec_sys")
    ignite = pytest.importorskip("ignite")
    if ignite.__version__ != "0.5.5":
        pytest.skip(f"the docs describe Ignite 0.5.5, this is {ignite.__version__}")
    assert sorted(rec_sys.__all__) == ["HitRate", "NDCG"]


# --------------------------------------------------------------------------- TorchMetrics


def flat(preds: torch.Tensor, target: torch.Tensor):
    """TorchMetrics' retrieval input: flat triples with a query id per entry."""
    indexes = torch.arange(preds.shape[0]).unsqueeze(1).expand_as(preds)
    return preds.flatten(), target.flatten(), indexes.flatten()


def torchmetrics_mean(metric, preds: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    metric.update(*flat(preds, target)[:2], indexes=flat(preds, target)[2])
    return metric.compute().double()


# TorchMetrics class name -> (metric here, options here, TorchMetrics keywords)
TORCHMETRICS_AT_K = {
    "RetrievalHitRate": ("hit_rate", {}, {}),
    "RetrievalMRR": ("mrr", {}, {}),
    "RetrievalPrecision": ("precision", {}, {}),
    "RetrievalPrecision-adaptive": ("precision", {"adaptive_k": True}, {"adaptive_k": True}),
    "RetrievalRecall": ("recall", {}, {}),
    "RetrievalNormalizedDCG": ("ndcg", {"gain": "linear"}, {}),
}


@pytest.mark.parametrize("name", list(TORCHMETRICS_AT_K))
@pytest.mark.parametrize("top_k", [None, 1, 3, 20])
@pytest.mark.parametrize("empty_target_action", ["neg", "pos", "skip"])
def test_torchmetrics_at_k(name: str, top_k: int | None, empty_target_action: str) -> None:
    retrieval = pytest.importorskip("torchmetrics.retrieval")
    metric, options, their_options = TORCHMETRICS_AT_K[name]
    preds, target = case(
        seed_of("tm", name, top_k), graded=metric == "ndcg", every_query_relevant=False
    )
    theirs = getattr(retrieval, name.split("-")[0])(
        top_k=top_k, empty_target_action=empty_target_action, **their_options
    )
    ours = rank_metrics(
        preds, target, [metric], top_k, empty_target_action=empty_target_action, **options
    )
    torch.testing.assert_close(
        next(iter(ours.values())), torchmetrics_mean(theirs, preds, target), atol=ATOL, rtol=0
    )


@pytest.mark.parametrize("top_k", [None, 1, 3, 20])
def test_torchmetrics_ndcg_averages_ties(top_k: int | None) -> None:
    """TorchMetrics' NDCG spreads a tie group's gain over its positions: ``ties="average"``."""
    retrieval = pytest.importorskip("torchmetrics.retrieval")
    preds, target = case(seed_of("tm-ndcg-ties", top_k), tied=True, graded=True)
    theirs = torchmetrics_mean(retrieval.RetrievalNormalizedDCG(top_k=top_k), preds, target)
    ours = rank_metrics(preds, target, ["ndcg"], top_k, gain="linear", ties="average")
    torch.testing.assert_close(next(iter(ours.values())), theirs, atol=ATOL, rtol=0)
    first = rank_metrics(preds, target, ["ndcg"], top_k, gain="linear", ties="first")
    assert not torch.isclose(next(iter(first.values())), theirs, atol=ATOL)


def test_torchmetrics_map_whole_list_and_r_precision() -> None:
    retrieval = pytest.importorskip("torchmetrics.retrieval")
    preds, target = case(seed_of("tm-map"), every_query_relevant=False)
    ours = rank_metrics(preds, target, ["map", "r_precision"], None)
    torch.testing.assert_close(
        ours["map"], torchmetrics_mean(retrieval.RetrievalMAP(), preds, target), atol=ATOL, rtol=0
    )
    torch.testing.assert_close(
        ours["r_precision"],
        torchmetrics_mean(retrieval.RetrievalRPrecision(), preds, target),
        atol=ATOL,
        rtol=0,
    )


@pytest.mark.parametrize("k", [3, 5])  # at k = 1 all three agree
def test_torchmetrics_map_at_k_divides_by_hits(k: int) -> None:
    """RetrievalMAP(top_k=k) divides by the relevant items found in the top k.

    Neither ``ap_denominator`` reproduces it; per query it is ``map@k / recall@k``
    (0 where nothing relevant is in the top k).
    """
    retrieval = pytest.importorskip("torchmetrics.retrieval")
    preds, target = case(seed_of("tm-map-k", k))
    theirs = torchmetrics_mean(retrieval.RetrievalMAP(top_k=k), preds, target)
    values = per_query("map", preds, target, k)[f"map@{k}"]
    recall = per_query("recall", preds, target, k)[f"recall@{k}"]
    hits_based = torch.where(recall > 0, values / recall.clamp(min=1e-12), 0.0).mean()
    torch.testing.assert_close(hits_based, theirs, atol=ATOL, rtol=0)
    for denominator in ("relevant", "min_k_relevant"):
        ours = rank_metrics(preds, target, ["map"], k, ap_denominator=denominator)
        assert not torch.isclose(ours[f"map@{k}"], theirs, atol=ATOL), denominator


@pytest.mark.parametrize("name", ["RetrievalMRR", "RetrievalMAP", "RetrievalPrecision"])
def test_torchmetrics_drops_relevant_items_scored_at_most_zero(name: str) -> None:
    """TorchMetrics' MRR, MAP and Precision count a relevant item with score ≤ 0 as
    non-relevant; the same target with those items set to 0 reproduces it here."""
    retrieval = pytest.importorskip("torchmetrics.retrieval")
    metric = {"RetrievalMRR": "mrr", "RetrievalMAP": "map", "RetrievalPrecision": "precision"}[name]
    preds, target = case(seed_of("tm-nonpositive", name), positive=False)
    # the whole list, so that the items scored at most 0 are inside it
    theirs = torchmetrics_mean(getattr(retrieval, name)(), preds, target)
    k = None
    filtered = torch.where(preds > 0, target, 0)
    ours = next(iter(rank_metrics(preds, filtered, [metric], k).values()))
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)
    plain = next(iter(rank_metrics(preds, target, [metric], k).values()))
    assert not torch.isclose(plain, theirs, atol=ATOL)


@pytest.mark.parametrize("tied", [False, True], ids=["tie-free", "tied"])
def test_torchmetrics_auroc_is_auc_with_average_ties(tied: bool) -> None:
    retrieval = pytest.importorskip("torchmetrics.retrieval")
    preds, target = case(seed_of("tm-auc", tied), tied=tied)
    target[:, 0], target[:, 1] = 1, 0  # every query has both kinds
    theirs = torchmetrics_mean(retrieval.RetrievalAUROC(), preds, target)
    ours = rank_metrics(preds, target, ["auc"], None, ties="average")["auc"]
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)


@pytest.mark.parametrize("top_k", [None, 1, 3, 20])
def test_torchmetrics_fall_out(top_k: int | None) -> None:
    """Equal on queries with relevant and non-relevant items (empty queries differ)."""
    retrieval = pytest.importorskip("torchmetrics.retrieval")
    preds, target = case(seed_of("tm-fall-out", top_k))
    target[:, 0], target[:, 1] = 1, 0
    theirs = torchmetrics_mean(retrieval.RetrievalFallOut(top_k=top_k), preds, target)
    ours = next(iter(rank_metrics(preds, target, ["fall_out"], top_k).values()))
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)


@pytest.mark.parametrize("top_k", [None, 1, 3])
def test_torchmetrics_fall_out_rule_gives_its_empty_queries(top_k: int | None) -> None:
    """With ``fall_out_empty="no_nonrelevant"`` equal on every query under "pos" (issue 26),
    queries without relevant items and without non-relevant ones included."""
    retrieval = pytest.importorskip("torchmetrics.retrieval")
    preds, target = case(seed_of("tm-fall-out-rule", top_k))
    target[0], target[1] = 0, 1  # a query of each kind
    theirs = torchmetrics_mean(retrieval.RetrievalFallOut(top_k=top_k), preds, target)
    options = {"fall_out_empty": "no_nonrelevant", "empty_target_action": "pos"}
    ours = next(iter(rank_metrics(preds, target, ["fall_out"], top_k, **options).values()))
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)
