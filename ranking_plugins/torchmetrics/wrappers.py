"""The callers that need one number from a metric: TorchMetrics' wrappers
(``BootStrapper``, ``MinMaxMetric``, ``metric + other``, ``MetricTracker.best_metric``,
``MetricCollection.plot``) and Lightning's ``self.log``.

A metric of several keys computes a dict; these callers use what ``compute``
returns at once, with no hook for the metric, so the caller is read from the
stack (a few frames up from ``compute``) and a dict is refused there with what
works instead, before the caller's own TypeError, KeyError or IndexError.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from typing import Any

from torch import Tensor


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
