"""A qrels and a run evaluated by the package's kernel: per-query values, means,
standard errors and counts, as ``ranking-plugins evaluate`` prints them.

:func:`evaluate` evaluates joined parts (:mod:`ranking_plugins.runs.joining`);
:func:`evaluate_file` reads a run file, joins it to the qrels and evaluates it
as the command does (:class:`Settings`: its flags). No metric is computed
here: the kernel (:class:`ranking_plugins.request.RankingRequest`, the object
behind :func:`ranking_plugins.rank_metrics`) computes them, and means and
standard errors come from :class:`ranking_plugins.totals.Totals`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

import torch
from torch import Tensor

from ranking_plugins.kernel import recall_level_cut
from ranking_plugins.metrics import METRICS, result_key
from ranking_plugins.options import Options
from ranking_plugins.per_query import EmptyQueryError, Evaluation, PerQuery
from ranking_plugins.request import RankingRequest
from ranking_plugins.runs.diversity import (
    SubtopicQrels,
    left_out,
    read_subtopic_file,
    subtopic_collections,
)
from ranking_plugins.runs.joining import Collection, WholeRunNeeded, collections, run_keys
from ranking_plugins.runs.names import GEOMETRIC_MEANS, is_diversity
from ranking_plugins.runs.reading import FileFormatError, Records, read_batches, read_records
from ranking_plugins.totals import Totals, geometric_mean

#: the command's defaults where they differ from the package's: its RBP persistence
COMMAND_DEFAULTS = Options(rbp_persistence=0.9)


@dataclass(frozen=True)
class Results:
    """Per-query values, means, standard errors and counts, one entry per result key."""

    qids: list[str]
    keys: list[str]
    per_query: dict[str, Tensor]  # (Q,) float64, NaN where a query was left out
    mean: dict[str, float]
    standard_error: dict[str, float]
    counted: dict[str, int]


def evaluate(
    joined: Collection | Iterable[Collection],
    wanted: Sequence[tuple[str, int | None]],
    options: Options,
    qrels_path: str = "qrels",
    judged_only: bool = False,
) -> Results:
    """Evaluate a joined collection, or its parts of whole queries, with the kernel.

    One request of ``(metric, k)`` pairs ranks each part once and reads every
    pair from that ranking. Per-query values follow the query names, sorted as strings.

    A run document absent from the qrels is unjudged, any document of the
    qrels judged (grade 0 included; a negative grade is trec_eval's "in the
    pool, not judged"): the measures of judged items read the collection's
    ``judged``. ``judged_only``: trec_eval's ``-J``.
    """
    parts = [joined] if isinstance(joined, Collection) else joined
    parts = (_judged_only(part) for part in parts) if judged_only else parts
    keys = result_keys(wanted)
    # a geometric mean (trec_eval's gm_map) aggregates its metric's per-query values
    computed = [(GEOMETRIC_MEANS.get(name, name), k) for name, k in wanted]
    request = RankingRequest.create(computed, None, options)
    computed_keys = list(request.keys)
    results: dict[str, list[PerQuery]] = {key: [] for key in computed_keys}
    qids: list[str] = []
    for part in parts:
        if not part.qids:
            continue
        inputs = (part.preds, part.target)
        # read only by the measures of judged items: the others never pay for it
        judged = part.judged if request.judgments else None
        try:
            evaluation = request.evaluate(*inputs, mask=part.mask, judged=judged)
            for key in computed_keys:
                results[key].append(evaluation.results[key])
        except EmptyQueryError as error:
            # the kernel knows the query by its row; the user knows it by its id
            named = EmptyQueryError(error.metric, error.query, part.qids[error.query])
            raise FileFormatError(qrels_path, None, str(named)) from None
        except ValueError as error:
            raise FileFormatError(qrels_path, None, str(error)) from None
        qids.extend(part.qids)
    # the parts' queries in name order, then summed once: the means of the whole run
    order = torch.tensor(sorted(range(len(qids)), key=qids.__getitem__), dtype=torch.int64)
    merged = {
        key: PerQuery(
            torch.cat([r.values for r in rows] or [torch.zeros(0, dtype=torch.float64)])[order],
            torch.cat([r.counted for r in rows] or [torch.zeros(0, dtype=torch.bool)])[order],
        )
        for key, rows in results.items()
    }
    totals = Totals.of(
        Evaluation(merged, torch.zeros(len(qids))), tuple(computed_keys), weighted=False
    )
    per_query = {key: merged[key].values for key in computed_keys}
    mean = dict(zip(computed_keys, totals.mean().tolist(), strict=True))
    standard_error = dict(zip(computed_keys, totals.standard_error().tolist(), strict=True))
    counted = dict(zip(computed_keys, map(int, totals.weight.tolist()), strict=True))
    for name, metric in GEOMETRIC_MEANS.items():
        if name in keys:
            values = per_query[metric]
            per_query[name] = torch.full_like(values, math.nan)  # a summary: none per query
            mean[name] = geometric_mean(values)
            standard_error[name] = math.nan
            counted[name] = int((~values.isnan()).sum())
    return Results(
        [qids[i] for i in order.tolist()], keys, per_query, mean, standard_error, counted
    )


def result_keys(wanted: Sequence[tuple[str, int | None]]) -> list[str]:
    """The keys of ``wanted``'s results (``ndcg@10``; a geometric mean by its name)."""
    return [name if name in GEOMETRIC_MEANS else result_key(METRICS[name], k) for name, k in wanted]


def _judged_only(part: Collection) -> Collection:
    """trec_eval's ``-J``: the run's unjudged documents leave the ranking (masked).

    Unjudged: absent from the qrels, or there with a negative grade (in the pool,
    not judged); trec_eval keeps the grades >= 0. Masked rather than dropped, so
    that a query whose every retrieved document is unjudged is still evaluated,
    with nothing retrieved (as trec_eval does).
    """
    return replace(part, mask=part.mask & (part.target >= 0))


@dataclass(frozen=True)
class Settings:
    """How a run file is read, joined and evaluated: the values of the command's flags.

    ``options``: the kernel's (its ``ties`` and ``relevance_threshold``, ``-l``,
    included). ``trec_eval_layout``: the output is trec_eval's own
    (``--format trec_eval``): scores are read as C floats, and trec_eval's ``-l``
    leaves its graded measures alone. ``judged_only``: trec_eval's ``-J``.
    ``unjudged_queries``, ``unretrieved_queries``: what a query in one side only
    does (:func:`~ranking_plugins.runs.joining.collections`). ``run_format``:
    the run file's format (``auto``: guessed). ``tied_ids``: the order of document
    ids ``ties="first"`` breaks ties by, ``"descending"`` (trec_eval's) or
    ``"ascending"``. ``c_float_scores``: whether scores are read as C floats; None:
    where trec_eval is reproduced (its layout, or ``ties="first"`` by descending ids).
    """

    options: Options = field(default_factory=lambda: COMMAND_DEFAULTS)
    trec_eval_layout: bool = False
    judged_only: bool = False
    unjudged_queries: str = "error"
    unretrieved_queries: str = "skip"
    run_format: str = "auto"
    tied_ids: str = "descending"
    c_float_scores: bool | None = None


def read_qrels(
    path: str,
    file_format: str,
    wanted: Sequence[tuple[str, int | None]],
    progress: TextIO | None = None,
) -> tuple[Records, SubtopicQrels | None]:
    """A qrels file read for ``wanted``, and its subtopic judgments where a diversity
    measure is asked.

    With a diversity measure the file is the diversity track's (``qid subtopic docid
    rel``): its second column is the subtopic, as ndeval reads it, and the other
    measures read each (query, document)'s largest grade
    (:meth:`~ranking_plugins.runs.diversity.SubtopicQrels.records`). Raises
    :class:`~ranking_plugins.runs.reading.FileFormatError` for a bad file.
    """
    if not any(is_diversity(name) for name, _ in wanted):
        return read_records(path, "qrels", file_format, progress), None
    if file_format not in ("auto", "trec"):
        raise FileFormatError(
            path,
            None,
            f"the diversity measures read TREC qrels with subtopics (qid subtopic docid "
            f"rel); a {file_format} qrels file has no subtopic column",
        )
    subtopics = read_subtopic_file(path)
    return subtopics.records(), subtopics


def evaluate_file(
    qrels: Records,
    run_path: str | Records,
    wanted: Sequence[tuple[str, int | None]],
    settings: Settings,
    progress: TextIO | None = None,
    subtopics: SubtopicQrels | None = None,
) -> tuple[Results, Collection]:
    """The run file ``run_path`` (or its records, already read or made in Python) read,
    joined to ``qrels`` and evaluated for ``wanted``
    (``(metric, k)`` pairs); and the join's last part, which lists the queries left
    out. ``progress``: the stream of a progress bar, for large files on a terminal.
    ``subtopics``: the judgments per subtopic that the diversity measures of ``wanted``
    read (:func:`read_qrels`), in a pass of their own (:func:`evaluate_subtopics`);
    ``qrels`` then holds each document's largest grade.

    No query in both files is no error here (the results have no query): the caller
    says so, after its notes. In trec_eval's layout with ``-l``, the measures ``-l``
    leaves alone are evaluated in a pass of their own, without it; Rndcg in another,
    where a query with no grade at the level has no relevant document (trec_eval's
    Rndcg is 0 when its num_rel, counted at ``-l``, is 0).
    """
    options = settings.options
    level = options.relevance_threshold
    unleveled_options = options.replace(relevance_threshold=None)
    diverse = [w for w in wanted if subtopics is not None and is_diversity(w[0])]
    others = [w for w in wanted if w not in diverse]
    unleveled = [w for w in others if _unleveled(settings, w[0])]
    leveled = [w for w in others if not _unleveled(settings, w[0])]
    if _empty_lists_read(settings, others):
        leveled += _EMPTY_LIST_COUNTS  # not returned: read by _empty_list_nans
    passes = [
        (leveled, options, None),
        ([w for w in unleveled if not _counts_at_level(w[0])], unleveled_options, None),
        ([w for w in unleveled if _counts_at_level(w[0])], unleveled_options, level),
        (diverse, options, None),
    ]
    results: Results | None = None
    first: Collection | None = None
    for measures, measure_options, relevant_at in (p for p in passes if p[0]):
        if measures is diverse:
            assert subtopics is not None  # diverse is empty without them
            done, collection = evaluate_subtopics(subtopics, run_path, diverse, settings, progress)
        else:
            done, collection = evaluate_pass(
                qrels, run_path, measures, settings, measure_options, progress, relevant_at
            )
        if results is None:
            results, first = done, collection
            if not results.qids:
                break
            continue
        for name in ("per_query", "mean", "standard_error", "counted"):
            getattr(results, name).update(getattr(done, name))
    assert results is not None and first is not None  # wanted is never empty
    results = replace(results, keys=result_keys(wanted))
    if results.qids and _empty_lists_read(settings, wanted):
        _empty_list_nans(results, wanted)
    return results, first


def unleveled(name: str, trec_eval_layout: bool, level: float | None) -> bool:
    """Whether ``name`` is evaluated without ``-l`` (``level``): trec_eval's layout with a
    level, where trec_eval's -l leaves its graded measures alone."""
    leveled_layout = trec_eval_layout and level is not None
    return leveled_layout and METRICS[GEOMETRIC_MEANS.get(name, name)].trec_eval_graded


def _unleveled(settings: Settings, name: str) -> bool:
    return unleveled(name, settings.trec_eval_layout, settings.options.relevance_threshold)


#: the counts (trec_eval's num_ret, and num_rel at -l) that :func:`_empty_list_nans` reads
_EMPTY_LIST_COUNTS = [("num_ret", None), ("num_rel", None)]


def _recall_levels(name: str) -> tuple[float, ...]:
    """The recall levels a measure of interpolated precision reads (none for the others)."""
    return METRICS[GEOMETRIC_MEANS.get(name, name)].recall_levels


def _counts_at_level(name: str) -> bool:
    return METRICS[GEOMETRIC_MEANS.get(name, name)].trec_eval_counts_at_level


def _empty_lists_read(settings: Settings, wanted: Sequence[tuple[str, int | None]]) -> bool:
    """Whether trec_eval's layout may print interpolated precision of an empty list: only
    -J empties a list (without it trec_eval ranks -c's stand-in document)."""
    reads = any(_recall_levels(name) for name, _ in wanted)
    return settings.trec_eval_layout and settings.judged_only and reads


def _empty_list_nans(results: Results, wanted: Sequence[tuple[str, int | None]]) -> None:
    """trec_eval's interpolated precision of a query left with no ranked document is
    0 / 0, nan, at the recall levels whose cutoff is 0 hits, and so is 11pt_avg, their
    mean (m_iprec_at_recall.c, m_11pt_avg.c: precision num_rel_ret / num_ret at the
    levels no relevant document reaches); the mean over the queries is nan too."""
    empty = results.per_query["num_ret"] == 0
    relevant = results.per_query["num_rel"].unsqueeze(1)
    for (name, _), key in zip(wanted, results.keys, strict=True):
        levels = _recall_levels(name)
        if not levels:
            continue
        at = torch.tensor(levels, dtype=torch.float64)
        nan = empty & (recall_level_cut(at, relevant) == 0).any(dim=1)
        if bool(nan.any()):
            _undefined_rows(results, key, nan)


def _undefined_rows(results: Results, key: str, rows: Tensor) -> None:
    """trec_eval's 0 / 0 in ``rows`` of ``key``: nan there, and so is its mean over the
    queries (trec_eval averages the nan)."""
    results.per_query[key] = torch.where(rows, math.nan, results.per_query[key])
    results.mean[key] = math.nan


def evaluate_pass(
    qrels: Records,
    run_path: str | Records,
    wanted: Sequence[tuple[str, int | None]],
    settings: Settings,
    options: Options,
    progress: TextIO | None = None,
    relevant_at: float | None = None,
) -> tuple[Results, Collection]:
    """A run file read, joined and evaluated in parts of whole queries, in one pass (with
    ``options``), as ``settings`` say; and its last part.

    ``relevant_at``: a query without a judged grade at or above it has no relevant
    document (trec_eval's Rndcg under ``-l``, whose gains ignore the level), and one
    with such a grade but none above 0 (``-l`` <= 0) is nan, trec_eval's 0 / 0.
    """
    first = settings.options.ties == "first"
    c_floats = settings.c_float_scores
    if c_floats is None:
        # trec_eval holds a score as a C float: read so wherever the command reproduces
        # trec_eval (its layout, its tie break); elsewhere float64's precision stays
        c_floats = (first and settings.tied_ids == "descending") or settings.trec_eval_layout
    join: dict[str, Any] = {
        "trec_eval_order": first,
        "tied_ids": settings.tied_ids,
        "float32_scores": c_floats,
        "relevance_threshold": join_threshold(wanted, settings.options.relevance_threshold),
        "unjudged": settings.unjudged_queries,
        "unretrieved": settings.unretrieved_queries,
    }
    last: list[Collection] = []

    def evaluated(run: Records | Iterable[Records]) -> Results:
        parts: Iterable[Collection] = _keep_last(collections(qrels, run, **join), last)
        undefined: list[str] = []
        if relevant_at is not None:
            parts = (_relevant_at(part, relevant_at, undefined) for part in parts)
        results = evaluate(parts, wanted, options, qrels.path, settings.judged_only)
        if undefined:
            nan_qids = set(undefined)
            rows = torch.tensor([qid in nan_qids for qid in results.qids])
            for key in results.keys:
                _undefined_rows(results, key, rows)
        return results

    if isinstance(run_path, Records):  # read already (the Python API's inputs)
        return evaluated(run_path), last[-1]
    try:
        batches = read_batches(run_path, "run", settings.run_format, progress, run_keys)
        with contextlib.closing(batches):
            results = evaluated(batches)
    except WholeRunNeeded:  # a query's lines are apart: the run is read whole
        results = evaluated(read_records(run_path, "run", settings.run_format, progress))
    return results, last[-1]


def evaluate_subtopics(
    subtopics: SubtopicQrels,
    run_path: str | Records,
    wanted: Sequence[tuple[str, int | None]],
    settings: Settings,
    progress: TextIO | None = None,
) -> tuple[Results, Collection]:
    """The diversity measures of ``wanted`` from the run (a file, read whole, or its
    records) joined to ``subtopics`` (:func:`~ranking_plugins.runs.diversity.subtopic_collections`:
    a (Q, N, S) target per part), as ``settings`` say; and a part that lists the queries
    left out. Scores keep float64's precision: the C floats of trec_eval's tie break
    belong to trec_eval's measures."""
    if isinstance(run_path, Records):
        run = run_path
    else:
        run = read_records(run_path, "run", settings.run_format, progress)
    collection = left_out(subtopics, run, settings.unjudged_queries)
    parts = subtopic_collections(
        subtopics,
        run,
        ties=settings.options.ties,
        judged_only=settings.judged_only,
        unretrieved=settings.unretrieved_queries,
        tied_ids=settings.tied_ids,
    )
    return evaluate(parts, wanted, settings.options, subtopics.path), collection


def _relevant_at(part: Collection, level: float, undefined: list[str]) -> Collection:
    """``part`` with no relevant document in the queries without a judged grade at or
    above ``level`` (their positive grades set to 0; padding and unjudged are -inf).

    The queries with such a grade but none above 0 join ``undefined``: m_Rndcg.c counts
    their relevant documents (num_rel > 0), but with no positive gain it averages no
    ndcg, 0 / 0.
    """
    reaches = (part.target >= level).any(dim=1)
    no_gain = (reaches & ~(part.target > 0).any(dim=1)).tolist()
    undefined.extend(qid for qid, flag in zip(part.qids, no_gain, strict=True) if flag)
    below = ~reaches.unsqueeze(1)
    return replace(part, target=torch.where(below, part.target.clamp(max=0), part.target))


def join_threshold(
    wanted: Sequence[tuple[str, int | None]], threshold: float | None
) -> float | None:
    """The threshold the join adds unretrieved judged documents at or above, as masked items.

    ``threshold`` itself (the unretrieved documents that count in R or the ideal
    DCG), or −∞ when a measure of judged items is asked: bpref counts every
    judged non-relevant document of the query (N), retrieved or not.
    """
    judgments = any(METRICS[GEOMETRIC_MEANS.get(name, name)].judgments for name, _ in wanted)
    return -math.inf if judgments else threshold


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's intra-op threads set to ``count`` for a while, then as they were.

    The command ranks parts of about 100k items: each of the kernel's many
    small operations would wake and join a team of threads, which costs more
    than it gives, and on a shared machine spinning threads slowed a run ten
    times (``benchmarks/RESULTS.md``).
    """
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _keep_last(parts: Iterable[Collection], last: list[Collection]) -> Iterator[Collection]:
    """``parts``, keeping the latest in ``last`` (the last part lists the left-out queries)."""
    for part in parts:
        last[:] = [part]
        yield part


__all__ = [
    "COMMAND_DEFAULTS",
    "Results",
    "Settings",
    "evaluate",
    "evaluate_file",
    "evaluate_pass",
    "evaluate_subtopics",
    "join_threshold",
    "read_qrels",
    "result_keys",
    "torch_threads",
    "unleveled",
]
