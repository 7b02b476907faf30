"""Qrels and a run evaluated from Python in one call, by the command's own path.

:func:`evaluate_run` takes the qrels and a run in any form of
:mod:`ranking_plugins.runs.inputs` (files, pytrec_eval's dicts, pandas and
polars DataFrames, ranx's ``Qrels`` and ``Run``, ir_datasets' records), makes
them the records a file reader makes, and hands them to
:func:`~ranking_plugins.runs.evaluation.evaluate_file`: the same join, the same
kernel, the same defaults (:data:`~ranking_plugins.runs.evaluation.COMMAND_DEFAULTS`)
and the same notes as ``ranking-plugins evaluate``, so the numbers are the
command's to the bit. :class:`RunResults` holds them by query id.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ranking_plugins import _validation as validation
from ranking_plugins._display import html_table, import_pandas
from ranking_plugins.choices import DEFAULT_METRICS, UNJUDGED_QUERIES, UNRETRIEVED_QUERIES
from ranking_plugins.options import Options, unknown_keywords
from ranking_plugins.runs.diversity import SubtopicQrels, subtopic_qrels
from ranking_plugins.runs.evaluation import (
    COMMAND_DEFAULTS,
    Results,
    Settings,
    evaluate_file,
    result_keys,
    torch_threads,
)
from ranking_plugins.runs.inputs import as_records, check_repeats, is_in_memory
from ranking_plugins.runs.joining import Collection
from ranking_plugins.runs.names import MeasureSpec, is_diversity, parse_measures
from ranking_plugins.runs.notes import left_out_notes, listing
from ranking_plugins.runs.reading import FileFormatError, Records, arrow, query_name

#: the options of :class:`~ranking_plugins.options.Options` the command has a flag for:
#: the ones :func:`evaluate_run` takes as keywords (tests check they are the command's)
COMMAND_OPTIONS = (
    "ties",
    "relevance_threshold",
    "empty_target_action",
    "gain",
    "ap_denominator",
    "rbp_persistence",
)


@dataclass(frozen=True)
class RunResults:
    """A run's values, by measure and by query id, and what was left out.

    ``measures``: the result keys, in the order asked, each under the spelling
    it was asked by (``ndcg@10``, ``ndcg_cut_10`` and ``nDCG@10`` are three
    keys of one value; a trec_eval name that stands for several, ``P.5,10``,
    gives trec_eval's name of each, ``P_5`` and ``P_10``).
    ``qids``: the queries evaluated, sorted as strings. ``per_query``:
    ``{measure: {query_id: value}}`` (ranx's ``Run.scores`` shape; NaN where a
    query is left out of the mean, ``empty_target_action="skip"``). ``means``,
    ``standard_errors``, ``counts`` (queries in each mean): by measure.
    ``unjudged_queries``: the run's queries the qrels lack, left out
    (``unjudged_queries="skip"``); ``unretrieved_queries``: the qrels' queries
    the run lacks, left out or counted as retrieving nothing
    (``unretrieved_queries="count"``); ``notes``: both in the command's words.
    ``options``: the options the values were computed with.

    In a notebook it shows as a table of the means (``_repr_html_``);
    ``to_pandas()`` gives the per-query values.
    """

    measures: list[str]
    qids: list[str]
    per_query: dict[str, dict[str, float]]
    means: dict[str, float]
    standard_errors: dict[str, float]
    counts: dict[str, int]
    unjudged_queries: list[str]
    unretrieved_queries: list[str]
    notes: list[str]
    options: Options

    def mean(self) -> dict[str, float]:
        """``{measure: mean}``, as ranx's ``evaluate`` returns for several metrics."""
        return dict(self.means)

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{query_id: {measure: value}}``: pytrec_eval's ``evaluate`` shape."""
        return {
            qid: {measure: self.per_query[measure][qid] for measure in self.measures}
            for qid in self.qids
        }

    def to_pandas(self) -> Any:
        """A pandas DataFrame, one row per query (index ``query_id``), one column per measure.

        Needs pandas (imported here)."""
        pd = import_pandas("RunResults.to_pandas")

        columns = {measure: list(self.per_query[measure].values()) for measure in self.measures}
        return pd.DataFrame(columns, index=pd.Index(self.qids, name="query_id"))

    def __repr__(self) -> str:
        means = ", ".join(f"{m}={_short(self.means[m])}" for m in self.measures)
        return f"RunResults(queries={len(self.qids)}, {means})"

    def _repr_html_(self) -> str:
        """Jupyter's view: each measure's mean, standard error and number of queries,
        and the notes (the queries left out)."""
        rows = [
            [m, _short(self.means[m]), _short(self.standard_errors[m]), str(self.counts[m])]
            for m in self.measures
        ]
        head = ["measure", "mean", "stderr", "queries"]
        caption = f"RunResults: {len(self.qids)} queries"
        return html_table(head, rows, caption=caption, notes=self.notes)


def _short(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.4f}"


def evaluate_run(
    qrels: Any,
    run: Any,
    measures: str | Iterable[Any] = DEFAULT_METRICS,
    *,
    judged_only: bool = False,
    unjudged_queries: str = "error",
    unretrieved_queries: str = "skip",
    qrels_format: str = "auto",
    run_format: str = "auto",
    **options: Any,
) -> RunResults:
    """Evaluate ``run`` against ``qrels`` as ``ranking-plugins evaluate`` does.

    Args:
        qrels: the judgments: a path, ``{query_id: {doc_id: grade}}``, a pandas or
            polars DataFrame (``query_id``, ``doc_id``, ``relevance``; or ranx's
            ``q_id``, ``doc_id``, ``score``), a ranx ``Qrels`` or an iterable of
            ir_datasets records (:mod:`ranking_plugins.runs.inputs`).
        run: the scored documents, in the same forms (``score`` for the value).
        measures: one measure or several, as strings or ir_measures measure
            objects: the package's names (``ndcg@10``, ``precision@5,10``),
            trec_eval's (``ndcg_cut_10``, ``P.5,10``, ``all_trec``) and
            ir_measures' (``nDCG@10``, ``P(rel=2)@10``, ``RBP(p=0.5)``), each with
            its own cutoff and parameters, its result under the spelling asked
            (:func:`~ranking_plugins.runs.names.parse_measures`). Default: the
            command's.
        judged_only: trec_eval's ``-J``: unjudged documents leave the ranking.
        unjudged_queries: a query in the run but not in the qrels is an
            ``"error"`` (default) or is ``"skip"``-ped (listed in the notes).
        unretrieved_queries: a query in the qrels but not in the run is
            ``"skip"``-ped (default, trec_eval's; listed in the notes) or
            ``"count"``-ed as retrieving nothing (trec_eval ``-c``).
        qrels_format, run_format: a file's format, as the command's
            ``--qrels-format`` and ``--run-format`` (``auto``: guessed).
        **options: the command's evaluation options (:data:`COMMAND_OPTIONS`),
            defaults :data:`~ranking_plugins.runs.evaluation.COMMAND_DEFAULTS`:
            ``ties`` (``"average"``; ``"first"`` is trec_eval's tie break,
            with scores read as C floats as trec_eval does), ``gain``
            (``"linear"``), ``relevance_threshold`` (trec_eval's ``-l``),
            ``empty_target_action``, ``ap_denominator``, ``rbp_persistence`` (0.9).

    Raises:
        ValueError: a bad input (a DataFrame without the columns, NaN scores, a
            (query, document) pair given twice, an id that is neither a string
            nor an integer, an empty side, a bad line of a file, a run query
            the qrels lack under ``unjudged_queries="error"``, no query in
            both), an unknown measure or a bad option value.
        TypeError: an unknown keyword, or an input of no form taken.
    """
    unknown = [name for name in options if name not in COMMAND_OPTIONS]
    if unknown:
        accepted = [*COMMAND_OPTIONS, "judged_only", "unjudged_queries", "unretrieved_queries",
                    "qrels_format", "run_format"]  # fmt: skip
        raise TypeError(unknown_keywords("evaluate_run", unknown, accepted))
    validation.check_choice("unjudged_queries", unjudged_queries, UNJUDGED_QUERIES)
    validation.check_choice("unretrieved_queries", unretrieved_queries, UNRETRIEVED_QUERIES)
    validation.check("judged_only", validation.flag_problem(judged_only))
    settings = Settings(
        COMMAND_DEFAULTS.replace(**options),
        judged_only=judged_only,
        unjudged_queries=unjudged_queries,
        unretrieved_queries=unretrieved_queries,
    )
    specs = parse_measures(_measure_list(measures))
    if not specs:
        raise ValueError("`measures` is empty: name at least one measure")
    return evaluate_specs(qrels, run, specs, settings, qrels_format, run_format)


def evaluate_specs(
    qrels: Any,
    run: Any,
    specs: list[MeasureSpec],
    settings: Settings,
    qrels_format: str = "auto",
    run_format: str = "auto",
    *,
    no_query_ok: bool = False,
) -> RunResults:
    """:func:`evaluate_run` past its arguments: ``specs`` (read by
    :func:`~ranking_plugins.runs.names.parse_measures` or the drop-ins' readers) under
    ``settings``. ``no_query_ok``: no query in both sides gives results of no query
    (pytrec_eval's and ir_measures' answer) rather than a ValueError.
    """
    unjudged_queries = settings.unjudged_queries
    subtopics: SubtopicQrels | None = None
    try:
        if any(is_diversity(spec.metric) for spec in specs):
            # the diversity measures read each judgment's subtopic; the others the
            # largest grade of each (query, document)
            subtopics = qrels if isinstance(qrels, SubtopicQrels) else subtopic_qrels(qrels)
            qrels = subtopics.records()
        qrels_records = as_records(qrels, "qrels", qrels_format)
        run_records = as_records(run, "run", run_format)
        if unjudged_queries == "error":
            _check_judged(qrels_records, run_records)
        with torch_threads(1):  # as the command: see torch_threads
            results, collection = _evaluate_specs(
                qrels_records, run_records, specs, settings, subtopics
            )
    except FileFormatError as error:
        # a file's problem at its FILE:LINE; an in-memory side's without the stand-in path
        if not is_in_memory(error.path):
            raise ValueError(str(error)) from None
        for side in (qrels_records, run_records):  # the join found a repeated pair: name it
            check_repeats(side)
        raise ValueError(error.message) from None
    if not results.qids and not no_query_ok:
        raise ValueError("no query is both in the run and in the qrels")
    counted = settings.unretrieved_queries == "count"
    values = {key: results.per_query[key].tolist() for key in results.keys}
    return RunResults(
        measures=list(results.keys),
        qids=list(results.qids),
        per_query={key: dict(zip(results.qids, values[key], strict=True)) for key in results.keys},
        means={key: results.mean[key] for key in results.keys},
        standard_errors={key: results.standard_error[key] for key in results.keys},
        counts={key: results.counted[key] for key in results.keys},
        unjudged_queries=list(collection.unjudged),
        unretrieved_queries=list(collection.unretrieved),
        notes=left_out_notes(collection.unjudged, collection.unretrieved, counted),
        options=settings.options,
    )


def _evaluate_specs(
    qrels: Records,
    run: Records,
    specs: list[MeasureSpec],
    settings: Settings,
    subtopics: SubtopicQrels | None = None,
) -> tuple[Results, Collection]:
    """Each measure evaluated with the options its own parameters set (one pass per set
    of options, as the command's passes), its results under the key it was asked by."""
    passes: dict[tuple[tuple[tuple[str, Any], ...], bool], list[MeasureSpec]] = {}
    for spec in specs:
        passes.setdefault((spec.option_items, spec.judged_only), []).append(spec)
    per_query: dict[str, Any] = {}
    mean: dict[str, float] = {}
    standard_error: dict[str, float] = {}
    counted: dict[str, int] = {}
    first: tuple[Results, Collection] | None = None
    for (option_items, judged_only), group in passes.items():
        wanted = list(dict.fromkeys((spec.metric, spec.k) for spec in group))
        pass_settings = replace(
            settings,
            options=settings.options.replace(**dict(option_items)),
            judged_only=settings.judged_only or judged_only,
        )
        # the diversity measures read the subtopics, in a pass of their own
        done, collection = evaluate_file(qrels, run, wanted, pass_settings, subtopics=subtopics)
        first = first or (done, collection)
        assert done.qids == first[0].qids  # the same join, whatever the options
        keys = dict(zip(wanted, result_keys(wanted), strict=True))
        for spec in group:
            key = keys[(spec.metric, spec.k)]
            per_query[spec.key] = done.per_query[key]
            mean[spec.key] = done.mean[key]
            standard_error[spec.key] = done.standard_error[key]
            counted[spec.key] = done.counted[key]
    assert first is not None  # specs is never empty
    ordered = [spec.key for spec in specs]
    results = Results(first[0].qids, ordered, per_query, mean, standard_error, counted)
    return results, first[1]


def _measure_list(measures: str | Iterable[Any]) -> list[Any]:
    """One measure or several, as the list :func:`~ranking_plugins.runs.names.parse_measures`
    reads (a measure object that is not iterable is one measure)."""
    if isinstance(measures, str) or not isinstance(measures, Iterable):
        return [measures]
    return list(measures)


def _check_judged(qrels: Records, run: Records) -> None:
    """Under ``unjudged_queries="error"``: every run query is in the qrels (the command
    says so at the query's first line; an in-memory run has no line to name)."""
    pa = arrow()
    queries = pa.compute.unique(run.qids)
    judged = pa.compute.is_in(queries, value_set=pa.compute.unique(qrels.qids))
    missing = sorted(query_name(q) for q in queries.filter(pa.compute.invert(judged)).to_pylist())
    if missing:
        one = len(missing) == 1
        raise ValueError(
            f"{len(missing)} {'query' if one else 'queries'} of the run {'is' if one else 'are'} "
            f"not in the qrels: {listing(missing)}; pass unjudged_queries='skip' to leave "
            f"{'it' if one else 'them'} out"
        )


__all__ = ["COMMAND_OPTIONS", "RunResults", "evaluate_run", "evaluate_specs"]
