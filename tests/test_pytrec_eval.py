"""rank_metrics vs trec_eval itself (pytrec_eval) on random tie-free inputs.

Each query has N candidate columns with distinct random scores; a random
subset is retrieved (mask=True) and a random subset is judged (qrels), so
some judged docs, relevant ones included, are not retrieved (they count in R
and in the ideal DCG but are never ranked), some retrieved docs are unjudged
(grade 0 for us, "not in pool" for trec_eval), and masked columns often
score higher than retrieved ones (they must not be ranked). Every query has
at least one retrieved and one judged doc; some have no relevant doc (R = 0,
trec_eval reports 0 for every measure here, which is empty_target_action="neg").

trec_eval measure names: "P_5" etc., requested with custom cutoffs as
"P.1,3,10". pytrec_eval returns unrounded doubles.
"""

from __future__ import annotations

import pytest
import torch

from ranking_plugins import rank_metrics

pytrec_eval = pytest.importorskip("pytrec_eval")

KS = [1, 3, 10, 25, 60]  # N = 40 columns: 60 is past every list; 25 past many
N = 40
Q = 30
TOL = 1e-6

# trec_eval family -> rank_metrics metric (families with a cutoff)
CUT_FAMILIES = {
    "P": "precision",
    "recall": "recall",
    "success": "hit_rate",
    "map_cut": "map",
    "ndcg_cut": "ndcg",
}
# trec_eval measure -> rank_metrics metric (whole list, top_k=None)
WHOLE = {"recip_rank": "mrr", "map": "map", "ndcg": "ndcg", "Rprec": "r_precision"}
UNTHRESHOLDED = {"ndcg", "ndcg_cut"}  # trec_eval's nDCG ignores relevance_level


def make_case(seed: int, graded: bool):
    g = torch.Generator().manual_seed(seed)
    preds = torch.randn(Q, N, generator=g, dtype=torch.float64)
    assert all(row.unique().numel() == N for row in preds)  # tie-free
    mask = torch.rand(Q, N, generator=g) < torch.rand(Q, 1, generator=g)
    judged = torch.rand(Q, N, generator=g) < 0.6
    if graded:
        # grades -1..3 (-1: judged, "unjudged in pool" / gain 0 for trec_eval)
        probs = torch.tensor([0.1, 0.45, 0.2, 0.15, 0.1])
        grades = torch.multinomial(probs, Q * N, replacement=True, generator=g).view(Q, N) - 1
    else:
        grades = (torch.rand(Q, N, generator=g) < 0.3).long()
    for q in range(Q):  # at least one retrieved and one judged doc per query
        mask[q, int(torch.randint(N, (1,), generator=g))] = True
        judged[q, int(torch.randint(N, (1,), generator=g))] = True
    grades = torch.where(judged, grades, torch.zeros_like(grades))
    grades[0] = torch.where(grades[0] > 0, torch.zeros_like(grades[0]), grades[0])  # R = 0
    grades[1] = torch.where(
        mask[1], torch.zeros_like(grades[1]), grades[1]
    )  # only unretrieved relevant
    grades[1, ~mask[1]] = grades[1, ~mask[1]].clamp(min=1)
    judged[1] |= ~mask[1]

    qrels = {
        f"q{q}": {f"d{j}": int(grades[q, j]) for j in range(N) if judged[q, j]} for q in range(Q)
    }
    run = {f"q{q}": {f"d{j}": float(preds[q, j]) for j in range(N) if mask[q, j]} for q in range(Q)}
    return preds, grades, mask, qrels, run


def ours(preds, target, mask, level):
    """{trec_eval measure name: per-query tensor} from rank_metrics."""
    common = dict(mask=mask, ties="first", gain="linear", reduction="none")
    thr = None if level == 1 else level
    res = {}
    for fam, metric in CUT_FAMILIES.items():
        out = rank_metrics(
            preds,
            target,
            metrics=(metric,),
            top_k=KS,
            relevance_threshold=None if fam in UNTHRESHOLDED else thr,
            **common,
        )
        res.update({f"{fam}_{k}": out[f"{metric}@{k}"] for k in KS})
    for meas, metric in WHOLE.items():
        out = rank_metrics(
            preds,
            target,
            metrics=(metric,),
            top_k=None,
            relevance_threshold=None if meas in UNTHRESHOLDED else thr,
            **common,
        )
        res[meas] = out[metric]
    return res


def reference(qrels, run, level):
    cut = ",".join(map(str, KS))
    measures = {f"{fam}.{cut}" for fam in CUT_FAMILIES} | set(WHOLE)
    ev = pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=level)
    return ev.evaluate(run)


CASES = (
    [(seed, False, 1) for seed in range(4)]
    + [(seed, True, 1) for seed in range(10, 14)]
    + [(seed, True, 2) for seed in range(20, 24)]
)


@pytest.mark.parametrize(
    "seed,graded,level",
    CASES,
    ids=[f"seed{s}-{'graded' if g else 'binary'}-l{lvl}" for s, g, lvl in CASES],
)
def test_matches_pytrec_eval(seed, graded, level):
    preds, target, mask, qrels, run = make_case(seed, graded)
    ref = reference(qrels, run, level)
    assert sorted(ref) == sorted(qrels)
    got = ours(preds, target, mask, level)
    mismatches = []
    for meas, values in got.items():
        assert values.shape == (Q,) and values.dtype == torch.float64, meas
        for q in range(Q):
            expected = ref[f"q{q}"][meas]
            if not abs(float(values[q]) - expected) <= TOL:
                mismatches.append(
                    f"{meas} q{q}: pytrec_eval {expected!r}, got {float(values[q])!r}"
                )
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n".join(mismatches[:50])


def test_float32_scores_and_bool_target():
    """Same numbers from float32 scores and a bool target (binary qrels)."""
    preds, target, mask, qrels, run = make_case(99, graded=False)
    preds32 = preds.float()
    assert all(row.unique().numel() == N for row in preds32)
    run32 = {
        q: {d: float(torch.tensor(s, dtype=torch.float32)) for d, s in docs.items()}
        for q, docs in run.items()
    }
    ref = reference(qrels, run32, 1)
    got = ours(preds32, target.bool(), mask, 1)
    for meas, values in got.items():
        for q in range(Q):
            assert float(values[q]) == pytest.approx(ref[f"q{q}"][meas], abs=TOL), (meas, q)


def test_matches_ranx():
    """A few measures against ranx (optional dependency; first call compiles numba)."""
    ranx = pytest.importorskip("ranx")
    preds, target, mask, qrels, run = make_case(7, graded=True)
    # ranx: grade > 0 is relevant, gain = grade ("ndcg" is Jarvelin's linear gain)
    rqrels = {q: {d: g for d, g in docs.items() if g > 0} for q, docs in qrels.items()}
    keep = [q for q in range(Q) if rqrels[f"q{q}"]]  # ranx needs relevant docs per query
    qids = [f"q{q}" for q in keep]
    metrics = [
        f"{m}@{k}"
        for m in ("precision", "recall", "hit_rate", "mrr", "map", "ndcg")
        for k in (3, 25)
    ] + ["mrr", "map", "ndcg", "r-precision"]
    ref = ranx.evaluate(
        ranx.Qrels({q: rqrels[q] for q in qids}),
        ranx.Run({q: run[q] for q in qids}),
        metrics,
        return_mean=False,
    )
    name = {
        "precision": "precision",
        "recall": "recall",
        "hit_rate": "hit_rate",
        "mrr": "mrr",
        "map": "map",
        "ndcg": "ndcg",
        "r-precision": "r_precision",
    }
    idx = torch.tensor(keep)
    for m in metrics:
        base, _, k = m.partition("@")
        out = rank_metrics(
            preds[idx],
            target[idx],
            metrics=(name[base],),
            top_k=int(k) if k else None,
            mask=mask[idx],
            ties="first",
            gain="linear",
            reduction="none",
        )
        key = f"{name[base]}@{k}" if k else name[base]
        # ranx returns the run's queries in its own (sorted) order
        order = sorted(range(len(qids)), key=lambda i: qids[i])
        torch.testing.assert_close(
            out[key][order],
            torch.as_tensor(ref[m], dtype=torch.float64),
            atol=TOL,
            rtol=0,
            msg=lambda s, m=m: f"{m}: {s}",
        )
