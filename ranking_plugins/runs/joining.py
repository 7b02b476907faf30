"""Qrels and a run, as read by :mod:`ranking_plugins.runs.reading`, joined into dense parts.

:func:`collections` joins the run, as it is read, to the qrels in dense parts
of whole queries for the kernel (the layout of
:func:`ranking_plugins.rank_metrics`): each query's document ids become
integers (their bytes, a hash of them, or pyarrow's codes) sorted once per
row, which finds a repeated document and each judged one. Judged documents
the run does not retrieve follow as masked items (they count in R and in the
ideal DCG). Vectorised: never a loop over lines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from ranking_plugins.runs.notes import listing
from ranking_plugins.runs.reading import (
    FileFormatError,
    Records,
    arrow,
    arrow_array,
    column_tensor,
    concat,
    diagnose,
    first_line_of_query,
    numpy_column,
    query_name,
)

#: slots (queries x longest query) of a part given to the kernel; run lines joined at a time
PART_LINES = 1 << 17


class WholeRunNeeded(Exception):
    """A query's lines are apart, or an error needs the whole run: :func:`collections`
    cannot go on as the run is read; give it the run read whole
    (:func:`~ranking_plugins.runs.reading.read_records`)."""


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
        import numpy as np

        queries = arrow().compute.dictionary_encode(qrels.qids)
        codes = column_tensor(queries.indices)
        if _judged_twice(qrels, codes):
            diagnose(qrels.path, qrels.kind, qrels.format)
            raise FileFormatError(qrels.path, None, "a query judges a document twice")
        counts = torch.bincount(codes, minlength=len(queries.dictionary))
        # numpy's stable sort finds the qrels' runs of lines of one query (torch's: 10x slower)
        by_query = torch.from_numpy(np.argsort(codes.numpy(), kind="stable"))
        starts = torch.cumsum(counts, 0) - counts
        names = queries.dictionary.to_pylist()
        return cls(qrels, names, queries.dictionary, by_query, starts, counts)


def _judged_twice(qrels: Records, codes: Tensor) -> bool:
    """Whether a query (``codes``: each line's) judges a document twice: two lines of one
    query and one key (:func:`_document_keys`), and of one id where the keys are hashes
    (pyarrow's codes decide when two ids meet on one hash key)."""
    import numpy as np

    pa = arrow()
    keys, _, unique = _document_keys(qrels.docnos, qrels.docnos.slice(0, 0), False)
    # one sorted hash of (query, key) first: when none meet, no document is judged twice
    pair = _hashed(keys.numpy().view(np.uint64)[None], codes.numpy())
    pair.sort()
    if not (pair[1:] == pair[:-1]).any():
        return False
    lines = torch.from_numpy(np.lexsort((keys.numpy(), codes.numpy())))  # by query, by key
    code, key = codes[lines], keys[lines]
    meet = ((code[1:] == code[:-1]) & (key[1:] == key[:-1])).nonzero().flatten()
    if not meet.numel() or unique:
        return bool(meet.numel())
    pairs = (qrels.docnos.take(arrow_array(lines[at])) for at in (meet, meet + 1))
    if pa.compute.all(pa.compute.equal(*pairs)).as_py():
        return True
    documents = column_tensor(pa.compute.dictionary_encode(qrels.docnos).indices)
    pairs_of = torch.sort(codes * (int(documents.max()) + 1) + documents).values
    return bool((pairs_of[1:] == pairs_of[:-1]).any())


def collections(
    qrels: Records,
    run: Records | Iterable[Records],
    *,
    trec_eval_order: bool = False,
    relevance_threshold: float | None = None,
    unjudged: str = "error",
    unretrieved: str = "skip",
    float32_scores: bool = False,
    tied_ids: str = "descending",
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
            (``tied_ids``), so that ``ties="first"`` breaks ties by document id.
        relevance_threshold: unretrieved judged documents with a grade at or
            above it (or above 0) are added as masked items.
        unjudged: a run query without judgments is an ``"error"``
            (:class:`FileFormatError` at its first line) or is ``"skip"``-ped.
        unretrieved: a judged query the run has no line for is ``"skip"``-ped
            (trec_eval's default) or ``"count"``-ed as a query with nothing
            retrieved (trec_eval ``-c``).
        float32_scores: the run's scores as trec_eval holds them
            (:func:`as_trec_eval_scores`), not float64's.
        tied_ids: the order of the document ids of a tie under ``trec_eval_order``:
            ``"descending"`` (trec_eval's) or ``"ascending"`` (ir_measures' msmarco
            and judged providers: Python's sort by ``(-score, doc_id)``).
    """
    judgments, whole = Judgments.of(qrels), isinstance(run, Records)
    options = (unjudged, whole, trec_eval_order, relevance_threshold, float32_scores, tied_ids)
    done: dict[bytes, int] = {}  # each run query's code in the qrels (-1: none), in run order
    held: list[Records] = []
    for batch in [run] if isinstance(run, Records) else run:
        if not len(batch):  # a run of no line (the drop-in's, of {} queries only)
            continue
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
    other = numpy_column(arrow().compute.not_equal(lines.qids, lines.qids[-1]))
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
    tied_ids: str,
) -> Iterator[Collection]:
    """The judged queries of ``run`` (whole queries), in parts; ``done`` takes its queries."""
    pc, n = arrow().compute, len(run)
    if float32_scores:
        run = replace(run, values=as_trec_eval_scores(run.values))
    # the blocks of lines of one query, and the queries in order of first line
    new = torch.ones(n, dtype=torch.bool)
    new[1:] = column_tensor(pc.not_equal(run.qids.slice(1), run.qids.slice(0, n - 1)), torch.bool)
    starts = new.nonzero().flatten()
    heads = pc.dictionary_encode(run.qids.take(arrow_array(starts)))
    names: list[bytes] = heads.dictionary.to_pylist()
    if any(name in done for name in names):
        raise WholeRunNeeded  # a query seen in an earlier batch
    blocks, block_sizes = column_tensor(heads.indices), torch.diff(starts, append=torch.tensor([n]))
    sizes = torch.zeros(len(names), dtype=torch.int64).index_add_(0, blocks, block_sizes)
    code = column_tensor(pc.index_in(heads.dictionary, judgments.queries), null=-1)
    done.update(zip(names, code.tolist(), strict=True))
    missing = [name for name, c in zip(names, code.tolist(), strict=True) if c < 0]
    if missing and unjudged == "error":
        if not whole:
            raise WholeRunNeeded
        raise unjudged_error(run, missing)
    # the lines query by query, those of unjudged queries left out
    grouped, order = len(blocks) == len(names), None
    if trec_eval_order or not grouped or missing:
        line_query = torch.repeat_interleave(blocks, block_sizes)
        if trec_eval_order:
            order = _trec_eval_order(run, line_query, grouped, tied_ids)
        elif not grouped:
            order = torch.argsort(line_query, stable=True)
        if missing:
            kept = code[line_query if order is None else line_query[order]] >= 0
            order = kept.nonzero().flatten() if order is None else order[kept]
    if order is not None:
        keys = None if run.keys is None else run.keys[order.numpy()]
        docnos = run.docnos.take(arrow_array(order))
        run = replace(run, docnos=docnos, values=run.values[order], keys=keys)
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
    query = torch.tensor(queries, dtype=torch.int64)
    rows = _Rows(torch.tensor(sizes, dtype=torch.int64))
    count = judgments.counts[query]
    line_row, line_place = _places(count)  # each judgment's row and place among the row's
    lines = judgments.by_query[judgments.starts[query][line_row] + line_place]
    grades = judgments.qrels.values[lines]
    run = run.lines(first, first + rows.total)  # the part's lines
    judged_docnos = judgments.qrels.docnos.take(arrow_array(lines))
    found, hit = _find_judged(rows, run, judged_docnos, line_row, line_place, count)
    line_target = torch.full((rows.total,), -math.inf, dtype=torch.float64)
    line_target[hit] = grades[found]
    line_judged = torch.zeros(rows.total, dtype=torch.bool)
    line_judged[hit] = True
    matrices = [
        rows.dense(run.values, 0.0),
        rows.dense(line_target, -math.inf),
        rows.dense(torch.ones(rows.total, dtype=torch.bool), 0),
        rows.dense(line_judged, 0),
    ]
    # judged documents not retrieved, in columns after the run's: masked items, when
    # they can count in R or the ideal DCG (grade > 0, or at or above the threshold)
    useful = grades > 0
    if relevance_threshold is not None:
        useful |= grades >= relevance_threshold
    added = ~found & useful
    more = _added_columns(grades[added], line_row[added], len(queries))
    if more is not None:
        matrices = [torch.cat(pair, dim=1) for pair in zip(matrices, more, strict=True)]
    preds, target, mask, judged = matrices
    qids = [query_name(judgments.names[q]) for q in queries]
    return Collection(qids, preds, target, mask, judged)


class _Rows:
    """Consecutive run lines laid out as rows, ``size[r]`` lines in row ``r`` then padding."""

    def __init__(self, size: Tensor) -> None:
        self.size, self.total = size, int(size.sum())
        self.longest = max([1, *size.tolist()])
        # each line's (row, place), None when every row is as long (the rows are a view)
        self.at = None if bool((size == self.longest).all()) else _places(size)

    def dense(self, values: Tensor, fill: float) -> Tensor:
        """(rows, longest) of each line's value, ``fill`` in the padding."""
        rows = len(self.size)
        if self.at is None:
            return values.view(rows, self.longest)
        padded = torch.full((rows * self.longest,), fill, dtype=values.dtype)
        where = self.at[0] * self.longest + self.at[1]
        return padded.index_put_((where,), values).view(rows, self.longest)


def _find_judged(
    rows: _Rows, run: Records, judged: Any, line_row: Tensor, line_place: Tensor, count: Tensor
) -> tuple[Tensor, Tensor]:
    """Which judgments the run retrieves (``found``, one per judgment) and at which of the
    part's lines (``hit``, one per judgment found).

    The ids are keys by :func:`_document_keys`: their bytes, or a hash of them whose
    meetings are checked on the ids themselves (a judgment found, two lines of a row
    on one key); pyarrow's codes when two ids met on one hash key.
    """
    found, hit, unique, twice = _matches(rows, run, judged, line_row, line_place, count, False)
    if not unique:
        pc = arrow().compute
        same = pc.equal(
            judged.take(arrow_array(found.nonzero().flatten())), run.docnos.take(arrow_array(hit))
        )
        repeated = pc.equal(*(run.docnos.take(arrow_array(lines)) for lines in twice))
        if pc.all(same).as_py() is False or pc.all(repeated).as_py() is False:
            found, hit, unique, twice = _matches(
                rows, run, judged, line_row, line_place, count, True
            )
    if twice.shape[1]:  # a row's two lines of one id
        diagnose(run.path, run.kind, run.format)
        raise FileFormatError(run.path, None, "a query lists a document twice")
    return found, hit


def _matches(
    rows: _Rows,
    run: Records,
    judged: Any,
    line_row: Tensor,
    line_place: Tensor,
    count: Tensor,
    exact: bool,
) -> tuple[Tensor, Tensor, bool, Tensor]:
    """``found`` and ``hit`` of :func:`_find_judged` by keys; whether the keys are unique
    to their ids, and the (2, pairs) lines of a row that meet on one key.

    Each row's keys are sorted (numpy's sort is the faster): a repeated one is
    adjacent, a judged one found by bisection; the padding sorts last (no key is
    the largest int64).
    """
    import numpy as np

    big, size = torch.iinfo(torch.int64).max, rows.size
    made = None if run.keys is None else (run.keys, run.key_kind)
    judged_keys, run_keys, unique = _document_keys(judged, run.docnos, exact, made)
    keys = rows.dense(run_keys, big)
    slot = torch.from_numpy(np.argsort(keys.numpy(), axis=1))
    keys = keys.gather(1, slot)
    asked = torch.full((len(size), max([1, *count.tolist()])), big)
    asked[line_row, line_place] = judged_keys
    place = torch.searchsorted(keys, asked)[line_row, line_place]
    found = place < size[line_row]
    place = place.clamp(max=rows.longest - 1)
    found &= keys[line_row, place] == judged_keys
    hit_row = line_row[found]
    row_start = torch.cumsum(size, 0) - size
    hit = row_start[hit_row] + slot[hit_row, place[found]]
    real = torch.arange(rows.longest) < size.unsqueeze(1)
    row, column = ((keys[:, 1:] == keys[:, :-1]) & real[:, 1:]).nonzero(as_tuple=True)
    twice = torch.stack(
        [row_start[row] + slot[row, column], row_start[row] + slot[row, column + 1]]
    )
    return found, hit, unique, twice


def _added_columns(grades: Tensor, row: Tensor, rows: int) -> tuple[Tensor, ...] | None:
    """The columns of judged documents not retrieved (their ``grades``, in ``row``), as
    (preds, target, mask, judged) matrices; None when there is none."""
    added_count = torch.bincount(row, minlength=rows)
    width = max([0, *added_count.tolist()])
    if not width:
        return None
    extra = row * width + _places(added_count)[1]
    target = torch.full((rows * width,), -math.inf, dtype=torch.float64)
    target[extra] = grades
    judged = torch.zeros(rows * width, dtype=torch.bool)
    judged[extra] = True
    return (torch.zeros(rows, width, dtype=torch.float64), target.view(rows, width),
            torch.zeros(rows, width, dtype=torch.bool), judged.view(rows, width))  # fmt: skip


def _places(counts: Tensor) -> tuple[Tensor, Tensor]:
    """For items laid out row by row, ``counts`` per row: each item's row and place in it."""
    row = torch.repeat_interleave(torch.arange(len(counts)), counts)
    return row, torch.arange(len(row)) - (torch.cumsum(counts, 0) - counts)[row]


def _document_keys(
    judged: Any, retrieved: Any, exact: bool, made: tuple[Any, Any] | None = None
) -> tuple[Tensor, Tensor, bool]:
    """int64 keys of two pyarrow arrays of ids, equal for equal ids; and whether only for
    equal ids. An id's bytes when every id fits in 8 bytes and none holds a zero byte,
    else a hash of its bytes (:func:`_hashed`); pyarrow's codes when ``exact`` (it hashes
    the ids in a table that grows with them: slower). ``made``: the retrieved ids' keys
    and kind by :func:`run_keys`, kept when the judged ids can be keyed alike."""
    import numpy as np

    pa, both = arrow(), (judged, retrieved)

    def signed(key: Any) -> Tensor:
        return torch.from_numpy(key.view(np.int64))

    if not exact and made is not None:
        keys, (words, itself) = made
        if _longest(judged) <= 8 * words:
            ids = _words(judged, words)
            if ids[2] or not itself:  # hashed alike, or both the ids themselves
                key, judged_itself = _keys_of(ids, itself)
                return signed(key), signed(keys), itself and judged_itself
    if not exact:
        words = max(1, -(-max(_longest(ids) for ids in both) // 8))
        packed = [_words(ids, words) for ids in both]
        unique = all(itself for _, _, itself in packed)
        keyed = [_keys_of(p, unique) for p in packed]
        return signed(keyed[0][0]), signed(keyed[1][0]), all(k[1] for k in keyed)
    codes = column_tensor(pa.compute.dictionary_encode(pa.concat_arrays(both)).indices)
    return codes[: len(judged)], codes[len(judged) :], True


def run_keys(ids: Any) -> tuple[Any, tuple[int, bool]]:
    """The keys of a block of run lines' document ids on their own, made as the run is
    read, in its reader thread (:func:`~ranking_plugins.runs.reading.read_batches`): the
    hashing of long ids leaves the join's thread. Their kind: the words hashed, and
    whether each key is its id (:func:`_document_keys` keys the judged ids alike)."""
    words = max(1, -(-_longest(ids) // 8))
    packed = _words(ids, words)
    key, itself = _keys_of(packed, packed[2])
    return key, (words, itself)


def _longest(ids: Any) -> int:
    pc = arrow().compute
    return int(pc.max(pc.binary_length(ids)).as_py() or 0)


def _keys_of(packed: tuple[Any, Any, bool], itself: bool) -> tuple[Any, bool]:
    """(n,) uint64 keys of :func:`_words`' ``packed`` ids: the ids themselves (``itself``)
    or their hashes; and whether each key is its id's alone."""
    import numpy as np

    key = packed[0][0] if itself else _hashed(packed[0], packed[1])
    big = np.uint64(torch.iinfo(torch.int64).max)  # the padding's: no key may be it
    at = key == big
    if at.any():
        key[at], itself = big - np.uint64(1), False
    return key, itself


def _words(ids: Any, words: int) -> tuple[Any, Any, bool]:
    """(words, n) uint64 numpy: each id's first ``8 * words`` bytes, little-endian and
    zero-padded; (n,) int64 its length; whether each id is its one word (``words`` is 1
    and no id holds a zero byte: b"a" and b"a\\0" would meet). Each word is one
    unaligned 8-byte load per id (a view of the bytes at every offset), then the bytes past
    the id's end cleared: no loop over bytes."""
    import numpy as np

    n, buffers = len(ids), ids.buffers()
    offsets = np.frombuffer(buffers[1], np.int32, n + 1, ids.offset * 4).astype(np.int64)
    lengths, size = np.diff(offsets), int(offsets[-1] - offsets[0])
    raw = np.frombuffer(buffers[2] or b"", np.uint8)[offsets[0] : offsets[-1]]
    itself = words == 1 and not bool((raw == 0).any())
    if n and size == 8 * words * n:  # every id fills its words (the longest fits them)
        return raw.view("<u8").reshape(n, words).T.copy(), lengths, itself
    data = np.zeros(size + 8 * words, np.uint8)  # zeros to load past the last id
    data[:size] = raw
    loads = np.ndarray((len(data) - 7,), np.dtype("<u8"), data, strides=(1,))
    # keep[w, length]: the bits of word w that an id of that length fills
    filled = np.clip(np.arange(8 * words + 1) - 8 * np.arange(words)[:, None], 0, 8)
    keep = np.where(
        filled == 8,
        np.uint64(2**64 - 1),
        (np.uint64(1) << (8 * filled).astype(np.uint64)) - np.uint64(1),
    )
    out = np.empty((words, n), np.uint64)
    starts = offsets[:-1] - offsets[0]
    for word in range(words):
        out[word] = loads[starts + 8 * word]
        if not n or int(lengths.min()) < 8 * (word + 1):  # some id ends in this word
            out[word] &= keep[word][lengths]
    return out, lengths, itself


def _hashed(words: Any, lengths: Any) -> Any:
    """(n,) uint64 numpy: a hash of each id's words and length. Its quality is speed only:
    the caller checks the ids that meet on one key."""
    import numpy as np

    key = lengths.astype(np.uint64)
    for word in words:  # multiply and fold: each word's every bit reaches every bit
        key ^= word
        key *= np.uint64(0x9E3779B97F4A7C15)
        key ^= key >> np.uint64(32)
    key *= np.uint64(0xBF58476D1CE4E5B9)
    key ^= key >> np.uint64(29)
    return key


def as_trec_eval_scores(scores: Tensor) -> Tensor:
    """Run scores as trec_eval holds them, a C ``float`` each (float32), back in float64.

    Two scores equal as float32 tie in trec_eval, and its tie break (the
    document id) orders them; past float32's range a score is ±inf.
    """
    return scores.to(torch.float32).to(torch.float64)


def _trec_eval_order(
    run: Records, line_query: Tensor, grouped: bool, tied_ids: str = "descending"
) -> Tensor:
    """The run's lines by query, score descending, then document id descending (trec_eval's)
    or ascending (``tied_ids``).

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
        columns = {"q": arrow_array(line_query[at]), "s": arrow_array(scores[at])}
        table = pa.table({**columns, "d": run.docnos.take(arrow_array(at))})
        keys = [("q", "ascending"), ("s", "descending"), ("d", tied_ids)]
        order[at] = at[column_tensor(pa.compute.sort_indices(table, keys))]
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


def unjudged_error(run: Records, missing: list[bytes]) -> FileFormatError:
    """The error of a run whose queries ``missing`` the qrels lack (``unjudged="error"``),
    at the first one's first line."""
    return FileFormatError(
        run.path,
        first_line_of_query(run, missing[0]),
        f"query {query_name(missing[0])!r} is in the run but not in the qrels "
        f"({len(missing)} such {'query' if len(missing) == 1 else 'queries'}"
        f"{_listed(missing)}); pass --unjudged-queries skip to leave them out",
    )


def _listed(qids: list[bytes]) -> str:
    return f": {listing([query_name(q) for q in qids])}" if len(qids) > 1 else ""


__all__ = [
    "PART_LINES",
    "Collection",
    "WholeRunNeeded",
    "as_trec_eval_scores",
    "collections",
    "run_keys",
    "unjudged_error",
]
