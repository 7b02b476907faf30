"""TorchMetrics' words: where ``torchmetrics.retrieval`` and this package both refuse
something, the error is TorchMetrics' type and starts with its message; what this
package says about it follows. Also Lightning's logging of a metric of several keys.

Glue only: every rule is the package's (:mod:`ranking_plugins._validation`, the
kernel's checks); this module words the errors.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.kernel import RankedBatch, check_grouped, check_inputs
from ranking_plugins.per_query import EmptyQueryError, Evaluation
from ranking_plugins.request import RankingRequest
from ranking_plugins.torchmetrics.functional import torchmetrics_dtype_refusal
from ranking_plugins.totals import AGGREGATIONS

_MIXED_SCORES = (
    "`preds`: the grouped layout (`indexes`) of one metric takes either floating-point "
    "or integer scores, not both: {found}. Converting one kind to the other could "
    "merge or reorder scores, so cast every batch's `preds` to one dtype before `update`"
)


def _refuse_lightning_log(metric: object, keys: Sequence[str]) -> None:
    """A clear error where Lightning's ``self.log(name, metric)`` computes a metric of several keys.

    Lightning logs one number per name: a metric logged by ``self.log`` (and
    by ``self.log_dict(collection)``, which logs each metric of a
    ``MetricCollection``) must compute a tensor, and Lightning's own error,
    at the epoch's end, says so without the way out. Its logged metric calls
    ``compute`` from a few frames up, holding this metric as its ``value``.
    """
    frame: types.FrameType | None = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return
        owner = frame.f_locals.get("self")
        if type(owner).__name__ == "_ResultMetric" and getattr(owner, "value", None) is metric:
            break
        frame = frame.f_back
    else:
        return
    name = getattr(getattr(owner, "meta", None), "name", "?")
    names = ", ".join(repr(key) for key in keys)
    raise ValueError(
        f"Lightning logs one number per name, and {type(metric).__name__} logged as {name!r} "
        f"computes {len(keys)} ({names}): `self.log(name, metric)` and "
        "`self.log_dict(collection)` take metrics of one key. Log its values at the epoch's end "
        "instead, `self.log_dict(metrics.compute())` then `metrics.reset()` (a "
        "MetricCollection's compute() gives every key of its metrics), use one k per metric "
        "object, or log them all with ranking_plugins.lightning.RankingMetricsCallback"
    )


#: the TorchMetrics wrappers that need one tensor from each metric they compute, and
#: the method of theirs that reads it
_ONE_TENSOR_WRAPPERS = {
    "BootStrapper": ("compute",),
    "MinMaxMetric": ("compute",),
    "CompositionalMetric": ("compute", "forward"),
    "MetricTracker": ("best_metric",),
    "MetricCollection": ("plot",),
}

#: what works instead, per wrapper, for a metric of several keys
_WRAPPER_WAYS = {
    "BootStrapper": (
        "BootStrapper stacks one tensor per bootstrapped copy: wrap a metric of one k "
        "(one BootStrapper per k, e.g. BootStrapper(RetrievalNormalizedDCG(top_k=10)))"
    ),
    "MinMaxMetric": (
        "MinMaxMetric tracks the minimum and maximum of one number: wrap a metric of one k "
        "(one MinMaxMetric per k)"
    ),
    "CompositionalMetric": (
        "`metric + other` (CompositionalMetric) applies its operator to each side's "
        "compute(), one tensor: compose metrics of one k, or combine the values of "
        "compute() yourself"
    ),
    "MetricTracker": (
        "MetricTracker.best_metric() picks the best of one value per metric (its `maximize` "
        "has one entry per metric): track metrics of one k each, or read "
        "`tracker.compute_all()`, which stacks every key over the increments"
    ),
    "MetricCollection": (
        "MetricCollection.plot() draws each metric from the collection's compute() under "
        "the metric's name, which a dict of keys is not: call "
        "`collection.plot(together=True)`, or `metric.plot()` (one curve per metric over k)"
    ),
}


def _calling_wrapper() -> Any:
    """The TorchMetrics wrapper of :data:`_ONE_TENSOR_WRAPPERS` whose method is computing
    a metric now (a few frames up from the metric's ``compute``), or None.

    TorchMetrics' wrappers call ``compute`` and use what it returns at once, with no hook
    for the metric: what they need is read from the stack, as Lightning's logging is.
    """
    frame: types.FrameType | None = sys._getframe(2)
    for _ in range(16):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        kind = type(owner).__name__
        if (
            frame.f_code.co_name in _ONE_TENSOR_WRAPPERS.get(kind, ())
            and type(owner).__module__.startswith("torchmetrics")
            # MetricCollection.plot(together=True) draws the flattened dict itself
            and not (kind == "MetricCollection" and frame.f_locals.get("together"))
        ):
            return owner
        frame = frame.f_back
    return None


def _for_wrapper(metric: object, value: Any, wrapper: Any) -> Any:
    """A metric's computed ``value`` as the TorchMetrics ``wrapper`` computing it needs it
    (None: no wrapper): a dict of several keys refused with what works (TorchMetrics'
    own errors there are a TypeError, a RuntimeError, a KeyError or an IndexError from
    inside the wrapper); one tensor in the dtype of BootStrapper's tensor ``quantile``
    (``torch.quantile`` takes one dtype; TorchMetrics' float32 values meet its float32
    quantiles)."""
    if wrapper is None:
        return value
    kind = type(wrapper).__name__
    if isinstance(value, dict):
        names = ", ".join(repr(key) for key in value)
        raise ValueError(
            f"{type(metric).__name__} computes a dict of {len(value)} values ({names}), and "
            f"{_WRAPPER_WAYS[kind]}"
        )
    quantile = getattr(wrapper, "quantile", None)
    if (
        kind == "BootStrapper"
        and isinstance(value, Tensor)
        and isinstance(quantile, Tensor)
        and quantile.is_floating_point()
        and quantile.dtype != value.dtype
    ):
        return value.to(quantile.dtype)
    return value


_TOP_K_FORMS = (
    "a positive int, a non-empty sequence of positive ints, or None for the whole list "
    "(also inside a sequence: [10, None])"
)


def _check_arguments(
    top_k: object,
    empty_target_action: object,
    ignore_index: object,
    adaptive_k: object,
    aggregation: object = "mean",
) -> None:
    """The constructor arguments ``torchmetrics.retrieval`` checks, in its order, each
    by the package's rule (:mod:`ranking_plugins._validation`) in TorchMetrics' words."""
    problem = validation.choice_problem(empty_target_action, validation.EMPTY_TARGET_ACTIONS)
    if problem is not None:
        raise ValueError(
            f"Argument `empty_target_action` received a wrong value `{empty_target_action}`. "
            f"`empty_target_action` {problem.text}"
        )
    if ignore_index is not None and (
        isinstance(ignore_index, bool) or not isinstance(ignore_index, int)
    ):
        raise ValueError(
            "Argument `ignore_index` must be an integer or None. "
            f"`ignore_index` must be an int or None, got {ignore_index!r}"
        )
    if not (
        callable(aggregation) or (isinstance(aggregation, str) and aggregation in AGGREGATIONS)
    ):
        raise ValueError(
            "Argument `aggregation` must be one of `mean`, `median`, `min`, `max` or a custom "
            f"callable function which takes tensor of values, but got {aggregation}. "
            f"`aggregation` must be one of {list(AGGREGATIONS)} or a callable "
            f"f(values, dim=None), got {aggregation!r}"
        )
    problem = validation.top_k_problem(top_k)
    # a non-int k inside a sequence: TorchMetrics takes no sequence, the package's error
    if problem is not None and problem.kind != "item":
        raise ValueError(
            f"`top_k` has to be a positive integer or None, got {top_k!r}; "
            f"`top_k` {problem.text} (ranking_plugins takes {_TOP_K_FORMS})"
        )
    problem = validation.flag_problem(adaptive_k)
    if problem is not None:
        raise ValueError(f"`adaptive_k` has to be a boolean: `adaptive_k` {problem.text}")


#: the options that only some metrics read (each class of one metric takes those its
#: metric reads); every other option changes every metric
METRIC_OPTIONS = (
    "gain",
    "ap_denominator",
    "adaptive_k",
    "fall_out_empty",
    "max_fpr",
    "rbp_persistence",
)


def _refuse_unread_options(owner: str, reads: Sequence[str], given: Sequence[str]) -> None:
    """TorchMetrics' ValueError for a keyword a class does not take, where ``owner``'s
    metrics read none of the :data:`METRIC_OPTIONS` given but ``reads``: kept, it would
    be ignored (``RetrievalMRR(max_fpr=0.1)`` computing plain MRR)."""
    unread = [name for name in given if name in METRIC_OPTIONS and name not in reads]
    if not unread:
        return
    names = ", ".join(f"`{name}`" for name in unread)
    takes = ", ".join(f"`{name}`" for name in reads) if reads else "none of them"
    raise ValueError(
        f"Unexpected keyword arguments: {names}. {owner}() takes no {names}: what it computes "
        f"does not read {'them' if len(unread) > 1 else 'it'}. Of the options only some "
        f"metrics read ({', '.join(METRIC_OPTIONS)}), it takes {takes}; "
        "RankingMetrics takes them all"
    )


def _is_mean(aggregation: object) -> bool:
    """Whether ``aggregation`` is the mean, the running sums' (not a callable, whatever it does)."""
    return isinstance(aggregation, str) and aggregation == "mean"


def _aggregation_name(aggregation: object) -> str:
    return repr(aggregation) if isinstance(aggregation, str) else "a callable"


class _EmptyTargetError(EmptyQueryError):
    """``empty_target_action="error"`` met an empty query (no relevant item; for
    fall-out, by default here, no non-relevant one).

    TorchMetrics' message, then the kernel's (which names the query and the
    metric); ``metric``, ``query`` and ``lacks`` are the kernel error's.
    """

    def __init__(self, error: EmptyQueryError) -> None:
        self.metric, self.query, self.lacks = error.metric, error.query, error.lacks
        target = "negative" if error.lacks == "non-relevant item" else "positive"
        ValueError.__init__(
            self, f"`compute` method was provided with a query with no {target} target. {error}"
        )


def _evaluate(request: RankingRequest, preds: Any, target: Tensor, **inputs: Any) -> Any:
    """``request.evaluate``, with TorchMetrics' message on an empty query under "error"."""
    return _read(request, _rank(request, preds, target, **inputs))


def _rank(request: RankingRequest, preds: Any, target: Tensor, **inputs: Any) -> RankedBatch:
    try:
        return request.rank(preds, target, **inputs)
    except EmptyQueryError as error:
        raise _EmptyTargetError(error) from error


def _read(request: RankingRequest, ranked: RankedBatch) -> Evaluation:
    try:
        return request.read(ranked)
    except EmptyQueryError as error:
        raise _EmptyTargetError(error) from error


def _check_flat(
    preds: object,
    target: object,
    indexes: object,
    mask: object,
    target_format: str | None,
) -> None:
    """The kernel's checks of the grouped layout that read no tensor value.

    They run in ``update`` (which only stores the triples); the kernel runs
    them again at ``compute``. The messages are the kernel's; where
    ``torchmetrics.retrieval`` refuses the same ``(preds, target, indexes)``,
    the error is its ValueError and its message comes first.
    """
    try:
        preds, target, _, mask = check_inputs(preds, target, indexes, mask, target_format)
        if preds.ndim != 1:
            raise ValueError(
                "`indexes` is only for the grouped layout, where `preds` is 1-D; "
                f"got `preds` of shape {tuple(preds.shape)}"
            )
        check_grouped(preds, target, validation.check_tensor("indexes", indexes), target_format)
    except (TypeError, ValueError) as error:
        refused = None if mask is not None else _torchmetrics_refusal(preds, target, indexes)
        if refused is None:
            raise
        raise ValueError(f"{refused}. {error}") from error


def _torchmetrics_refusal(preds: object, target: object, indexes: object) -> str | None:
    """TorchMetrics' message for grouped inputs it refuses by shape or dtype, else None.

    Its checks (``_check_retrieval_inputs``), in its order, less those that read
    values; only asked when this package refuses the inputs too, and not for a
    ``mask``, which TorchMetrics does not take.
    """
    if not (isinstance(preds, Tensor) and isinstance(target, Tensor)):
        return None
    if not isinstance(indexes, Tensor):
        return None
    if any(t.is_nested or t.layout != torch.strided for t in (preds, target, indexes)):
        return None  # not a tensor TorchMetrics reads either: the package's message stands
    if indexes.shape != preds.shape or preds.shape != target.shape:
        return "`indexes`, `preds` and `target` must be of the same shape"
    if indexes.dtype is not torch.long:
        return "`indexes` must be a tensor of long integers"
    return torchmetrics_dtype_refusal(preds, target)


def _retrieval_keywords(
    empty_target_action: str, ignore_index: int | None, aggregation: object, **given: object
) -> dict[str, Any]:
    """The keywords of the class above. The AUROC arguments are forwarded only away
    from TorchMetrics' defaults, so that a class that does not take them refuses
    them by name and one that does gets them; every class takes ``aggregation``."""
    keywords: dict[str, Any] = {
        "empty_target_action": empty_target_action,
        "ignore_index": ignore_index,
        "aggregation": aggregation,
    }
    keywords.update({name: value for name, value in given.items() if value is not None})
    return keywords
