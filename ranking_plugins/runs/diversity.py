"""Subtopic qrels and a run, joined for the diversity measures (:doc:`diversity`).

The TREC Web track's diversity qrels (``qid subtopic docid rel``, ndeval's
input), ir_measures' ``Qrel`` records with ``iteration`` as the subtopic,
DataFrames with a subtopic column, or ``(qid, subtopic, docid, rel)`` tuples
(pyndeval's) are read by :func:`subtopic_qrels`; :func:`subtopic_collections`
joins them to a run as :class:`~ranking_plugins.runs.joining.Collection`
parts whose target is each document's grade per subtopic (Q, N, S), which
:func:`~ranking_plugins.runs.evaluation.evaluate` hands to the kernel like
any other part. No formula here.

A query's documents (retrieved or judged) are its columns in document-id
order (bytes, as ndeval's ``strcmp``), so that the kernel's greedy ideal list
gives equal gains to the larger document id, as ndeval does; its subtopics
are its own, in id order. ``ties="first"`` breaks a run's ties by document id,
descending, as everywhere in the runs API (trec_eval's; ndeval's is ascending).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from ranking_plugins.runs.inputs import _id_array, _ids_of, _numbers, _value_tensor
from ranking_plugins.runs.joining import Collection, unjudged_error
from ranking_plugins.runs.reading import FileFormatError, Records, arrow, iter_lines, query_name

#: the names a DataFrame's subtopic column is taken under (ir_measures' ``iteration``)
SUBTOPIC_COLUMNS = ("subtopic", "subtopic_id", "iteration")
_QUERY, _DOC, _GRADE = ("query_id", "qid", "q_id"), ("doc_id", "docno"), ("relevance", "score")

#: queries joined into one dense part: a part holds (queries, documents, subtopics)
#: float64 grades, so parts stay near this many elements
PART_ELEMENTS = 1 << 23


@dataclass(frozen=True)
class SubtopicQrels:
    """Judgments per (query, subtopic, document): pyarrow binary ids and float64 grades."""

    qids: Any
    subtopics: Any
    docnos: Any
    grades: torch.Tensor
    #: the file read, named in the errors of every measure's evaluation ("qrels": none)
    path: str = "qrels"
    #: :meth:`records`, made on first use: one evaluation reads them more than once (the
    #: ir_measures drop-in for its other measures, then the Python API for the join)
    _records: Records | None = field(default=None, init=False, repr=False, compare=False)

    def records(self) -> Records:
        """Each (query, document) once, with its largest grade: the qrels every other
        measure reads (a document relevant to a subtopic is relevant to the query).

        Made once per instance: every call returns the same records, whose columns
        the package reads and never writes.
        """
        made = self._records
        if made is None:
            made = self._largest_grades()
            # the one attribute set after construction, a cache of the fields' function
            object.__setattr__(self, "_records", made)
        return made

    def _largest_grades(self) -> Records:
        pa = arrow()
        table = pa.table({"q": self.qids, "d": self.docnos, "g": self.grades.numpy()})
        grouped = table.group_by(["q", "d"], use_threads=False).aggregate([("g", "max")])
        return Records(
            self.path,
            "qrels",
            "trec",
            grouped.column("q").combine_chunks(),
            grouped.column("d").combine_chunks(),
            torch.from_numpy(grouped.column("g_max").to_numpy().copy()),
        )


def subtopic_qrels(qrels: object) -> SubtopicQrels:
    """Subtopic judgments in any form taken (see the module); a form without
    subtopics is a ValueError that says what the diversity measures need."""
    if isinstance(qrels, (str, os.PathLike)):
        try:
            return read_subtopic_file(os.fspath(qrels))
        except FileFormatError as error:
            raise ValueError(str(error)) from None
    if isinstance(qrels, Mapping):
        raise ValueError(_NO_SUBTOPICS + "; got a {query_id: {doc_id: grade}} dict, which has none")
    module = type(qrels).__module__ or ""
    if module.startswith(("pandas", "polars", "pyarrow")):
        return _subtopics_of_table(qrels)
    if isinstance(qrels, Iterable) and not isinstance(qrels, (bytes, bytearray)):
        return _subtopics_of_records(qrels)
    raise TypeError(
        f"`qrels` must be a path, a DataFrame or an iterable of records, got {qrels!r:.80}"
    )


_NO_SUBTOPICS = (
    "`qrels`: the diversity measures need subtopic judgments (qid subtopic docid rel "
    "lines, ir_measures' Qrel records with iteration as the subtopic, a DataFrame with "
    f"a {' / '.join(SUBTOPIC_COLUMNS)} column, or (qid, subtopic, docid, rel) tuples)"
)


def read_subtopic_file(path: str) -> SubtopicQrels:
    """The diversity track's qrels file (``qid subtopic docid rel``, gzip too), the second
    column read as the subtopic, as ndeval reads it; a bad line or an empty file is a
    :class:`~ranking_plugins.runs.reading.FileFormatError` (``FILE:LINE: ...``)."""
    columns: list[list[bytes]] = [[], [], [], []]
    for number, line in iter_lines(path):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 4:
            problem = f"expected 4 columns (qid subtopic docid rel), got {len(fields)}"
            raise FileFormatError(path, number, problem)
        for column, value in zip(columns, fields, strict=True):
            column.append(value)
    try:
        grades = torch.tensor([float(value) for value in columns[3]], dtype=torch.float64)
    except ValueError as error:
        raise FileFormatError(path, None, f"a grade is not a number ({error})") from None
    if not columns[0]:
        raise FileFormatError(path, None, "the qrels file holds no judgment")
    pa = arrow()
    qids, subtopics, docnos = (pa.array(column, pa.binary()) for column in columns[:3])
    return SubtopicQrels(qids, subtopics, docnos, grades, path)


def _subtopics_of_table(table: Any) -> SubtopicQrels:
    pa = arrow()
    if hasattr(table, "to_arrow"):
        table = table.to_arrow()
    elif not hasattr(table, "column_names"):
        table = pa.Table.from_pandas(table, preserve_index=False)
    found = list(table.column_names)

    def one(accepted: tuple[str, ...], what: str) -> str:
        present = [name for name in accepted if name in found]
        if len(present) != 1:
            if what == "subtopic":
                raise ValueError(_NO_SUBTOPICS + f"; the DataFrame's columns are {found}")
            raise ValueError(
                f"`qrels`: the DataFrame needs one {what} column of {accepted}, got {found}"
            )
        return present[0]

    q, s, d, g = (
        one(*spec)
        for spec in (
            (_QUERY, "query"),
            (SUBTOPIC_COLUMNS, "subtopic"),
            (_DOC, "document"),
            (_GRADE, "grade"),
        )
    )
    if not table.num_rows:
        raise ValueError("`qrels` is empty")
    return SubtopicQrels(
        _id_array(table.column(q), "qrels", q),
        _id_array(table.column(s), "qrels", s),
        _id_array(table.column(d), "qrels", d),
        _value_tensor(table.column(g), "qrels", g),
    )


def _subtopics_of_records(records: Iterable[Any]) -> SubtopicQrels:
    columns: list[list[Any]] = [[], [], [], []]
    for record in records:
        if isinstance(record, tuple) and not hasattr(record, "_fields") and len(record) == 4:
            values = record
        else:
            subtopic = next(
                (getattr(record, name) for name in SUBTOPIC_COLUMNS if hasattr(record, name)), None
            )
            if subtopic is None or not hasattr(record, "doc_id"):
                raise ValueError(_NO_SUBTOPICS + f"; got {type(record).__name__}: {record!r:.80}")
            values = (record.query_id, subtopic, record.doc_id, record.relevance)
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    if not columns[0]:
        raise ValueError("`qrels` is empty")
    return SubtopicQrels(
        _ids_of(columns[0], "qrels", "query"),
        _ids_of(columns[1], "qrels", "subtopic"),
        _ids_of(columns[2], "qrels", "document"),
        _numbers(columns[3], "qrels", lambda at: (columns[0][at], columns[2][at])),
    )


def subtopic_collections(
    qrels: SubtopicQrels,
    run: Records,
    *,
    ties: str,
    judged_only: bool,
    unretrieved: str,
    tied_ids: str = "descending",
) -> Iterator[Collection]:
    """The queries of both sides (and, with ``unretrieved="count"``, the judged ones the
    run lacks, retrieving nothing) as dense parts: scores (masked where a column is a
    judged document the run lacks), target (Q, N, S) grades (0 where unjudged).
    ``tied_ids``: the order of a tie's document ids under ``ties="first"`` (trec_eval's
    descending; ndeval's ascending)."""
    import numpy as np

    pa, pc = arrow(), arrow().compute
    sep = pa.scalar(b"\x00", pa.binary())
    run_keys = pc.binary_join_element_wise(run.qids, run.docnos, sep)
    judged_keys = pc.binary_join_element_wise(qrels.qids, qrels.docnos, sep)
    judged_queries = pc.unique(qrels.qids)
    run_queries = pc.unique(run.qids)
    kept = pc.is_in(run.qids, value_set=judged_queries)
    if judged_only:
        kept = pc.and_(kept, pc.is_in(run_keys, value_set=judged_keys))
    if unretrieved == "count":
        judged_rows = pa.array(np.ones(len(qrels.qids), dtype=bool))
    else:
        judged_rows = pc.is_in(qrels.qids, value_set=run_queries)
    keys = pa.concat_arrays([run_keys.filter(kept), judged_keys.filter(judged_rows)])
    query_of = pa.concat_arrays([run.qids.filter(kept), qrels.qids.filter(judged_rows)])
    documents = pc.unique(keys)
    documents = documents.take(pc.sort_indices(documents))  # by query, then document id
    document = np.asarray(pc.index_in(keys, value_set=documents))
    queries = pc.unique(query_of)
    queries = queries.take(pc.sort_indices(queries))
    query = np.asarray(pc.index_in(query_of, value_set=queries))
    num_queries, num_documents = len(queries), len(documents)
    document_query = np.zeros(num_documents, dtype=np.int64)
    document_query[document] = query
    first = np.searchsorted(document_query, np.arange(num_queries + 1))
    column = document - first[query]
    width = np.diff(first)
    # subtopics: each query's own, in id order
    sub_keys = pc.binary_join_element_wise(qrels.qids, qrels.subtopics, sep).filter(judged_rows)
    sub_unique = pc.unique(sub_keys)
    sub_unique = sub_unique.take(pc.sort_indices(sub_unique))
    sub_index = np.asarray(pc.index_in(sub_keys, value_set=sub_unique))
    num_run = int(pc.sum(kept.cast(pa.int64())).as_py() or 0)
    judged_query = query[num_run:]
    sub_query = np.zeros(len(sub_unique), dtype=np.int64)
    sub_query[sub_index] = judged_query
    sub_first = np.searchsorted(sub_query, np.arange(num_queries + 1))
    subtopic = sub_index - sub_first[judged_query]
    breadth = np.maximum(np.diff(sub_first), 1)
    scores = run.values.numpy()[np.asarray(kept)]
    if ties == "first":  # equal scores by document id, in the order asked
        tie_break = -document[:num_run] if tied_ids == "descending" else document[:num_run]
        order = np.lexsort((tie_break, -scores, query[:num_run]))
        scores = np.empty(num_run)
        scores[order] = -np.arange(num_run, dtype=np.float64)
    grades = qrels.grades.numpy()[np.asarray(judged_rows)]
    run_by_query = np.argsort(query[:num_run], kind="stable")
    run_starts = np.searchsorted(query[:num_run][run_by_query], np.arange(num_queries + 1))
    judged_by_query = np.argsort(judged_query, kind="stable")
    judged_starts = np.searchsorted(judged_query[judged_by_query], np.arange(num_queries + 1))
    names = [query_name(q) for q in queries.to_pylist()]
    low = 0
    while low < num_queries:
        high = low + 1
        while (
            high < num_queries
            and (high + 1 - low)
            * max(width[low : high + 1].max(), 1)
            * breadth[low : high + 1].max()
            <= PART_ELEMENTS
        ):
            high += 1
        n, s = max(int(width[low:high].max()), 1), int(breadth[low:high].max())
        preds = torch.full((high - low, n), -torch.inf, dtype=torch.float64)
        mask = torch.zeros(high - low, n, dtype=torch.bool)
        target = torch.zeros(high - low, n, s, dtype=torch.float64)
        rows = run_by_query[run_starts[low] : run_starts[high]]
        r, c = torch.from_numpy(query[rows] - low), torch.from_numpy(column[rows])
        preds[r, c] = torch.from_numpy(scores[rows])
        mask[r, c] = True
        rows = judged_by_query[judged_starts[low] : judged_starts[high]]
        at = num_run + rows
        r, c = torch.from_numpy(query[at] - low), torch.from_numpy(column[at])
        t = torch.from_numpy(subtopic[rows])
        # a (document, subtopic) judged twice keeps its largest grade
        flat = (r * n + c) * s + t
        target.view(-1).scatter_reduce_(0, flat, torch.from_numpy(grades[rows]), "amax")
        yield Collection(names[low:high], preds, target, mask, mask)
        low = high


def left_out(qrels: SubtopicQrels, run: Records, unjudged: str = "skip") -> Collection:
    """No query, with the run's queries the qrels lack (``unjudged``) and the qrels'
    queries the run lacks (``unretrieved``), for the notes. ``unjudged="error"``: a run
    query the qrels lack is a :class:`~ranking_plugins.runs.reading.FileFormatError` at
    its first line, as in every other measure's join."""
    pc = arrow().compute
    judged, ran = pc.unique(qrels.qids), pc.unique(run.qids)
    unjudged_ids = ran.filter(pc.invert(pc.is_in(ran, value_set=judged))).to_pylist()
    if unjudged_ids and unjudged == "error":
        raise unjudged_error(run, unjudged_ids)
    unretrieved = judged.filter(pc.invert(pc.is_in(judged, value_set=ran)))
    empty = torch.zeros(0, 0)
    return Collection(
        [], empty, empty, empty.bool(), empty.bool(),
        sorted(query_name(q) for q in unjudged_ids),
        sorted(query_name(q) for q in unretrieved.to_pylist()),
    )  # fmt: skip


__all__ = [
    "SUBTOPIC_COLUMNS",
    "SubtopicQrels",
    "left_out",
    "read_subtopic_file",
    "subtopic_collections",
    "subtopic_qrels",
]
