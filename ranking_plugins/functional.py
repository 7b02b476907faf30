"""The functional API: one call ranks a batch and returns every metric asked for.

>>> import torch
>>> from ranking_plugins import rank_metrics
>>> preds = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
>>> target = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]])
>>> rank_metrics(preds, target, ["mrr", "hit_rate"], top_k=[1, 2])
{'mrr@1': tensor(0.5000, dtype=torch.float64), 'mrr@2': tensor(0.7500, dtype=torch.float64), \
'hit_rate@1': tensor(0.5000, dtype=torch.float64), 'hit_rate@2': tensor(1., dtype=torch.float64)}
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from typing_extensions import Unpack

from ranking_plugins import _validation as validation
from ranking_plugins.embeddings import EmbeddingInput
from ranking_plugins.kernel import ItemInputs, ItemKeywords
from ranking_plugins.metrics import get_metrics
from ranking_plugins.options import OptionKeywords, Options
from ranking_plugins.request import RankingRequest, TopK
from ranking_plugins.totals import Totals

__all__ = [
    "arp",
    "auc",
    "coverage",
    "diversity",
    "entropy",
    "f1",
    "fall_out",
    "gini",
    "hit_rate",
    "intent_target",
    "map",
    "mean_rank",
    "mrr",
    "ndcg",
    "novelty",
    "personalisation",
    "precision",
    "r_precision",
    "rank_metrics",
    "recall",
    "tail_share",
]


def rank_metrics(
    preds: Tensor | EmbeddingInput,
    target: Tensor,
    metrics: str | Sequence[str] = ("hit_rate", "mrr", "ndcg"),
    top_k: TopK = 10,
    *,
    indexes: Tensor | None = None,
    mask: Tensor | None = None,
    judged: Tensor | None = None,
    reduction: str = "mean",
    item_popularity: Tensor | None = None,
    tail_items: Tensor | None = None,
    item_features: Tensor | None = None,
    item_categories: Tensor | None = None,
    **options: Unpack[OptionKeywords],
) -> dict[str, Tensor]:
    """Rank a batch once and compute several metrics at several cutoffs.

    Args:
        preds: scores, higher ranks first: ``(Q, N)``, or ``(M,)`` with ``indexes``; or
            :class:`~ranking_plugins.embeddings.EmbeddingScores` (query and item
            embeddings, scored chunk by chunk) with item-index targets, or
            :class:`~ranking_plugins.ShardedEmbeddingScores` (an item table sharded
            across processes: each process gets its own queries' values).
        target: relevance: grades ``(Q, N)`` (dense), relevant item ids ``(Q,)`` or
            ``(Q, T)`` padded with ``-1`` (item indices), or grades ``(M,)`` (grouped).
        metrics: names from :data:`ranking_plugins.metrics.METRICS`.
        top_k: a cutoff, a sequence of cutoffs, or None for the whole list; None
            inside a sequence adds the whole list (``[10, None]``: ``"mrr@10"``
            and ``"mrr"``).
        indexes: query id of each item, for the grouped layout.
        mask: ``False`` marks items that were not retrieved; they are never ranked
            but a relevant one still counts in R and in the ideal DCG.
        judged: which items carry a relevance judgment (None: every item), read by
            ``bpref``, ``infap``, ``num_nonrel_judged_ret``, ``unj``, ``judged`` and
            ``rbp_resid``: ``(Q, N)`` bool (dense), ``(M,)`` bool (grouped) or the
            judged item ids ``(Q,)`` or ``(Q, J)`` padded with ``-1`` (item indices and
            ``EmbeddingScores``; a relevant item is judged). An unjudged item is never
            relevant.
        reduction: ``"mean"`` (0-d float64 per key) or ``"none"`` (per query ``(Q,)``,
            NaN for skipped queries; not for the catalogue-level metrics
            ``coverage``, ``gini``, ``entropy`` and ``personalisation``, which
            have no per-query value).
        item_popularity: ``(N,)`` non-negative, one per item (a column of ``preds``):
            its interactions, for ``novelty`` and ``arp``.
        tail_items: ``(N,)`` bool, the long-tail items, for ``tail_share``.
        item_features: ``(N, d)``, for ``diversity`` (cosine similarity).
        item_categories: ``(N,)`` integer, for ``diversity`` (equal categories).
        options: the fields of :class:`~ranking_plugins.options.Options`, by keyword;
            its docstring lists each with its default and meaning.

    Returns:
        ``{"ndcg@10": tensor, ...}`` for @k metrics, bare names (``"auc"``,
        ``"r_precision"``, ``"mean_rank"``, or any metric with ``top_k=None``).
    """
    validation.check_choice("reduction", reduction, validation.REDUCTIONS)
    items = ItemInputs.create(item_popularity, tail_items, item_features, item_categories)
    request = RankingRequest.create(
        metrics, top_k, Options.create("rank_metrics", **options), items=items
    )
    if reduction == "none" and request.catalogue:
        names = [m.name for m in request.metrics if m.catalogue is not None]
        raise ValueError(
            f"`reduction='none'`: {', '.join(names)} "
            f"{'is a catalogue-level metric' if len(names) == 1 else 'are catalogue-level metrics'}"
            " (one value from every query's exposure, no per-query value); use "
            "reduction='mean', or ask the per-query metrics alone"
        )
    evaluation = request.evaluate(preds, target, indexes=indexes, mask=mask, judged=judged)
    if reduction == "none":
        return {key: r.values for key, r in evaluation.results.items()}
    mean = Totals.mean_of(evaluation, request.query_keys, request.options.weighted)
    values = request.assemble(mean, evaluation.exposure)
    return dict(zip(request.keys, values.unbind(0), strict=True))


class RankOptions(OptionKeywords, ItemKeywords, total=False):
    """Keywords of :func:`~ranking_plugins.rank_metrics` that each single-metric function takes."""

    indexes: Tensor | None
    mask: Tensor | None
    reduction: str


def _whole_list_metric(name: str, preds: Tensor, target: Tensor, options: RankOptions) -> Tensor:
    """A metric of the whole ranked list (no cutoff): a ``top_k`` keyword is an error."""
    if "top_k" in options:
        raise TypeError(
            f"{name}() takes no `top_k`: it reads the whole ranked list "
            f"(got top_k={options['top_k']!r})"  # type: ignore[typeddict-item]
        )
    return _metric_values(name, preds, target, None, options)


def _metric_values(
    name: str, preds: Tensor, target: Tensor, top_k: TopK, options: RankOptions
) -> Tensor:
    """One metric over ``rank_metrics``: 0-d (or (Q,)) for one k, stacked along k for several."""
    results = rank_metrics(preds, target, [name], top_k, **options)
    values = list(results.values())
    if top_k is None or validation.is_single_k(top_k) or not get_metrics(name)[0].at_k:
        return values[0]
    return torch.stack(values, dim=-1)


def hit_rate(
    preds: Tensor, target: Tensor, top_k: TopK = None, **options: Unpack[RankOptions]
) -> Tensor:
    """Hit rate@k: 1 if a relevant item is in the top k (trec_eval success_k).

    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.

    >>> import torch
    >>> preds = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> target = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]])
    >>> hit_rate(preds, target, top_k=[1, 2, 3])
    tensor([0.5000, 1.0000, 1.0000], dtype=torch.float64)
    """
    return _metric_values("hit_rate", preds, target, top_k, options)


def mrr(
    preds: Tensor, target: Tensor, top_k: TopK = None, **options: Unpack[RankOptions]
) -> Tensor:
    """Mean reciprocal rank@k: 1 / rank of the first relevant item if it is within k.

    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.

    >>> import torch
    >>> preds = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> target = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]])
    >>> mrr(preds, target, top_k=[1, 2, 3])
    tensor([0.5000, 0.7500, 0.7500], dtype=torch.float64)
    """
    return _metric_values("mrr", preds, target, top_k, options)


def precision(
    preds: Tensor, target: Tensor, top_k: TopK = None, **options: Unpack[RankOptions]
) -> Tensor:
    """Precision@k: relevant items in the top k, divided by k.

    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.

    >>> import torch
    >>> preds = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> target = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]])
    >>> precision(preds, target, top_k=[1, 2, 3])
    tensor([0.5000, 0.5000, 0.3333], dtype=torch.float64)
    """
    return _metric_values("precision", preds, target, top_k, options)


def recall(
    preds: Tensor, target: Tensor, top_k: TopK = None, **options: Unpack[RankOptions]
) -> Tensor:
    """Recall@k: relevant items in the top k, divided by R.

    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.

    >>> import torch
    >>> preds = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> target = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]])
    >>> recall(preds, target, top_k=[1, 2, 3])
    tensor([0.5000, 0.7500, 0.7500], dtype=torch.float64)
    """
    return _metric_values("recall", preds, target, top_k, options)


def f1(preds: Tensor, target: Tensor, top_k: TopK = None, **options: Unpack[RankOptions]) -> Tensor:
    """F1@k: the harmonic mean of precision@k and recall@k, 2 hits / (k + R).

    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.

    >>> import torch
    >>> preds = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> target = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]])
    >>> f1(preds, target, top_k=[1, 2, 3])
    tensor([0.5000, 0.5833, 0.4500], dtype=torch.float64)
    """
    return _metric_values("f1", preds, target, top_k, options)


def map(
    preds: Tensor, target: Tensor, top_k: TopK = None, **options: Unpack[RankOptions]
) -> Tensor:
    """Mean average precision@k (trec_eval map_cut_k; map with ``top_k=None``).

    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.

    >>> import torch
    >>> preds = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> target = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]])
    >>> map(preds, target, top_k=[1, 2, 3])
    tensor([0.5000, 0.6250, 0.6250], dtype=torch.float64)
    """
    return _metric_values("map", preds, target, top_k, options)


def ndcg(
    preds: Tensor, target: Tensor, top_k: TopK = None, **options: Unpack[RankOptions]
) -> Tensor:
    """Normalised discounted cumulative gain@k.

    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.

    >>> import torch
    >>> preds = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> target = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]])
    >>> ndcg(preds, target, top_k=[1, 2, 3])
    tensor([0.5000, 0.6934, 0.6934], dtype=torch.float64)
    """
    return _metric_values("ndcg", preds, target, top_k, options)


def fall_out(
    preds: Tensor, target: Tensor, top_k: TopK = None, **options: Unpack[RankOptions]
) -> Tensor:
    """Fall-out@k: non-relevant items in the top k over the non-relevant ranked items.

    Lower is better.

    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.

    >>> import torch
    >>> preds = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> target = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]])
    >>> fall_out(preds, target, top_k=[1, 2, 3])
    tensor([0.2500, 0.4167, 0.8333], dtype=torch.float64)
    """
    return _metric_values("fall_out", preds, target, top_k, options)


def r_precision(preds: Tensor, target: Tensor, **options: Unpack[RankOptions]) -> Tensor:
    """R-precision: precision at R, the number of relevant items.

    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.

    >>> import torch
    >>> preds = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> target = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]])
    >>> r_precision(preds, target)
    tensor(0.7500, dtype=torch.float64)
    """
    return _whole_list_metric("r_precision", preds, target, options)


def mean_rank(preds: Tensor, target: Tensor, **options: Unpack[RankOptions]) -> Tensor:
    """Mean rank of the relevant ranked items, 1 = best (lower is better).

    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.

    >>> import torch
    >>> preds = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> target = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]])
    >>> mean_rank(preds, target)
    tensor(2., dtype=torch.float64)
    """
    return _whole_list_metric("mean_rank", preds, target, options)


def auc(preds: Tensor, target: Tensor, **options: Unpack[RankOptions]) -> Tensor:
    """Per-query AUC: the fraction of (relevant, non-relevant) pairs ordered right.

    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.

    >>> import torch
    >>> preds = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> target = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]])
    >>> auc(preds, target)
    tensor(0.6250, dtype=torch.float64)
    """
    return _whole_list_metric("auc", preds, target, options)


# -- beyond accuracy ---------------------------------------------------------------

_EXAMPLE = """
    >>> import torch
    >>> preds = torch.tensor([[4.0, 3.0, 2.0, 1.0], [4.0, 1.0, 3.0, 2.0], [1.0, 1.0, 3.0, 2.0]])
    >>> target = torch.tensor([[1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0]])"""


def coverage(
    preds: Tensor, target: Tensor, top_k: TopK = 10, **options: Unpack[RankOptions]
) -> Tensor:
    """Catalogue coverage@k: the share of the N items in at least one query's top k.

    Catalogue-level: one value from every query's exposure (no per-query value).
    Under ``ties="average"`` it is the expectation over the orders of the tie groups.
    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.
    {example}
    >>> coverage(preds, target, top_k=[1, 2])
    tensor([0.5000, 1.0000], dtype=torch.float64)
    """
    return _metric_values("coverage", preds, target, top_k, options)


def gini(preds: Tensor, target: Tensor, top_k: TopK = 10, **options: Unpack[RankOptions]) -> Tensor:
    """Gini index@k of the items' exposure in the top k (RecBole's GiniIndex); lower is fairer.

    Catalogue-level, from the (expected, under ``ties="average"``) exposure counts.
    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.
    {example}
    >>> gini(preds, target, top_k=[1, 2])
    tensor([0.5833, 0.1667], dtype=torch.float64)
    """
    return _metric_values("gini", preds, target, top_k, options)


def entropy(
    preds: Tensor, target: Tensor, top_k: TopK = 10, **options: Unpack[RankOptions]
) -> Tensor:
    """Shannon entropy@k (bits) of the distribution of exposure over the items.

    Catalogue-level, from the (expected, under ``ties="average"``) exposure counts.
    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.
    {example}
    >>> entropy(preds, target, top_k=[1, 2])
    tensor([0.9183, 1.9183], dtype=torch.float64)
    """
    return _metric_values("entropy", preds, target, top_k, options)


def personalisation(
    preds: Tensor, target: Tensor, top_k: TopK = 10, **options: Unpack[RankOptions]
) -> Tensor:
    """Personalisation@k: 1 - the mean overlap ``|L_a ∩ L_b| / k`` of two queries' top k lists.

    PyG's LinkPredPersonalization, over every pair of queries, computed from the
    exposure counts (no pair is visited). Catalogue-level; under ``ties="average"``
    the expectation over the orders of the tie groups.
    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.
    {example}
    >>> personalisation(preds, target, top_k=[1, 2])
    tensor([0.6667, 0.6667], dtype=torch.float64)
    """
    return _metric_values("personalisation", preds, target, top_k, options)


def novelty(
    preds: Tensor, target: Tensor, top_k: TopK = 10, **options: Unpack[RankOptions]
) -> Tensor:
    """Novelty@k: mean self-information -log2 p(i) of the top k items, p(i) = the
    item's share of ``item_popularity`` (every entry must be > 0).

    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.
    {example}
    >>> novelty(preds, target, top_k=2, item_popularity=torch.tensor([4.0, 2.0, 1.0, 1.0]))
    tensor(2.1667, dtype=torch.float64)
    """
    return _metric_values("novelty", preds, target, top_k, options)


def arp(preds: Tensor, target: Tensor, top_k: TopK = 10, **options: Unpack[RankOptions]) -> Tensor:
    """Average recommendation popularity@k (PyG's LinkPredAveragePopularity); lower is better.

    The mean ``item_popularity`` of the top k items, averaged over queries.
    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.
    {example}
    >>> arp(preds, target, top_k=2, item_popularity=torch.tensor([4.0, 2.0, 1.0, 1.0]))
    tensor(2.1667, dtype=torch.float64)
    """
    return _metric_values("arp", preds, target, top_k, options)


def tail_share(
    preds: Tensor, target: Tensor, top_k: TopK = 10, **options: Unpack[RankOptions]
) -> Tensor:
    """Tail share@k: the share of the top k items in ``tail_items`` (RecBole's TailPercentage).

    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.
    {example}
    >>> tail_share(preds, target, top_k=2, tail_items=torch.tensor([False, False, True, True]))
    tensor(0.5000, dtype=torch.float64)
    """
    return _metric_values("tail_share", preds, target, top_k, options)


def diversity(
    preds: Tensor, target: Tensor, top_k: TopK = 10, **options: Unpack[RankOptions]
) -> Tensor:
    """Intra-list diversity@k: 1 - the mean similarity of the pairs of items in the top k.

    Similarity: cosine of ``item_features`` rows, or 1 for equal ``item_categories``
    (PyG's LinkPredDiversity). A query with fewer than two items is left out.
    See :func:`~ranking_plugins.rank_metrics` for the inputs and options.
    {example}
    >>> diversity(preds, target, top_k=2, item_categories=torch.tensor([0, 0, 1, 1]))
    tensor(0.3333, dtype=torch.float64)
    """
    return _metric_values("diversity", preds, target, top_k, options)


for _function in (coverage, gini, entropy, personalisation, novelty, arp, tail_share, diversity):
    _function.__doc__ = (_function.__doc__ or "").replace("{example}", _EXAMPLE.strip())


def intent_target(target: Tensor, item_categories: Tensor, query_intents: Tensor) -> Tensor:
    """The (Q, N, S) subtopic target of the diversity measures from item categories, for
    recommenders (alpha-nDCG over genres): ``target[q, n] * category[n, s] * intent[q, s]``.

    Args:
        target: ``(Q, N)`` grades, the relevance of item n to query q (dense layout).
        item_categories: ``(N,)`` integer, each item's one category in ``0..S-1``, or
            ``(N, S)`` bool or numbers, the categories of each item (several per item).
        query_intents: ``(Q, S)`` bool or numbers: which categories (intents) each query
            has, 0/1 or graded.

    An item earns its grade in each category it belongs to and its query has; the
    result (the promoted dtype of the three) goes to :func:`rank_metrics` or an
    adapter's ``update`` as the ``target`` (:doc:`diversity`).

    >>> target = torch.tensor([[1, 1, 0, 1]])
    >>> categories = torch.tensor([0, 0, 1, 2])  # genre of each of the 4 items
    >>> intents = torch.tensor([[1, 0, 1]])  # the user likes genres 0 and 2
    >>> intent_target(target, categories, intents)[0].tolist()
    [[1, 0, 0], [1, 0, 0], [0, 0, 0], [0, 0, 1]]
    """
    target = validation.check_tensor("target", target)
    categories = validation.check_tensor("item_categories", item_categories)
    intents = validation.check_tensor("query_intents", query_intents)
    if target.ndim != 2:
        raise validation.ArgumentError(
            "target", f"must be (Q, N) grades, got shape {tuple(target.shape)}"
        )
    num_queries, num_items = target.shape
    if intents.ndim != 2 or intents.shape[0] != num_queries:
        raise validation.ArgumentError(
            "query_intents",
            f"must be (Q, S) with Q = {num_queries} queries, got shape {tuple(intents.shape)}",
        )
    breadth = intents.shape[1]
    if categories.ndim == 1 and not (
        categories.is_floating_point() or categories.dtype == torch.bool
    ):
        if categories.shape[0] != num_items:
            raise validation.ArgumentError(
                "item_categories",
                f"must give one category per item, N = {num_items}; got {categories.shape[0]}",
            )
        if categories.numel() and (int(categories.min()) < 0 or int(categories.max()) >= breadth):
            raise validation.ArgumentError(
                "item_categories",
                f"must hold categories in 0..{breadth - 1} (S = {breadth}, the columns of "
                f"`query_intents`), got {int(categories.min())}..{int(categories.max())}",
            )
        categories = torch.nn.functional.one_hot(categories.long(), breadth)
    elif categories.ndim != 2 or tuple(categories.shape) != (num_items, breadth):
        raise validation.ArgumentError(
            "item_categories",
            f"must be (N,) integer categories or (N, S) = ({num_items}, {breadth}) "
            f"memberships, got {categories.dtype} of shape {tuple(categories.shape)}",
        )
    for name, value in (
        ("target", target),
        ("item_categories", categories),
        ("query_intents", intents),
    ):
        if value.is_floating_point() and bool(value.isnan().any()):
            raise validation.ArgumentError(name, "must not hold NaN")
    dtype = torch.promote_types(torch.promote_types(target.dtype, categories.dtype), intents.dtype)
    dtype = torch.int64 if dtype == torch.bool else dtype
    categories = categories.to(target.device, dtype)
    intents = intents.to(target.device, dtype)
    return target.to(dtype).unsqueeze(2) * categories.unsqueeze(0) * intents.unsqueeze(1)
