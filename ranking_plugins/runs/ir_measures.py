"""A drop-in for ir_measures' ``calc_aggregate`` and ``iter_calc``: change the import.

>>> from ranking_plugins.runs.ir_measures import calc_aggregate, iter_calc
>>> qrels = {"q1": {"d1": 1, "d2": 0, "d3": 2}, "q2": {"d1": 1}}
>>> run = {"q1": {"d1": 0.5, "d2": 0.5, "d3": 0.1}, "q9": {"d1": 1.0}}
>>> {str(m): round(v, 4) for m, v in calc_aggregate(["AP", "P@2"], qrels, run).items()}
{'AP': 0.2917, 'P@2': 0.25}
>>> [(m.query_id, m.measure, m.value) for m in iter_calc(["P@2"], qrels, run)]
[('q1', 'P@2', 0.5), ('q2', 'P@2', 0.0)]

Ties follow the provider ir_measures' default pipeline routes each measure to
(:data:`PROVIDERS`): ``RR@k`` is MS MARCO's, ties by document id ascending, so that
``d1`` (relevant) comes first here; ``RR`` (no cutoff) is pytrec_eval's, descending.

>>> tied = {"q1": {"d1": 1.0, "d2": 1.0}}
>>> calc_aggregate(["RR@10", "RR"], {"q1": {"d1": 1}}, tied)
{'RR@10': 1.0, 'RR': 0.5}

Measures are ir_measures' objects (``nDCG@10``, ``P(rel=2)@5``; results keyed by the
objects, as ir_measures keys them) or strings in any spelling
:func:`ranking_plugins.evaluate_run` reads (keyed by the string). Qrels and run in
any form ``evaluate_run`` takes (ir_measures' dicts, DataFrames, iterables of
:class:`Qrel` / :class:`ScoredDoc`, :func:`read_trec_qrels` and :func:`read_trec_run`).
Conventions of ir_measures: the qrels' queries the run lacks (or holds as ``{}``,
or an empty run) scored 0, the run's queries the qrels lack left out, a qrels query
given as ``{}`` scored 0 where its provider counts it; counts (``NumRet``,
``NumRel``, ``NumRelRet``) summed, the others averaged. ``docs/runs.rst`` lists
what differs.
"""

from __future__ import annotations

import gzip
import io
import math
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import IO, Any, NamedTuple

from ranking_plugins.choices import TIES
from ranking_plugins.runs.evaluation import COMMAND_DEFAULTS, Settings
from ranking_plugins.runs.names import MeasureSpec, is_count, is_diversity, parse_measures


class Metric(NamedTuple):
    """One query's value of one measure: ir_measures' ``Metric`` (its own class is
    used instead when ir_measures is imported)."""

    query_id: str
    measure: Any
    value: float


class Qrel(NamedTuple):
    """One judgment, ir_measures' ``Qrel`` (the qrels may be an iterable of them)."""

    query_id: str
    doc_id: str
    relevance: int
    iteration: str = "0"


class ScoredDoc(NamedTuple):
    """One scored document of a run, ir_measures' ``ScoredDoc``."""

    query_id: str
    doc_id: str
    score: float


@dataclass(frozen=True)
class Provider:
    """How one of ir_measures' providers ranks and which queries it scores.

    ``tied_ids``: the order of the document ids of a tie (``"descending"``:
    trec_eval's; ``"ascending"``: a Python sort by ``(-score, doc_id)``).
    ``c_float_scores``: scores held as C floats (pytrec_eval's) rather than float64.
    ``empty_queries``: a qrels query given as ``{}`` is among its queries (scored 0):
    it reads the qrels dict's keys, not its judgments. ``negative_judged``: a negative
    grade is a judgment (trec_eval's is "in the pool, not judged").
    """

    name: str
    tied_ids: str
    c_float_scores: bool
    empty_queries: bool
    negative_judged: bool = False


#: the providers of the measures computed here, in the order ir_measures' default
#: pipeline tries them (each measure goes to the first that supports it)
PROVIDERS = {
    "pytrec_eval": Provider("pytrec_eval", "descending", True, True),
    "judged": Provider("judged", "ascending", False, True, negative_judged=True),
    "msmarco": Provider("msmarco", "ascending", False, False),
    "gdeval": Provider("gdeval", "descending", False, False),
    "pyndeval": Provider("pyndeval", "ascending", False, False),
}


def provider(spec: MeasureSpec) -> Provider:
    """The provider ir_measures' default pipeline routes the measure of ``spec`` to.

    pytrec_eval's RR takes no cutoff, so ``RR@k`` is MS MARCO's; ``Judged`` is its own
    provider's; ``nDCG(dcg='exp-log2')@k`` gdeval's; every other measure computed here
    pytrec_eval's.
    """
    if spec.metric == "mrr" and spec.k is not None:
        return PROVIDERS["msmarco"]
    if spec.metric == "judged":
        return PROVIDERS["judged"]
    if spec.metric == "ndcg" and spec.k is not None and spec.options.get("gain") == "exponential":
        return PROVIDERS["gdeval"]
    if is_diversity(spec.metric):
        return PROVIDERS["pyndeval"]
    return PROVIDERS["pytrec_eval"]


def iter_calc(
    measures: Iterable[Any], qrels: Any, run: Any, *, ties: str = "first"
) -> Iterator[Metric]:
    """Each scored query's value of each measure, as ir_measures' ``Metric`` records.

    ``ties``: this package's tie policy (``"first"``, the default, breaks ties by
    document id as each measure's provider does; ``"average"`` the expected value over
    the orders of each tie, ...).
    """
    table = _measure_table(measures, qrels, run, ties)
    record = _metric_class()
    for qid in table.qids:
        for key, measure in table.keys.items():
            value = table.values[key].get(qid)
            if value is not None:
                yield record(qid, measure, value)


def calc_aggregate(
    measures: Iterable[Any], qrels: Any, run: Any, *, ties: str = "first"
) -> dict[Any, float]:
    """``{measure: value over the queries}``: the mean (NaN over no query), or the sum of
    a count."""
    table = _measure_table(measures, qrels, run, ties)
    means: dict[Any, float] = {}
    for key, measure in table.keys.items():
        values = list(table.values[key].values())
        total = math.fsum(values)
        if key in table.counts:
            means[measure] = total
        else:
            means[measure] = total / len(values) if values else math.nan
    return means


@dataclass(frozen=True)
class _Table:
    """Each measure's values by query id (the queries its provider scores)."""

    qids: list[str]  # every query scored by a measure, sorted
    keys: dict[str, Any]  # result key -> the measure as asked
    values: dict[str, dict[str, float]]
    counts: set[str]


def _measure_table(measures: Iterable[Any], qrels: Any, run: Any, ties: str) -> _Table:
    from ranking_plugins import _validation as validation
    from ranking_plugins.runs.python_api import _measure_list

    validation.check_choice("ties", ties, TIES)
    keys: dict[str, Any] = {}
    specs: list[MeasureSpec] = []
    for measure in _measure_list(measures):
        for spec in parse_measures([measure]):
            if spec.key not in keys:
                keys[spec.key] = spec.key if isinstance(measure, str) else measure
                specs.append(spec)
    if not specs:
        raise ValueError("`measures` is empty: name at least one measure")
    empty_qids: list[str] = []
    if isinstance(qrels, Mapping):  # kept: as_records checks their ids
        empty_qids = [
            _qid(q) for q, docs in qrels.items() if isinstance(docs, Mapping) and not docs
        ]
    subtopics = None
    if any(is_diversity(spec.metric) for spec in specs):  # read with their subtopics
        from ranking_plugins.runs.diversity import subtopic_qrels

        subtopics = subtopic_qrels(qrels)
        qrels = subtopics.records()
    qrels_records, run_records = _records_or_none(qrels, "qrels"), _records_or_none(run, "run")
    groups: dict[str, list[MeasureSpec]] = {}
    for spec in specs:
        groups.setdefault(provider(spec).name, []).append(spec)
    # with several providers, ir_measures scores every query of the first one's qrels in
    # each measure (a default of 0 where the measure's own provider left it out)
    first = next(PROVIDERS[name] for name in PROVIDERS if name in groups)
    values: dict[str, dict[str, float]] = {}
    for name, group in groups.items():
        judgments = subtopics if name == "pyndeval" else qrels_records
        scored = _scored(judgments, run_records, group, PROVIDERS[name], ties)
        empty_counted = PROVIDERS[name].empty_queries or (len(groups) > 1 and first.empty_queries)
        for spec in group:
            values[spec.key] = scored[spec.key]
            if empty_counted:
                values[spec.key].update(dict.fromkeys(empty_qids, 0.0))
    qids = sorted({qid for row in values.values() for qid in row})
    counts = {s.key for s in specs if is_count(s.metric)}
    return _Table(qids, keys, values, counts)


def _qid(qid: Any) -> str:
    return qid.decode() if isinstance(qid, bytes) else str(qid)


def _records_or_none(value: Any, kind: str) -> Any:
    """``value`` as records (read once: an iterator is read by one provider only), or None
    where it holds no (query, document) pair: ir_measures' answer is then a 0 for every
    query of the qrels."""
    from ranking_plugins.runs.inputs import EmptySideError, as_records

    try:
        return as_records(value, kind)
    except EmptySideError:
        return None


def _scored(
    qrels: Any, run: Any, specs: list[MeasureSpec], source: Provider, ties: str
) -> dict[str, dict[str, float]]:
    """``{key: {query id: value}}`` of ``specs`` under ``source``'s conventions, for each
    query the qrels judge (0 where the run has none of its documents)."""
    from ranking_plugins.runs.python_api import evaluate_specs
    from ranking_plugins.runs.reading import arrow, query_name

    if qrels is None:
        return {spec.key: {} for spec in specs}
    if run is None:
        judged = arrow().compute.unique(qrels.qids).to_pylist()
        return {spec.key: dict.fromkeys(map(query_name, judged), 0.0) for spec in specs}
    settings = Settings(
        COMMAND_DEFAULTS.replace(ties=ties),
        # pytrec_eval's trec_eval: C-float scores, rel leaves nDCG alone
        trec_eval_layout=source.name == "pytrec_eval",
        unjudged_queries="skip",
        unretrieved_queries="count",
        tied_ids=source.tied_ids,
        c_float_scores=source.c_float_scores,
    )
    if source.negative_judged:  # a grade of 0 is judged, and not relevant, alike
        qrels = replace(qrels, values=qrels.values.clamp(min=0))
    results = evaluate_specs(qrels, run, specs, settings, no_query_ok=True)
    # a query the run lacks is 0 on every measure (its NumRel too: trec_eval's -c counts
    # its judgments, ir_measures fills in a 0)
    missing = set(results.unretrieved_queries)
    return {
        spec.key: {
            qid: 0.0 if qid in missing else float(results.per_query[spec.key][qid])
            for qid in results.qids
        }
        for spec in specs
    }


def _metric_class() -> Any:
    """ir_measures' ``Metric`` where ir_measures is imported (a user's isinstance holds),
    else this module's, of the same fields: ir_measures is never imported here."""
    loaded = sys.modules.get("ir_measures")
    return getattr(loaded, "Metric", Metric) if loaded is not None else Metric


def read_trec_qrels(file: str | os.PathLike[str] | IO[str]) -> Iterator[Qrel]:
    """The judgments of a TREC qrels file (``query_id iteration doc_id relevance``), as
    ir_measures reads them: ``file`` is a path (gzipped when it ends in ``.gz``), the
    file's text (a string holding a newline) or an open text file."""
    for at, fields in _trec_lines(file, 4, "qrels", "query_id iteration doc_id relevance"):
        query_id, iteration, doc_id, relevance = fields
        try:
            grade = int(relevance)
        except ValueError:
            raise ValueError(
                f"qrels line {at}: the relevance must be an integer, got {relevance!r}"
            ) from None
        yield Qrel(query_id, doc_id, grade, iteration)


def read_trec_run(file: str | os.PathLike[str] | IO[str]) -> Iterator[ScoredDoc]:
    """The scored documents of a TREC run file (``query_id Q0 doc_id rank score tag``),
    as ir_measures reads them (``file`` as :func:`read_trec_qrels`'s)."""
    for at, fields in _trec_lines(file, 6, "run", "query_id Q0 doc_id rank score tag"):
        query_id, _, doc_id, _, score, _ = fields
        try:
            value = float(score)
        except ValueError:
            raise ValueError(f"run line {at}: the score must be a number, got {score!r}") from None
        yield ScoredDoc(query_id, doc_id, value)


def _trec_lines(
    file: str | os.PathLike[str] | IO[str], count: int, kind: str, layout: str
) -> Iterator[tuple[int, list[str]]]:
    """The (line number, fields) of each line that is not blank, ``count`` fields each."""
    if isinstance(file, str) and "\n" in file:
        file = io.StringIO(file)
    if isinstance(file, (str, os.PathLike)):
        path = os.fspath(file)
        opener: Any = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as handle:
            yield from _trec_lines(handle, count, kind, layout)
        return
    if not hasattr(file, "read"):
        raise TypeError(
            f"`file` must be a path, the text of a {kind} file or an open text file, "
            f"got {type(file).__name__}"
        )
    for at, line in enumerate(file, start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != count:
            raise ValueError(
                f"{kind} line {at}: expected {count} fields ({layout}), got {len(fields)}: "
                f"{line.strip()!r:.80}"
            )
        yield at, fields


__all__ = [
    "PROVIDERS",
    "Metric",
    "Provider",
    "Qrel",
    "ScoredDoc",
    "calc_aggregate",
    "iter_calc",
    "provider",
    "read_trec_qrels",
    "read_trec_run",
]
