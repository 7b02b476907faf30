"""sentence-transformers' ``InformationRetrievalEvaluator``, scored and ranked by the rank kernel.

A subclass of sentence-transformers' own class: its constructor, ``__call__``
(the CSV file, ``primary_metric``, the model card, the name prefix) and its
encoding (prompts, ``truncate_dim``, ``batch_size``) are sentence-transformers'.
Only :meth:`InformationRetrievalEvaluator.compute_all_metrics` is replaced:
the corpus embeddings go to :class:`~ranking_plugins.EmbeddingScores` (or,
sharded across processes, :class:`~ranking_plugins.ShardedEmbeddingScores`)
with the relevant documents as item ids, and one
:class:`~ranking_plugins.request.RankingRequest` reads every metric at every
k from one count of each relevant document's rank.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from numbers import Real
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor
from typing_extensions import Unpack

from ranking_plugins import _validation as validation
from ranking_plugins.accumulator import Accumulator
from ranking_plugins.embeddings import EmbeddingScores, ShardedEmbeddingScores
from ranking_plugins.metrics import get_metrics, result_key
from ranking_plugins.options import OptionKeywords, Options
from ranking_plugins.request import RankingRequest

try:
    from sentence_transformers.sentence_transformer.evaluation import (
        InformationRetrievalEvaluator as _SentenceTransformersEvaluator,
    )
except ImportError as error:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "ranking_plugins.sentence_transformers needs sentence-transformers; install it "
        'with `pip install "ranking-plugins[sentence-transformers]"`'
    ) from error

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

#: sentence-transformers' conventions, the evaluator's defaults: MAP@k divides by
#: min(k, R); ties in (-score, corpus id) order, which ``ties="first"`` gives on a
#: corpus held in ascending id order; a query without relevant documents left out
SENTENCE_TRANSFORMERS_DEFAULTS: dict[str, Any] = {
    "ties": "first",
    "ap_denominator": "min_k_relevant",
    "gain": "linear",
    "adaptive_k": False,
    "empty_target_action": "skip",
}

#: sentence-transformers' result groups and the package metric each one is
_GROUPS = (
    ("accuracy", "hit_rate", "accuracy_at_k"),
    ("precision", "precision", "precision_recall_at_k"),
    ("recall", "recall", "precision_recall_at_k"),
    ("ndcg", "ndcg", "ndcg_at_k"),
    ("mrr", "mrr", "mrr_at_k"),
    ("map", "map", "map_at_k"),
)

#: (Q, N) score elements ranked at once for graded relevance (the dense path)
_GRADED_BLOCK_ELEMENTS = 1 << 24

Grades = Mapping[str, Real]
Relevant = Mapping[str, Iterable[str] | Grades]


class InformationRetrievalEvaluator(_SentenceTransformersEvaluator):
    """sentence-transformers' ``InformationRetrievalEvaluator``, the package's numbers.

    The arguments of sentence-transformers 6.x's constructor, with its defaults
    (see its documentation), and these keywords:

    Args:
        metrics: more metrics of the package, ``{name: [k, ...]}`` (k None: the whole
            list; names from :data:`ranking_plugins.metrics.METRICS`), returned as
            ``{name}_{score function}_{metric}@{k}`` beside sentence-transformers'
            (not in the CSV file).
        shard_corpus: split the corpus (and the queries) across the processes of
            ``group``: each process encodes and scores its own rows, every process
            gets the values of all of them. Every process of the group must call
            the evaluator. False (the default) when only one process calls it, as
            sentence-transformers' trainer does.
        group: the ``torch.distributed`` process group (None: the default group).
        options: the fields of :class:`~ranking_plugins.options.Options`, over
            sentence-transformers' conventions (:data:`SENTENCE_TRANSFORMERS_DEFAULTS`):
            ``ties="average"`` (or ``"pessimistic"``, ...) for the package's tie
            policies, ``ap_denominator="relevant"`` for trec_eval's MAP, ``gain``
            and ``relevance_threshold`` for graded ``relevant_docs``.

    ``relevant_docs`` maps a query id to its relevant document ids (a set), or to
    ``{doc_id: grade}`` (graded: a grade above 0, or at ``relevance_threshold``
    or above, is relevant, and NDCG's gain is the grade). The corpus is held
    in ascending id order (``self.corpus_ids``): that is the order of the rows
    of a ``corpus_embeddings`` given to :meth:`compute_all_metrics`.
    """

    def __init__(
        self,
        queries: Mapping[str, Any],
        corpus: Mapping[str, Any],
        relevant_docs: Relevant,
        corpus_chunk_size: int = 50000,
        mrr_at_k: Sequence[int] = (10,),
        ndcg_at_k: Sequence[int] = (10,),
        accuracy_at_k: Sequence[int] = (1, 3, 5, 10),
        precision_recall_at_k: Sequence[int] = (1, 3, 5, 10),
        map_at_k: Sequence[int] = (100,),
        show_progress_bar: bool = False,
        batch_size: int = 32,
        name: str = "",
        write_csv: bool = True,
        truncate_dim: int | None = None,
        score_functions: Mapping[str, Callable[[Tensor, Tensor], Tensor]] | None = None,
        main_score_function: str | None = None,
        query_prompt: str | None = None,
        query_prompt_name: str | None = None,
        corpus_prompt: str | None = None,
        corpus_prompt_name: str | None = None,
        write_predictions: bool = False,
        *,
        metrics: Mapping[str, Sequence[int | None]] | None = None,
        shard_corpus: bool = False,
        group: ProcessGroup | None = None,
        **options: Unpack[OptionKeywords],
    ) -> None:
        cutoffs = {
            "mrr_at_k": mrr_at_k,
            "ndcg_at_k": ndcg_at_k,
            "accuracy_at_k": accuracy_at_k,
            "precision_recall_at_k": precision_recall_at_k,
            "map_at_k": map_at_k,
        }
        _check_inputs(queries, corpus, relevant_docs, cutoffs)
        for argument, value in (
            ("corpus_chunk_size", corpus_chunk_size),
            ("batch_size", batch_size),
        ):
            problem = validation.positive_int_problem(value)
            if problem is not None:
                raise problem.error(argument)
        for argument, value in (
            ("write_predictions", write_predictions),
            ("shard_corpus", shard_corpus),
        ):
            problem = validation.flag_problem(value)
            if problem is not None:
                raise problem.error(argument)
        if write_predictions:
            raise validation.ArgumentError(
                "write_predictions",
                "is not supported: the package counts each relevant document's rank and "
                "keeps no ranked lists; use sentence_transformers' evaluator to write them",
            )
        super().__init__(
            dict(queries),
            # ascending ids: sentence-transformers breaks ties by corpus id, ties="first" by row
            {doc_id: corpus[doc_id] for doc_id in sorted(corpus)},
            dict(relevant_docs),  # type: ignore[arg-type]  # read by `in` and len(): grades too
            corpus_chunk_size=corpus_chunk_size,
            **{argument: list(ks) for argument, ks in cutoffs.items()},
            show_progress_bar=show_progress_bar,
            batch_size=batch_size,
            name=name,
            write_csv=write_csv,
            truncate_dim=truncate_dim,
            score_functions=None if score_functions is None else dict(score_functions),
            main_score_function=main_score_function,
            query_prompt=query_prompt,
            query_prompt_name=query_prompt_name,
            corpus_prompt=corpus_prompt,
            corpus_prompt_name=corpus_prompt_name,
            write_predictions=False,
        )
        self.options = Options.create(
            type(self).__name__, **{**SENTENCE_TRANSFORMERS_DEFAULTS, **options}
        )
        self.graded = any(isinstance(docs, Mapping) for docs in relevant_docs.values())
        self.shard_corpus = shard_corpus
        self.group = group
        if self.graded and shard_corpus:
            raise validation.ArgumentError(
                "relevant_docs",
                "holds grades, which are ranked on one process: pass shard_corpus=False",
            )
        self.request, self.groups = _request(cutoffs, metrics, self.options)
        self._targets: tuple[Tensor, Tensor | None] | None = None

    # ----------------------------------------------------------------- glue

    def __call__(
        self,
        model: Any,
        output_path: str | None = None,
        epoch: int = -1,
        steps: int = -1,
        *args: Any,
        **kwargs: Any,
    ) -> dict[str, float]:
        if self.shard_corpus and _rank(self.group) != 0:
            output_path = None  # every process has the values; the first writes them
        return super().__call__(model, output_path, epoch, steps, *args, **kwargs)

    def compute_all_metrics(  # type: ignore[override]  # the base returns this nesting too
        self,
        model: Any,
        corpus_model: Any = None,
        corpus_embeddings: Tensor | None = None,
        output_path: str | None = None,
    ) -> dict[str, dict[str, dict[int | None, float]]]:
        """Every score function's metrics, ``{name: {"ndcg@k": {10: value}, ...}}``.

        ``corpus_embeddings``: (N, d), rows in ``self.corpus_ids`` order (ascending
        ids), in place of encoding the corpus with ``corpus_model`` (default ``model``).
        """
        corpus_model = model if corpus_model is None else corpus_model
        world, rank = (_world(self.group), _rank(self.group)) if self.shard_corpus else (1, 0)
        query_rows = _share(len(self.queries), world, rank)
        corpus_rows = _share(len(self.corpus), world, rank)
        query_emb = self._encode(model, "query", self.queries[query_rows])
        if corpus_embeddings is None:
            corpus_emb = self._encode(corpus_model, "document", self.corpus[corpus_rows])
        else:
            corpus_emb = corpus_embeddings[corpus_rows]
        ids, grades = self._relevant(query_emb.device)
        ids = ids[query_rows]
        score_functions = self.score_functions
        assert score_functions is not None  # the base sets them from the model when not given
        results = {}
        for name, score_fn in score_functions.items():
            values = self._values(query_emb, corpus_emb, score_fn, ids, grades, corpus_rows.start)
            by_key = dict(zip(self.request.keys, values.tolist(), strict=True))
            results[name] = _grouped(self.groups, by_key)
        for name in self.score_function_names:
            self.output_scores({group: results[name][group] for group in _ST_GROUPS})
        return results

    compute_metrices = compute_all_metrics  # type: ignore[assignment]

    def _encode(self, model: Any, side: str, texts: list[Any]) -> Tensor:
        """sentence-transformers' encoding of queries or documents, as a tensor."""
        prompt_name, prompt = (
            (self.query_prompt_name, self.query_prompt)
            if side == "query"
            else (self.corpus_prompt_name, self.corpus_prompt)
        )
        encoded = self.embed_inputs(
            model, texts, encode_fn_name=side, prompt_name=prompt_name, prompt=prompt
        )
        return torch.as_tensor(encoded)

    def _values(
        self,
        query_emb: Tensor,
        corpus_emb: Tensor,
        score_fn: Callable[[Tensor, Tensor], Tensor],
        ids: Tensor,
        grades: Tensor | None,
        offset: int,
    ) -> Tensor:
        """Every key of the request, in its order, from this process's rows."""
        request = self.request
        if grades is not None:
            return _graded_values(request, query_emb, corpus_emb, score_fn, grades)
        chunk = self.corpus_chunk_size
        if not self.shard_corpus:
            scores = EmbeddingScores(query_emb, corpus_emb, score_fn, chunk_size=chunk)
            kept = Accumulator.of(request.evaluate(scores, ids), request)
            return kept.values(request)
        sharded = ShardedEmbeddingScores(
            query_emb,
            corpus_emb,
            score_fn,
            chunk_size=chunk,
            item_offset=offset,
            catalogue_size=len(self.corpus),
            group=self.group,
        )
        sums, exposure = Accumulator.of(request.evaluate(sharded, ids), request).flat()
        sums = sums.clone()
        torch.distributed.all_reduce(sums, group=self.group)
        return Accumulator.from_flat(request, sums, exposure).values(request)

    def _relevant(self, device: torch.device) -> tuple[Tensor, Tensor | None]:
        """Each query's relevant rows of the corpus (Q, T), -1 padded; for graded
        ``relevant_docs``, the (Q, N) grades instead of None."""
        if self._targets is None:
            row = {doc_id: i for i, doc_id in enumerate(self.corpus_ids)}
            listed = [list(self.relevant_docs[qid]) for qid in self.queries_ids]
            width = max(len(docs) for docs in listed)
            ids = torch.full((len(listed), width), -1, dtype=torch.int64)
            for q, docs in enumerate(listed):
                ids[q, : len(docs)] = torch.tensor([row[doc_id] for doc_id in docs])
            grades = None
            if self.graded:
                grades = torch.zeros(len(listed), len(self.corpus_ids), dtype=torch.float64)
                for q, qid in enumerate(self.queries_ids):
                    judged = self.relevant_docs[qid]
                    if isinstance(judged, Mapping):
                        for doc_id, grade in judged.items():
                            grades[q, row[doc_id]] = float(grade)
                    else:
                        grades[q, ids[q, : len(judged)]] = 1.0
            self._targets = (ids, grades)
        ids, grades = self._targets
        return ids.to(device), None if grades is None else grades.to(device)


_ST_GROUPS = ("accuracy@k", "precision@k", "recall@k", "mrr@k", "ndcg@k", "map@k")


def _request(
    cutoffs: Mapping[str, Sequence[int]],
    metrics: Mapping[str, Sequence[int | None]] | None,
    options: Options,
) -> tuple[RankingRequest, list[tuple[str, str, int | None]]]:
    """One request for every result, and each result's (group, key, k) in
    sentence-transformers' order, the extra metrics after."""
    pairs: list[tuple[str, int | None]] = []
    groups: list[tuple[str, str, int | None]] = []
    for group, metric, argument in _GROUPS:
        for k in cutoffs[argument]:
            pairs.append((metric, k))
            groups.append((f"{group}@k", f"{metric}@{k}", k))
    if metrics is not None:
        if not isinstance(metrics, Mapping):
            raise validation.ArgumentError(
                "metrics", f"must map metric names to lists of k, got {type(metrics).__name__}"
            )
        known = {key for _, key, _ in groups}
        for name, ks in metrics.items():
            if isinstance(ks, (str, int)) or not isinstance(ks, Sequence) or not ks:
                raise validation.ArgumentError(
                    "metrics", f"must map {name!r} to a non-empty list of k, got {ks!r}"
                )
            (table_metric,) = get_metrics(name)
            for cutoff in ks:
                pairs.append((name, cutoff))
                key = result_key(table_metric, cutoff)
                if key not in known:
                    known.add(key)
                    group = key if key == table_metric.name else f"{table_metric.name}@k"
                    groups.append((group, key, cutoff))
    request = RankingRequest.create(pairs, options=options)
    return request, groups


def _grouped(
    groups: Sequence[tuple[str, str, int | None]], values: Mapping[str, float]
) -> dict[str, dict[int | None, float]]:
    """``{"ndcg@k": {10: value}, ...}``: sentence-transformers' nesting of the values."""
    nested: dict[str, dict[int | None, float]] = {}
    for group, key, k in groups:
        nested.setdefault(group, {})[k] = values[key]
    return nested


def _graded_values(
    request: RankingRequest,
    query_emb: Tensor,
    corpus_emb: Tensor,
    score_fn: Callable[[Tensor, Tensor], Tensor],
    grades: Tensor,
) -> Tensor:
    """Graded targets: the kernel reads item-id targets as grade 1, so the scores
    are ranked as dense rows, a block of queries at a time (memory: a block's rows)."""
    rows = max(1, _GRADED_BLOCK_ELEMENTS // max(1, corpus_emb.shape[0]))
    kept = Accumulator.empty(request, device=query_emb.device)
    for low in range(0, query_emb.shape[0], rows):
        scores = score_fn(query_emb[low : low + rows], corpus_emb)
        evaluation = request.evaluate(scores, grades[low : low + rows])
        kept = kept.merge(Accumulator.of(evaluation, request))
    return kept.values(request)


def _check_inputs(
    queries: object,
    corpus: object,
    relevant_docs: object,
    cutoffs: Mapping[str, Sequence[int]],
) -> None:
    """Refuse what sentence-transformers would turn into an internal error or a wrong number."""
    for argument, value in (
        ("queries", queries),
        ("corpus", corpus),
        ("relevant_docs", relevant_docs),
    ):
        if not isinstance(value, Mapping):
            raise validation.ArgumentError(argument, f"must be a dict, got {type(value).__name__}")
        if not value:
            raise validation.ArgumentError(argument, "must not be empty")
    assert isinstance(queries, Mapping) and isinstance(corpus, Mapping)
    assert isinstance(relevant_docs, Mapping)
    try:
        sorted(corpus)
    except TypeError as error:
        raise validation.ArgumentError(
            "corpus", f"ids must be comparable with each other: {error}"
        ) from None
    evaluated = [qid for qid in queries if qid in relevant_docs and len(relevant_docs[qid]) > 0]
    if not evaluated:
        raise validation.ArgumentError(
            "relevant_docs", "lists no relevant document for any query of `queries`"
        )
    missing: list[str] = []
    for qid in evaluated:
        docs = relevant_docs[qid]
        if isinstance(docs, str) or not isinstance(docs, Iterable):
            raise validation.ArgumentError(
                "relevant_docs",
                f"must map each query id to a set of document ids or to {{doc_id: grade}}, "
                f"got {type(docs).__name__} for {qid!r}",
            )
        if isinstance(docs, Mapping):
            for doc_id, grade in docs.items():
                if isinstance(grade, bool) or not isinstance(grade, Real) or grade != grade:
                    raise validation.ArgumentError(
                        "relevant_docs",
                        f"grades must be real numbers, got {grade!r} for {qid!r}, {doc_id!r}",
                    )
        missing.extend(f"{qid!r}: {doc_id!r}" for doc_id in docs if doc_id not in corpus)
    if missing:
        shown = ", ".join(missing[:10]) + (
            f", ... ({len(missing) - 10} more)" if len(missing) > 10 else ""
        )
        raise validation.ArgumentError(
            "relevant_docs", f"names documents that are not in `corpus` ({shown})"
        )
    for argument, ks in cutoffs.items():
        if isinstance(ks, (str, int)) or not isinstance(ks, Sequence) or not ks:
            raise validation.ArgumentError(
                argument, f"must be a non-empty list of positive ints, got {ks!r}"
            )
        for k in ks:
            problem = validation.positive_int_problem(k)
            if problem is not None:
                raise validation.ArgumentError(argument, f"holds a k that {problem.text}")
            if k > len(corpus):
                raise validation.ArgumentError(
                    argument, f"holds k={k}, more than the {len(corpus)} documents of `corpus`"
                )


def _share(n: int, world: int, rank: int) -> slice:
    """This process's contiguous share of n rows (the first processes one more)."""
    base, extra = divmod(n, world)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (rank < extra))


def _world(group: ProcessGroup | None) -> int:
    return int(torch.distributed.get_world_size(group))


def _rank(group: ProcessGroup | None) -> int:
    return int(torch.distributed.get_rank(group))


__all__ = ["SENTENCE_TRANSFORMERS_DEFAULTS", "InformationRetrievalEvaluator"]
