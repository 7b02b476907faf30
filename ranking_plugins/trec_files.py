"""Qrels and run files: fast readers, exact error messages, and their join.

Three formats, each for qrels (judgments) and runs (scored results):

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

Reading is two-speed. The fast path splits whole chunks at once
(``bytes.split`` per line, ``float`` mapped over a column) and only checks
that everything is well formed; the first time a check fails, the file is
read again line by line by :func:`diagnose`, which finds the first bad line
and raises :class:`FileFormatError` with ``FILE:LINE: what was wrong``. So a
good file never pays for per-line Python, and a bad one always gets the exact
line.

:func:`build_collection` joins a qrels and a run into the grouped layout of
:func:`ranking_plugins.rank_metrics` (flat scores, grades, query ids and a
``mask``), adding every judged relevant document the run does not retrieve
as a masked item so that it counts in R and in the ideal DCG, as trec_eval
counts it.

This module imports torch and the standard library only.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import gzip
import json
import math
import os
import time
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, compress, groupby, islice, repeat
from typing import BinaryIO, TextIO

import torch
from torch import Tensor

KINDS = ("qrels", "run")
FORMATS = ("auto", "trec", "tsv", "jsonl")
#: bytes read per chunk by the fast path (a few thousand lines): small enough
#: that a chunk's tokens stay in the CPU cache (4 MiB chunks read 30% slower)
CHUNK_BYTES = 256 * 1024


class FileFormatError(Exception):
    """A problem in an input file: ``FILE:LINE: message`` (no line when it is the whole file)."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        super().__init__(path, line, message)
        self.path = path
        self.line = line
        self.message = message

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class Layout:
    """Where the query id, document id and value sit in a whitespace-separated line."""

    columns: tuple[str, ...]
    qid: int
    docno: int
    value: int

    @property
    def width(self) -> int:
        return len(self.columns)


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


# --------------------------------------------------------------------------- progress


class Progress:
    """A one-line progress report on a terminal for files of over ``min_lines`` lines.

    The number of lines is estimated from the file size and the bytes per
    line read so far, so a report starts only for files that will take a
    while. Updates are at most every ``interval`` seconds, and the line is
    cleared at the end. Nothing is written unless the stream is a terminal.
    """

    def __init__(
        self, stream: TextIO | None, min_lines: int = 1_000_000, interval: float = 0.2
    ) -> None:
        self.stream = stream if stream is not None and _isatty(stream) else None
        self.min_lines = min_lines
        self.interval = interval
        self._shown = 0  # characters of the line on screen now
        self._last = 0.0

    @property
    def enabled(self) -> bool:
        return self.stream is not None

    def update(self, label: str, done_bytes: int, total_bytes: int, lines: int) -> None:
        if self.stream is None or done_bytes <= 0 or total_bytes <= 0:
            return
        if not self._shown and lines * total_bytes / done_bytes <= self.min_lines:
            return  # a small file: it will be over before a report helps
        now = time.monotonic()
        if self._shown and now - self._last < self.interval:
            return
        self._last = now
        percent = min(100.0, 100.0 * done_bytes / total_bytes)
        text = f"reading {label}: {lines:,} lines, {done_bytes / 2**20:,.0f} MiB, {percent:.0f}%"
        self._write(text)

    def finish(self) -> None:
        if self.stream is not None and self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self.stream.flush()
            self._shown = 0

    def _write(self, text: str) -> None:
        assert self.stream is not None
        padding = " " * max(0, self._shown - len(text))
        self.stream.write("\r" + text + padding)
        self.stream.flush()
        self._shown = len(text)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# --------------------------------------------------------------------------- records


@dataclass
class Records:
    """The records of one file as columns (one entry per non-blank line).

    Query ids are kept per block of consecutive lines of one query (files
    list a query's lines together, so there are about as many blocks as
    queries); :attr:`qids` spells them out per line when needed. Ids are
    bytes (as read, UTF-8 for JSONL), so that a TREC qrels and a JSONL run
    name the same documents alike.
    """

    path: str
    kind: str
    format: str
    blocks: list[bytes]  # the query id of each block
    lengths: list[int]  # the number of lines of each block
    docnos: list[bytes]
    values: Tensor  # float64 grades (qrels) or scores (run)

    def __len__(self) -> int:
        return len(self.docnos)

    @functools.cached_property
    def qids(self) -> list[bytes]:
        """The query id of every line."""
        return list(chain.from_iterable(map(repeat, self.blocks, self.lengths)))


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
    with _opened(path) as handle:
        for number, raw in enumerate(handle, 1):
            line = _strip_bom(raw, number).strip()
            if not line:
                continue
            if line.startswith(b"{"):
                return "jsonl"
            width = len(line.split())
            if width == LAYOUTS[(kind, "trec")].width:
                return "trec"
            if width == LAYOUTS[(kind, "tsv")].width:
                return "tsv"
            raise FileFormatError(
                path,
                number,
                f"cannot tell the format of this {kind} file from its first line: "
                f"{width} columns, expected {LAYOUTS[(kind, 'trec')].width} (TREC: "
                f"{' '.join(LAYOUTS[(kind, 'trec')].columns)}) or 3 (TSV: "
                f"{' '.join(LAYOUTS[(kind, 'tsv')].columns)}), or a JSON object "
                f"(got {_show(line)}); or name it with --{kind}-format",
            )
    raise FileFormatError(path, None, f"the {kind} file is empty")


def read_records(
    path: str, kind: str, file_format: str = "auto", progress: Progress | None = None
) -> Records:
    """Read a qrels (``kind="qrels"``) or run (``kind="run"``) file.

    Raises :class:`FileFormatError` for a file that cannot be read or holds a
    bad line (wrong number of columns, a score that is not a number or is
    NaN, a grade that is not an integer in TREC format, a repeated document
    of a query, invalid JSON or a missing key), and for an empty file.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if file_format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {file_format!r}")
    try:
        if file_format == "auto":
            file_format = guess_format(path, kind)
        with paused_gc():
            records = _read_fast(path, kind, file_format, progress)
    except (OSError, EOFError) as error:
        raise FileFormatError(path, None, f"cannot read the file: {_os_reason(error)}") from None
    except _Malformed:
        diagnose(path, kind, file_format)  # raises with the line
        raise FileFormatError(path, None, "the file could not be parsed") from None
    finally:
        if progress is not None:
            progress.finish()
    if not len(records):
        raise FileFormatError(path, None, f"the {kind} file has no {kind} lines (it is empty)")
    return records


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while millions of small lists come and go.

    The readers make no reference cycles; with the collector running, its
    passes over the growing heap cost several times the reading itself.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Malformed(Exception):
    """The fast path met something wrong; :func:`diagnose` says what and where."""


def _os_reason(error: Exception) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


def _opened(path: str) -> BinaryIO:
    try:
        return open_binary(path)
    except OSError as error:
        raise FileFormatError(path, None, f"cannot read the file: {_os_reason(error)}") from None


def _strip_bom(line: bytes, number: int) -> bytes:
    return line[3:] if number == 1 and line.startswith(b"\xef\xbb\xbf") else line


def _chunks(path: str, progress: Progress | None) -> Iterator[tuple[bytes, int]]:
    """The file in chunks of whole lines (each ends with a newline, but perhaps the
    last), with the line number of each chunk's first line."""
    total = os.path.getsize(path)
    label = os.path.basename(path)
    with open(path, "rb") as raw:
        handle: BinaryIO = raw
        if path.endswith(".gz"):
            handle = gzip.GzipFile(fileobj=raw)  # type: ignore[assignment]
        rest = b""
        first_line = 1
        while True:
            block = handle.read(CHUNK_BYTES)
            if not block:
                break
            if first_line == 1 and not rest and block.startswith(b"\xef\xbb\xbf"):
                block = block[3:]
            data = rest + block
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            if cut:
                chunk = data[:cut]
                yield chunk, first_line
                first_line += chunk.count(b"\n")
                if progress is not None:
                    progress.update(label, raw.tell(), total, first_line - 1)
        if rest:
            yield rest, first_line


def _lines(chunk: bytes) -> list[bytes]:
    lines = chunk.split(b"\n")
    if not lines[-1]:
        lines.pop()  # the empty piece after the last newline
    return lines


def _read_fast(path: str, kind: str, file_format: str, progress: Progress | None) -> Records:
    if file_format == "jsonl":
        return _read_jsonl_fast(path, kind, progress)
    layout = LAYOUTS[(kind, file_format)]
    width = layout.width
    blocks: list[bytes] = []
    lengths: list[int] = []
    docnos: list[bytes] = []
    values = array("d")
    # trec_eval's grades are integers: "1.5" is an error, not a 1
    parse = _integer if kind == "qrels" and file_format == "trec" else float
    for chunk, first_line in _chunks(path, progress):
        tokens = None
        if not (first_line == 1 and file_format == "tsv"):  # a header is looked for there
            tokens = _uniform_tokens(chunk, width)
        if tokens is None:
            rows = list(map(bytes.split, _lines(chunk)))
            widths = set(map(len, rows))
            if 0 in widths:
                rows = list(filter(None, rows))
                widths.discard(0)
            if not rows:
                continue
            if first_line == 1 and file_format == "tsv" and _is_tsv_header(rows[0]):
                rows = rows[1:]
                widths = set(map(len, rows))
            if widths - {width}:
                raise _Malformed
            tokens = list(chain.from_iterable(rows))
            del rows
        _add_blocks(blocks, lengths, islice(tokens, layout.qid, None, width))
        docnos.extend(islice(tokens, layout.docno, None, width))
        try:
            values.extend(map(parse, islice(tokens, layout.value, None, width)))
        except (ValueError, OverflowError):
            raise _Malformed from None
    value_tensor = _tensor(values)
    _check_values(value_tensor, kind)
    return Records(path, kind, file_format, blocks, lengths, docnos, value_tensor)


def _add_blocks(blocks: list[bytes], lengths: list[int], qids: Iterable[bytes]) -> None:
    """Append the blocks of consecutive equal ``qids``, continuing the last block."""
    for qid, block in groupby(qids):
        length = len(list(block))
        if blocks and blocks[-1] == qid:
            lengths[-1] += length
        else:
            blocks.append(qid)
            lengths.append(length)


#: every byte but the whitespace of ``bytes.split``: what ``translate`` deletes
_NOT_WHITESPACE = bytes(b for b in range(256) if b not in b" \t\n\r\x0b\x0c")


def _uniform_tokens(chunk: bytes, width: int) -> list[bytes] | None:
    """All tokens of a chunk whose every line has ``width`` columns; None when unsure.

    The common file separates columns by one space (or one tab) per gap and
    ends lines with ``\\n`` (or ``\\r\\n``). Then the chunk's whitespace alone
    (everything else deleted) is that line pattern repeated, which proves no
    line has more than ``width`` tokens; with ``width`` tokens per line in all,
    every line has exactly ``width``. One ``split`` of the whole chunk is then
    enough, and no Python runs per line. Anything else (blank lines, runs of
    blanks, mixed tabs and spaces) returns None, and the chunk is split line
    by line.
    """
    first_line = chunk[: chunk.find(b"\n")]
    separator = b"\t" if b"\t" in first_line else b" "
    whitespace = chunk.translate(None, _NOT_WHITESPACE)
    full_lines = chunk.count(b"\n")
    lines = full_lines if chunk.endswith(b"\n") else full_lines + 1
    gaps = separator * (width - 1)
    for line_end in (b"\n", b"\r\n"):
        expected = (gaps + line_end) * full_lines
        if lines > full_lines:
            expected += gaps
        if whitespace == expected:
            break
    else:
        return None
    tokens = chunk.split()
    return tokens if len(tokens) == width * lines else None


def _is_tsv_header(row: list[bytes]) -> bool:
    return len(row) == 3 and row[2].decode("utf-8", "replace").lower() in TSV_HEADER_VALUES


def _integer(token: bytes) -> float:
    return float(int(token))


def _tensor(values: array[float]) -> Tensor:
    if not values:
        return torch.zeros(0, dtype=torch.float64)
    return torch.frombuffer(values, dtype=torch.float64).clone()


def _check_values(values: Tensor, kind: str) -> None:
    bad = torch.isnan(values) if kind == "run" else ~torch.isfinite(values)
    if bool(bad.any()):
        raise _Malformed


def _read_jsonl_fast(path: str, kind: str, progress: Progress | None) -> Records:
    qids: list[bytes] = []
    docnos: list[bytes] = []
    values = array("d")
    for chunk, _ in _chunks(path, progress):
        try:
            for line in _lines(chunk):
                if not line.strip():
                    continue
                qid, docno, value = _json_record(json.loads(line), kind)
                qids.append(qid)
                docnos.append(docno)
                values.append(value)
        except (ValueError, TypeError, KeyError):
            raise _Malformed from None
    value_tensor = _tensor(values)
    _check_values(value_tensor, kind)
    blocks: list[bytes] = []
    lengths: list[int] = []
    _add_blocks(blocks, lengths, qids)
    return Records(path, kind, "jsonl", blocks, lengths, docnos, value_tensor)


def _json_record(record: object, kind: str) -> tuple[bytes, bytes, float]:
    """``(qid, docno, value)`` of one JSON object; ValueError saying what is wrong."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    qid = _json_id(record, "qid")
    docno = _json_id(record, "docno")
    field_name = value_name(kind)
    key, value = _json_field(record, field_name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{key!r} must be a number, got {json.dumps(value)}")
    return qid, docno, float(value)


def _json_field(record: dict[str, object], name: str) -> tuple[str, object]:
    for key in JSON_KEYS[name]:
        if key in record:
            return key, record[key]
    names = " or ".join(repr(k) for k in JSON_KEYS[name])
    raise ValueError(f"missing key {names}")


def _json_id(record: dict[str, object], name: str) -> bytes:
    key, value = _json_field(record, name)
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode()
    raise ValueError(f"{key!r} must be a string or an integer, got {json.dumps(value)}")


# --------------------------------------------------------------------------- exact checks


def iter_lines(path: str) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of every line, with the numbering of an editor."""
    with _opened(path) as handle:
        number = 0
        for number, raw in enumerate(handle, 1):
            yield number, _strip_bom(raw, number).rstrip(b"\n")
        if number == 0:
            return


def iter_records(path: str, kind: str, file_format: str) -> Iterator[tuple[int, bytes, bytes]]:
    """``(line number, qid, docno)`` of every record, checking each line exactly.

    Raises :class:`FileFormatError` at the first bad line; the fast reader
    and this one accept the same files.
    """
    seen: dict[tuple[bytes, bytes], int] = {}
    header_done = False
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        if file_format == "jsonl":
            qid, docno = _check_json_line(path, number, line, kind)
        else:
            tokens = line.split()
            if not header_done and file_format == "tsv" and _is_tsv_header(tokens):
                header_done = True
                continue
            header_done = True
            qid, docno = _check_text_line(path, number, tokens, kind, file_format)
        first = seen.setdefault((qid, docno), number)
        if first != number:
            raise FileFormatError(
                path,
                number,
                f"document {_text(docno)!r} is listed twice for query {_text(qid)!r} "
                f"(first at line {first}); trec_eval rejects such a {kind} file",
            )
        yield number, qid, docno


def diagnose(path: str, kind: str, file_format: str) -> None:
    """Read the file line by line and raise :class:`FileFormatError` at its first bad line."""
    for _ in iter_records(path, kind, file_format):
        pass


def _check_text_line(
    path: str, number: int, tokens: list[bytes], kind: str, file_format: str
) -> tuple[bytes, bytes]:
    layout = LAYOUTS[(kind, file_format)]
    if len(tokens) != layout.width:
        raise FileFormatError(
            path,
            number,
            f"expected {layout.width} columns ({' '.join(layout.columns)}) in a "
            f"{file_format.upper()} {kind} line, got {len(tokens)} "
            f"(got {_show(b' '.join(tokens))})",
        )
    token = tokens[layout.value]
    name = value_name(kind)
    try:
        integer = kind == "qrels" and file_format == "trec"
        value = float(int(token)) if integer else float(token)
    except (ValueError, OverflowError):
        expected = "an integer" if kind == "qrels" and file_format == "trec" else "a number"
        raise FileFormatError(
            path, number, f"the {name} is not {expected} (got {_show(token)})"
        ) from None
    _check_value(path, number, value, kind)
    return tokens[layout.qid], tokens[layout.docno]


def _check_value(path: str, number: int, value: float, kind: str) -> None:
    if math.isnan(value):
        raise FileFormatError(path, number, f"the {value_name(kind)} is NaN")
    if kind == "qrels" and math.isinf(value):
        raise FileFormatError(path, number, f"the grade is infinite (got {value})")


def _check_json_line(path: str, number: int, line: bytes, kind: str) -> tuple[bytes, bytes]:
    try:
        record = json.loads(line)
    except ValueError as error:
        message = error.msg if isinstance(error, json.JSONDecodeError) else str(error)
        raise FileFormatError(
            path, number, f"invalid JSON: {message} (got {_show(line)})"
        ) from None
    try:
        qid, docno, value = _json_record(record, kind)
    except ValueError as error:
        raise FileFormatError(path, number, f"{error} (got {_show(line)})") from None
    _check_value(path, number, value, kind)
    return qid, docno


def first_line_of_query(records: Records, qid: bytes) -> int | None:
    """The line on which ``qid`` first appears in the records' file."""
    for number, line_qid, _ in iter_records(records.path, records.kind, records.format):
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
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return repr(text)


# --------------------------------------------------------------------------- join


@dataclass(frozen=True)
class Collection:
    """A qrels and a run joined into the grouped layout of ``rank_metrics``.

    Item ``i`` belongs to query ``qids[indexes[i]]``; ``mask`` is False for
    judged documents the run did not retrieve (they count in R and in the
    ideal DCG but are never ranked). ``target`` holds the qrels grades; a
    retrieved document the qrels do not judge, and the masked placeholder
    item of a counted query with nothing retrieved, has grade ``-inf``, which
    is relevant under no threshold. The rows of ``rank_metrics(...,
    reduction="none")`` follow ``qids``, names sorted as strings
    (:func:`query_name`).
    """

    qids: list[str]
    preds: Tensor
    target: Tensor
    indexes: Tensor
    mask: Tensor
    #: queries of the run without judgments, left out (``unjudged="skip"``)
    unjudged: list[str] = field(default_factory=list)
    #: judged queries the run does not retrieve for (counted or left out)
    unretrieved: list[str] = field(default_factory=list)


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
    with paused_gc():
        return _join(qrels, run, trec_eval_order, relevance_threshold, unjudged, unretrieved)


def _join(
    qrels: Records,
    run: Records,
    trec_eval_order: bool,
    relevance_threshold: float | None,
    unjudged: str,
    unretrieved: str,
) -> Collection:
    run_blocks, run_lengths = run.blocks, run.lengths
    qrels_blocks, qrels_lengths = qrels.blocks, qrels.lengths
    judged_qids = dict.fromkeys(qrels_blocks)
    run_qids = dict.fromkeys(run_blocks)
    # which run lines are judged, and by which qrels line (checking that no
    # query lists a document twice)
    if len(run_blocks) == len(run_qids):
        run_items, judgment = _match_by_block(qrels, run, run_blocks, run_lengths)
    else:
        _check_run_duplicates(run, run_blocks, run_lengths, len(run_qids))
        run_items, judgment = _match_by_docno(qrels, run.qids, run.docnos)
    unjudged_qids = [q for q in run_qids if q not in judged_qids]
    if unjudged_qids and unjudged == "error":
        first = unjudged_qids[0]
        raise FileFormatError(
            run.path,
            first_line_of_query(run, first),
            f"query {query_name(first)!r} is in the run but not in the qrels "
            f"({len(unjudged_qids)} such {'query' if len(unjudged_qids) == 1 else 'queries'}"
            f"{_listing(unjudged_qids)}); pass --unjudged-queries skip to leave them out",
        )
    unretrieved_qids = [q for q in judged_qids if q not in run_qids]
    evaluated = [q for q in run_qids if q in judged_qids]
    if unretrieved == "count":
        evaluated += unretrieved_qids
    names = _distinct_names(evaluated, qrels, run)
    evaluated.sort(key=names.__getitem__)
    code = dict(zip(evaluated, range(len(evaluated)), strict=True))

    grades = qrels.values
    # a retrieved document the qrels do not judge is never relevant, whatever the
    # threshold: grade -inf (relevant means grade > 0, or >= a finite threshold)
    run_target = torch.full((len(run),), -math.inf, dtype=torch.float64)
    retrieved = torch.zeros(len(qrels), dtype=torch.bool)
    if run_items:
        judged = torch.tensor(judgment)
        run_target[torch.tensor(run_items)] = grades[judged]
        retrieved[judged] = True
    run_qcodes = _expand([code.get(q, -1) for q in run_blocks], run_lengths)
    run_scores, run_docnos = run.values, run.docnos
    if unjudged_qids:
        keep = (run_qcodes >= 0).nonzero().flatten()
        run_qcodes, run_scores, run_target = run_qcodes[keep], run_scores[keep], run_target[keep]
        if trec_eval_order:
            run_docnos = [run.docnos[i] for i in keep.tolist()]

    # judged documents not retrieved: masked items, when they can count in R or
    # the ideal DCG (grade > 0, or at or above the threshold)
    qrels_qcodes = _expand([code.get(q, -1) for q in qrels_blocks], qrels_lengths)
    useful = grades > 0
    if relevance_threshold is not None:
        useful |= grades >= relevance_threshold
    missing = (~retrieved) & useful & (qrels_qcodes >= 0)
    missing_qcodes = qrels_qcodes[missing]
    missing_grades = grades[missing]
    # a counted query with nothing retrieved and nothing relevant still needs one
    # item: a masked placeholder of grade -inf, never relevant
    present = torch.zeros(len(evaluated), dtype=torch.bool)
    present[run_qcodes] = True
    present[missing_qcodes] = True
    empty_rows = (~present).nonzero().flatten()

    if trec_eval_order:
        one_block_each = len(run_blocks) == len(run_qids)
        order = _trec_eval_order(run_scores, run_qcodes, run_docnos, one_block_each)
        run_scores, run_qcodes, run_target = (
            run_scores[order],
            run_qcodes[order],
            run_target[order],
        )
    masked = missing_qcodes.numel() + empty_rows.numel()
    preds = torch.cat([run_scores, torch.zeros(masked, dtype=torch.float64)])
    placeholders = torch.full((empty_rows.numel(),), -math.inf, dtype=torch.float64)
    target = torch.cat([run_target, missing_grades, placeholders])
    indexes = torch.cat([run_qcodes, missing_qcodes, empty_rows])
    mask = torch.cat(
        [torch.ones(run_scores.numel(), dtype=torch.bool), torch.zeros(masked, dtype=torch.bool)]
    )
    return Collection(
        qids=[names[q] for q in evaluated],
        preds=preds,
        target=target,
        indexes=indexes,
        mask=mask,
        unjudged=sorted(map(query_name, unjudged_qids)),
        unretrieved=sorted(map(query_name, unretrieved_qids)),
    )


def _distinct_names(qids: list[bytes], qrels: Records, run: Records) -> dict[bytes, str]:
    """``{qid: query_name(qid)}``; two ids of one name are a :class:`FileFormatError`.

    Only an id that is valid UTF-8 and spells a ``\\xNN`` escape can share its
    name with an id that is not UTF-8.
    """
    names = {qid: query_name(qid) for qid in qids}
    if len(set(names.values())) == len(names):
        return names
    owner: dict[str, bytes] = {}
    for qid, name in names.items():
        other = owner.setdefault(name, qid)
        if other != qid:
            records = qrels if qid in dict.fromkeys(qrels.blocks) else run
            raise FileFormatError(
                records.path,
                first_line_of_query(records, qid),
                f"query ids {other!r} and {qid!r} (as bytes) would both be reported as "
                f"{name!r}; rename one of them",
            )
    raise AssertionError("unreachable")


def _judgments_by_query(qrels: Records) -> dict[bytes, dict[bytes, int]]:
    """``{qid: {docno: qrels line index}}``; a document judged twice for a query is an error."""
    by_query: dict[bytes, dict[bytes, int]] = {}
    for position, (qid, docno) in enumerate(zip(qrels.qids, qrels.docnos, strict=True)):
        of_query = by_query.setdefault(qid, {})
        if docno in of_query:
            diagnose(qrels.path, qrels.kind, qrels.format)
            raise FileFormatError(qrels.path, None, "a query judges a document twice")
        of_query[docno] = position
    return by_query


def _match_by_block(
    qrels: Records, run: Records, blocks: list[bytes], lengths: list[int]
) -> tuple[list[int], list[int]]:
    """(run items, their qrels lines) when each query's run lines are one block.

    One dictionary per block maps its documents to their lines (a shorter
    dictionary than the block is a repeated document), and each judgment of
    the query looks its document up there: per-line work is in C, per-judgment
    work in Python.
    """
    by_query = _judgments_by_query(qrels)
    docnos = run.docnos
    run_items: list[int] = []
    judgment: list[int] = []
    start = 0
    for qid, length in zip(blocks, lengths, strict=True):
        end = start + length
        lines = dict(zip(docnos[start:end], range(start, end), strict=True))
        if len(lines) != length:
            diagnose(run.path, run.kind, run.format)
            raise FileFormatError(run.path, None, "a query lists a document twice")
        for docno, position in by_query.get(qid, {}).items():
            item = lines.get(docno)
            if item is not None:
                run_items.append(item)
                judgment.append(position)
        start = end
    return run_items, judgment


def _match_by_docno(
    qrels: Records, qids: list[bytes], docnos: list[bytes]
) -> tuple[list[int], list[int]]:
    """(run items, their qrels lines) for any order of lines: one lookup per run line."""
    by_docno: dict[bytes, dict[bytes, int]] = {}
    for qid, judged in _judgments_by_query(qrels).items():
        for docno, position in judged.items():
            by_docno.setdefault(docno, {})[qid] = position
    found = list(map(by_docno.get, docnos))
    run_items: list[int] = []
    judgment: list[int] = []
    for item in compress(range(len(found)), found):
        judged_at = found[item].get(qids[item])  # type: ignore[union-attr]
        if judged_at is not None:
            run_items.append(item)
            judgment.append(judged_at)
    return run_items, judgment


def _listing(qids: list[bytes], limit: int = 10) -> str:
    if len(qids) <= 1:
        return ""
    shown = ", ".join(query_name(q) for q in qids[:limit])
    return f": {shown}{', ...' if len(qids) > limit else ''}"


def _expand(block_values: list[int], lengths: list[int]) -> Tensor:
    """One value per line from one value per block."""
    return torch.repeat_interleave(
        torch.tensor(block_values, dtype=torch.int64), torch.tensor(lengths, dtype=torch.int64)
    )


def _check_run_duplicates(
    run: Records, blocks: list[bytes], lengths: list[int], num_queries: int
) -> None:
    """Raise (through :func:`diagnose`) if a query lists a document twice.

    For runs whose queries are split over several blocks (one block per query
    is checked by :func:`_match_by_block`): 64-bit keys (the document id's hash
    mixed with the query's number) are sorted and only equal keys are compared
    exactly.
    """
    docnos = run.docnos
    numbers = dict(zip(dict.fromkeys(blocks), range(num_queries), strict=True))
    qcodes = _expand([numbers[q] for q in blocks], lengths)
    hashes = torch.frombuffer(array("q", map(hash, docnos)), dtype=torch.int64)
    keys = hashes * 1_000_003 + qcodes  # wraps around on overflow: still a hash
    sorted_keys, order = torch.sort(keys)
    equal = sorted_keys[1:] == sorted_keys[:-1]
    if not bool(equal.any()):
        return
    candidates = torch.zeros(len(docnos), dtype=torch.bool)
    candidates[1:] |= equal
    candidates[:-1] |= equal
    seen: set[tuple[bytes, bytes]] = set()
    for item in order[candidates].tolist():
        pair = (run.qids[item], docnos[item])
        if pair in seen:
            diagnose(run.path, run.kind, run.format)
            raise FileFormatError(run.path, None, "a query lists a document twice")
        seen.add(pair)


def _trec_eval_order(
    scores: Tensor, qcodes: Tensor, docnos: list[bytes], one_block_each: bool
) -> Tensor:
    """Item order by query, score descending, then document id descending (trec_eval's).

    The kernel keeps each query's items in input order, so only the order
    within a query matters. A run written in rank order (each query one
    block, scores not increasing) is kept as it is; otherwise the scores are
    laid out one query per row and each row is sorted (much faster than one
    sort of everything). Only the items of tie groups (equal query and score)
    are then ordered by document id, in Python.
    """
    same_query = qcodes[1:] == qcodes[:-1]
    if one_block_each and bool((~same_query | (scores[1:] <= scores[:-1])).all()):
        order = torch.arange(qcodes.numel())
    else:
        order = _by_query_and_score(scores, qcodes)
    s, q = scores[order], qcodes[order]
    tied_next = (s[1:] == s[:-1]) & (q[1:] == q[:-1])
    if not bool(tied_next.any()):
        return order
    group = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(~tied_next, 0)])
    in_tie = torch.zeros(order.numel(), dtype=torch.bool)
    in_tie[1:] |= tied_next
    in_tie[:-1] |= tied_next
    positions = in_tie.nonzero().flatten()
    tied = order[positions]
    # document id descending (a stable sort), then group ascending (stable again)
    tied_docnos = [docnos[i] for i in tied.tolist()]
    by_docno = torch.tensor(
        sorted(range(len(tied_docnos)), key=tied_docnos.__getitem__, reverse=True),
        dtype=torch.int64,
    )
    by_group = by_docno[torch.argsort(group[positions][by_docno], stable=True)]
    order[positions] = tied[by_group]
    return order


def _by_query_and_score(scores: Tensor, qcodes: Tensor) -> Tensor:
    """Item order by query, then score descending (stable), one sort per query row."""
    num_queries = int(qcodes.max()) + 1 if qcodes.numel() else 0
    by_query = torch.argsort(qcodes, stable=True)
    row = qcodes[by_query]
    sizes = torch.bincount(qcodes, minlength=num_queries)
    column = torch.arange(qcodes.numel()) - (torch.cumsum(sizes, 0) - sizes)[row]
    width = int(sizes.max()) if num_queries else 0
    table = torch.full((num_queries, width), -math.inf, dtype=torch.float64)
    table[row, column] = scores[by_query]
    items = torch.full((num_queries, width), -1, dtype=torch.int64)
    items[row, column] = by_query
    # stable: padding (after every real item of its row) stays after a real -inf
    _, within = torch.sort(table, dim=1, descending=True, stable=True)
    order = items.gather(1, within).flatten()
    return order[order >= 0]


__all__ = [
    "FORMATS",
    "KINDS",
    "Collection",
    "FileFormatError",
    "Progress",
    "Records",
    "build_collection",
    "diagnose",
    "guess_format",
    "query_name",
    "read_records",
]
