"""TorchMetrics' retrieval tests against this package: the documented differences.

Not a TorchMetrics file. ``conftest.py`` calls :func:`mark` on every test of
this folder. A case that meets a difference documented in
``docs/migration_torchmetrics.rst`` (decided from the test's own inputs, as the
tester compares them) is a check of the documented rule, in two steps:

1. the test runs as TorchMetrics wrote it and must fail, with the exception
   the difference makes; if it passes, the package gave TorchMetrics' value
   where the rule says otherwise, and the case fails;
2. the package's value of every input the test compares must then equal the
   documented rule's value, modelled here in numpy. A class test (and the
   curve's) runs again through TorchMetrics' own tester with the rule's
   reference in place of TorchMetrics' (:func:`rule_reference`,
   :func:`rule_curve`): every batch and all batches, in the DDP pool for a DDP
   case. A functional test compares each query it reads; an argument test
   checks the value of the input TorchMetrics refuses.

Only then does the case pass; a wrong number inside a documented difference
fails the suite. Each such case carries ``documented_difference(reason)`` and is
counted by reason at the end of the run ("checked against a documented
rule"): these are policies, not bugs, so they are checks, not expected
failures (``tests/peers/README.md``).
"""

from __future__ import annotations

import contextlib
import functools
import itertools

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from ranking_plugins import torchmetrics as C
from ranking_plugins import torchmetrics_functional as F
from unittests.retrieval import helpers
from unittests.retrieval.helpers import _retrieval_aggregate

SKIP_NAN = (
    'empty_target_action="skip" and no query of a batch counts: NaN here, 0.0 in TorchMetrics'
)
MAP_AT_K = (
    "MAP@k divides by R here (trec_eval's map_cut); TorchMetrics by the relevant items "
    "within the top k"
)
FALL_OUT = (
    "FallOut: a query without non-relevant items (empty) counts 1 under 'neg' here, the "
    "worst fall-out; 0 in RetrievalFallOut"
)
AUC_ONE_CLASS = (
    "AUC of a query with relevant items only: undefined (empty) here, 0 in RetrievalAUROC"
)
INDEXES_OPTIONAL = "`indexes` is optional here: (Q, N) scores without it are the dense layout"
EMPTY_BATCH = "an empty batch adds nothing here; TorchMetrics raises ValueError"
SCORE_AT_MOST_0 = (
    "TorchMetrics' MRR, MAP, Precision and Recall drop relevant items whose score is <= 0; "
    "here a score only ranks (every item is tied at 0: the expectation over their orders)"
)
FALL_OUT_FUNCTION = (
    "retrieval_fall_out of a query without non-relevant items: 1 here (its worst value, as "
    "FallOut's empty query under 'neg'); 0 in TorchMetrics"
)
GRADED = (
    "graded targets: every function takes them here (a grade > 0 is relevant); "
    "TorchMetrics refuses non-binary targets but in NDCG"
)
EMPTY = (
    "an empty preds is a query without relevant items here (0, or fall-out's 1); "
    "TorchMetrics raises ValueError"
)
FLOAT64 = (
    "the functions return float64 (the package's precision), TorchMetrics' float32: "
    "torch.allclose against a float32 tensor raises 'Double did not match Float'"
)

_DID_NOT_RAISE = pytest.fail.Exception
#: what TorchMetrics' test raises where it meets each difference: another error fails
RAISES = {
    SKIP_NAN: AssertionError,
    MAP_AT_K: AssertionError,
    FALL_OUT: AssertionError,
    AUC_ONE_CLASS: AssertionError,
    INDEXES_OPTIONAL: _DID_NOT_RAISE,
    EMPTY_BATCH: _DID_NOT_RAISE,
    SCORE_AT_MOST_0: AssertionError,
    FALL_OUT_FUNCTION: AssertionError,
    GRADED: _DID_NOT_RAISE,
    EMPTY: _DID_NOT_RAISE,
    FLOAT64: RuntimeError,
}

#: test_arguments_class_metric: the expected message -> why this package differs
ARGUMENT_DIFFERENCES = {
    "`indexes` cannot be None": INDEXES_OPTIONAL,
    "must be non-empty and non-scalar tensors": EMPTY_BATCH,
}

#: the class and the function each test file tests
CLASSES = {
    "auroc": C.RetrievalAUROC,
    "fallout": C.RetrievalFallOut,
    "hit_rate": C.RetrievalHitRate,
    "map": C.RetrievalMAP,
    "mrr": C.RetrievalMRR,
    "ndcg": C.RetrievalNormalizedDCG,
    "precision": C.RetrievalPrecision,
    "r_precision": C.RetrievalRPrecision,
    "recall": C.RetrievalRecall,
}
FUNCTIONS = {
    "auroc": F.retrieval_auroc,
    "fallout": F.retrieval_fall_out,
    "hit_rate": F.retrieval_hit_rate,
    "map": F.retrieval_average_precision,
    "mrr": F.retrieval_reciprocal_rank,
    "ndcg": F.retrieval_normalized_dcg,
    "precision": F.retrieval_precision,
    "r_precision": F.retrieval_r_precision,
    "recall": F.retrieval_recall,
}


def mark(item: pytest.Function) -> None:
    """Make ``item`` a check of the documented rule if it meets a documented difference."""
    found = _difference(item)
    if found is None:
        return
    reason, check = found
    item.add_marker(pytest.mark.documented_difference(reason))
    item.user_properties.append(("documented_difference", reason))
    item.obj = _checking(item.obj, reason, check)


def _checking(test, reason: str, check):
    """``test``, which must fail with ``RAISES[reason]``, and then ``check`` pass."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        try:
            test(*args, **kwargs)
        except RAISES[reason] as error:
            check(functools.partial(test, *args, **kwargs), error)
            return
        pytest.fail(
            f"TorchMetrics' test passed, where the documented rule gives another value: {reason}",
            pytrace=False,
        )

    return run


def _difference(item: pytest.Function):
    """``(reason, check)`` if ``item`` meets a documented difference, else None."""
    metric = item.path.stem.removeprefix("test_")
    name = item.originalname
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec else {}
    if name.endswith("_all_zero_predictions_returns_zero"):
        return SCORE_AT_MOST_0, functools.partial(_check_all_tied, metric)
    if metric == "ndcg" and name == "test_corner_case_with_tied_scores":
        return FLOAT64, _check_tied_ndcg
    if name == "test_arguments_class_metric":
        return _argument_difference(metric, params)
    if name in ("test_functional_metric", "test_arguments_functional_metric"):
        return _functional_difference(metric, name, params)
    if name not in ("test_class_metric", "test_class_metric_ignore_index"):
        return None
    reason = _class_difference(metric, name, params)
    if reason is None:
        return None
    return reason, functools.partial(_check_against_rule, item.module, metric)


# ------------------------------------------------------------------ the classes


def _class_difference(metric: str, name: str, params: dict) -> str | None:
    """The difference a class test meets, decided from its inputs batch by batch and
    over all batches (what the tester compares), under its ``aggregation``."""
    k = params.get("k", params.get("top_k"))
    aggregation = params.get("aggregation", "mean")
    ignore_index = params.get("ignore_index", -100 if name.endswith("_ignore_index") else None)
    eta = params["empty_target_action"]
    kwargs = {"top_k": k, "max_fpr": params.get("max_fpr")}
    reasons = {"map": MAP_AT_K, "fallout": FALL_OUT, "auroc": AUC_ONE_CLASS}
    for groups in _units(params["indexes"], params["preds"], params["target"], ignore_index):
        # FallOut's empty queries are others: its own comparison below covers them
        if metric != "fallout" and eta == "skip" and not any((t > 0).any() for _, t in groups):
            return SKIP_NAN
        model = TM_MODELS.get(metric)
        if model is None or (metric == "auroc" and k is not None):  # auroc@k: the same rule
            continue
        reverse = metric == "fallout"
        tm = [_tm_query(p, t, model, eta, reverse, kwargs) for p, t in groups]
        ours = [_rule_query(metric, p, t, model, eta, reverse, kwargs) for p, t in groups]
        if not np.isclose(
            _aggregate(tm, aggregation, 0.0), _aggregate(ours, aggregation), rtol=0.0, atol=1e-6
        ):
            return reasons[metric]
    return None


def _units(indexes, preds, target, ignore_index):
    """The queries of each batch, then of all batches: what the tester compares."""
    idx, scores, grades = (np.asarray(x) for x in (indexes, preds, target))
    for i in [*range(len(idx)), slice(None)]:
        yield list(_queries(idx[i], scores[i], grades[i], ignore_index))


def _queries(indexes, preds, target, ignore_index):
    """``(preds, target)`` numpy arrays of each query id, ``ignore_index`` dropped."""
    ids, p, t = (np.asarray(x).ravel() for x in (indexes, preds, target))
    if ignore_index is not None:
        keep = t != ignore_index
        ids, p, t = ids[keep], p[keep], t[keep]
    for q in np.unique(ids):
        yield p[ids == q], t[ids == q]


def _aggregate(values, aggregation, none=np.nan) -> float:
    """The queries' aggregation; ``none`` when no query counts (NaN here, 0.0 in TorchMetrics)."""
    counted = [v for v in values if v is not None]
    if not counted:
        return none
    return float(_retrieval_aggregate(torch.tensor(counted, dtype=torch.float64), aggregation))


def _on_empty(eta):
    return {"skip": None, "neg": 0.0, "pos": 1.0}[eta]


def _tm_query(p, t, reference, eta, reverse, kwargs):
    """A query's value in TorchMetrics' reference (``_compute_sklearn_metric``): None if
    not counted."""
    if ((1 - t) if reverse else t).sum() == 0:
        return _on_empty(eta)
    value = float(reference(t, p, **kwargs))
    return 0.0 if np.isnan(value) else value


def _rule_query(metric, p, t, reference, eta, reverse, kwargs):
    """A query's value under the documented rules: TorchMetrics' but for MAP@k, FallOut's
    and AUROC's empty queries."""
    k = kwargs.get("top_k")
    if metric == "map" and k is not None:
        return _average_precision(t, p, k) if (t > 0).any() else _on_empty(eta)
    if metric == "fallout" and not (t <= 0).any():
        return None if eta == "skip" else 1.0  # the worst fall-out, under "neg" too
    if metric == "auroc" and k is None and not (t <= 0).any():
        return _on_empty(eta)  # all relevant: undefined, an empty query
    return _tm_query(p, t, reference, eta, reverse, kwargs)


def rule_reference(
    metric,
    preds,
    target,
    indexes=None,
    *,
    reference,
    empty_target_action="skip",
    ignore_index=None,
    reverse=False,
    aggregation="mean",
    **kwargs,
):
    """TorchMetrics' ``_compute_sklearn_metric`` under the documented rules: each query's
    value by :func:`_rule_query` (``reference`` is the test's own for one query), NaN when
    no query counts."""
    if indexes is None:
        indexes = np.zeros(np.shape(preds), dtype=np.int64)
    queries = _queries(indexes, preds, target, ignore_index)
    values = [
        _rule_query(metric, p, t, reference, empty_target_action, reverse, kwargs)
        for p, t in queries
    ]
    return np.array(_aggregate(values, aggregation))


def rule_curve(
    reference,
    preds,
    target,
    indexes=None,
    *,
    empty_target_action="skip",
    ignore_index=None,
    reverse=False,
    max_k=None,
    **kwargs,
):
    """TorchMetrics' reference curve, NaN at every k when no query counts (skip)."""
    queries = list(_queries(indexes, preds, target, ignore_index))
    counted = empty_target_action != "skip" or any(
        ((1 - t) if reverse else t).sum() for _, t in queries
    )
    if counted:
        return reference(
            preds,
            target,
            indexes,
            empty_target_action=empty_target_action,
            ignore_index=ignore_index,
            reverse=reverse,
            max_k=max_k,
            **kwargs,
        )
    max_k = max_k or max(len(t) for _, t in queries)
    nan = torch.full((max_k,), float("nan"))
    return nan, nan, torch.arange(1, max_k + 1)


@contextlib.contextmanager
def _rule_references(module, metric: str):
    """The test's reference replaced by the documented rules' (in the main process, where
    the tester binds it: a DDP case's processes get it with the test's arguments)."""
    if metric == "precision_recall_curve":
        name, original = "_compute_precision_recall_curve", module._compute_precision_recall_curve
        target, replacement = module, functools.partial(rule_curve, original)
    else:
        name, original = "_compute_sklearn_metric", helpers._compute_sklearn_metric
        target, replacement = helpers, functools.partial(_reference_for, metric)
    setattr(target, name, replacement)
    try:
        yield
    finally:
        setattr(target, name, original)


def _reference_for(name, *args, metric, **kwargs):
    """``_compute_sklearn_metric``'s signature (``metric=`` is the test's reference of one
    query) bound to :func:`rule_reference`: a partial of it pickles for the DDP pool."""
    return rule_reference(name, *args, reference=metric, **kwargs)


def _check_against_rule(module, metric, rerun, error) -> None:
    """The test again, against the documented rules' reference: every value it compares."""
    assert isinstance(error, AssertionError), error
    with _rule_references(module, metric):
        rerun()


def _check_all_tied(metric, rerun, error) -> None:
    """``*_all_zero_predictions_returns_zero``'s query (three items tied at 0, the first
    and last relevant): the value is the mean over the 3! orders of the items."""
    preds, target = torch.tensor([0.0, 0.0, 0.0]), torch.tensor([1, 0, 1])
    value = CLASSES[metric]()(preds, target, indexes=torch.zeros(3, dtype=torch.long))
    one_order = {
        "mrr": lambda hits: 1.0 / (1 + int(np.argmax(hits))),
        "map": lambda hits: float((np.cumsum(hits) / np.arange(1, 4))[hits].sum()) / 2,
        "precision": lambda hits: hits.sum() / 3,
        "recall": lambda hits: hits.sum() / 2,
    }[metric]
    grades = target.numpy() > 0
    expected = np.mean([one_order(grades[list(o)]) for o in itertools.permutations(range(3))])
    assert np.isclose(float(value), expected, rtol=0.0, atol=1e-12), (float(value), expected)


def _argument_difference(metric: str, params: dict):
    message = params["message"]
    reason = next((why for text, why in ARGUMENT_DIFFERENCES.items() if text in message), None)
    if reason == INDEXES_OPTIONAL:
        return reason, functools.partial(_check_dense, metric, params)
    if reason == EMPTY_BATCH:
        return reason, functools.partial(_check_empty_batch, metric, params)
    return None


def _check_dense(metric, params, rerun, error) -> None:
    """``(Q, N)`` scores without ``indexes``: one query per row."""
    preds, target, args = params["preds"], params["target"], params["metric_args"]
    rows = torch.arange(preds.shape[0]).unsqueeze(1).expand_as(preds)
    dense = CLASSES[metric](**args)(preds, target)
    grouped = CLASSES[metric](**args)(preds.ravel(), target.ravel(), indexes=rows.ravel())
    assert torch.allclose(dense, grouped, rtol=0.0, atol=1e-12, equal_nan=True), (dense, grouped)


def _check_empty_batch(metric, params, rerun, error) -> None:
    """An empty batch adds nothing: NaN alone (no query), and nothing to a batch after it."""
    args = params["metric_args"]
    empty = CLASSES[metric](**args)
    assert empty(params["preds"], params["target"], indexes=params["indexes"]).isnan()
    batch = (torch.tensor([0.9, 0.1, 0.8, 0.2]), torch.tensor([1, 0, 0, 1]))
    indexes = torch.tensor([0, 0, 1, 1])
    empty.update(*batch, indexes=indexes)
    alone = CLASSES[metric](**args)
    alone.update(*batch, indexes=indexes)
    assert torch.equal(empty.compute(), alone.compute()), (empty.compute(), alone.compute())


# ------------------------------------------------------------- the functions


def _functional_difference(metric: str, name: str, params: dict):
    function = FUNCTIONS[metric]
    if name == "test_arguments_functional_metric":
        message, preds, target = params["message"], params["preds"], params["target"]
        if "non-empty" in message and preds.numel() == 0:
            return EMPTY, functools.partial(_check_empty, metric, function, preds, target)
        if "binary" in message:
            return GRADED, functools.partial(_check_graded, function, preds, target)
        return None
    k = params.get("k", params.get("top_k"))
    models = {"map": (MAP_AT_K, _average_precision), "fallout": (FALL_OUT_FUNCTION, _fall_out)}
    if metric not in models:
        return None
    reason, ours = models[metric]
    queries = list(_compared(params["preds"], params["target"]))
    tm = TM_MODELS[metric]
    if all(np.isclose(tm(t, p, k), ours(t, p, k), rtol=0.0, atol=1e-6) for p, t in queries):
        return None
    return reason, functools.partial(_check_values, function, ours, queries, k)


def _check_tied_ndcg(rerun, error) -> None:
    """test_corner_case_with_tied_scores' inputs: the package's value is scikit-learn's
    (both the expectation over a tie's orders) in float64, at each k it tries."""
    from sklearn.metrics import ndcg_score

    assert "Double did not match Float" in str(error), error
    target = torch.tensor([[10, 0, 0, 1, 5]])
    preds = torch.tensor([[0.1, 0, 0, 0, 0.1]])
    for k in (1, 3, 5):
        got = F.retrieval_normalized_dcg(preds, target, top_k=k)
        assert got.dtype == torch.float64
        assert abs(float(got) - ndcg_score(target, preds, k=k)) < 1e-12, (k, float(got))


def _compared(preds, target):
    """The queries ``_functional_test`` compares: the first half of the batches, each
    one query read flattened, as numpy arrays.

    Copies, not views: they are read when the test runs, and a DDP case run before
    it moves the tensors' storage to shared memory (torch's pickling for the pool),
    which leaves a view of the old memory reading freed bytes.
    """
    for i in range(preds.shape[0] // 2):
        yield preds[i].numpy().ravel().copy(), target[i].numpy().ravel().copy()


def _check_values(function, model, queries, k, rerun, error) -> None:
    assert isinstance(error, AssertionError), error
    for p, t in queries:
        value = function(torch.from_numpy(p), torch.from_numpy(t), top_k=k).item()
        expected = model(t, p, k)
        assert np.isclose(value, expected, rtol=0.0, atol=1e-9), (value, expected)


def _check_empty(metric, function, preds, target, rerun, error) -> None:
    value = function(preds, target).item()
    assert value == (1.0 if metric == "fallout" else 0.0), value


def _check_graded(function, preds, target, rerun, error) -> None:
    for p, t in zip(preds, target):
        graded, binary = function(p, t), function(p, (t > 0).long())
        assert torch.equal(graded, binary), (graded, binary)


# ----------------------------------------------- the rules, in numpy (no ties)
# Signature of TorchMetrics' references: (target, preds, top_k, ...), one query.


def _top(t, p, k):
    """The grades of the top k (all when k is None), best score first."""
    order = np.argsort(-p, kind="stable")
    return t[order][: len(t) if k is None else k]


def _precisions_at_hits(t, p, k):
    top = _top(t, p, k) > 0
    return (np.cumsum(top) / np.arange(1, len(top) + 1))[top]


def _average_precision(t, p, k=None, **_) -> float:
    """AP@k: the precisions at the relevant items within the top k over R; 0 for R = 0."""
    relevant = int((t > 0).sum())
    return float(_precisions_at_hits(t, p, k).sum()) / relevant if relevant else 0.0


def _tm_average_precision(t, p, top_k=None, **_) -> float:
    """TorchMetrics' AP@k: over the relevant items found within the top k."""
    found = _precisions_at_hits(t, p, top_k)
    return float(found.mean()) if len(found) else 0.0


def _fall_out(t, p, k=None, **_) -> float:
    """retrieval_fall_out@k: 1 for a query without non-relevant items, else TorchMetrics'
    value."""
    return _tm_fall_out(t, p, k) if (t <= 0).any() else 1.0


def _tm_fall_out(t, p, top_k=None, **_) -> float:
    """TorchMetrics' fall-out@k: the non-relevant items in the top k over the non-relevant
    items (0 if there are none)."""
    nonrelevant = int((t <= 0).sum())
    return float((_top(t, p, top_k) <= 0).sum()) / nonrelevant if nonrelevant else 0.0


def _tm_auc(t, p, top_k=None, max_fpr=None, **_) -> float:
    """TorchMetrics' AUROC of the whole list (``top_k=None``): scikit-learn's, 0 where one
    class is missing."""
    if not ((t > 0).any() and (t <= 0).any()):
        return 0.0
    return float(roc_auc_score(t > 0, p, max_fpr=max_fpr))


#: TorchMetrics' value of one query, where the rules here differ from it
TM_MODELS = {"map": _tm_average_precision, "fallout": _tm_fall_out, "auroc": _tm_auc}
