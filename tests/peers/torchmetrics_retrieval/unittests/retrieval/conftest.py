"""TorchMetrics' retrieval tests against ``ranking_plugins.torchmetrics``: the differences.

The test files of this folder are TorchMetrics' own (v1.9.0), with only the imports
swapped (``from ranking_plugins.torchmetrics import RetrievalMRR``, ``from
ranking_plugins.torchmetrics_functional import retrieval_reciprocal_rank``, ...;
``test_precision_recall_curve.py`` also imports TorchMetrics' ``_retrieval_aggregate``
from ``helpers.py``, where the same function is, not from ``torchmetrics``). The functional tests' differences are marked
by ``functional_differences.py``, which says how. The helpers differ from TorchMetrics' in three places,
each said where it is: an argument at TorchMetrics' default that a class here
does not take is left out (``helpers.py``), TorchScript compiles each metric
class and argument set once (``_helpers/testers.py``), and the inputs are
seeded (``_inputs.py``).

This file marks each test that meets a deliberate difference, documented in
``docs/migration_torchmetrics.rst``, as ``xfail(strict=True)``: it must fail, and for
that reason. Where the difference depends on the data (which queries are empty,
which relevant items fall below k), the mark is decided from the test's own
inputs, batch by batch and over all batches, as the tester compares them, under
the test's ``aggregation`` (TorchMetrics' ``"mean"``, ``"median"``, ``"min"``,
``"max"`` or a callable, taken here alike):

* ``empty_target_action="skip"`` where no query of a batch counts:
  ``compute()`` is NaN here, 0.0 in TorchMetrics.
* MAP with a ``top_k``, where a query has relevant items both in and below its
  top k: AP@k divides by R here (trec_eval's ``map_cut``), by the relevant
  items within the top k in TorchMetrics.
* FallOut under ``empty_target_action="neg"``, where a query has no
  non-relevant item (the empty query of both): it counts 1 here, the worst
  fall-out, as ``"neg"`` counts every metric's worst value; 0 in TorchMetrics.
* AUROC without ``top_k``, where a query has relevant items only: its AUC is
  undefined here (an empty query, handled by ``empty_target_action``);
  TorchMetrics counts 0. With a ``top_k`` (``auroc@k``) both count 0.
* ``indexes=None``: not an error here, ``(Q, N)`` scores are the dense layout.
* An empty batch: adds nothing here; TorchMetrics raises ValueError.
* ``*_all_zero_predictions_returns_zero``: TorchMetrics' MRR, MAP, Precision
  and Recall treat a relevant item whose score is <= 0 as not relevant; here a
  score only ranks (and every item is tied).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from unittests.retrieval import functional_differences
from unittests.retrieval.helpers import _retrieval_aggregate

HERE = Path(__file__).parent

SKIP_NAN = (
    'empty_target_action="skip" and no query of a batch counts: NaN here, 0.0 in TorchMetrics'
)
MAP_AT_K = (
    "MAP@k divides by R here (trec_eval's map_cut); RetrievalMAP(top_k=k) divides by the "
    "relevant items within the top k"
)
FALL_OUT = (
    "FallOut: a query without non-relevant items (empty) counts 1 under 'neg' here, the "
    "worst fall-out; 0 in RetrievalFallOut"
)
AUC_ONE_CLASS = (
    "AUC of a query with relevant items only: undefined (empty) here, 0 in RetrievalAUROC"
)
CURVE_AGGREGATION = (
    "RetrievalPrecisionRecallCurve(max_k=None) averages its curves over the queries: another "
    "`aggregation` needs a `max_k` here (refused by name); TorchMetrics aggregates per k"
)
INDEXES_OPTIONAL = "`indexes` is optional here: (Q, N) scores without it are the dense layout"
EMPTY_BATCH = "an empty batch adds nothing here; TorchMetrics raises ValueError"
SCORE_AT_MOST_0 = (
    "TorchMetrics' MRR, MAP, Precision and Recall drop relevant items whose score is <= 0; "
    "here a score only ranks (every item is tied at 0)"
)

#: what each difference makes the test raise: an xfail for another error is a failure
RAISES = {
    SKIP_NAN: AssertionError,
    MAP_AT_K: AssertionError,
    FALL_OUT: AssertionError,
    AUC_ONE_CLASS: AssertionError,
    INDEXES_OPTIONAL: pytest.fail.Exception,  # DID NOT RAISE
    EMPTY_BATCH: pytest.fail.Exception,  # DID NOT RAISE
    SCORE_AT_MOST_0: AssertionError,
    CURVE_AGGREGATION: ValueError,
}

#: test_arguments_class_metric: the expected message -> why this package differs
ARGUMENT_DIFFERENCES = {
    "`indexes` cannot be None": INDEXES_OPTIONAL,
    "must be non-empty and non-scalar tensors": EMPTY_BATCH,
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE not in item.path.parents or not isinstance(item, pytest.Function):
            continue
        if functional_differences.mark(item):  # the functional tests: that module's marks
            continue
        reason = _difference(item)
        if reason:
            item.add_marker(pytest.mark.xfail(strict=True, reason=reason, raises=RAISES[reason]))
            # Python's own traceback format: pytest's default parses the source of
            # every frame, about 0.1 s for each of these thousands of expected failures
            item.repr_failure = functools.partial(item._repr_failure_py, style="native")


def _difference(item) -> str | None:
    metric = item.path.stem.removeprefix("test_")
    name = item.originalname
    params = getattr(item, "callspec", None)
    params = params.params if params else {}
    if name.endswith("_all_zero_predictions_returns_zero"):
        return SCORE_AT_MOST_0
    if name == "test_arguments_class_metric":
        message = params["message"]
        return next((why for text, why in ARGUMENT_DIFFERENCES.items() if text in message), None)
    if name not in ("test_class_metric", "test_class_metric_ignore_index"):
        return None
    k = params.get("k", params.get("top_k"))
    aggregation = params.get("aggregation", "mean")
    if metric == "precision_recall_curve" and params.get("max_k") is None and aggregation != "mean":
        return CURVE_AGGREGATION
    ignore_index = params.get("ignore_index", -100 if name.endswith("_ignore_index") else None)
    eta = params["empty_target_action"]
    units = _units(params["indexes"], params["preds"], params["target"], ignore_index)
    reasons = {"map": MAP_AT_K, "fallout": FALL_OUT, "auroc": AUC_ONE_CLASS}
    for groups in units:
        # FallOut's empty queries are others: its own comparison below covers them
        if metric != "fallout" and eta == "skip" and not any((t > 0).any() for _, t in groups):
            return SKIP_NAN
        differs = DIFFERS.get(metric)
        if differs and differs(groups, eta, k, params.get("max_fpr"), aggregation):
            return reasons[metric]
    return None


def _units(indexes, preds, target, ignore_index):
    """The queries of each batch, then of all batches: what the tester compares.

    Each is a list of ``(preds, target)`` numpy arrays, one per query id.
    """
    idx, scores, grades = (np.asarray(x) for x in (indexes, preds, target))
    flat = [(idx[i].ravel(), scores[i].ravel(), grades[i].ravel()) for i in range(len(idx))]
    flat.append((idx.ravel(), scores.ravel(), grades.ravel()))
    for ids, p, t in flat:
        if ignore_index is not None:
            keep = t != ignore_index
            ids, p, t = ids[keep], p[keep], t[keep]
        yield [(p[ids == q], t[ids == q]) for q in np.unique(ids)]


def _top(p, t, k):
    """The grades of the top k (all when k is None), best score first."""
    order = np.argsort(-p, kind="stable")
    return t[order][: len(t) if k is None else k]


def _means_differ(groups, tm_value, our_value, aggregation) -> bool:
    """TorchMetrics' aggregation (0.0 when no query counts) against this package's (NaN then)."""
    tm = [v for v in map(tm_value, groups) if v is not None]
    ours = [v for v in map(our_value, groups) if v is not None]

    def aggregate(values):
        return float(_retrieval_aggregate(torch.tensor(values, dtype=torch.float64), aggregation))

    tm_mean = aggregate(tm) if tm else 0.0
    our_mean = aggregate(ours) if ours else float("nan")
    return not np.isclose(tm_mean, our_mean, rtol=0.0, atol=1e-6)


def _on_empty(eta):
    return {"skip": None, "neg": 0.0, "pos": 1.0}[eta]


def _map_differs(groups, eta, k, max_fpr, aggregation) -> bool:
    if k is None:
        return False

    def precisions(p, t):
        top = _top(p, t, k) > 0
        return (np.cumsum(top) / np.arange(1, len(top) + 1))[top]

    def tm(group):
        p, t = group
        if not (t > 0).any():
            return _on_empty(eta)
        found = precisions(p, t)
        return float(found.mean()) if len(found) else 0.0

    def ours(group):
        p, t = group
        relevant = int((t > 0).sum())
        return _on_empty(eta) if not relevant else float(precisions(p, t).sum()) / relevant

    return _means_differ(groups, tm, ours, aggregation)


def _fall_out_differs(groups, eta, k, max_fpr, aggregation) -> bool:
    def fall_out(p, t):
        nonrelevant = int((t <= 0).sum())
        return float((_top(p, t, k) <= 0).sum()) / nonrelevant if nonrelevant else 0.0

    def tm(group):
        p, t = group
        return _on_empty(eta) if not (t <= 0).any() else fall_out(p, t)

    def ours(group):
        p, t = group
        return {"skip": None, "neg": 1.0, "pos": 1.0}[eta] if not (t <= 0).any() else fall_out(p, t)

    return _means_differ(groups, tm, ours, aggregation)


def _auc_differs(groups, eta, k, max_fpr, aggregation) -> bool:
    if k is not None:  # auroc@k: TorchMetrics' rule, 0 where the top k holds one class
        return False

    def auc(p, t):
        return float(roc_auc_score(t > 0, p, max_fpr=max_fpr))

    def tm(group):
        p, t = group
        if not (t > 0).any():
            return _on_empty(eta)
        return auc(p, t) if (t <= 0).any() else 0.0

    def ours(group):
        p, t = group
        return auc(p, t) if (t > 0).any() and (t <= 0).any() else _on_empty(eta)

    return _means_differ(groups, tm, ours, aggregation)


DIFFERS = {"map": _map_differs, "fallout": _fall_out_differs, "auroc": _auc_differs}
