"""Qrels and runs held in Python, as the :class:`~ranking_plugins.runs.reading.Records`
the file readers make, so that they are joined and evaluated as files are.

:func:`as_records` takes, for the qrels (``kind="qrels"``) or a run (``kind="run"``):

* a path (``str`` or ``os.PathLike``): a file in any format the command reads;
* pytrec_eval's dicts, ``{query_id: {doc_id: grade}}`` and ``{query_id: {doc_id: score}}``;
* a pandas or polars DataFrame, or a pyarrow Table, with ir_measures' columns
  (``query_id``, ``doc_id``, ``relevance`` / ``score``) or ranx's (``q_id``,
  ``doc_id``, ``score``): converted through pyarrow, column by column, never
  a Python loop per row;
* ranx's ``Qrels`` and ``Run``;
* an iterable of records with ``query_id``, ``doc_id`` and ``relevance`` /
  ``score`` attributes (ir_datasets' and ir_measures' named tuples).

Ids are strings (or UTF-8 bytes); an integer id is its decimal string (``1`` and ``"1"`` are one
query, as in a TREC file), in a DataFrame column of Python objects mixing both too; any
other id is a ValueError. A grade or score is a number
read as its float value: an int of any size (a double, as pytrec_eval reads it), a float,
a numpy scalar, a 0-d tensor or a Decimal (as ranx reads them); anything else is a
ValueError naming its (query, document) pair and its type. A repeated (query,
document) pair, a NaN score, a grade that is not finite, a missing value and an
empty side are ValueErrors that name the argument.
"""

from __future__ import annotations

import decimal
import numbers
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

from ranking_plugins.runs.reading import (
    IN_MEMORY,
    JSON_KEYS,
    Records,
    arrow,
    column_tensor,
    read_records,
)

#: the columns a DataFrame may name each field by: ir_measures' first, then ranx's and
#: the JSONL readers' other names (a ranx qrels DataFrame holds its grades in ``score``)
COLUMNS: dict[str, dict[str, tuple[str, ...]]] = {
    "qrels": {"query id": JSON_KEYS["qid"], "document id": JSON_KEYS["docno"],
              "grade": (*JSON_KEYS["grade"], "score")},
    "run": {"query id": JSON_KEYS["qid"], "document id": JSON_KEYS["docno"],
            "score": JSON_KEYS["score"]},
}  # fmt: skip
#: the attribute of an ir_datasets / ir_measures record that holds the value
RECORD_VALUE = {"qrels": "relevance", "run": "score"}
#: where an in-memory side is said to come from (no file: never read line by line)
SOURCE = {"qrels": "<qrels>", "run": "<run>"}


def as_records(value: object, kind: str, file_format: str = "auto") -> Records:
    """``value`` (see the module for the forms taken) as the records of a ``kind`` file.

    ``file_format``: a path's format (``auto``: guessed, as the command does).
    """
    if isinstance(value, (str, os.PathLike)):
        return read_records(os.fspath(value), kind, file_format)
    if isinstance(value, Records):
        return value
    if _is_ranx(value):
        value = value.to_dict()  # type: ignore[attr-defined]
    if isinstance(value, Mapping):
        return _from_mapping(value, kind)
    table = _arrow_table(value)
    if table is not None:
        return _from_table(table, kind)
    if isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray)):
        return _from_iterable(value, kind)
    raise TypeError(
        f"`{kind}` must be a path, a {{query_id: {{doc_id: value}}}} dict, a pandas or polars "
        f"DataFrame, a ranx {'Qrels' if kind == 'qrels' else 'Run'} or an iterable of records, "
        f"got {type(value).__name__}"
    )


def is_in_memory(path: str) -> bool:
    """Whether records of this ``path`` were made here, not read from a file."""
    return path in SOURCE.values()


def _is_ranx(value: object) -> bool:
    module = type(value).__module__ or ""
    return module.startswith("ranx.") and type(value).__name__ in ("Qrels", "Run")


def _arrow_table(value: object) -> Any:
    """A pyarrow Table of a pandas or polars DataFrame or a pyarrow Table; else None."""
    module = type(value).__module__ or ""
    if module.startswith("pyarrow") and hasattr(value, "column_names"):
        return value
    if module.startswith("polars") and hasattr(value, "to_arrow"):
        return _Frame(value, polars=True)
    if module.startswith("pandas") and type(value).__name__ == "DataFrame":
        return _Frame(value, polars=False)
    return None


class _Frame:
    """A pandas or polars DataFrame seen as a table: each column converted by pyarrow when
    asked (never the whole frame, whose other columns may hold what pyarrow cannot read).

    A column of Python objects (pandas' ``object``, polars' ``Object``) that mixes str
    and int ids holds their strings, as the dict of the same ids does."""

    def __init__(self, frame: Any, polars: bool) -> None:
        self.frame, self.polars = frame, polars
        self.column_names = [str(name) for name in frame.columns]

    def column(self, name: str) -> Any:
        pa = arrow()
        series = self.frame[name]
        if self.polars:
            import polars as pl

            if series.dtype != pl.Object:  # polars' Object column is pointers in pyarrow
                return series.to_arrow()
            reason = "it holds Python objects"
        else:
            try:
                # NaN stays NaN (a NaN score is said as such), None and pd.NA are missing
                return pa.array(series, from_pandas=False)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
                reason = str(error)
        texts = _id_texts(series.to_list())
        if texts is None:
            raise ValueError(f"column {name!r} cannot be read: {reason}")
        return pa.array(texts, pa.string())

    @property
    def num_rows(self) -> int:
        return len(self.frame)


def _from_table(table: Any, kind: str) -> Records:
    """The records of a table with one accepted column per field (:data:`COLUMNS`)."""
    found = list(table.column_names)
    columns = []
    for field, accepted in COLUMNS[kind].items():
        present = [name for name in accepted if name in found]
        if len(present) != 1:
            problem = "no" if not present else f"{len(present)} ({', '.join(present)})"
            raise ValueError(
                f"`{kind}`: the DataFrame has {problem} {field} column; expected one of "
                f"{', '.join(accepted)} (columns "
                + "; ".join(f"{f}: {' or '.join(a)}" for f, a in COLUMNS[kind].items())
                + f"), found {', '.join(map(repr, found)) or 'no column'}"
            )
        columns.append((present[0], table.column(present[0])))
    (qid_name, qids), (docno_name, docnos), (value_name, values) = columns
    if not table.num_rows:  # before the columns' types, which an empty frame leaves open
        raise _empty(kind)
    return _checked_records(
        kind,
        _id_array(qids, kind, qid_name),
        _id_array(docnos, kind, docno_name),
        _value_tensor(values, kind, value_name),
    )


def _id_array(column: Any, kind: str, name: str) -> Any:
    """A column of ids as pyarrow binary (UTF-8), integers as their decimal strings."""
    pa = arrow()
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.null_count:
        raise ValueError(f"`{kind}`: column {name!r} has {column.null_count} missing ids")
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    kind_of = column.type
    if not (pa.types.is_integer(kind_of) or _is_text(kind_of)):
        raise ValueError(
            f"`{kind}`: column {name!r} must hold string or integer ids, got {kind_of}"
        )
    return column.cast(pa.string()).cast(pa.binary())


def _is_text(kind_of: Any) -> bool:
    pa = arrow()
    view = getattr(pa.types, "is_string_view", lambda _: False)
    return bool(pa.types.is_string(kind_of) or pa.types.is_large_string(kind_of) or view(kind_of))


def _value_tensor(column: Any, kind: str, name: str) -> torch.Tensor:
    pa = arrow()
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.null_count:
        raise ValueError(f"`{kind}`: column {name!r} has {column.null_count} missing values")
    kind_of = column.type
    if not (pa.types.is_integer(kind_of) or pa.types.is_floating(kind_of)):
        raise ValueError(f"`{kind}`: column {name!r} must hold numbers, got {kind_of}")
    return column_tensor(column, torch.float64)


def _from_mapping(value: Mapping[Any, Any], kind: str) -> Records:
    """``{query_id: {doc_id: value}}``: one Python step per query, the ids and values of
    a query taken as lists (its documents are distinct keys already)."""
    pa = arrow()
    qids: list[Any] = []
    counts: list[int] = []
    docnos: list[Any] = []
    values: list[Any] = []
    for qid, documents in value.items():
        if not isinstance(documents, Mapping):
            raise ValueError(
                f"`{kind}` must map each query id to a {{doc_id: value}} dict; query {qid!r} "
                f"maps to {type(documents).__name__}"
            )
        qids.append(qid)
        counts.append(len(documents))
        docnos.extend(documents.keys())
        values.extend(documents.values())
    query_ids, document_ids = _ids_of(qids, kind, "query"), _ids_of(docnos, kind, "document")
    lines = torch.repeat_interleave(
        torch.arange(len(qids)), torch.tensor(counts, dtype=torch.int64)
    )
    scores = _numbers(values, kind, lambda at: (qids[int(lines[at])], docnos[at]))
    return _checked_records(kind, query_ids.take(pa.array(lines.numpy())), document_ids, scores)


def _from_iterable(value: Iterable[Any], kind: str) -> Records:
    """Records with ``query_id``, ``doc_id`` and ``relevance`` / ``score`` attributes."""
    field = RECORD_VALUE[kind]
    qids: list[Any] = []
    docnos: list[Any] = []
    values: list[Any] = []
    try:
        for record in value:
            qids.append(record.query_id)
            docnos.append(record.doc_id)
            values.append(getattr(record, field))
    except AttributeError:
        raise ValueError(
            f"`{kind}`: each record must have the attributes query_id, doc_id and {field} "
            f"(ir_datasets' and ir_measures' records), got {type(record).__name__}: "
            f"{record!r:.80}"
        ) from None
    return _checked_records(
        kind, _ids_of(qids, kind, "query"), _ids_of(docnos, kind, "document"),
        _numbers(values, kind, lambda at: (qids[at], docnos[at])),
    )  # fmt: skip


def _ids_of(ids: list[Any], kind: str, what: str) -> Any:
    """Python ids as pyarrow binary: a str, an int (its decimal string), UTF-8 bytes."""
    pa = arrow()
    array: Any = None  # mixed types: each id said in words below
    for given_type in (pa.string(), None):  # strings first: inferring a type costs 4x
        try:
            array = pa.array(ids, given_type)
            break
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            continue
    typed = array is not None and not array.null_count  # a None is said below
    if typed and (_is_text(array.type) or pa.types.is_integer(array.type)):
        return array.cast(pa.string()).cast(pa.binary())
    texts = _id_texts(ids)
    if texts is None:
        item = next(item for item in ids if _id_text(item) is None)
        raise ValueError(
            f"`{kind}`: {what} ids must be strings (or integers, read as their decimal "
            f"strings), got {type(item).__name__} {item!r}"
        )
    return pa.array(texts, pa.string()).cast(pa.binary())


def _id_texts(ids: list[Any]) -> list[str] | None:
    """Each id as its text (:func:`_id_text`); None if one is neither a str nor an int."""
    texts = [_id_text(item) for item in ids]
    return None if None in texts else texts  # type: ignore[return-value]


def _id_text(item: object) -> str | None:
    """A str itself, an int (Python's or numpy's, not a bool) its decimal string; else None."""
    import numpy as np

    if isinstance(item, str):
        return item
    if (isinstance(item, int) and not isinstance(item, bool)) or isinstance(item, np.integer):
        return str(int(item))
    return None


def _numbers(values: list[Any], kind: str, ids: Callable[[int], tuple[Any, Any]]) -> torch.Tensor:
    """The grades or scores as float64, each read as ``float(value)`` (pytrec_eval reads an
    int of any size as a double; ranx a numpy scalar, a 0-d tensor, a Decimal). ``ids``:
    the (query id, document id) of a value, which a refused value is said with."""
    pa = arrow()
    try:  # pyarrow converts the usual values (floats, ints within int64) in C
        array = pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        array = None
    if array is None or array.null_count:  # a None is said as such, not read as NaN
        return torch.tensor(
            [_number(value, kind, ids, at) for at, value in enumerate(values)],
            dtype=torch.float64,
        )
    # writable: torch warns on a read-only view
    return torch.from_numpy(array.to_numpy(zero_copy_only=False).copy())


def _number(value: Any, kind: str, ids: Callable[[int], tuple[Any, Any]], at: int) -> float:
    """One grade or score as a float: a real number (numbers.Real: int, float, bool, numpy's
    scalars), a Decimal, or a 0-d array or tensor; anything else, a string among them, is
    a ValueError naming the pair and the value's type."""
    what = "grade" if kind == "qrels" else "score"
    scalar = getattr(value, "ndim", None) == 0 and hasattr(value, "__float__")
    if isinstance(value, (numbers.Real, decimal.Decimal)) or scalar:
        try:
            return float(value)
        except OverflowError:
            problem = "is too large for a float"
        except (TypeError, ValueError):
            problem = "cannot be read as a float"
    else:
        problem = "is not a number"
    qid, docno = ids(at)
    raise ValueError(
        f"`{kind}`: the {what} of (query {qid!r}, document {docno!r}) {problem}: got "
        f"{type(value).__name__} {value!r:.60}; the {what}s must be numbers (int, float, "
        f"a numpy scalar, a 0-d tensor, Decimal)"
    )


def _checked_records(kind: str, qids: Any, docnos: Any, values: torch.Tensor) -> Records:
    """The checked records of an in-memory side."""
    if not len(values):
        raise _empty(kind)
    if kind == "run":
        bad = torch.isnan(values)
        problem = "NaN scores"
    else:
        bad = ~torch.isfinite(values)
        problem = "grades that are not finite (NaN or infinite)"
    if bool(bad.any()):
        at = bad.nonzero().flatten()
        first = _pair(qids, docnos, int(at[0]))
        raise ValueError(f"`{kind}` has {len(at)} {problem}, the first {first}")
    return Records(SOURCE[kind], kind, IN_MEMORY, qids, docnos, values)


class EmptySideError(ValueError):
    """An in-memory qrels or run without a (query, document) pair (a caller to which an
    empty side is an answer, as ir_measures' drop-in, catches it)."""


def _empty(kind: str) -> ValueError:
    return EmptySideError(f"`{kind}` is empty: it has no (query, document) pair")


def check_repeats(records: Records) -> None:
    """A (query, document) pair given twice is a ValueError naming it (trec_eval refuses
    such files; a dict or DataFrame has no rule that says which value counts).

    The join finds a repeated pair at no cost (each query's documents are sorted
    there): this names it, once the join has said there is one.
    """
    kind, qids, docnos = records.kind, records.qids, records.docnos
    pc = arrow().compute
    queries, documents = pc.dictionary_encode(qids), pc.dictionary_encode(docnos)
    keys = column_tensor(queries.indices) * len(documents.dictionary) + column_tensor(
        documents.indices
    )
    ordered, order = torch.sort(keys, stable=True)
    repeated = (ordered[1:] == ordered[:-1]).nonzero().flatten()
    if len(repeated):
        at = int(order[int(repeated[0]) + 1])
        raise ValueError(
            f"`{kind}` gives {len(repeated)} (query, document) "
            f"{'pair' if len(repeated) == 1 else 'pairs'} more than once, the first "
            f"{_pair(qids, docnos, at)}; each pair must appear once"
        )


def _pair(qids: Any, docnos: Any, at: int) -> str:
    return f"(query {qids[at].as_py().decode()!r}, document {docnos[at].as_py().decode()!r})"


__all__ = ["COLUMNS", "EmptySideError", "as_records", "check_repeats", "is_in_memory"]
