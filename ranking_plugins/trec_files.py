"""Qrels and run files: a columnar reader (pyarrow), exact error messages, and their join.

========  ======================================  ==============================
format    qrels line                              run line
========  ======================================  ==============================
``trec``  ``qid iter docno grade``                ``qid Q0 docno rank score runid``
``tsv``   ``qid docno grade``                     ``qid docno score``
``jsonl`` ``{"query_id", "doc_id", "relevance"}``  ``{"query_id", "doc_id", "score"}``
========  ======================================  ==============================

Columns are separated by any whitespace; blank lines are ignored; a ``.gz``
file is read through gzip. The rank, ``iter``, ``Q0`` and run-id columns are
read past (a run is ordered by score, as trec_eval orders it). TREC grades
are integers (trec_eval's); TSV and JSONL grades may be any finite number.

pyarrow parses a file into columns block by block, and every check and the
join are vectorised (pyarrow's hash lookups, torch's sorts). When pyarrow
refuses a file or a check fails, :func:`iter_records` reads it line by line:
it raises :class:`FileFormatError` (``FILE:LINE: what was wrong``) at the
first bad line, or returns the records of a good file that a one-character
separator cannot split (runs of blanks).

:func:`build_collection` joins a qrels and a run into the grouped layout of
:func:`ranking_plugins.rank_metrics`, adding each judged relevant document the
run does not retrieve as a masked item (it counts in R and the ideal DCG, as
in trec_eval); :func:`iter_collections` does the same in parts of whole
queries as it reads the run, in bounded memory. pyarrow, numpy and tqdm are
the ``cli`` extra, imported when a file is read, never by ``import ranking_plugins``.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO, TextIO

import torch
from torch import Tensor

KINDS = ("qrels", "run")
FORMATS = ("auto", "trec", "tsv", "jsonl")
#: bytes that pyarrow parses per block: the unit of reading and of progress
CHUNK_BYTES = 2 << 20
#: run lines joined and evaluated at a time by :func:`iter_collections` (whole queries)
PART_LINES = 1 << 17
#: a progress bar (on a terminal) for files of at least this many bytes
PROGRESS_MIN_BYTES = 32 << 20
INSTALL = 'pip install "ranking-plugins[cli]"'


class FileFormatError(Exception):
    """A problem in an input file: ``FILE:LINE: message`` (no line when it is the whole file)."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        super().__init__(path, line, message)
        self.path, self.line, self.message = path, line, message

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"


class MissingExtraError(ImportError):
    """The file readers need the ``cli`` extra (pyarrow, numpy, tqdm)."""


class WholeRunNeeded(Exception):
    """:func:`iter_collections` cannot go on part by part (a query's lines are apart, or an
    error needs the whole run): read it with :func:`read_records` and :func:`build_collection`."""


class _Malformed(Exception):
    """The columnar reader met something it does not accept; :func:`iter_records` says what."""


def arrow() -> Any:
    """The ``pyarrow`` module with its ``csv``, ``json`` and ``compute`` modules loaded."""
    try:
        import numpy  # noqa: F401  (pyarrow's arrays become tensors through numpy)
        import pyarrow
        import pyarrow.compute
        import pyarrow.csv
        import pyarrow.json
        import tqdm  # noqa: F401
    except ImportError as error:
        raise MissingExtraError(
            f"reading qrels and run files needs the 'cli' extra ({error.name} is missing): "
            f"{INSTALL}"
        ) from None
    return pyarrow


@dataclass(frozen=True)
class Layout:
    """Where the query id, document id and value sit in a whitespace-separated line."""

    columns: tuple[str, ...]
    qid: int
    docno: int
    value: int


LAYOUTS: dict[tuple[str, str], Layout] = {
    ("qrels", "trec"): Layout(("qid", "iter", "docno", "grade"), 0, 2, 3),
    ("run", "trec"): Layout(("qid", "Q0", "docno", "rank", "score", "runid"), 0, 2, 4),
    ("qrels", "tsv"): Layout(("qid", "docno", "grade"), 0, 1, 2),
    ("run", "tsv"): Layout(("qid", "docno", "score"), 0, 1, 2),
}
#: JSONL keys, the first is the documented one; the others are accepted aliases
JSON_KEYS: dict[str, tuple[str, ...]] = {
    "qid": ("query_id", "qid", "q_id"),
    "docno": ("doc_id", "docno", "docid"),
    "grade": ("relevance", "grade", "rel"),
    "score": ("score",),
}
#: a TSV file may start with a header line naming its columns (ir_measures and
#: ranx DataFrames written with ``to_csv(sep="\t")``); it is recognised by the
#: name of its third column, so a broken first data line is never taken for one
TSV_HEADER_VALUES = {"score", "relevance", "rel", "grade", "label"}


def value_name(kind: str) -> str:
    return "grade" if kind == "qrels" else "score"


# --------------------------------------------------------------------------- records


@dataclass
class Records:
    """The records of a file (or of consecutive lines of it) as columns, one entry per line.

    Ids are bytes (as read, UTF-8 for JSONL), so that a TREC qrels and a JSONL
    run name the same documents alike.
    """

    path: str
    kind: str
    format: str
    qids: Any  # (n,) pyarrow binary: each line's query id
    docnos: Any  # (n,) pyarrow binary: each line's document id
    values: Tensor  # (n,) float64 grades (qrels) or scores (run)

    def __len__(self) -> int:
        return self.values.numel()

    def lines(self, start: int, stop: int | None = None) -> Records:
        stop = len(self) if stop is None else stop
        qids, docnos = (a.slice(start, stop - start) for a in (self.qids, self.docnos))
        return replace(self, qids=qids, docnos=docnos, values=self.values[start:stop])


def concat(parts: list[Records]) -> Records:
    """One :class:`Records` of consecutive parts of one file."""
    if len(parts) == 1:
        return parts[0]
    joined = (
        arrow().concat_arrays([getattr(p, name) for p in parts]) for name in ("qids", "docnos")
    )
    return replace(parts[0], qids=next(joined), docnos=next(joined),
                   values=torch.cat([p.values for p in parts]))  # fmt: skip


def _tensor(array: Any, dtype: torch.dtype = torch.int64) -> Tensor:
    return torch.tensor(array.to_numpy(zero_copy_only=False)).to(dtype)


def _columns(path: str, kind: str, file_format: str, qid: Any, docno: Any, value: Any) -> Records:
    """Records from three pyarrow columns; ``_Malformed`` if a value is NaN (or infinite grade)."""
    pa = arrow()
    values = _tensor(value, torch.float64)
    if bool((torch.isnan(values) if kind == "run" else ~torch.isfinite(values)).any()):
        raise _Malformed
    return Records(path, kind, file_format, qid.cast(pa.binary()), docno.cast(pa.binary()), values)


def open_binary(path: str) -> BinaryIO:
    """The file's bytes, decompressed when the name ends in ``.gz``."""
    if path.endswith(".gz"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def guess_format(path: str, kind: str) -> str:
    """``trec``, ``tsv`` or ``jsonl`` from the file name, else from the first non-blank line."""
    name = path[:-3] if path.endswith(".gz") else path
    extension = os.path.splitext(name)[1].lower()
    if extension == ".tsv":
        return "tsv"
    if extension in (".jsonl", ".ndjson"):
        return "jsonl"
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        if line.lstrip().startswith(b"{"):
            return "jsonl"
        width = len(line.split())
        trec, tsv = LAYOUTS[(kind, "trec")].columns, LAYOUTS[(kind, "tsv")].columns
        if width in (len(trec), len(tsv)):
            return "trec" if width == len(trec) else "tsv"
        raise FileFormatError(
            path,
            number,
            f"cannot tell the format of this {kind} file from its first line: {width} columns, "
            f"expected {len(trec)} (TREC: {' '.join(trec)}) or 3 (TSV: {' '.join(tsv)}), or a "
            f"JSON object (got {_show(line)}); or name it with --{kind}-format",
        )
    raise FileFormatError(path, None, f"the {kind} file is empty")


def read_records(
    path: str, kind: str, file_format: str = "auto", progress: TextIO | None = None
) -> Records:
    """Read a qrels (``kind="qrels"``) or run (``kind="run"``) file whole.

    Raises :class:`FileFormatError` for a file that cannot be read or holds a
    bad line (wrong number of columns, a score that is not a number or is
    NaN, a grade that is not an integer in TREC format, invalid JSON or a
    missing key), and for an empty file. ``progress``: the stream of a
    progress bar (shown only on a terminal, for large files).
    """
    parts = list(read_parts(path, kind, file_format, progress))
    return parts[0] if len(parts) == 1 else concat(parts)


def read_parts(
    path: str, kind: str, file_format: str = "auto", progress: TextIO | None = None
) -> Iterator[Records]:
    """The file's records in parts of consecutive lines, as pyarrow reads its blocks
    (:func:`read_records` says what is checked); an empty file is an error."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if file_format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {file_format!r}")
    if file_format == "auto":
        file_format = guess_format(path, kind)
    pa, done = arrow(), 0
    try:
        for part in _read_columnar(path, kind, file_format, progress):
            done += len(part)
            if len(part):
                yield part
    except (OSError, EOFError) as error:
        raise FileFormatError(path, None, f"cannot read the file: {_os_reason(error)}") from None
    except (_Malformed, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        # raises at the first bad line; a good file is read here, after what was yielded
        exact = _exact_records(path, kind, file_format, skip=done)
        done += len(exact)
        if len(exact):
            yield exact
    if not done:
        raise FileFormatError(path, None, f"the {kind} file has no {kind} lines (it is empty)")


def _read_columnar(
    path: str, kind: str, file_format: str, progress: TextIO | None
) -> Iterator[Records]:
    pa = arrow()
    if file_format == "jsonl":
        with open_binary(path) as handle:
            yield _jsonl_columns(path, kind, pa.json.read_json(handle))
        return
    layout = LAYOUTS[(kind, file_format)]
    first = next((line for _, line in iter_lines(path) if line.strip()), b"")
    header = file_format == "tsv" and _is_tsv_header(first.split())
    names = [f"c{i}" for i in range(len(layout.columns))]
    wanted = [names[layout.qid], names[layout.docno], names[layout.value]]
    integer = kind == "qrels" and file_format == "trec"  # trec_eval's grades: 1.5 is an error
    value_type = pa.int64() if integer else pa.float64()
    types = dict(zip(wanted, [pa.binary(), pa.binary(), value_type], strict=True))
    options = {
        "read_options": pa.csv.ReadOptions(
            column_names=names, block_size=CHUNK_BYTES, skip_rows=int(header), use_threads=False
        ),
        "parse_options": pa.csv.ParseOptions(
            delimiter="\t" if b"\t" in first else " ", quote_char=False, escape_char=False
        ),
        "convert_options": pa.csv.ConvertOptions(
            column_types=types, include_columns=wanted, null_values=[], strings_can_be_null=False
        ),
    }
    with open(path, "rb") as raw:
        stream: Any = gzip.GzipFile(fileobj=raw) if path.endswith(".gz") else raw
        bar = progress_bar(progress, path)
        try:
            for batch in pa.csv.open_csv(stream, **options):
                yield _columns(path, kind, file_format, *batch.columns)
                if bar is not None:
                    bar.update(raw.tell() - bar.n)
        finally:
            if bar is not None:
                bar.close()


def _jsonl_columns(path: str, kind: str, table: Any) -> Records:
    """The id and value columns, under one accepted key each, with the types they must have."""
    pa, columns = arrow(), []
    for name in ("qid", "docno", value_name(kind)):
        present = [key for key in JSON_KEYS[name] if key in table.column_names]
        if len(present) != 1 or table.column(present[0]).null_count:
            raise _Malformed  # a missing key, or two names for one field: the exact reader decides
        column = table.column(present[0])
        allowed = (pa.types.is_integer, pa.types.is_floating) if name in ("grade", "score") else (
            pa.types.is_integer, pa.types.is_string
        )  # fmt: skip
        if not any(test(column.type) for test in allowed):
            raise _Malformed
        columns.append(column.combine_chunks())
    qid, docno, value = columns
    return _columns(path, kind, "jsonl", qid.cast(pa.string()), docno.cast(pa.string()), value)


def _is_tsv_header(row: list[bytes]) -> bool:
    return len(row) == 3 and row[2].decode("utf-8", "replace").lower() in TSV_HEADER_VALUES


def progress_bar(stream: TextIO | None, path: str) -> Any:
    """A tqdm bar over the file's bytes, on a terminal and for a large file only; else None."""
    if stream is None or not _isatty(stream) or os.path.getsize(path) < PROGRESS_MIN_BYTES:
        return None
    from tqdm import tqdm

    label = f"reading {os.path.basename(path)}"
    size = os.path.getsize(path)
    return tqdm(total=size, desc=label, unit="B", unit_scale=True, leave=False, file=stream)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _os_reason(error: Exception) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


# --------------------------------------------------------------------------- exact checks


def iter_lines(path: str) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of every line, with the numbering of an editor."""
    try:
        with open_binary(path) as handle:
            for number, raw in enumerate(handle, 1):
                if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                yield number, raw.rstrip(b"\n")
    except (OSError, EOFError) as error:
        raise FileFormatError(path, None, f"cannot read the file: {_os_reason(error)}") from None


def iter_records(
    path: str, kind: str, file_format: str
) -> Iterator[tuple[int, bytes, bytes, float]]:
    """``(line number, qid, docno, value)`` of every record, checking each line exactly.

    Raises :class:`FileFormatError` at the first bad line (a repeated document
    of a query included); the columnar reader and this one accept the same files.
    """
    seen: dict[tuple[bytes, bytes], int] = {}
    header_done = False
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        if file_format == "jsonl":
            qid, docno, value = _check_json_line(path, number, line, kind)
        else:
            tokens = line.split()
            if not header_done and file_format == "tsv" and _is_tsv_header(tokens):
                header_done = True
                continue
            header_done = True
            qid, docno, value = _check_text_line(path, number, tokens, kind, file_format)
        first = seen.setdefault((qid, docno), number)
        if first != number:
            raise FileFormatError(
                path,
                number,
                f"document {_text(docno)!r} is listed twice for query {_text(qid)!r} "
                f"(first at line {first}); trec_eval rejects such a {kind} file",
            )
        yield number, qid, docno, value


def diagnose(path: str, kind: str, file_format: str) -> None:
    """Read the file line by line and raise :class:`FileFormatError` at its first bad line."""
    for _ in iter_records(path, kind, file_format):
        pass


def _exact_records(path: str, kind: str, file_format: str, skip: int = 0) -> Records:
    """The records after the first ``skip``, read by :func:`iter_records`."""
    pa = arrow()
    records = list(iter_records(path, kind, file_format))[skip:]
    qids, docnos = ([r[i] for r in records] for i in (1, 2))
    values = torch.tensor([r[3] for r in records], dtype=torch.float64)
    return Records(path, kind, file_format, pa.array(qids, pa.binary()),
                   pa.array(docnos, pa.binary()), values)  # fmt: skip


def _check_text_line(
    path: str, number: int, tokens: list[bytes], kind: str, file_format: str
) -> tuple[bytes, bytes, float]:
    layout = LAYOUTS[(kind, file_format)]
    if len(tokens) != len(layout.columns):
        raise FileFormatError(
            path,
            number,
            f"expected {len(layout.columns)} columns ({' '.join(layout.columns)}) in a "
            f"{file_format.upper()} {kind} line, got {len(tokens)} "
            f"(got {_show(b' '.join(tokens))})",
        )
    token = tokens[layout.value]
    integer = kind == "qrels" and file_format == "trec"
    try:
        value = float(int(token)) if integer else float(token)
    except (ValueError, OverflowError):
        expected = "an integer" if integer else "a number"
        raise FileFormatError(
            path, number, f"the {value_name(kind)} is not {expected} (got {_show(token)})"
        ) from None
    _check_value(path, number, value, kind)
    return tokens[layout.qid], tokens[layout.docno], value


def _check_value(path: str, number: int, value: float, kind: str) -> None:
    if math.isnan(value):
        raise FileFormatError(path, number, f"the {value_name(kind)} is NaN")
    if kind == "qrels" and math.isinf(value):
        raise FileFormatError(path, number, f"the grade is infinite (got {value})")


def _check_json_line(path: str, number: int, line: bytes, kind: str) -> tuple[bytes, bytes, float]:
    try:
        record = json.loads(line)
    except ValueError as error:
        message = error.msg if isinstance(error, json.JSONDecodeError) else str(error)
        raise FileFormatError(
            path, number, f"invalid JSON: {message} (got {_show(line)})"
        ) from None
    try:
        if not isinstance(record, dict):
            raise ValueError(f"expected a JSON object, got {type(record).__name__}")
        qid, docno = _json_id(record, "qid"), _json_id(record, "docno")
        key, value = _json_field(record, value_name(kind))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{key!r} must be a number, got {json.dumps(value)}")
    except ValueError as error:
        raise FileFormatError(path, number, f"{error} (got {_show(line)})") from None
    _check_value(path, number, float(value), kind)
    return qid, docno, float(value)


def _json_field(record: dict[str, object], name: str) -> tuple[str, object]:
    for key in JSON_KEYS[name]:
        if key in record:
            return key, record[key]
    raise ValueError(f"missing key {' or '.join(repr(k) for k in JSON_KEYS[name])}")


def _json_id(record: dict[str, object], name: str) -> bytes:
    key, value = _json_field(record, name)
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode()
    raise ValueError(f"{key!r} must be a string or an integer, got {json.dumps(value)}")


def first_line_of_query(records: Records, qid: bytes) -> int | None:
    """The line on which ``qid`` first appears in the records' file."""
    for number, line_qid, _, _ in iter_records(records.path, records.kind, records.format):
        if line_qid == qid:
            return number
    return None


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def query_name(qid: bytes) -> str:
    """The name a query id is reported by: its text, when it is UTF-8.

    An id that is not valid UTF-8 keeps the text of its valid parts; each byte
    that does not decode is written ``\\xNN`` and each backslash doubled, as
    Python's ``repr`` writes them. Distinct ids so get distinct names
    (``errors="replace"`` would turn every such byte into U+FFFD, and two ids
    into one name, one query overwriting the other in the JSON output). The one
    exception, a UTF-8 id that spells such an escape itself, is refused by
    :func:`build_collection`.
    """
    try:
        return qid.decode("utf-8")
    except UnicodeDecodeError:
        # a backslash (0x5C) is never part of a multi-byte UTF-8 sequence
        return qid.replace(b"\\", b"\\\\").decode("utf-8", "backslashreplace")


def _show(value: bytes, limit: int = 80) -> str:
    text = _text(value.strip())
    return repr(text[: limit - 3] + "..." if len(text) > limit else text)


# --------------------------------------------------------------------------- join


@dataclass(frozen=True)
class Collection:
    """A qrels and a run joined into the grouped layout of ``rank_metrics``.

    Item ``i`` belongs to query ``qids[indexes[i]]``; items come query by query
    (``indexes`` never decreases), each query's retrieved documents in the run's
    order (trec_eval's with ``trec_eval_order``), then its judged documents the
    run did not retrieve, with ``mask`` False (they count in R and in the ideal
    DCG but are never ranked). ``target`` holds the qrels grades; a retrieved
    document the qrels do not judge, and the masked placeholder item of a
    counted query with nothing retrieved, has grade ``-inf``, which is relevant
    under no threshold. ``judged``: whether the qrels judge the item. The rows
    of ``rank_metrics(..., reduction="none")`` follow ``qids``, names sorted as
    strings (:func:`query_name`).
    """

    qids: list[str]
    preds: Tensor
    target: Tensor
    indexes: Tensor
    mask: Tensor
    judged: Tensor
    #: queries of the run without judgments, left out (``unjudged="skip"``)
    unjudged: list[str] = field(default_factory=list)
    #: judged queries the run does not retrieve for (counted or left out)
    unretrieved: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Judgments:
    """The qrels as codes, and each query's judgments."""

    qrels: Records
    names: list[bytes]  # the judged query ids; a query's code is its position here
    queries: Any  # the same, as a pyarrow array
    documents: Any  # the distinct judged document ids (pyarrow)
    qcodes: Tensor  # each judgment's query code
    dcodes: Tensor  # each judgment's document code (a position in ``documents``)
    by_query: Tensor  # the judgments' lines, query by query
    starts: Tensor  # where each query's lines start in ``by_query``
    counts: Tensor  # how many lines each query has
    words: int  # the words of 8 bytes that the longest judged document takes
    packed: Tensor | None  # the documents packed into so many words (:func:`_packed`)

    @classmethod
    def of(cls, qrels: Records) -> Judgments:
        """Encode ``qrels``; a document judged twice for one query is a :class:`FileFormatError`."""
        queries, documents = map(arrow().compute.dictionary_encode, (qrels.qids, qrels.docnos))
        qcodes, dcodes = _tensor(queries.indices), _tensor(documents.indices)
        if _adjacent_equal(torch.sort(qcodes * len(documents.dictionary) + dcodes).values):
            diagnose(qrels.path, qrels.kind, qrels.format)
            raise FileFormatError(qrels.path, None, "a query judges a document twice")
        names = queries.dictionary.to_pylist()
        counts = torch.bincount(qcodes, minlength=len(names))
        by_query = torch.argsort(qcodes, stable=True)
        starts = torch.cumsum(counts, 0) - counts
        longest = arrow().compute.max(arrow().compute.binary_length(documents.dictionary))
        words = -(-(longest.as_py() or 0) // 8)
        packed = _packed(documents.dictionary, words) if words * 8 <= PACKED_BYTES else None
        return cls(qrels, names, queries.dictionary, documents.dictionary, qcodes, dcodes,
                   by_query, starts, counts, words, packed)  # fmt: skip

    def lines_of(self, codes: list[int]) -> Tensor:
        """The qrels lines of the queries ``codes``, query by query."""
        query = torch.tensor(codes, dtype=torch.int64)
        counts = self.counts[query]
        shift = torch.repeat_interleave(
            self.starts[query] - (torch.cumsum(counts, 0) - counts), counts
        )
        return self.by_query[shift + torch.arange(int(counts.sum()))]

    def document_ids(self, docnos: Any, lines: Tensor, packed: bool) -> tuple[Tensor, Tensor]:
        """(n, words) int64 ids of ``docnos`` and of the documents of the judgments on
        ``lines``, equal for equal ids: their bytes (``packed``, when they fit,
        :func:`_packed`) or codes (one word, exact, slower: every id hashed by pyarrow)."""
        pa = arrow()
        longest = pa.compute.max(pa.compute.binary_length(docnos)).as_py() or 0
        words = max(-(-longest // 8), self.words)
        if packed and words * 8 <= PACKED_BYTES and self.packed is not None:
            ids = _packed(docnos, words)
            if ids is not None:  # zero words added to the judged ids: the same as packing wider
                judged = self.packed[self.dcodes[lines]]
                return ids, torch.nn.functional.pad(judged, (0, words - self.words))
        both = pa.compute.dictionary_encode(pa.concat_arrays([self.documents, docnos]))
        codes = _tensor(both.indices).unsqueeze(1)  # the judged documents first: their codes
        return codes[len(self.documents) :], self.dcodes[lines].unsqueeze(1)


def build_collection(
    qrels: Records,
    run: Records,
    *,
    trec_eval_order: bool = False,
    relevance_threshold: float | None = None,
    unjudged: str = "error",
    unretrieved: str = "skip",
) -> Collection:
    """Join ``qrels`` and ``run`` into flat ``(preds, target, indexes, mask)``.

    Args:
        trec_eval_order: order each query's items by score, then document id
            DESCENDING, so that ``ties="first"`` breaks ties as trec_eval does.
        relevance_threshold: unretrieved judged documents with a grade at or
            above it (or above 0) are added as masked items.
        unjudged: a run query without judgments is an ``"error"``
            (:class:`FileFormatError` at its first line) or is ``"skip"``-ped.
        unretrieved: a judged query the run has no line for is ``"skip"``-ped
            (trec_eval's default) or ``"count"``-ed as a query with nothing
            retrieved (trec_eval ``-c``).
    """
    options = (trec_eval_order, relevance_threshold, unjudged, unretrieved)
    return next(_joined(qrels, iter([run]), *options, whole=True))


def iter_collections(
    qrels: Records,
    run_path: str,
    run_format: str = "auto",
    progress: TextIO | None = None,
    *,
    trec_eval_order: bool = False,
    relevance_threshold: float | None = None,
    unjudged: str = "error",
    unretrieved: str = "skip",
) -> Iterator[Collection]:
    """:func:`build_collection` in parts of whole queries (about :data:`PART_LINES` run
    lines each), joined as the run is read, so that memory does not grow with the run.

    The last part holds the counted unretrieved queries and the lists of
    left-out ones. Raises :class:`WholeRunNeeded` when a query's lines are
    apart, or a query is not judged under ``unjudged="error"`` (its message
    counts them all): the caller then reads the run whole.
    """
    options = (trec_eval_order, relevance_threshold, unjudged, unretrieved)
    yield from _joined(
        qrels, _whole_queries(read_parts(run_path, "run", run_format, progress)), *options
    )


def _whole_queries(parts: Iterator[Records]) -> Iterator[Records]:
    """``parts`` regrouped into parts of at least :data:`PART_LINES` lines that end with a query."""
    pc, held, size = arrow().compute, [], 0
    for part in parts:
        held.append(part)
        size += len(part)
        if size >= PART_LINES:
            other = pc.not_equal(part.qids, part.qids[-1]).to_numpy(zero_copy_only=False)
            cut = int(other.nonzero()[0][-1]) + 1 if other.any() else 0
            if cut:  # the part's last query may go on in the next part
                yield concat([*held[:-1], part.lines(0, cut)])
                held, size = [part.lines(cut)], len(part) - cut
    if held:
        yield concat(held)


def _joined(
    qrels: Records,
    parts: Iterator[Records],
    trec_eval_order: bool,
    relevance_threshold: float | None,
    unjudged: str,
    unretrieved: str,
    whole: bool = False,
) -> Iterator[Collection]:
    pc, judgments = arrow().compute, Judgments.of(qrels)
    done: dict[bytes, None] = {}
    unjudged_qids: list[bytes] = []
    held: tuple[Records, Tensor, Tensor] | None = None  # the last part takes the counted queries
    for part in parts:
        encoded = pc.dictionary_encode(part.qids)
        qids, codes = encoded.dictionary.to_pylist(), _tensor(encoded.indices)
        blocks = 1 + int((codes[1:] != codes[:-1]).sum())
        if not whole and (blocks != len(qids) or any(q in done for q in qids)):
            raise WholeRunNeeded
        done.update(dict.fromkeys(qids))
        judged = _tensor(pc.fill_null(pc.index_in(encoded.dictionary, judgments.queries), -1))
        missing = [q for q, j in zip(qids, judged.tolist(), strict=True) if j < 0]
        if missing and unjudged == "error":
            if not whole:
                raise WholeRunNeeded
            raise FileFormatError(
                part.path,
                first_line_of_query(part, missing[0]),
                f"query {query_name(missing[0])!r} is in the run but not in the qrels "
                f"({len(missing)} such {'query' if len(missing) == 1 else 'queries'}"
                f"{_listing(missing)}); pass --unjudged-queries skip to leave them out",
            )
        unjudged_qids.extend(missing)
        if held is not None:
            yield _join(judgments, *held, [], trec_eval_order, relevance_threshold)
        held = (part, codes, judged[codes])
    assert held is not None  # read_parts refuses an empty run
    unretrieved_codes = [code for code, q in enumerate(judgments.names) if q not in done]
    unretrieved_qids = [judgments.names[code] for code in unretrieved_codes]
    extra = unretrieved_codes if unretrieved == "count" else []
    names = set(judgments.names)
    _distinct_names([q for q in done if q in names] + unretrieved_qids * bool(extra), qrels)
    yield replace(
        _join(judgments, *held, extra, trec_eval_order, relevance_threshold),
        unjudged=sorted(map(query_name, unjudged_qids)),
        unretrieved=sorted(map(query_name, unretrieved_qids)),
    )


def _join(
    judgments: Judgments,
    run: Records,
    codes: Tensor,
    line_query: Tensor,
    extra: list[int],
    trec_eval_order: bool,
    relevance_threshold: float | None,
) -> Collection:
    """The judged queries of ``run`` and the ``extra`` judged queries, as one collection.

    ``codes``: each run line's query (a code of the run's own); ``line_query``:
    its code in the qrels, or -1.
    """
    grades = judgments.qrels.values
    # the rows: the evaluated queries in name order, and their judgments
    evaluated = torch.unique(line_query[line_query >= 0]).tolist() + extra
    evaluated.sort(key=lambda code: query_name(judgments.names[code]))
    row_of = torch.full((len(judgments.names) + 1,), -1, dtype=torch.int64)  # [-1]: no row
    row_of[evaluated] = torch.arange(len(evaluated))
    lines = judgments.lines_of(evaluated)
    # the run's (query, document) pairs as sorted integer keys
    run_ids, judged_ids = judgments.document_ids(run.docnos, lines, packed=True)
    pairs = torch.sort(_mix(codes, run_ids))
    size = 0  # keys mixed by _mix; else exact: query code * size + document code
    if _adjacent_equal(pairs.values):  # a repeated pair, or two pairs meeting on one key
        run_ids, judged_ids = judgments.document_ids(run.docnos, lines, packed=False)
        size = len(judgments.documents) + len(run)
        pairs = torch.sort(codes * size + run_ids[:, 0])
        if _adjacent_equal(pairs.values):
            diagnose(run.path, run.kind, run.format)
            raise FileFormatError(run.path, None, "a query lists a document twice")
    # each judgment of the part's queries looked up among the run's keys (exact: the
    # keys do not repeat, and the query and document of the key found are compared)
    part_code = torch.full((len(judgments.names) + 1,), -1, dtype=torch.int64)
    part_code[line_query] = codes
    wanted = part_code[judgments.qcodes[lines]]
    asked = (wanted >= 0).nonzero().flatten()
    query, document = wanted[asked], judged_ids[asked]
    keys = query * size + document[:, 0] if size else _mix(query, document)
    at = torch.searchsorted(pairs.values, keys).clamp(max=len(run) - 1)
    line = pairs.indices[at]
    found = (pairs.values[at] == keys) & (codes[line] == query)
    found &= (run_ids[line] == document).all(dim=1)
    hit, judged_lines = line[found], lines[asked[found]]
    # a retrieved document the qrels do not judge is never relevant, whatever the
    # threshold: grade -inf (relevant means grade > 0, or >= a finite threshold)
    run_target = torch.full((len(run),), -math.inf, dtype=torch.float64)
    run_target[hit] = grades[judged_lines]
    run_judged = torch.zeros(len(run), dtype=torch.bool)
    run_judged[hit] = True
    run_rows, scores, docnos = row_of[line_query], run.values, run.docnos
    if bool((line_query < 0).any()):  # lines of unjudged queries are left out
        kept = (line_query >= 0).nonzero().flatten()
        run_rows, scores, docnos = run_rows[kept], scores[kept], docnos.take(kept.numpy())
        run_target, run_judged = run_target[kept], run_judged[kept]
    if trec_eval_order and run_rows.numel():
        order = _trec_eval_order(scores, run_rows, docnos, len(evaluated) - len(extra))
        scores, run_rows, run_target = scores[order], run_rows[order], run_target[order]
        run_judged = run_judged[order]
    # judged documents not retrieved: masked items, when they can count in R or
    # the ideal DCG (grade > 0, or at or above the threshold)
    retrieved = torch.zeros(len(lines), dtype=torch.bool)
    retrieved[asked[found]] = True
    useful = grades[lines] > 0
    if relevance_threshold is not None:
        useful |= grades[lines] >= relevance_threshold
    missing = lines[~retrieved & useful]
    missing_rows = row_of[judgments.qcodes[missing]]
    # a counted query with nothing retrieved and nothing relevant still needs one
    # item: a masked placeholder of grade -inf, never relevant
    present = torch.zeros(len(evaluated) + 1, dtype=torch.bool)
    present[run_rows] = present[missing_rows] = True
    empty = (~present[:-1]).nonzero().flatten()
    extra_rows = torch.cat([missing_rows, empty])
    # items gathered query by query: a query's run lines, then its masked items
    run_rank, run_count = _rank_in_row(run_rows, len(evaluated))
    extra_rank, extra_count = _rank_in_row(extra_rows, len(evaluated))
    count = run_count + extra_count
    start = torch.cumsum(count, 0) - count
    at_item = torch.cat([start[run_rows] + run_rank,
                         start[extra_rows] + run_count[extra_rows] + extra_rank])  # fmt: skip

    def items(run_values: Tensor, extra_values: Tensor) -> Tensor:
        values = torch.cat([run_values, extra_values])
        return torch.empty_like(values).index_put_((at_item,), values)

    no = torch.zeros(extra_rows.numel(), dtype=torch.bool)
    return Collection(
        qids=[query_name(judgments.names[code]) for code in evaluated],
        preds=items(scores, torch.zeros(extra_rows.numel(), dtype=torch.float64)),
        target=items(
            run_target,
            torch.cat([grades[missing], torch.full((len(empty),), -math.inf, dtype=torch.float64)]),
        ),
        indexes=torch.repeat_interleave(torch.arange(len(evaluated)), count),
        mask=items(torch.ones(run_rows.numel(), dtype=torch.bool), no),
        judged=items(
            run_judged, torch.cat([torch.ones(len(missing), dtype=torch.bool), no[len(missing) :]])
        ),
    )


def _rank_in_row(rows: Tensor, num_rows: int) -> tuple[Tensor, Tensor]:
    """Each item's place among the items of its row (in input order), and each row's count."""
    count = torch.bincount(rows, minlength=num_rows)
    first = torch.ones(rows.numel(), dtype=torch.bool)
    first[1:] = rows[1:] != rows[:-1]
    starts = first.nonzero().flatten()
    if starts.numel() == int((count > 0).sum()):  # each row's items are together
        block = torch.cumsum(first, 0) - 1
        return torch.arange(rows.numel()) - starts[block], count
    order = torch.argsort(rows, stable=True)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(rows.numel()) - (torch.cumsum(count, 0) - count)[rows[order]]
    return rank, count


def _mix(codes: Tensor, ids: Tensor) -> Tensor:
    """A key per (query code, document id words): equal pairs, equal keys (distinct pairs
    may meet too: a repeated key is checked exactly, a key found is compared)."""
    import numpy as np

    factor = np.uint64(0x9E3779B97F4A7C15)
    mixed = codes.numpy().astype(np.uint64) * factor
    for word in ids.numpy().view(np.uint64).T:
        mixed = (mixed ^ word) * factor
    return torch.from_numpy(mixed.view(np.int64))


def _adjacent_equal(keys: Tensor) -> bool:
    return bool((keys[1:] == keys[:-1]).any())


#: ids of at most this many bytes are joined as integers (words of 8 bytes), longer as codes
PACKED_BYTES = 32


def _packed(ids: Any, words: int) -> Tensor | None:
    """(n, words) int64: each id's bytes, zero-padded, when that is one-to-one (no id longer
    than ``8 * words`` bytes, none holding a zero byte); else None."""
    import numpy as np

    n, buffers = len(ids), ids.buffers()
    offsets = np.frombuffer(buffers[1], np.int32, n + 1, ids.offset * 4)
    lengths = np.diff(offsets)
    if not n or buffers[2] is None or int(lengths.max()) > 8 * words:
        return None
    data = np.frombuffer(buffers[2], np.uint8)[offsets[0] : offsets[-1]]
    width = int(lengths.max())
    if not width or bool((data == 0).any()):
        return None
    if int(lengths.min()) == width:
        matrix = data.reshape(n, width)
    else:
        column = np.arange(width)
        at = np.minimum(offsets[:-1, None] - offsets[0] + column, data.size - 1)
        matrix = np.where(column < lengths[:, None], data[at], 0)
    padded = np.zeros((n, 8 * words), np.uint8)
    padded[:, :width] = matrix
    return torch.from_numpy(padded.view(np.int64))


def _distinct_names(qids: list[bytes], qrels: Records) -> None:
    """Two ids of one :func:`query_name` are a :class:`FileFormatError`.

    Only an id that is valid UTF-8 and spells a ``\\xNN`` escape can share its
    name with an id that is not UTF-8.
    """
    owner: dict[str, bytes] = {}
    for qid in qids:
        other = owner.setdefault(query_name(qid), qid)
        if other != qid:
            raise FileFormatError(
                qrels.path,
                first_line_of_query(qrels, qid),
                f"query ids {other!r} and {qid!r} (as bytes) would both be reported as "
                f"{query_name(qid)!r}; rename one of them",
            )


def _listing(qids: list[bytes], limit: int = 10) -> str:
    if len(qids) <= 1:
        return ""
    shown = ", ".join(query_name(q) for q in qids[:limit])
    return f": {shown}{', ...' if len(qids) > limit else ''}"


def _trec_eval_order(scores: Tensor, rows: Tensor, docnos: Any, num_queries: int) -> Tensor:
    """Item order by query, score descending, then document id descending (trec_eval's).

    Only the order within a query matters (the kernel keeps it). A run in rank
    order (a block per query, scores not increasing) needs only its tie groups
    sorted; any other run is sorted whole, both by pyarrow.
    """
    same_query = rows[1:] == rows[:-1]
    ranked = bool((~same_query | (scores[1:] <= scores[:-1])).all())
    if ranked and 1 + int((~same_query).sum()) == num_queries:
        tied_next = same_query & (scores[1:] == scores[:-1])
        in_tie = torch.zeros(rows.numel(), dtype=torch.bool)
        in_tie[1:] |= tied_next
        in_tie[:-1] |= tied_next
        positions = in_tie.nonzero().flatten()
    else:
        positions = torch.arange(rows.numel())
    order = torch.arange(rows.numel())
    if positions.numel():
        pa, at = arrow(), positions.numpy()
        table = pa.table({"q": rows[at].numpy(), "s": scores[at].numpy(), "d": docnos.take(at)})
        keys = [("q", "ascending"), ("s", "descending"), ("d", "descending")]
        order[positions] = positions[_tensor(pa.compute.sort_indices(table, keys), torch.int64)]
    return order


__all__ = [
    "FORMATS",
    "KINDS",
    "Collection",
    "FileFormatError",
    "MissingExtraError",
    "Records",
    "WholeRunNeeded",
    "build_collection",
    "diagnose",
    "guess_format",
    "iter_collections",
    "query_name",
    "read_records",
]
