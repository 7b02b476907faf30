"""What to compute, validated once: the object every entry point builds first.

A :class:`RankingRequest` holds the metrics, the cutoffs and every option,
checked when it is made (so an adapter fails in its constructor, not at the
first batch). :meth:`RankingRequest.evaluate` runs the kernel on one batch.

Several metric objects that see the same batch (a TorchMetrics
``MetricCollection`` of MRR, NDCG and HitRate, or three Ignite metrics
attached to one engine) should not rank it three times: the ranking of the
last batch is kept and reused (:mod:`ranking_plugins.batch_cache`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import torch
from torch import Tensor
from typing_extensions import Unpack

from ranking_plugins import _validation as validation
from ranking_plugins.batch_cache import last_batch
from ranking_plugins.embeddings import EmbeddingInput, EmbeddingScores, ShardedEmbeddingScores
from ranking_plugins.kernel import (
    ITEM_INPUTS,
    NO_ITEM_INPUTS,
    Exposure,
    ItemInputs,
    RankedBatch,
    RankingPlan,
    rank_inputs,
    subtopic_relevance,
)
from ranking_plugins.metrics import (
    Metric,
    get_metrics,
    metric_names,
    rank_depth,
    result_columns,
    result_key,
)
from ranking_plugins.options import OptionKeywords, Options
from ranking_plugins.per_query import Evaluation, read_catalogue, read_metrics

#: a cutoff, several (None among them: the whole list too), or None (the whole list)
TopK = int | Sequence[int | None] | None
#: a metric and its cutoff (None: read on the whole list)
MetricPair = tuple[str, int | None]


@dataclass(frozen=True)
class RankingRequest:
    """Metrics, cutoffs and options, validated; build it with :meth:`create`."""

    metrics: tuple[Metric, ...]
    ks: tuple[int, ...] | None
    options: Options = field(default_factory=Options)
    #: the item inputs of the exposure metrics (popularity, tail set, features, categories)
    items: ItemInputs = NO_ITEM_INPUTS
    #: the ``(metric, k)`` pairs asked, when made from pairs: then ``metrics`` and ``ks``
    #: are their union, and only the pairs' keys are results
    pairs: tuple[tuple[Metric, int | None], ...] | None = None

    @classmethod
    def create(
        cls,
        metrics: str | Sequence[str] | Sequence[MetricPair],
        top_k: TopK = None,
        options: Options | None = None,
        items: ItemInputs | None = None,
        **keywords: Unpack[OptionKeywords],
    ) -> RankingRequest:
        """Check every argument (naming it in the error) and build the request.

        ``metrics``: names, each read at every k of ``top_k``; or ``(metric, k)``
        pairs, each with its own cutoff (k None: the whole list), ``top_k`` left None.
        The options come as an :class:`~ranking_plugins.options.Options` record,
        or as its keywords (not both). ``items``: the item inputs, given once
        (:meth:`ItemInputs.create <ranking_plugins.kernel.inputs.items.ItemInputs.create>`).
        """
        pairs = _metric_pairs(metrics, top_k)
        if pairs is None and validation.whole_list_in(top_k):
            pairs = _whole_list_pairs(metrics, top_k)
        if pairs is not None:
            metric_list = list(dict.fromkeys(metric for metric, _ in pairs))
            at = {k for _, k in pairs if k is not None}
            ks = tuple(sorted(at)) if at else None
        else:
            metric_list = get_metrics(metrics)  # type: ignore[arg-type]
            ks = validation.normalize_top_k(top_k)
        if options is None:
            options = Options.create("RankingRequest.create", **keywords)
        elif keywords:
            raise TypeError(
                "RankingRequest.create takes an Options record or its keywords, not both"
            )
        items = NO_ITEM_INPUTS if items is None else items
        for group_metrics, group_ks in _groups(pairs, tuple(metric_list), ks):
            _check_exposure_metrics(group_metrics, group_ks, items)
        for metric in metric_list:
            problem = gain_threshold_problem(metric, options.relevance_threshold)
            if problem is not None:
                raise ValueError(
                    f"`relevance_threshold={options.relevance_threshold!r}`: {problem}. "
                    "Use a threshold > 0, or None"
                )
        return cls(tuple(metric_list), ks, options, items, pairs)

    # cached: a call reads them several times (totals, results), 36 strings each for W1
    @cached_property
    def keys(self) -> tuple[str, ...]:
        """The result keys in output order, metric by metric, each in ascending k
        (made from pairs: in the pairs' order)."""
        return self._keys(self.metrics)

    @cached_property
    def query_keys(self) -> tuple[str, ...]:
        """The keys of the per-query metrics (the columns of ``Totals``), in output order."""
        return self._keys(tuple(m for m in self.metrics if m.value is not None))

    def _keys(self, metrics: tuple[Metric, ...]) -> tuple[str, ...]:
        if self.pairs is not None:
            keys = (result_key(metric, k) for metric, k in self.pairs if metric in metrics)
            return tuple(dict.fromkeys(keys))
        return tuple(key for metric in metrics for _, key in result_columns(metric, self.ks))

    @property
    def groups(self) -> tuple[tuple[tuple[Metric, ...], tuple[int, ...] | None], ...]:
        """The ``(metrics, ks)`` reads of one ranking that give every key: one, or made
        from pairs, the whole-list metrics and the @k metrics (at every k asked)."""
        return _groups(self.pairs, self.metrics, self.ks)

    @property
    def identities(self) -> bool:
        """Whether a metric reads which items each top k holds (the exposure metrics)."""
        return any(metric.exposure for metric in self.metrics)

    @property
    def catalogue(self) -> bool:
        """Whether a catalogue-level metric is asked (its value comes from the exposure)."""
        return any(metric.catalogue is not None for metric in self.metrics)

    def empty_exposure(self, device: torch.device | str | None = None) -> Exposure | None:
        """Zero exposure sums for this request's ks and catalogue, or None without a
        catalogue-level metric or without a known catalogue size."""
        num_items = self.items.num_items
        if not self.catalogue or self.ks is None or num_items is None:
            return None
        return Exposure.zeros(len(self.ks), num_items, device)

    def check_exposure_size(self, owner: str) -> None:
        """An adapter's exposure state is made before any scores: it needs N given,
        and N > 0 (a batch of an empty catalogue is ranked with one phantom column,
        which a state of N = 0 items cannot take)."""
        if not self.catalogue:
            return
        names = ", ".join(m.name for m in self.metrics if m.catalogue is not None)
        if self.empty_exposure() is None:
            raise ValueError(
                f"{owner}: {names} keep one count per catalogue item: give "
                "`num_items` (or an item input: `item_popularity`, `tail_items`, "
                "`item_features`, `item_categories`)"
            )
        if self.items.num_items == 0:
            raise ValueError(
                f"{owner}: {names} keep one count per catalogue item, and the catalogue "
                "is empty: `num_items` (or the item inputs' length) must be positive, got 0"
            )

    def assemble(
        self, per_query: Tensor, exposure: Exposure | None, catalogue: bool = True
    ) -> Tensor:
        """Every key's value in :attr:`keys` order: ``per_query`` (one per :attr:`query_keys`)
        and the catalogue-level metrics from ``exposure`` (NaN with ``catalogue=False``,
        for a standard error, which they do not have; NaN without exposure)."""
        if not self.catalogue:
            return per_query
        found = dict(zip(self.query_keys, per_query.unbind(0), strict=True))
        nan = torch.full((), torch.nan, dtype=torch.float64, device=per_query.device)
        if catalogue and exposure is not None and self.ks is not None:
            found.update(
                {
                    key: value.to(per_query.device)
                    for key, value in read_catalogue(exposure, self.metrics, self.ks).items()
                }
            )
        return torch.stack([found.get(key, nan) for key in self.keys])

    def evaluate(
        self,
        preds: Tensor | EmbeddingInput,
        target: Tensor,
        *,
        indexes: Tensor | None = None,
        mask: Tensor | None = None,
        judged: Tensor | None = None,
    ) -> Evaluation:
        """Per-query values of every metric at every k for one batch (no gradient).

        ``preds`` is a score tensor, or :class:`EmbeddingScores` with item-index targets.
        ``judged``: which items carry a judgment (None: every item). A (Q, N, S)
        ``target`` holds subtopic judgments (the diversity measures): each item's
        grade per subtopic; the other metrics read each item's largest grade.
        """
        target, intents = self.split_intents(preds, target, indexes)
        ranked = self.rank(preds, target, indexes=indexes, mask=mask, judged=judged)
        return self.read(ranked, intents)

    @property
    def intents(self) -> bool:
        """Whether a metric reads subtopic judgments (the diversity measures)."""
        return any(metric.intents for metric in self.metrics)

    def split_intents(
        self, preds: Tensor | EmbeddingInput, target: Tensor, indexes: Tensor | None
    ) -> tuple[Tensor, Tensor | None]:
        """A (Q, N, S) subtopic target as each item's largest grade and its subtopic
        relevance (bool); another target as it is, with None."""
        is_subtopics = isinstance(target, Tensor) and target.ndim == 3
        if not is_subtopics:
            if self.intents:
                names = metric_names(lambda metric: metric.intents)
                given = tuple(target.shape) if isinstance(target, Tensor) else type(target)
                raise validation.ArgumentError(
                    "target",
                    f"must hold subtopic judgments for the diversity measures ({names}): a "
                    f"(Q, N, S) grade tensor, each item's grade per subtopic; got shape {given}",
                )
            return target, None
        if not self.intents:
            return target, None  # a 3-D target without a diversity measure: the kernel refuses
        shape = tuple(preds.shape) if isinstance(preds, Tensor) else None
        if indexes is not None or shape is None or len(shape) != 2 or target.shape[:2] != shape:
            raise validation.ArgumentError(
                "target",
                "must be a (Q, N, S) grade tensor of subtopic judgments for (Q, N) scores "
                f"(dense layout, no indexes); got target {tuple(target.shape)} for preds "
                f"{shape if shape is not None else type(preds).__name__}",
            )
        if target.shape[2] == 0:
            raise validation.ArgumentError(
                "target", "must hold at least one subtopic (S > 0), got S = 0"
            )
        if target.dtype == torch.bool:
            target = target.to(torch.int64)
        if self.options.validate_args and target.is_floating_point() and bool(target.isnan().any()):
            raise validation.ArgumentError("target", "must not hold NaN subtopic grades")
        relevant = subtopic_relevance(target, self.options.relevance_threshold)
        return target.amax(dim=2), relevant

    def rank(
        self,
        preds: Tensor | EmbeddingInput,
        target: Tensor,
        *,
        indexes: Tensor | None = None,
        mask: Tensor | None = None,
        judged: Tensor | None = None,
        scores_checked: bool = False,
    ) -> RankedBatch:
        """The batch's rank statistics, as deep as this request reads (:meth:`read`).

        The last batch's ranking is reused when its inputs are proved equal.
        ``scores_checked``: the grouped scores were checked when they were kept
        (an adapter's ``update``), so they are not checked for NaN again.
        """
        depth = self.depth
        if isinstance(preds, ShardedEmbeddingScores):
            # collective, never reused: reusing is each process's own decision, and
            # processes that decided differently would wait for each other forever
            with torch.no_grad():
                return self._rank(preds, target, indexes, mask, depth, judged, scores_checked)
        inputs = (preds, target, indexes, mask, judged)
        ranking = self.ranking_key
        identities = self.identities or self.intents
        if self.identities and isinstance(preds, Tensor) and preds.ndim == 2 and indexes is None:
            self.items.check_catalogue(preds.shape[1])
        if self.identities and isinstance(preds, EmbeddingScores):
            self.items.check_catalogue(preds.num_items)
        ranked = last_batch.lookup(inputs, ranking, depth, self.options.validate_args)
        if ranked is not None and identities and not ranked.identities:
            ranked = None  # counted, or made without the items' order: rank again
        if ranked is None:
            with torch.no_grad():
                ranked = self._rank(preds, target, indexes, mask, depth, judged, scores_checked)
            if ranked.reusable:
                last_batch.store(inputs, ranking, None if ranked.whole_lists else depth, ranked)
        return ranked

    def read(self, ranked: RankedBatch, intents: Tensor | None = None) -> Evaluation:
        """Every metric at every k, per query, from a ranking at least :attr:`depth` deep
        (``intents``: the (Q, N, S) subtopic relevance of the diversity measures)."""
        with torch.no_grad():
            items = self.items.to(ranked.device) if self.identities else self.items
            reads = [
                read_metrics(ranked, metrics, ks, self.options, items, intents)
                for metrics, ks in self.groups
            ]
        if len(reads) == 1 and self.pairs is None:
            return reads[0]
        found = {key: value for read in reads for key, value in read.results.items()}
        exposures = [read.exposure for read in reads if read.exposure is not None]
        return Evaluation(
            {key: found[key] for key in self.query_keys},
            reads[0].relevant_count,
            exposures[0] if exposures else None,
        )

    @property
    def depth(self) -> int | None:
        """How deep the ranked lists must go: the largest k, or None for whole lists."""
        depths = [rank_depth(metrics, ks) for metrics, ks in self.groups]
        return None if None in depths else max(d for d in depths if d is not None)

    @property
    def ranking_key(self) -> tuple[object, ...]:
        """The options that change a ranking: two requests with equal keys rank alike."""
        options = self.options
        key = (options.target_format, options.rule, options.ties, options.validate_args)
        # the measures of judged items read counts of the judged items too
        return (*key, "judgments") if self.judgments else key

    @property
    def judgments(self) -> bool:
        """Whether a metric reads which items are judged (bpref, infAP, unj, ...)."""
        return any(metric.judgments for metric in self.metrics)

    def reads(self, ranking_key: tuple[object, ...], depth: int | None) -> bool:
        """Whether a ranking made under ``ranking_key``, ``depth`` deep, serves this request."""
        deep_enough = depth is None or (self.depth is not None and self.depth <= depth)
        return ranking_key == self.ranking_key and deep_enough

    def _rank(
        self,
        preds: Tensor | EmbeddingInput,
        target: Tensor,
        indexes: Tensor | None,
        mask: Tensor | None,
        depth: int | None,
        judged: Tensor | None = None,
        scores_checked: bool = False,
    ) -> RankedBatch:
        self.check_layout(preds, indexes)
        embeddings = (EmbeddingScores, ShardedEmbeddingScores)
        if self.identities and isinstance(preds, embeddings) and self.ks is not None:
            # counting gives the accuracy statistics of whole lists whatever the
            # depth; the items' top is needed down to the largest k only
            depth = max(self.ks)
        plan = RankingPlan(
            target_format=self.options.target_format,
            rule=self.options.rule,
            ties=self.options.ties,
            depth=depth,
            validate_args=self.options.validate_args,
            identities=self.identities or self.intents,
            judgments=self.judgments,
            check_catalogue=self.items.check_catalogue if self.identities else None,
            first_hits=all(metric.first_hit for metric in self.metrics),
        )
        return rank_inputs(
            preds,
            target,
            plan,
            indexes=indexes,
            mask=mask,
            judged=judged,
            scores_checked=scores_checked,
        )

    def check_layout(self, preds: Tensor | EmbeddingInput, indexes: Tensor | None) -> None:
        """The input layouts that this request's metrics cannot read."""
        if self.judgments and isinstance(preds, ShardedEmbeddingScores):
            names = metric_names(lambda metric: metric.judgments)
            raise ValueError(
                f"the measures of judged items ({names}) do not take ShardedEmbeddingScores "
                "yet; pass EmbeddingScores or the (Q, N) score matrix (with `judged`)"
            )
        if self.intents and indexes is not None:
            names = metric_names(lambda metric: metric.intents)
            raise validation.ArgumentError(
                "indexes",
                f"is not taken by the diversity measures ({names}): the grouped layout has "
                "no subtopics; pass (Q, N) scores and a (Q, N, S) target of subtopic grades",
            )
        if self.identities and indexes is not None:
            names = metric_names(lambda metric: metric.exposure)
            raise ValueError(
                f"the metrics of item exposure ({names}) need catalogue items: the grouped "
                "layout (`indexes`) has none (an entry is a position in its query's list); "
                "pass (Q, N) scores with dense grades or item-index targets"
            )


def _metric_pairs(metrics: object, top_k: TopK) -> tuple[tuple[Metric, int | None], ...] | None:
    """``metrics`` as checked ``(metric, k)`` pairs, or None where they are names."""
    if isinstance(metrics, str) or not isinstance(metrics, Sequence):
        return None
    if not any(isinstance(spec, tuple) for spec in metrics):
        return None
    if top_k is not None:
        raise ValueError(
            f"`top_k={top_k!r}`: `metrics` are (metric, k) pairs, each with its own "
            "cutoff; leave top_k None"
        )
    pairs: list[tuple[Metric, int | None]] = []
    for spec in metrics:
        if not isinstance(spec, tuple) or len(spec) != 2:
            raise ValueError(
                f"`metrics`: expected names or (metric, k) pairs, not both; got {spec!r}"
            )
        name, k = spec
        if not isinstance(name, str):
            raise ValueError(f"`metrics`: the metric of {spec!r} must be a name (a str)")
        (metric,) = get_metrics(name)
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ValueError(f"`metrics`: the k of {spec!r} must be an int >= 1, or None")
        if (metric, k) not in pairs:
            pairs.append((metric, k))
    return tuple(pairs)


def _whole_list_pairs(metrics: object, top_k: TopK) -> tuple[tuple[Metric, int | None], ...]:
    """Names with a ``top_k`` that holds None: each metric at every k, ascending, then on
    the whole list (its key the bare name, as with ``top_k=None``)."""
    ks = validation.normalize_top_k(top_k) or ()
    return tuple(
        (metric, k)
        for metric in get_metrics(metrics)  # type: ignore[arg-type]
        for k in (*ks, None)
    )


def _groups(
    pairs: tuple[tuple[Metric, int | None], ...] | None,
    metrics: tuple[Metric, ...],
    ks: tuple[int, ...] | None,
) -> tuple[tuple[tuple[Metric, ...], tuple[int, ...] | None], ...]:
    """The reads of :attr:`RankingRequest.groups` (``metrics``, ``ks``: the union)."""
    if pairs is None:
        return ((metrics, ks),)
    whole = tuple(dict.fromkeys(metric for metric, k in pairs if k is None))
    at_k = tuple(dict.fromkeys(metric for metric, k in pairs if k is not None))
    return tuple((group, group_ks) for group, group_ks in ((whole, None), (at_k, ks)) if group)


def gain_threshold_problem(metric: Metric, threshold: float | None) -> str | None:
    """Why ``metric`` cannot be read at relevance ``threshold`` (None where it can).

    A metric whose relevant items are those of positive gain (trec_eval's
    ndcg_rel, Rndcg) at a threshold <= 0 would count in R the relevant items of
    gain 0 that trec_eval leaves out (m_ndcg_rel.c, m_Rndcg.c): a wrong number,
    so refused. The library and the command (``-l``) both ask here.
    """
    if metric.relevant_by_gain and threshold is not None and threshold <= 0:
        return (
            f"{metric.name} counts the items of positive gain as relevant (trec_eval's); "
            "a threshold <= 0 makes grades <= 0 relevant with gain 0"
        )
    return None


def _check_exposure_metrics(
    metrics: Sequence[Metric], ks: tuple[int, ...] | None, items: ItemInputs
) -> None:
    """Each exposure metric has a cutoff and the item inputs it reads."""
    for metric in metrics:
        if not metric.exposure:
            continue
        if ks is None:
            raise ValueError(
                f"`top_k`: {metric.name} is read at a cutoff k (the items of each top k); "
                "give top_k, not None"
            )
        wanted = " or ".join(f"`{name}`" for name in metric.needs)
        given = [name for name in metric.needs if items.given(name)]
        if metric.needs and not given:
            raise ValueError(f"{metric.name} needs {wanted} (given once, for every item)")
        if len(given) > 1:
            raise ValueError(f"{metric.name} reads one of {wanted}: give one, not both")
        problem = metric.inputs_problem(items) if metric.inputs_problem else None
        if problem is not None:
            raise ValueError(problem)


__all__ = ["ITEM_INPUTS", "MetricPair", "RankingRequest", "TopK"]
