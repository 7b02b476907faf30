"""Qrels and run files: read into columns by pyarrow, checked exactly, and joined.

========  ======================================  ==============================
format    qrels line                              run line
========  ======================================  ==============================
``trec``  ``qid iter docno grade``                ``qid Q0 docno rank score runid``
``tsv``   ``qid docno grade``                     ``qid docno score``
``jsonl`` ``{"query_id", "doc_id", "relevance"}``  ``{"query_id", "doc_id", "score"}``
========  ======================================  ==============================

Columns are separated by any whitespace; blank lines are ignored; a ``.gz``
file is read through gzip. The rank, ``iter``, ``Q0`` and run-id columns are
read past (trec_eval orders a run by score). TREC grades are integers
(trec_eval's); TSV and JSONL grades may be any finite number.

pyarrow parses a file into columns block by block; the checks and the join
are vectorised, never a loop over lines. When pyarrow refuses a file or a
check fails, :func:`iter_records` reads it line by line: it raises
:class:`FileFormatError` (``FILE:LINE: what was wrong``) at the first bad
line, or returns the records of a good file that a one-character separator
cannot split (runs of blanks). :func:`collections` joins the run, as it is
read, to the qrels in dense parts of whole queries for
:func:`ranking_plugins.rank_metrics`. pyarrow, numpy and tqdm are the ``cli``
extra, imported when a file is read, never by ``import ranking_plugins``.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import queue
import threading
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO, TextIO

import torch
from torch import Tensor

KINDS = ("qrels", "run")
FORMATS = ("auto", "trec", "tsv", "jsonl")
#: bytes that pyarrow parses per block: the unit of reading and of progress
CHUNK_BYTES = 2 << 20
#: slots (queries x longest query) of a part given to the kernel; run lines joined at a time
PART_LINES = 1 << 17
#: a progress bar (on a terminal) for files of at least this many bytes
PROGRESS_MIN_BYTES = 32 << 20
INSTALL = 'pip install "ranking-plugins[cli]"'
#: (columns, where the query id, document id and value are) of a whitespace-separated line
LAYOUTS: dict[tuple[str, str], tuple[tuple[str, ...], int, int, int]] = {
    ("qrels", "trec"): (("qid", "iter", "docno", "grade"), 0, 2, 3),
    ("run", "trec"): (("qid", "Q0", "docno", "rank", "score", "runid"), 0, 2, 4),
    ("qrels", "tsv"): (("qid", "docno", "grade"), 0, 1, 2),
    ("run", "tsv"): (("qid", "docno", "score"), 0, 1, 2),
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
    """A query's lines are apart, or an error needs the whole run: :func:`collections`
    cannot go on as the run is read; give it the run read whole (:func:`read_records`)."""


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


def value_name(kind: str) -> str:
    return "grade" if kind == "qrels" else "score"


@dataclass(frozen=True)
class Records:
    """Consecutive lines of a file as columns (ids as bytes, UTF-8 for JSONL, so that a
    TREC qrels and a JSONL run name the same documents alike)."""

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
        ids = (self.qids.slice(start, stop - start), self.docnos.slice(start, stop - start))
        return replace(self, qids=ids[0], docnos=ids[1], values=self.values[start:stop])


def concat(parts: list[Records]) -> Records:
    """One :class:`Records` of consecutive parts of a file."""
    if len(parts) == 1:
        return parts[0]
    qids, docnos = (
        arrow().concat_arrays([getattr(p, f) for p in parts]) for f in ("qids", "docnos")
    )
    return replace(parts[0], qids=qids, docnos=docnos, values=torch.cat([p.values for p in parts]))


def _tensor(array: Any, dtype: torch.dtype = torch.int64) -> Tensor:
    import numpy as np

    # numpy's copy, shared: torch.tensor of pyarrow's read-only view may take a slow path
    # (5 ms, not 20 us, for a block's 60k values)
    return torch.from_numpy(np.array(array.to_numpy(zero_copy_only=False))).to(dtype)


def open_binary(path: str) -> BinaryIO:
    """The file's bytes, decompressed when the name ends in ``.gz``."""
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")  # type: ignore[return-value]


def guess_format(path: str, kind: str) -> str:
    """``trec``, ``tsv`` or ``jsonl`` from the file name, else from the first non-blank line."""
    extension = os.path.splitext(path[:-3] if path.endswith(".gz") else path)[1].lower()
    if extension in (".tsv", ".jsonl", ".ndjson"):
        return "tsv" if extension == ".tsv" else "jsonl"
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        if line.lstrip().startswith(b"{"):
            return "jsonl"
        width = len(line.split())
        trec, tsv = LAYOUTS[(kind, "trec")][0], LAYOUTS[(kind, "tsv")][0]
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
    return concat(list(read_batches(path, kind, file_format, progress)))


def read_batches(
    path: str, kind: str, file_format: str = "auto", progress: TextIO | None = None
) -> Generator[Records, None, None]:
    """The file's records in batches of consecutive lines, as pyarrow parses its blocks
    (:func:`read_records` says what is checked)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if file_format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {file_format!r}")
    file_format = guess_format(path, kind) if file_format == "auto" else file_format
    pa, done = arrow(), 0
    try:
        for qid, docno, value in _read_ahead(_read_columnar(path, kind, file_format, progress)):
            values = _tensor(value, torch.float64)
            if not len(values):
                continue
            if bool((torch.isnan(values) if kind == "run" else ~torch.isfinite(values)).any()):
                raise _Malformed
            yield Records(path, kind, file_format, qid, docno, values)
            done += len(values)
    except (OSError, EOFError) as error:
        raise FileFormatError(path, None, f"cannot read the file: {_os_reason(error)}") from None
    except (_Malformed, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        exact = _exact_records(path, kind, file_format)  # raises at the first bad line
        if len(exact) > done:  # a good file that pyarrow cannot split: the lines not yielded
            yield exact.lines(done)
        done = max(done, len(exact))
    if not done:
        raise FileFormatError(path, None, f"the {kind} file has no {kind} lines (it is empty)")


def _read_ahead(items: Iterator[Any], depth: int = 4) -> Iterator[Any]:
    """``items`` made in a thread while the caller works on those before: pyarrow parses
    a block without the GIL, so reading and joining share two cores."""
    ready: queue.Queue[Any] = queue.Queue(depth)
    stop, end = threading.Event(), object()

    def offer(item: Any) -> bool:
        while not stop.is_set():
            with contextlib.suppress(queue.Full):
                ready.put(item, timeout=0.1)
                return True
        return False  # the caller has stopped

    def make() -> None:
        try:
            for item in items:
                if not offer(item):
                    return
            offer(end)
        except BaseException as error:  # raised again in the caller
            offer(error)

    thread = threading.Thread(target=make, daemon=True)
    thread.start()
    try:
        while (item := ready.get()) is not end:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:  # the thread ends before the caller goes on (at most one block later)
        stop.set()
        thread.join()


def _read_columnar(
    path: str, kind: str, file_format: str, progress: TextIO | None
) -> Iterator[tuple[Any, Any, Any]]:
    """The query id, document id and value columns of each block of a file."""
    pa = arrow()
    if file_format == "jsonl":
        with open_binary(path) as handle:
            yield _jsonl_columns(kind, pa.json.read_json(handle))
        return
    columns, qid, docno, value = LAYOUTS[(kind, file_format)]
    first = next((line for _, line in iter_lines(path) if line.strip()), b"")
    names = [f"c{i}" for i in range(len(columns))]
    wanted = [names[qid], names[docno], names[value]]
    integer = kind == "qrels" and file_format == "trec"  # trec_eval's grades: 1.5 is an error
    types = [pa.binary(), pa.binary(), pa.int64() if integer else pa.float64()]
    header = file_format == "tsv" and _is_tsv_header(first.split())
    options = (
        pa.csv.ReadOptions(column_names=names, block_size=CHUNK_BYTES, skip_rows=int(header),
                           use_threads=False),
        pa.csv.ParseOptions(delimiter="\t" if b"\t" in first else " ", quote_char=False,
                            escape_char=False),
        pa.csv.ConvertOptions(column_types=dict(zip(wanted, types, strict=True)),
                              include_columns=wanted, null_values=[], strings_can_be_null=False),
    )  # fmt: skip
    with open(path, "rb") as raw:
        stream: Any = gzip.GzipFile(fileobj=raw) if path.endswith(".gz") else raw
        bar = progress_bar(progress, path)
        try:
            for batch in pa.csv.open_csv(stream, *options):
                yield batch.column(0), batch.column(1), batch.column(2)
                if bar is not None:
                    bar.update(raw.tell() - bar.n)
        finally:
            if bar is not None:
                bar.close()


def _jsonl_columns(kind: str, table: Any) -> tuple[Any, Any, Any]:
    """The id and value columns, under one accepted key each, with the types they must have."""
    pa, columns = arrow(), []
    for name in ("qid", "docno", value_name(kind)):
        present = [key for key in JSON_KEYS[name] if key in table.column_names]
        if len(present) != 1 or table.column(present[0]).null_count:
            raise _Malformed  # a missing key, or two names for one field: the exact reader decides
        column = table.column(present[0]).combine_chunks()
        number = name in ("grade", "score")
        allowed = (pa.types.is_integer, pa.types.is_floating if number else pa.types.is_string)
        if not any(test(column.type) for test in allowed):
            raise _Malformed
        columns.append(column if number else column.cast(pa.string()).cast(pa.binary()))
    return columns[0], columns[1], columns[2]


def _is_tsv_header(row: list[bytes]) -> bool:
    return len(row) == 3 and row[2].decode("utf-8", "replace").lower() in TSV_HEADER_VALUES


def progress_bar(stream: TextIO | None, path: str) -> Any:
    """A tqdm bar over the file's bytes, on a terminal and for a large file only; else None."""
    try:
        terminal = stream is not None and stream.isatty()
    except (AttributeError, ValueError):
        terminal = False
    if not terminal or os.path.getsize(path) < PROGRESS_MIN_BYTES:
        return None
    from tqdm import tqdm

    size, label = os.path.getsize(path), f"reading {os.path.basename(path)}"
    return tqdm(total=size, desc=label, unit="B", unit_scale=True, leave=False, file=stream)


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
        if math.isnan(value):
            raise FileFormatError(path, number, f"the {value_name(kind)} is NaN")
        if kind == "qrels" and math.isinf(value):
            raise FileFormatError(path, number, f"the grade is infinite (got {value})")
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


def _exact_records(path: str, kind: str, file_format: str) -> Records:
    """The file's records, read by :func:`iter_records`."""
    pa = arrow()
    records = list(iter_records(path, kind, file_format))
    qids, docnos = (pa.array([r[i] for r in records], pa.binary()) for i in (1, 2))
    values = torch.tensor([r[3] for r in records], dtype=torch.float64)
    return Records(path, kind, file_format, qids, docnos, values)


def _check_text_line(
    path: str, number: int, tokens: list[bytes], kind: str, file_format: str
) -> tuple[bytes, bytes, float]:
    columns, qid, docno, value = LAYOUTS[(kind, file_format)]
    if len(tokens) != len(columns):
        raise FileFormatError(
            path,
            number,
            f"expected {len(columns)} columns ({' '.join(columns)}) in a "
            f"{file_format.upper()} {kind} line, got {len(tokens)} "
            f"(got {_show(b' '.join(tokens))})",
        )
    integer = kind == "qrels" and file_format == "trec"
    try:
        number_value = float(int(tokens[value])) if integer else float(tokens[value])
    except (ValueError, OverflowError):
        expected = "an integer" if integer else "a number"
        raise FileFormatError(
            path, number, f"the {value_name(kind)} is not {expected} (got {_show(tokens[value])})"
        ) from None
    return tokens[qid], tokens[docno], number_value


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

    Else its valid parts as text, each byte that does not decode as ``\\xNN``
    and each backslash doubled (as ``repr`` writes them), so that distinct ids
    get distinct names; the one exception, a UTF-8 id that spells such an
    escape itself, is refused by :func:`collections`.
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
    """Whole queries of a qrels and a run, joined into the dense layout of ``rank_metrics``.

    Row ``r`` is query ``qids[r]``: its retrieved documents in the run's order
    (trec_eval's with ``trec_eval_order``), padding, then its judged documents
    the run did not retrieve (they count in R and in the ideal DCG); ``mask`` is
    True for the retrieved only. ``target``: the qrels grades; a retrieved
    document the qrels do not judge, and padding, have grade ``-inf``, relevant
    under no threshold. ``judged``: whether the qrels judge the item.
    """

    qids: list[str]
    preds: Tensor
    target: Tensor
    mask: Tensor
    judged: Tensor
    #: queries of the run without judgments, left out (``unjudged="skip"``; last part)
    unjudged: list[str] = field(default_factory=list)
    #: judged queries the run does not retrieve for (counted or left out; last part)
    unretrieved: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Judgments:
    """The qrels, with each judged query's lines."""

    qrels: Records
    names: list[bytes]  # the judged query ids; a query's code is its place here
    queries: Any  # the same, as a pyarrow array
    by_query: Tensor  # the qrels lines, query by query
    starts: Tensor  # where each query's lines start in ``by_query``
    counts: Tensor  # how many lines each query has

    @classmethod
    def of(cls, qrels: Records) -> Judgments:
        """Index ``qrels``; a document judged twice for one query is a :class:`FileFormatError`."""
        pc = arrow().compute
        queries, documents = (pc.dictionary_encode(ids) for ids in (qrels.qids, qrels.docnos))
        codes = _tensor(queries.indices)
        pairs = torch.sort(codes * len(documents.dictionary) + _tensor(documents.indices)).values
        if bool((pairs[1:] == pairs[:-1]).any()):
            diagnose(qrels.path, qrels.kind, qrels.format)
            raise FileFormatError(qrels.path, None, "a query judges a document twice")
        counts = torch.bincount(codes, minlength=len(queries.dictionary))
        by_query, starts = torch.argsort(codes, stable=True), torch.cumsum(counts, 0) - counts
        names = queries.dictionary.to_pylist()
        return cls(qrels, names, queries.dictionary, by_query, starts, counts)


def collections(
    qrels: Records,
    run: Records | Iterable[Records],
    *,
    trec_eval_order: bool = False,
    relevance_threshold: float | None = None,
    unjudged: str = "error",
    unretrieved: str = "skip",
    float32_scores: bool = False,
) -> Iterator[Collection]:
    """Join ``qrels`` and ``run`` (read whole, or the batches of :func:`read_batches`,
    joined as they come: memory then does not grow with the run) into parts of whole
    queries (:data:`PART_LINES` run lines at a time, parts of at most twice that many slots).

    The last part holds the counted unretrieved queries and lists the left-out
    ones. With batches, raises :class:`WholeRunNeeded` when a query's lines are
    apart, or a query is not judged under ``unjudged="error"`` (the message
    counts them all): the caller then reads the run whole.

    Args:
        trec_eval_order: order each query's documents by score, then document id
            DESCENDING, so that ``ties="first"`` breaks ties as trec_eval does.
        relevance_threshold: unretrieved judged documents with a grade at or
            above it (or above 0) are added as masked items.
        unjudged: a run query without judgments is an ``"error"``
            (:class:`FileFormatError` at its first line) or is ``"skip"``-ped.
        unretrieved: a judged query the run has no line for is ``"skip"``-ped
            (trec_eval's default) or ``"count"``-ed as a query with nothing
            retrieved (trec_eval ``-c``).
        float32_scores: the run's scores as trec_eval holds them
            (:func:`as_trec_eval_scores`), not float64's.
    """
    judgments, whole = Judgments.of(qrels), isinstance(run, Records)
    options = (unjudged, whole, trec_eval_order, relevance_threshold, float32_scores)
    done: dict[bytes, int] = {}  # each run query's code in the qrels (-1: none), in run order
    held: list[Records] = []
    for batch in [run] if isinstance(run, Records) else run:
        held.append(batch)
        if whole or sum(map(len, held)) < PART_LINES:
            continue
        if len(held) > 1 and _goes_on(held[-2], batch):
            continue  # no query ends here: held, not joined again (one long query stays linear)
        lines = concat(held)
        cut = _last_query_start(lines)  # the last query may go on in the next batch
        held = [lines.lines(cut)] if cut else [lines]
        if cut:
            yield from _joined(judgments, lines.lines(0, cut), done, *options)
    if held:
        yield from _joined(judgments, concat(held), done, *options)
    retrieved = set(done.values())
    left = [code for code in range(len(judgments.names)) if code not in retrieved]
    extra = left if unretrieved == "count" else []
    evaluated = [qid for qid, code in done.items() if code >= 0]
    _distinct_names(evaluated + [judgments.names[code] for code in extra], qrels)
    # the counted unretrieved queries: rows of their judged documents only (no run line)
    last = _part(judgments, qrels, 0, extra, [0] * len(extra), relevance_threshold)
    missing = [query_name(qid) for qid, code in done.items() if code < 0]
    unretrieved_qids = [query_name(judgments.names[code]) for code in left]
    yield replace(last, unjudged=sorted(missing), unretrieved=sorted(unretrieved_qids))


def _goes_on(before: Records, batch: Records) -> bool:
    """Whether ``batch`` is all lines of the query that ends ``before``."""
    return not _last_query_start(batch) and batch.qids[0] == before.qids[-1]


def _last_query_start(lines: Records) -> int:
    """The first of the lines of the last query of ``lines`` (0: they are one query's)."""
    other = arrow().compute.not_equal(lines.qids, lines.qids[-1]).to_numpy(zero_copy_only=False)
    return int(other.nonzero()[0][-1]) + 1 if other.any() else 0


def _joined(
    judgments: Judgments,
    run: Records,
    done: dict[bytes, int],
    unjudged: str,
    whole: bool,
    trec_eval_order: bool,
    relevance_threshold: float | None,
    float32_scores: bool,
) -> Iterator[Collection]:
    """The judged queries of ``run`` (whole queries), in parts; ``done`` takes its queries."""
    pc, n = arrow().compute, len(run)
    if float32_scores:
        run = replace(run, values=as_trec_eval_scores(run.values))
    # the blocks of lines of one query, and the queries in order of first line
    new = torch.ones(n, dtype=torch.bool)
    new[1:] = _tensor(pc.not_equal(run.qids.slice(1), run.qids.slice(0, n - 1)), torch.bool)
    starts = new.nonzero().flatten()
    heads = pc.dictionary_encode(run.qids.take(starts.numpy()))
    names: list[bytes] = heads.dictionary.to_pylist()
    if any(name in done for name in names):
        raise WholeRunNeeded  # a query seen in an earlier batch
    blocks, block_sizes = _tensor(heads.indices), torch.diff(starts, append=torch.tensor([n]))
    sizes = torch.zeros(len(names), dtype=torch.int64).index_add_(0, blocks, block_sizes)
    code = _tensor(pc.fill_null(pc.index_in(heads.dictionary, judgments.queries), -1))
    done.update(zip(names, code.tolist(), strict=True))
    missing = [name for name, c in zip(names, code.tolist(), strict=True) if c < 0]
    if missing and unjudged == "error":
        if not whole:
            raise WholeRunNeeded
        raise FileFormatError(
            run.path,
            first_line_of_query(run, missing[0]),
            f"query {query_name(missing[0])!r} is in the run but not in the qrels "
            f"({len(missing)} such {'query' if len(missing) == 1 else 'queries'}"
            f"{_listing(missing)}); pass --unjudged-queries skip to leave them out",
        )
    # the lines query by query, those of unjudged queries left out
    grouped, order = len(blocks) == len(names), None
    if trec_eval_order or not grouped or missing:
        line_query = torch.repeat_interleave(blocks, block_sizes)
        if trec_eval_order:
            order = _trec_eval_order(run, line_query, grouped)
        elif not grouped:
            order = torch.argsort(line_query, stable=True)
        if missing:
            kept = code[line_query if order is None else line_query[order]] >= 0
            order = kept.nonzero().flatten() if order is None else order[kept]
    if order is not None:
        run = replace(run, docnos=run.docnos.take(order.numpy()), values=run.values[order])
    # parts of consecutive queries, at most 2 * PART_LINES slots (queries x longest) each
    queries: list[int] = []
    lengths: list[int] = []
    first = widest = 0
    for query, size in zip(code.tolist(), sizes.tolist(), strict=True):
        if query < 0:
            continue
        if queries and (len(queries) + 1) * max(widest, size) > 2 * PART_LINES:
            yield _part(judgments, run, first, queries, lengths, relevance_threshold)
            first, queries, lengths, widest = first + sum(lengths), [], [], 0
        queries.append(query)
        lengths.append(size)
        widest = max(widest, size)
    if queries:
        yield _part(judgments, run, first, queries, lengths, relevance_threshold)


def _part(
    judgments: Judgments,
    run: Records,
    first: int,
    queries: list[int],
    sizes: list[int],
    relevance_threshold: float | None,
) -> Collection:
    """The dense rows of ``queries`` (codes in the qrels), whose ``sizes`` lines follow
    each other in ``run`` from line ``first``."""
    import numpy as np

    query, size = torch.tensor(queries, dtype=torch.int64), torch.tensor(sizes, dtype=torch.int64)
    rows, count, big = len(queries), judgments.counts[query], torch.iinfo(torch.int64).max
    line_row, line_place = _places(count)  # each judgment's row and place among the row's
    lines = judgments.by_query[judgments.starts[query][line_row] + line_place]
    grades, total, pc = judgments.qrels.values[lines], int(size.sum()), arrow().compute
    docnos = run.docnos.slice(first, total)
    judged_docnos = judgments.qrels.docnos.take(lines.numpy())
    # the run lines as rows (their columns, then padding): a view when all are as long
    longest = max([1, *sizes])
    at = None if bool((size == longest).all()) else _places(size)

    def dense(values: Tensor, fill: float) -> Tensor:
        if at is None:
            return values.view(rows, longest)
        padded = torch.full((rows * longest,), fill, dtype=values.dtype)
        return padded.index_put_((at[0] * longest + at[1],), values).view(rows, longest)

    # each row's documents sorted (numpy's sort is the faster): a repeated one is adjacent,
    # a judged one found by bisection; the padding sorts last (no key is the largest int64)
    real = torch.arange(longest) < size.unsqueeze(1)
    for exact in (False, True):  # a hash first, pyarrow's codes if two ids meet on one
        judged_keys, run_keys, unique = _document_keys(judged_docnos, docnos, exact)
        keys = dense(run_keys, big)
        slot = torch.from_numpy(np.argsort(keys.numpy(), axis=1))
        keys = keys.gather(1, slot)
        asked = torch.full((rows, max([1, *count.tolist()])), big)
        asked[line_row, line_place] = judged_keys
        place = torch.searchsorted(keys, asked)[line_row, line_place]
        found = place < size[line_row]
        place = place.clamp(max=longest - 1)
        found &= keys[line_row, place] == judged_keys
        hit_row = line_row[found]
        hit = (torch.cumsum(size, 0) - size)[hit_row] + slot[hit_row, place[found]]
        repeated = bool(((keys[:, 1:] == keys[:, :-1]) & real[:, 1:]).any())
        if unique and repeated:
            diagnose(run.path, run.kind, run.format)
            raise FileFormatError(run.path, None, "a query lists a document twice")
        if unique:
            break
        # a hash: each judgment found must be the same id (no two ids met on one key)
        same = pc.equal(judged_docnos.filter(found.numpy()), docnos.take(hit.numpy()))
        if not repeated and pc.all(same).as_py() is not False:
            break
    line_target = torch.full((total,), -math.inf, dtype=torch.float64)
    line_target[hit] = grades[found]
    line_judged = torch.zeros(total, dtype=torch.bool)
    line_judged[hit] = True
    matrices = [
        dense(run.values[first : first + total], 0.0),
        dense(line_target, -math.inf),
        dense(torch.ones(total, dtype=torch.bool), 0),
        dense(line_judged, 0),
    ]
    # judged documents not retrieved, in columns after the run's: masked items, when
    # they can count in R or the ideal DCG (grade > 0, or at or above the threshold)
    useful = grades > 0
    if relevance_threshold is not None:
        useful |= grades >= relevance_threshold
    added = ~found & useful
    added_count = torch.bincount(line_row[added], minlength=rows)
    width = max([0, *added_count.tolist()])
    if width:
        extra = line_row[added] * width + _places(added_count)[1]
        target = torch.full((rows * width,), -math.inf, dtype=torch.float64)
        target[extra] = grades[added]
        judged = torch.zeros(rows * width, dtype=torch.bool)
        judged[extra] = True
        more = (torch.zeros(rows, width, dtype=torch.float64), target.view(rows, width),
                torch.zeros(rows, width, dtype=torch.bool), judged.view(rows, width))  # fmt: skip
        matrices = [torch.cat(pair, dim=1) for pair in zip(matrices, more, strict=True)]
    preds, target, mask, judged = matrices
    qids = [query_name(judgments.names[q]) for q in queries]
    return Collection(qids, preds, target, mask, judged)


def _places(counts: Tensor) -> tuple[Tensor, Tensor]:
    """For items laid out row by row, ``counts`` per row: each item's row and place in it."""
    row = torch.repeat_interleave(torch.arange(len(counts)), counts)
    return row, torch.arange(len(row)) - (torch.cumsum(counts, 0) - counts)[row]


def _document_keys(judged: Any, retrieved: Any, exact: bool) -> tuple[Tensor, Tensor, bool]:
    """int64 keys of two pyarrow arrays of ids, equal for equal ids; and whether only for
    equal ids. An id's bytes when every id fits in 8, a hash of them up to 32 bytes, else
    (and when ``exact``) pyarrow's codes (it hashes the ids themselves: slower)."""
    import numpy as np

    pa, both = arrow(), (judged, retrieved)
    longest = max(pa.compute.max(pa.compute.binary_length(ids)).as_py() or 0 for ids in both)
    words = max(1, -(-longest // 8))
    packed: list[Any] = [None if exact or words > 4 else _packed(ids, words) for ids in both]
    if packed[0] is not None and packed[1] is not None:
        keys = [np.zeros(len(p), np.uint64) for p in packed]
        for key, words_of in zip(keys, packed, strict=True):
            for word in words_of.view(np.uint64).T:  # one word: the bytes themselves
                key ^= word
                if words > 1:
                    key *= np.uint64(0x9E3779B97F4A7C15)
        signed = [torch.from_numpy(key.view(np.int64)) for key in keys]
        if not any(bool((key == torch.iinfo(torch.int64).max).any()) for key in signed):
            return signed[0], signed[1], words == 1
    codes = _tensor(pa.compute.dictionary_encode(pa.concat_arrays(both)).indices)
    return codes[: len(judged)], codes[len(judged) :], True


def _packed(ids: Any, words: int) -> Any:
    """(n, words) int64 numpy: each id's bytes, zero-padded; None unless that is one-to-one
    (no id longer than ``8 * words`` bytes, none holding a zero byte)."""
    import numpy as np

    n, buffers = len(ids), ids.buffers()
    offsets = np.frombuffer(buffers[1], np.int32, n + 1, ids.offset * 4)
    lengths = np.diff(offsets)
    data = np.frombuffer(buffers[2] or b"", np.uint8)[offsets[0] : offsets[-1]]
    if n and (int(lengths.max()) > 8 * words or bool((data == 0).any())):
        return None
    width = int(lengths.max()) if n else 0
    padded = np.zeros((n, 8 * words), np.uint8)
    if n and int(lengths.min()) == width:
        padded[:, :width] = data.reshape(n, width)
    elif n:
        column = np.arange(width)
        at = np.minimum(offsets[:-1, None] - offsets[0] + column, max(data.size - 1, 0))
        padded[:, :width] = np.where(column < lengths[:, None], data[at], 0)
    return padded.view(np.int64)


def as_trec_eval_scores(scores: Tensor) -> Tensor:
    """Run scores as trec_eval holds them, a C ``float`` each (float32), back in float64.

    Two scores equal as float32 tie in trec_eval, and its tie break (the
    document id) orders them; past float32's range a score is ±inf.
    """
    return scores.to(torch.float32).to(torch.float64)


def _trec_eval_order(run: Records, line_query: Tensor, grouped: bool) -> Tensor:
    """The run's lines by query, score descending, then document id descending (trec_eval's).

    A run in rank order (a block per query, scores not increasing) needs only
    its tie groups sorted; any other run is sorted whole, both by pyarrow.
    """
    pa, scores = arrow(), run.values
    same = line_query[1:] == line_query[:-1]
    at, order = torch.arange(len(run)), torch.arange(len(run))
    if grouped and bool((~same | (scores[1:] <= scores[:-1])).all()):
        tied = same & (scores[1:] == scores[:-1])
        in_tie = torch.zeros(len(run), dtype=torch.bool)
        in_tie[1:] |= tied
        in_tie[:-1] |= tied
        at = in_tie.nonzero().flatten()
    if at.numel():
        columns = {"q": line_query[at].numpy(), "s": scores[at].numpy()}
        table = pa.table({**columns, "d": run.docnos.take(at.numpy())})
        keys = [("q", "ascending"), ("s", "descending"), ("d", "descending")]
        order[at] = at[_tensor(pa.compute.sort_indices(table, keys))]
    return order


def _distinct_names(qids: list[bytes], qrels: Records) -> None:
    """Two ids of one :func:`query_name` are a :class:`FileFormatError` (only an id that is
    valid UTF-8 and spells a ``\\xNN`` escape can share its name with one that is not)."""
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


__all__ = [
    "FORMATS",
    "KINDS",
    "Collection",
    "FileFormatError",
    "MissingExtraError",
    "Records",
    "WholeRunNeeded",
    "as_trec_eval_scores",
    "collections",
    "diagnose",
    "guess_format",
    "query_name",
    "read_batches",
    "read_records",
]
