"""Qrels and run files: read into columns by pyarrow, and checked exactly.

=========  =======================================  ===================================
format     qrels line                               run line
=========  =======================================  ===================================
``trec``   ``qid iter docno grade``                 ``qid Q0 docno rank score runid``
``tsv``    ``qid docno grade``                      ``qid docno score``
``jsonl``  ``{"query_id", "doc_id", "relevance"}``  ``{"query_id", "doc_id", "score"}``
=========  =======================================  ===================================

Columns are separated by any whitespace; blank lines are ignored; a ``.gz``
file is read through gzip. The rank, ``iter``, ``Q0`` and run-id columns are
read past (trec_eval orders a run by score). TREC grades are integers
(trec_eval's); TSV and JSONL grades may be any finite number.

pyarrow parses a file into columns block by block, in a thread that reads
ahead; the checks are vectorised, never a loop over lines. When pyarrow
refuses a file or a check fails, :func:`iter_records` reads it line by line:
it raises :class:`FileFormatError` (``FILE:LINE: what was wrong``) at the
first bad line, or returns the records of a good file that a one-character
separator cannot split (runs of blanks). :mod:`ranking_plugins.runs.joining`
joins what is read to the qrels. pyarrow, numpy and tqdm are the ``cli``
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
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, replace
from typing import Any, BinaryIO, TextIO

import torch
from torch import Tensor

from ranking_plugins.choices import FILE_FORMATS

KINDS = ("qrels", "run")
FORMATS = FILE_FORMATS
#: the format of records made in Python (:mod:`ranking_plugins.runs.inputs`): no file
IN_MEMORY = "python"
#: bytes that pyarrow parses per block: the unit of reading and of progress
CHUNK_BYTES = 2 << 20
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
    #: (n,) numpy made of the document ids as they were read (:func:`read_batches`' ``keyed``:
    #: the join's keys), and their kind (only keys of one kind are joined); None: not made
    keys: Any = None
    key_kind: Any = None

    def __len__(self) -> int:
        return self.values.numel()

    def lines(self, start: int, stop: int | None = None) -> Records:
        stop = len(self) if stop is None else stop
        ids = (self.qids.slice(start, stop - start), self.docnos.slice(start, stop - start))
        keys = None if self.keys is None else self.keys[start:stop]
        return replace(self, qids=ids[0], docnos=ids[1], values=self.values[start:stop], keys=keys)


def concat(parts: list[Records]) -> Records:
    """One :class:`Records` of consecutive parts of a file."""
    if len(parts) == 1:
        return parts[0]
    import numpy as np

    qids, docnos = (
        arrow().concat_arrays([getattr(p, f) for p in parts]) for f in ("qids", "docnos")
    )
    kinds = {p.key_kind for p in parts}
    keyed = len(kinds) == 1 and all(p.keys is not None for p in parts)
    keys = np.concatenate([p.keys for p in parts]) if keyed else None
    values = torch.cat([p.values for p in parts])
    return replace(parts[0], qids=qids, docnos=docnos, values=values, keys=keys,
                   key_kind=kinds.pop() if keyed else None)  # fmt: skip


def column_tensor(
    array: Any, dtype: torch.dtype = torch.int64, null: float | None = None
) -> Tensor:
    """A pyarrow array of numbers as a tensor (:func:`numpy_column`)."""
    import numpy as np

    # numpy's copy, shared: torch.tensor of pyarrow's read-only view may take a slow path
    # (5 ms, not 20 us, for a block's 60k values)
    return torch.from_numpy(np.array(numpy_column(array, null))).to(dtype)


def numpy_column(array: Any, null: float | None = None) -> Any:
    """A pyarrow array of numbers or booleans as a numpy array (read-only where it is a view
    of pyarrow's buffer), ``null`` in place of a missing value.

    Read from the array's buffers, not by pyarrow's ``to_numpy``, whose first call imports
    pandas: 0.2-0.4 s of CPU of a command's 3.5 (so does converting any Python or numpy
    value, hence :func:`arrow_array`)."""
    import numpy as np

    pa = arrow()
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    kind, n, offset = array.type, len(array), array.offset
    buffers = array.buffers()
    if pa.types.is_boolean(kind):
        values: Any = _bits(buffers[1], offset, n)
    elif pa.types.is_integer(kind) or pa.types.is_floating(kind):
        letter = (
            "f" if pa.types.is_floating(kind) else "i" if pa.types.is_signed_integer(kind) else "u"
        )
        dtype = np.dtype(f"<{letter}{kind.bit_width // 8}")
        values = (
            np.frombuffer(buffers[1], dtype, n, offset * dtype.itemsize)
            if n
            else np.zeros(0, dtype)
        )
    else:  # another type: pyarrow's conversion, whatever it imports
        return np.asarray(array.to_numpy(zero_copy_only=False))
    if array.null_count:
        if null is None:
            raise ValueError(f"`array` has {array.null_count} missing values: pass `null`")
        values = np.where(_bits(buffers[0], offset, n), values, null)
    return values


def _bits(buffer: Any, offset: int, n: int) -> Any:
    """(n,) bool numpy of a pyarrow bitmap (a boolean array's values, or its validity)
    from bit ``offset`` on."""
    import numpy as np

    packed = np.frombuffer(buffer, np.uint8) if n else np.zeros(0, np.uint8)
    return np.unpackbits(packed, count=offset + n, bitorder="little")[offset:].view(bool)


def arrow_array(values: Any) -> Any:
    """(n,) numpy (or torch) numbers as a pyarrow array, float64 for floats, else int64 (as
    ``take`` wants positions): made from the buffer, since pyarrow's conversion of a numpy
    array imports pandas (:func:`numpy_column`)."""
    import numpy as np

    pa = arrow()
    data = np.asarray(values)
    floating = data.dtype.kind == "f"
    data = np.ascontiguousarray(data, np.float64 if floating else np.int64)
    kind = pa.float64() if floating else pa.int64()
    return pa.Array.from_buffers(kind, len(data), [None, pa.py_buffer(data)])


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
    path: str,
    kind: str,
    file_format: str = "auto",
    progress: TextIO | None = None,
    keyed: Callable[[Any], tuple[Any, Any]] | None = None,
) -> Generator[Records, None, None]:
    """The file's records in batches of consecutive lines, as pyarrow parses its blocks
    (:func:`read_records` says what is checked). ``keyed``: a function of a block's
    document ids that gives :attr:`Records.keys` and ``key_kind``, called in the reader
    thread (the join's keys: that numpy work then leaves the join's thread)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if file_format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {file_format!r}")
    file_format = guess_format(path, kind) if file_format == "auto" else file_format
    pa, done = arrow(), 0
    try:
        blocks: Iterator[tuple[Any, ...]] = _read_columnar(path, kind, file_format, progress)
        if keyed is not None:  # a generator: run by _read_ahead's thread
            blocks = ((*block, *keyed(block[1])) for block in blocks)
        for qid, docno, value, *keys in _read_ahead(blocks):
            values = column_tensor(value, torch.float64)
            if not len(values):
                continue
            if bool((torch.isnan(values) if kind == "run" else ~torch.isfinite(values)).any()):
                raise _Malformed
            yield Records(path, kind, file_format, qid, docno, values, *keys)
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
        finally:
            # the caller stopped early (a bad block, an error in the join): the source
            # (pyarrow's reader, the file) is closed here, in the thread that ran it, not
            # left suspended in the frames an exception keeps alive until the process exits
            close = getattr(items, "close", None)
            if close is not None:
                close()

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
    with contextlib.ExitStack() as stack:
        raw = stack.enter_context(open(path, "rb"))
        stream: Any = raw
        if path.endswith(".gz"):
            stream = stack.enter_context(gzip.GzipFile(fileobj=raw))
        bar = progress_bar(progress, path)
        if bar is not None:
            stack.callback(bar.close)
        # closed first when the caller stops early: its read-ahead ends before the file does
        reader = stack.enter_context(contextlib.closing(pa.csv.open_csv(stream, *options)))
        for batch in reader:
            yield batch.column(0), batch.column(1), batch.column(2)
            if bar is not None:
                bar.update(raw.tell() - bar.n)


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
    """Read the file line by line and raise :class:`FileFormatError` at its first bad line
    (records made in Python, :data:`IN_MEMORY`, have no file: their caller says what)."""
    if file_format == IN_MEMORY:
        return
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


__all__ = [
    "FORMATS",
    "KINDS",
    "FileFormatError",
    "MissingExtraError",
    "Records",
    "arrow_array",
    "column_tensor",
    "diagnose",
    "guess_format",
    "numpy_column",
    "query_name",
    "read_batches",
    "read_records",
]
