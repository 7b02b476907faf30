"""PyTorch-Ignite metrics: drop-in replacements for ``ignite.metrics.rec_sys``.

Switch ``from ignite.metrics.rec_sys import HitRate, NDCG`` to
``from ranking_plugins.ignite import HitRate, NDCG``: the constructor
arguments, their defaults and the returned lists are Ignite's, the numbers are
the same on inputs without tied scores, and every metric and option of this
package comes on top (``MRR``, ``MAP``, ``Precision``, ..., ``ties``, masks,
item-index and grouped targets, several metrics from one ranking with
:class:`RankingMetrics`).

>>> import torch
>>> from ignite.engine import Engine
>>> from ranking_plugins.ignite import MRR, RankingMetrics
>>> evaluator = Engine(lambda engine, batch: batch)
>>> MRR(top_k=[1, 2, 3, 4]).attach(evaluator, "mrr")
>>> RankingMetrics(["hit_rate", "ndcg"], top_k=[1, 3]).attach(evaluator, "ranking")
>>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
>>> y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
>>> state = evaluator.run([(y_pred, y)])
>>> state.metrics["mrr"]
[0.5, 0.75, 0.75, 0.75]
>>> {key: round(value, 4) for key, value in state.metrics.items() if key != "mrr"}
{'hit_rate@1': 0.5, 'hit_rate@3': 1.0, 'ndcg@1': 0.5, 'ndcg@3': 0.6934}

What every metric here reads from the engine's output (after
``output_transform``):

* ``(y_pred, y)``: scores and relevance, as Ignite's own metrics;
* ``(y_pred, y, mask)``: ``mask`` is a bool tensor shaped like ``y_pred``,
  False for items that were not candidates (already-seen items, say);
* a dict with the keys ``"y_pred"`` and ``"y"`` and optionally ``"mask"``,
  ``"indexes"`` and ``"judged"`` (which items carry a judgment, read by bpref,
  infap, unj, ...; see ``rank_metrics``) (other keys are ignored).

``y_pred`` is what the rest of the package calls ``preds`` and ``y`` its
``target``; every layout of :func:`ranking_plugins.rank_metrics` works:
dense grades ``(Q, N)``, relevant item ids ``(Q,)`` or ``(Q, T)`` padded
with ``-1``, or grouped ``(M,)`` lists with ``indexes``. For full-catalogue
evaluation ``y_pred`` may be an :class:`ranking_plugins.EmbeddingScores`
(query and item embeddings, never turned into a score matrix) with item-id
targets: return ``(EmbeddingScores(user_emb, item_emb, exclude=seen), y)``
from the evaluator's process function. In the grouped
layout every batch must hold complete queries: a query whose items arrive in
two batches counts as two queries (the per-query values are added up as
batches come, nothing is kept to regroup later).

State is four float64 rows per result (see :class:`ranking_plugins.totals.Totals`)
on ``device``, summed across processes by Ignite's ``sync_all_reduce``.
``update`` never reads a value back to the host when the metric lives on the
inputs' device and ``validate_args=False``; except in the grouped layout, where
turning flat lists into padded rows needs the number of queries and the
longest list (one synchronisation per batch; the TorchMetrics adapter keeps
grouped input until ``compute`` instead).

Several metrics attached to one engine rank each batch once when they share
the ranking options (``ties``, ``relevance_threshold``, ``gain_function``,
``target_format``, ``validate_args``) and the first one attached asks for the
largest k. With Ignite's own defaults :class:`NDCG` (grade >= 1 is relevant)
and :class:`HitRate` / :class:`MRR` (grade > 0) read the targets under
different rules and so rank separately; on binary or integer targets both
rules agree, and passing the same ``relevance_threshold`` to every metric, or
using one :class:`RankingMetrics`, gives one ranking per batch.

Where this module deliberately differs from Ignite:

* Ties: ``ties="average"`` (the default) gives the expected value over the
  orders of tied items; Ignite takes ``torch.topk``'s order (HitRate, MRR,
  MAP) or a stable sort (NDCG, the same as ``ties="first"``). Without ties
  the numbers are the same.
* A k larger than the number of items reads the list as padded with
  non-relevant items (trec_eval); Ignite's HitRate, MRR and MAP raise there.
* ``top_k`` may be any sequence of ints (repeats are dropped) or None (the
  whole list; ``compute()`` then returns a float, as the whole-list metrics
  ``RPrecision``, ``MeanRank`` and ``AUC`` always do).
* Sums are float64 (Ignite's are float32), so long runs can differ from
  Ignite's in the last float32 digits, ours being the exact ones.
* Besides ``(y_pred, y)``, a 3-tuple ``(y_pred, y, mask)`` and the ``mask``
  and ``indexes`` keys of a dict output are read; Ignite keeps only
  ``y_pred`` and ``y`` of a dict.
* NDCG: negative grades earn no gain, and a query whose ideal DCG is 0 counts
  as having no relevant item (this matters only with ``relevance_threshold``
  at or below 0).
* :class:`RankingMetrics` puts only its flat keys into
  ``engine.state.metrics`` (``metrics_result_mode="flatten"``; Ignite's
  default for dict results is ``"both"``).
* Two metrics that would write one key of ``engine.state.metrics`` (two
  :class:`RankingMetrics`, masked and unmasked, both writing ``"mrr@10"``;
  two metrics under one attach name) raise ValueError naming both and the
  key, at ``attach`` or when the run starts; Ignite lets the value computed
  last silently replace the other. ``RankingMetrics(prefix_keys=True)``
  writes ``"<attach name>/mrr@10"`` instead.
* The state is one tensor, ``_sums``: a ``state_dict`` of Ignite's own
  metrics cannot be loaded into these (nor the reverse).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from typing_extensions import Unpack

try:  # the modules of this package import these; named here, before any of them
    import ignite.distributed
    import ignite.exceptions
    import ignite.metrics.metric  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "ranking_plugins.ignite needs PyTorch-Ignite: "
        'pip install "ranking-plugins[ignite]" (or pip install pytorch-ignite)'
    ) from error

from ignite.metrics.metric import sync_all_reduce

from ranking_plugins.ignite.base import (
    CPU,
    BaseRankingMetric,
    IgniteOptions,
    PackageOptions,
    identity,
)
from ranking_plugins.request import TopK

__all__ = [
    "AUC",
    "F1",
    "MAP",
    "MRR",
    "NDCG",
    "BaseRankingMetric",
    "FallOut",
    "HitRate",
    "IgniteOptions",
    "MeanRank",
    "PackageOptions",
    "Precision",
    "RPrecision",
    "RankingMetrics",
    "Recall",
]


class _AtK(BaseRankingMetric):
    """An @k metric: Ignite's positional arguments, ``top_k=10`` by default."""

    def __init__(
        self,
        top_k: TopK = 10,
        ignore_zero_hits: bool = True,
        output_transform: Callable[[Any], Any] = identity,
        device: str | torch.device = CPU,
        skip_unrolling: bool = False,
        **options: Unpack[IgniteOptions],
    ) -> None:
        super().__init__(
            top_k, ignore_zero_hits, output_transform, device, skip_unrolling, **options
        )


class _WholeList(BaseRankingMetric):
    """A metric of the whole ranked list: no ``top_k``, ``compute()`` returns a float."""

    def __init__(
        self,
        ignore_zero_hits: bool = True,
        output_transform: Callable[[Any], Any] = identity,
        device: str | torch.device = CPU,
        skip_unrolling: bool = False,
        **options: Unpack[IgniteOptions],
    ) -> None:
        super().__init__(
            None, ignore_zero_hits, output_transform, device, skip_unrolling, **options
        )


class HitRate(_AtK):
    """Hit rate@k: the fraction of queries with a relevant item in the top k.

    Ignite's ``HitRate`` (``top_k=1`` by default, as there), plus this
    package's options (:class:`IgniteOptions`). ``compute()`` returns a list in
    ascending k order. Under ``ties="average"`` a query's hit is the
    probability that a relevant item lands in the top k.

    >>> import torch
    >>> from ignite.engine import Engine
    >>> evaluator = Engine(lambda engine, batch: batch)
    >>> HitRate(top_k=[1, 2, 3, 4], ignore_zero_hits=False).attach(evaluator, "hit_rate")
    >>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    >>> evaluator.run([(y_pred, y)]).metrics["hit_rate"]
    [0.0, 0.5, 0.5, 0.5]
    """

    _metrics = ("hit_rate",)

    def __init__(
        self,
        top_k: TopK = 1,
        ignore_zero_hits: bool = True,
        output_transform: Callable[[Any], Any] = identity,
        device: str | torch.device = CPU,
        skip_unrolling: bool = False,
        **options: Unpack[IgniteOptions],
    ) -> None:
        super().__init__(
            top_k, ignore_zero_hits, output_transform, device, skip_unrolling, **options
        )


class NDCG(BaseRankingMetric):
    """Normalised discounted cumulative gain@k, with Ignite's arguments in Ignite's order.

    ``top_k`` is required and ``relevance_threshold`` defaults to 1.0, as in
    Ignite's ``NDCG``: grades below the threshold earn no gain.
    ``gain_function`` is ``"exp_rank"`` (2^g - 1, Ignite's default, which this class
    keeps; the package's other entry points default to the linear gain) or
    ``"linear_rank"`` (g). A query whose ideal DCG is 0 has no relevant item
    (``ignore_zero_hits``).

    >>> import torch
    >>> from ignite.engine import Engine
    >>> evaluator = Engine(lambda engine, batch: batch)
    >>> NDCG(top_k=[1, 2, 3, 4]).attach(evaluator, "ndcg")
    >>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    >>> [round(v, 4) for v in evaluator.run([(y_pred, y)]).metrics["ndcg"]]
    [0.0, 0.3869, 0.3869, 0.6509]
    """

    _metrics = ("ndcg",)

    def __init__(
        self,
        top_k: TopK,
        ignore_zero_hits: bool = True,
        relevance_threshold: float | None = 1.0,
        gain_function: str = "exp_rank",
        output_transform: Callable[[Any], Any] = identity,
        device: str | torch.device = CPU,
        skip_unrolling: bool = False,
        **options: Unpack[PackageOptions],
    ) -> None:
        super().__init__(
            top_k,
            ignore_zero_hits,
            output_transform,
            device,
            skip_unrolling,
            relevance_threshold=relevance_threshold,
            gain_function=gain_function,
            **options,
        )


class MRR(_AtK):
    """Mean reciprocal rank@k, as Ignite's (0.6) ``MRR``: ``top_k=10`` by default.

    >>> import torch
    >>> from ignite.engine import Engine
    >>> evaluator = Engine(lambda engine, batch: batch)
    >>> MRR(top_k=[1, 2, 3, 4]).attach(evaluator, "mrr")
    >>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    >>> evaluator.run([(y_pred, y)]).metrics["mrr"]
    [0.5, 0.75, 0.75, 0.75]
    """

    _metrics = ("mrr",)


class MAP(_AtK):
    """Mean average precision@k, as Ignite's (0.6) ``MAP``: ``top_k=10`` by default.

    As there, AP@k divides by min(k, R) (``ap_denominator="min_k_relevant"``,
    RecBole's choice); ``ap_denominator="relevant"`` divides by R (trec_eval's
    ``map_cut``).

    >>> import torch
    >>> from ignite.engine import Engine
    >>> evaluator = Engine(lambda engine, batch: batch)
    >>> MAP(top_k=[1, 2, 3, 4]).attach(evaluator, "map")
    >>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    >>> [round(v, 4) for v in evaluator.run([(y_pred, y)]).metrics["map"]]
    [0.5, 0.625, 0.625, 0.75]
    """

    _metrics = ("map",)

    def __init__(
        self,
        top_k: TopK = 10,
        ignore_zero_hits: bool = True,
        output_transform: Callable[[Any], Any] = identity,
        device: str | torch.device = CPU,
        skip_unrolling: bool = False,
        **options: Unpack[IgniteOptions],
    ) -> None:
        options.setdefault("ap_denominator", "min_k_relevant")
        super().__init__(
            top_k, ignore_zero_hits, output_transform, device, skip_unrolling, **options
        )


class Precision(_AtK):
    """Precision@k: relevant items in the top k, divided by k (``adaptive_k`` caps k)."""

    _metrics = ("precision",)


class Recall(_AtK):
    """Recall@k: relevant items in the top k, divided by the query's relevant items."""

    _metrics = ("recall",)


class F1(_AtK):
    """F1@k: 2·hits@k / (k + R), the harmonic mean of precision@k and recall@k."""

    _metrics = ("f1",)


class FallOut(_AtK):
    """Fall-out@k: non-relevant items in the top k over all ranked non-relevant ones.

    Lower is better; a query without a relevant item counts 1 with
    ``ignore_zero_hits=False``.
    """

    _metrics = ("fall_out",)


class RPrecision(_WholeList):
    """R-precision: hits in the top R over R, R the query's number of relevant items."""

    _metrics = ("r_precision",)


class MeanRank(_WholeList):
    """Mean rank of the ranked relevant items (1 = best; lower is better).

    Keep ``ignore_zero_hits=True`` (the default): with False a query without a
    ranked relevant item counts 0, the best value.
    """

    _metrics = ("mean_rank",)


class AUC(_WholeList):
    """Per-query AUC: the fraction of (relevant, non-relevant) pairs ranked in order.

    ``weighted=True`` weights each query by its relevant items (RecBole's GAUC).

    >>> import torch
    >>> from ignite.engine import Engine
    >>> evaluator = Engine(lambda engine, batch: batch)
    >>> AUC().attach(evaluator, "auc")
    >>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    >>> evaluator.run([(y_pred, y)]).metrics["auc"]
    0.625
    """

    _metrics = ("auc",)


class RankingMetrics(BaseRankingMetric):
    """Several metrics at several ks from one ranking per batch, as one flat dict.

    ``compute()`` returns ``{"mrr@10": float, ..., "auc": float}`` (at-k
    metrics in ascending k, whole-list metrics under their bare name).
    Attached to an engine, every key becomes its own entry of
    ``engine.state.metrics`` (``metrics_result_mode="flatten"``; pass
    ``"both"`` to also keep the dict under the attached name, Ignite's default).
    ``prefix_keys=True`` writes each as ``"<attach name>/mrr@10"``, so that
    two of them (masked and unmasked, say) can share an engine; without it,
    attaching one whose keys another metric on the engine also writes raises
    ValueError.
    A key no query counted for is NaN; ``NotComputableError`` is raised only
    when no key has a counted query.

    >>> import torch
    >>> from ignite.engine import Engine
    >>> evaluator = Engine(lambda engine, batch: batch)
    >>> metrics = RankingMetrics(["mrr", "recall", "auc"], top_k=[1, 2])
    >>> metrics.attach(evaluator, "ranking")
    >>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    >>> evaluator.run([(y_pred, y)]).metrics
    {'mrr@1': 0.5, 'mrr@2': 0.75, 'recall@1': 0.5, 'recall@2': 0.75, 'auc': 0.625}
    """

    def __init__(
        self,
        metrics: str | Sequence[str] = ("hit_rate", "mrr", "ndcg"),
        top_k: TopK = 10,
        ignore_zero_hits: bool = True,
        output_transform: Callable[[Any], Any] = identity,
        device: str | torch.device = CPU,
        skip_unrolling: bool = False,
        metrics_result_mode: str = "flatten",
        prefix_keys: bool = False,
        **options: Unpack[IgniteOptions],
    ) -> None:
        if not isinstance(prefix_keys, bool):
            raise TypeError(f"`prefix_keys` must be a bool, got {prefix_keys!r}")
        self.prefix_keys = prefix_keys
        super().__init__(
            top_k,
            ignore_zero_hits,
            output_transform,
            device,
            skip_unrolling,
            metrics=[metrics] if isinstance(metrics, str) else metrics,
            metrics_result_mode=metrics_result_mode,
            **options,
        )

    @sync_all_reduce("_sums", "_exposure")
    def compute(self) -> dict[str, float]:
        """``{"metric@k": mean, ...}``; NaN for a key no query counted for."""
        values: list[float] = self._means().tolist()
        return dict(zip(self._request.keys, values, strict=True))

    def _result_mode(self) -> str:
        return str(getattr(self, "_metrics_result_mode", "flatten"))

    def _flat_keys(self, name: str) -> tuple[str, ...]:
        """The keys written one by one (none with ``metrics_result_mode="named"``)."""
        if self._result_mode() == "named":
            return ()
        return tuple(f"{name}/{key}" if self.prefix_keys else key for key in self.keys)

    def _prefixable_keys(self, name: str) -> tuple[str, ...]:
        return self._flat_keys(name)

    def _written_keys(self, name: str) -> tuple[str, ...]:
        named = (name,) if self._result_mode() != "flatten" else ()
        return (*self._flat_keys(name), *named)

    def completed(self, engine: Any, name: str) -> None:
        """Ignite's ``completed``; with ``prefix_keys=True`` each flat key starts with ``name/``."""
        if not self.prefix_keys:
            super().completed(engine, name)
            return
        result = self.compute()
        for key, value in zip(self._flat_keys(name), result.values(), strict=False):
            engine.state.metrics[key] = value
        if self._result_mode() != "flatten":
            engine.state.metrics[name] = result
