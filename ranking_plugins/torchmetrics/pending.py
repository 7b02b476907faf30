"""``whole_queries=True``: grouped batches of whole queries, ranked several at a time.

Each such batch holds whole queries, so only its sums need be kept. Ranking
each batch at its ``update`` costs one kernel call per update, whose fixed
cost (its host reads and small operations, about half a millisecond on a
CPU) dominates batches of some thousand entries, and whose operations on so
few entries run on one core (below torch's intra-op grain of 32,768
elements). So ``update`` checks a batch and keeps a copy of it in a *pending*
"cat" state; the pending batches are ranked once they hold
:data:`PENDING_ENTRIES` entries, and before anything reads or copies the
states (``compute``, ``sync``, ``forward``, ``merge_state``, ``state_dict``,
``metric_state``: :class:`PendingRanking`). Consecutive batches whose lists
all have one length (a loader's fixed number of candidates per query) are
ranked in one kernel call; a batch of lists of several lengths is ranked
alone, as at its ``update`` before (a padded row's sums take another order,
:func:`_groups`).

The memory stays constant in the number of updates: at most
:data:`PENDING_ENTRIES` entries (plus the last batch) are pending, each kept
as its scores and grades (in their own dtypes), an int64 query id and two
bool flags, at most 26 bytes an entry: 13 MiB at the default cap; ranking as
many entries at once takes more at its peak (about 100 MiB on a CPU for lists
of 100 items; a cap of 2^18 about half, 2^17 about 28 MiB).

The numbers are those of ranking each batch alone, to the bit: the batches
keep their queries apart (:func:`plan_run`: ids unique to a batch, in an
order that keeps the batches in turn and each batch's queries in id order),
every query is ranked in a row of the width its batch alone gives it, and
each batch's sums are taken over its own queries and added to the state in
update order (:meth:`~ranking_plugins.totals.Totals.of_parts`).

The metrics of a ``MetricCollection`` (MRR, NDCG, MAP) see the same batch one
after the other. The first keeps copies of it; the next ones keep the *same*
copies when their inputs are the same objects and prove equal to them
(:func:`shared_pending`, as the grouped layout's ``shared_copies``), and the
first to rank a run of pending batches holds its plan and rankings for the
next ones, whose pending states hold the very same copies (by weak reference:
copies never handed to user code, so the same objects prove the same
content): a collection keeps one copy of each batch and ranks it once. Both
go through the package's one cache slot, ``batch_cache.last_batch``.

The pending state is a "cat" list of tensors, :data:`FIELDS` per batch (a
missing mask or ``judged`` as an empty tensor), so that it
moves with the metric's device, is deep-copied with the other states by
``forward``, ``MetricTracker`` or ``BootStrapper``, and is shared by the
metrics of a ``MetricCollection`` compute group (TorchMetrics sets the first
metric's states on the others): whichever of them ranks it, it is ranked once,
into the sums they share.
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
from torch import Tensor
from torchmetrics import Metric

from ranking_plugins.batch_cache import last_batch
from ranking_plugins.kernel import RankedBatch, host_reads_are_free
from ranking_plugins.request import RankingRequest
from ranking_plugins.torchmetrics.dtypes import FixedDtypes
from ranking_plugins.torchmetrics.errors import _kernel_rank, _kernel_read
from ranking_plugins.totals import Totals, per_query_matrix

#: how many pending entries are ranked together: large enough that the kernel's
#: operations run above torch's intra-op grain (32,768 elements) and its fixed
#: cost is paid a few times per million entries, small enough to bound the memory
#: (see the module docstring)
PENDING_ENTRIES = 2**19

#: tensors kept per pending batch: scores, grades, query ids, mask, judged flags
FIELDS = 5


def pending_batch(
    preds: Tensor, target: Tensor, indexes: Tensor, mask: Tensor | None, judged: Tensor | None
) -> list[Tensor]:
    """The pending state's copies of one checked batch (the caller may rewrite its
    buffers before the batch is ranked); a missing mask or ``judged`` as an empty
    tensor."""
    own = [t.detach().clone() for t in (preds, target)]
    own.append(indexes.detach().to(torch.int64, copy=True))
    for flags in (mask, judged):
        own.append(
            torch.empty(0, dtype=torch.bool, device=preds.device)
            if flags is None
            else flags.detach().clone()
        )
    return own


def pending_entries(pending: list[Tensor]) -> int:
    """How many entries the pending batches hold (sizes only: no sync)."""
    return sum(t.numel() for t in pending[::FIELDS])


def _ranking_kind(batch: list[Tensor]) -> tuple[object, ...]:
    """What must be alike for batches ranked in one call: the dtypes the kernel ranks
    (scores, grades) and whether ``judged`` was given."""
    return (batch[0].dtype, batch[1].dtype, batch[0].device, batch[4].numel() > 0)


def runs(pending: list[Tensor]) -> list[list[list[Tensor]]]:
    """The pending batches, in update order, as runs of consecutive batches of one
    kind (usually one run)."""
    found: list[list[list[Tensor]]] = []
    for start in range(0, len(pending) - len(pending) % FIELDS, FIELDS):
        batch = pending[start : start + FIELDS]
        if found and _ranking_kind(found[-1][-1]) == _ranking_kind(batch):
            found[-1].append(batch)
        else:
            found.append([batch])
    return found


class RunPlan(NamedTuple):
    """What :func:`plan_run` finds of a run of pending batches."""

    #: one query id per entry, keeping the batches' queries apart
    key: Tensor
    #: each batch's number of queries
    queries: list[int]
    #: each batch's shape as the kernel ranks it: ``(list length, a mask hides an
    #: item)`` where every list has one length, None otherwise
    shapes: list[tuple[int, bool] | None]


def plan_run(batches: list[list[Tensor]]) -> RunPlan:
    """Query ids that keep two batches' queries apart, and each batch's queries and shape.

    Where the ids never decrease and change at every batch's end (a loader in
    query order) they are apart as they are. Otherwise batch b's id i becomes
    ``b * span + (i - lo)`` (``lo``, ``span``: the ids' least value and range over
    every batch; where that overflows int64, the ids' ranks stand in for them).
    Either way the ids order the queries by batch, then by id, as the kernel
    orders them, so that it ranks batch after batch, each batch's queries in its
    own id order. Two host reads (up to four where the ids are out of order or
    lists differ in length): whether the ids are apart and in order, the counts.
    """
    ids = [batch[2] for batch in batches]
    sizes = [t.numel() for t in ids]
    device = ids[0].device
    key = torch.cat(ids)
    ends = torch.tensor(list(itertools.accumulate(sizes)), device=device)
    # ids that never decrease and change at every batch's end: apart as they are
    first = ends[:-1]
    head = key[: sizes[0]]
    checks = [(key[1:] >= key[:-1]).all(), (key[first - 1] < key[first]).all()]
    # the first query's length (the first batch's size where it holds one query)
    checks += [(head != head[0]).int().argmax(), (head != head[0]).any()]
    in_order, apart, change, changes = torch.stack(checks).tolist()
    masked = [number for number, batch in enumerate(batches) if batch[3].numel()]
    if in_order and apart:
        same = _one_length(key, sizes, change if changes else sizes[0], masked, batches)
        if same is not None:
            return same
    else:
        lo, hi = torch.stack(torch.aminmax(key)).tolist()
        span = hi - lo + 1
        if span * len(batches) >= 2**62:  # ids spread too far: their ranks instead
            key = torch.unique(key, return_inverse=True)[1]
            lo, span = 0, int(key.max()) + 1
        numbers = torch.arange(len(batches), device=device)
        batch_of = torch.repeat_interleave(numbers, torch.tensor(sizes, device=device))
        key = (key - lo) + batch_of * span
        in_order = bool((key[1:] >= key[:-1]).all())
    # each batch's entries keep their places in key order (the batch leads the key):
    # a batch's queries are the runs of equal keys among the sorted keys of its places
    ordered = key if in_order else torch.sort(key).values
    lengths = torch.unique_consecutive(ordered, return_counts=True)[1]
    through = torch.searchsorted(lengths.cumsum(0), ends, right=True)  # queries so far
    flags = _hidden(masked, batches)
    read = torch.cat([through, torch.stack(torch.aminmax(lengths)), *flags]).tolist()
    count = len(batches)
    queries = [b - a for a, b in itertools.pairwise([0, *read[:count]])]
    shortest, longest = read[count : count + 2]
    hides = [False] * count  # a batch without a mask hides nothing
    for number, hide in zip(masked, read[count + 2 :], strict=True):
        hides[number] = bool(hide)
    if shortest == longest:  # every list of one length
        return RunPlan(key, queries, [(longest, hide) for hide in hides])
    # each batch's shortest and longest list
    parts = torch.tensor(queries, device=device)
    low = torch.segment_reduce(lengths.to(torch.float64), "min", lengths=parts)
    high = torch.segment_reduce(lengths.to(torch.float64), "max", lengths=parts)
    found = torch.stack([low, high]).tolist()
    shapes: list[tuple[int, bool] | None] = [
        (int(b), hide) if a == b else None
        for a, b, hide in zip(found[0], found[1], hides, strict=True)
    ]
    return RunPlan(key, queries, shapes)


def _hidden(masked: list[int], batches: list[list[Tensor]]) -> list[Tensor]:
    """Whether each batch given a mask (``masked``: their numbers) hides an item."""
    return [(~batches[number][3].all()).to(torch.int64).reshape(1) for number in masked]


def _one_length(
    key: Tensor, sizes: list[int], length: int, masked: list[int], batches: list[list[Tensor]]
) -> RunPlan | None:
    """The plan where ids in order and apart (:func:`plan_run`) hold lists of one
    ``length`` (the first query's) in every batch, read off the ids as rows of that
    length: each row one id, each row's id above the last row's; None otherwise.
    Touches two entries a query, not every entry."""
    if any(size % length for size in sizes):
        return None
    rows = key.view(-1, length)
    one = [(rows[:, 0] == rows[:, -1]).all(), (rows[1:, 0] > rows[:-1, -1]).all()]
    read = torch.cat([torch.stack(one).to(torch.int64), *_hidden(masked, batches)]).tolist()
    if not (read[0] and read[1]):
        return None
    hides = [False] * len(batches)  # a batch without a mask hides nothing
    for number, hide in zip(masked, read[2:], strict=True):
        hides[number] = bool(hide)
    queries = [size // length for size in sizes]
    return RunPlan(key, queries, [(length, hide) for hide in hides])


def _ranked_together(shapes: list[tuple[int, bool] | None]) -> list[range]:
    """Consecutive batches the kernel ranks together exactly as each alone: lists of one
    length, the same in every batch (rows of one width, no padding: a row's
    statistics do not depend on the other rows, while a row's sums do depend on its
    padding), masks that hide an item in every batch or in none (the kernel ranks an
    all-True mask as none); any other batch alone."""
    found: list[range] = []
    for number, shape in enumerate(shapes):
        if found and shape is not None and shapes[found[-1].start] == shape:
            found[-1] = range(found[-1].start, number + 1)
        else:
            found.append(range(number, number + 1))
    return found


def rank_run(
    request: RankingRequest, run: list[list[Tensor]], keep_per_query: bool
) -> tuple[list[Tensor], list[Tensor]]:
    """Batches of one kind (:func:`runs`), ranked in as few kernel calls as the numbers
    allow (:func:`_groups`): each batch's (5, K) sums and, when kept, every query's
    values, in update order.

    The plan and the rankings are held for the next metric whose pending batches are
    the very same copies (:func:`shared_pending`): a collection ranks a run once."""
    held = _held_run(run)
    if len(run) == 1:
        groups, plan = [range(1)], None
    else:
        if held.plan is None:
            held.plan = plan_run(run)
        plan = held.plan
        groups = _ranked_together(plan.shapes)
    sums: list[Tensor] = []
    per_query: list[Tensor] = []
    starts = [0, *itertools.accumulate(b[0].numel() for b in run)]
    for group in groups:
        queries = (
            None if plan is None or len(group) == 1 else plan.queries[group.start : group.stop]
        )
        ranked = held.ranking(group.start, request, run[group.start][1])
        intents = None
        if ranked is None:
            if plan is None or len(group) == 1:
                fields = run[group.start]
            else:
                batches = run[group.start : group.stop]
                fields = [torch.cat([b[i] for b in batches]) for i in (0, 1, 4)]
                fields.insert(2, plan.key[starts[group.start] : starts[group.stop]])
                fields.insert(3, _masks(batches))
            ranked, intents = _rank_group(request, fields)
            held.keep(group.start, request, ranked)
        found, values = _read_group(request, ranked, intents, queries, keep_per_query)
        sums += found
        per_query += values
    return sums, per_query


def _masks(batches: list[list[Tensor]]) -> Tensor:
    """The batches' masks as one, True where a batch has none (empty when none has)."""
    if not any(batch[3].numel() for batch in batches):
        return batches[0][3]
    return torch.cat(
        [
            batch[3] if batch[3].numel() else torch.ones_like(batch[0], dtype=torch.bool)
            for batch in batches
        ]
    )


def _rank_group(request: RankingRequest, fields: list[Tensor]) -> tuple[RankedBatch, Tensor | None]:
    """One kernel call on ``fields`` (one batch, or several), and the subtopic relevance."""
    preds, target, key, mask, judged = fields
    extra = {"judged": judged} if judged.numel() else {}
    target, intents = request.split_intents(preds, target, key)
    held = last_batch.held(_PendingEntry)
    try:
        ranked = _kernel_rank(
            request,
            preds,
            target,
            indexes=key,
            mask=mask if mask.numel() else None,
            # checked at update (``validate_args``); the grades' checks run here
            scores_checked=request.options.validate_args,
            **extra,
        )
    finally:
        if held is not None:  # the kernel keeps its own entry in the slot: ours back
            last_batch.hold(held)
    return ranked, intents


def _read_group(
    request: RankingRequest,
    ranked: RankedBatch,
    intents: Tensor | None,
    queries: list[int] | None,
    keep: bool,
) -> tuple[list[Tensor], list[Tensor]]:
    """The sums (each batch's, with ``queries`` each) and per-query values of a ranking."""
    evaluation = _kernel_read(request, ranked, intents)
    keys, weighted = request.query_keys, request.options.weighted
    if queries is None:
        sums = [Totals.of(evaluation, keys, weighted).sums]
    else:
        sums = [part.sums for part in Totals.of_parts(evaluation, keys, weighted, queries)]
    return sums, [per_query_matrix(evaluation, keys)] if keep else []


# -- what the metrics of a collection share, held in the package's one cache slot ----


@dataclass
class _HeldRun:
    """A run of pending batches (its tensors by weak reference), its plan and the
    ranking of each group (by the group's first batch), for the next metric whose
    pending batches are the very same tensors: the pending copies are the metrics'
    own, never handed to user code, so the same objects prove the same content."""

    tensors: tuple[weakref.ref[Tensor], ...]
    plan: RunPlan | None = None
    #: by group start: the ranking key and depth it was made for, and the ranking
    ranked: dict[int, tuple[tuple[object, ...], int | None, RankedBatch]] = field(
        default_factory=dict
    )

    def alive(self) -> bool:
        return all(ref() is not None for ref in self.tensors)

    def holds(self, run: list[list[Tensor]]) -> bool:
        tensors = [t for batch in run for t in batch]
        return len(tensors) == len(self.tensors) and all(
            ref() is t for ref, t in zip(self.tensors, tensors, strict=True)
        )

    def ranking(self, start: int, request: RankingRequest, target: Tensor) -> RankedBatch | None:
        """The group's ranking if it serves ``request`` (which reads no subtopics:
        those split the grades before the ranking)."""
        if start not in self.ranked or request.intents or target.ndim != 1:
            return None
        key, depth, ranked = self.ranked[start]
        if not request.reads(key, depth) or (request.identities and not ranked.identities):
            return None
        return ranked

    def keep(self, start: int, request: RankingRequest, ranked: RankedBatch) -> None:
        if ranked.reusable:  # ranked block by block when read: nothing to keep
            depth = None if ranked.whole_lists else request.depth
            self.ranked[start] = (request.ranking_key, depth, ranked)


@dataclass
class _PendingEntry:
    """The last batch's pending copies (as :func:`shared_pending` made them, for the
    next metric given the same input objects) and the runs last ranked."""

    inputs: tuple[weakref.ref[Tensor] | None, ...] = ()
    copies: tuple[weakref.ref[Tensor], ...] = ()
    runs: list[_HeldRun] = field(default_factory=list)
    #: the copies themselves where the metric that made them ranked them at once (at
    #: the cap), dropping them: alive for the next metrics, whose runs end with them
    ranked_at_once: tuple[Tensor, ...] = ()


def _entry() -> _PendingEntry:
    """The entry in the slot, put there if another kind was."""
    entry = last_batch.held(_PendingEntry)
    if entry is None:
        entry = _PendingEntry()
        last_batch.hold(entry)
    return entry


def _held_run(run: list[list[Tensor]]) -> _HeldRun:
    """What is held of ``run`` (these very tensors), held anew where nothing is."""
    entry = _entry()
    for held in entry.runs:
        if held.holds(run):
            return held
    held = _HeldRun(tuple(weakref.ref(t) for batch in run for t in batch))
    entry.runs = [*(other for other in entry.runs if other.alive()), held]
    return held


def shared_pending(
    inputs: tuple[Tensor, Tensor, Tensor, Tensor | None, Tensor | None], may_read: bool
) -> list[Tensor]:
    """The pending copies of a checked batch: those the previous metric made of the
    same input objects where they prove equal to them (``may_read``: whether
    comparing, which reads values, is allowed), else made here and held for the next."""
    entry = last_batch.held(_PendingEntry)
    if may_read and entry is not None and _same_inputs(entry, inputs):
        copies = [ref() for ref in entry.copies]
        kept = [copy for copy in copies if copy is not None]
        if len(kept) == FIELDS and all(
            _equal(given, copy) for given, copy in zip(_compared(inputs), kept, strict=True)
        ):
            return kept
    own = pending_batch(*inputs)
    entry = _entry()
    entry.inputs = tuple(None if t is None else weakref.ref(t) for t in inputs)
    entry.copies = tuple(weakref.ref(t) for t in own)
    entry.runs = [held for held in entry.runs if held.alive()]
    entry.ranked_at_once = ()
    return own


def keep_alive(copies: list[Tensor]) -> None:
    """Keep the last batch's copies alive past the ranking that drops them (the cap's),
    for the next metrics given the batch (:attr:`_PendingEntry.ranked_at_once`)."""
    entry = last_batch.held(_PendingEntry)
    if (
        entry is not None
        and len(entry.copies) == len(copies)
        and all(ref() is copy for ref, copy in zip(entry.copies, copies, strict=True))
    ):
        entry.ranked_at_once = tuple(copies)


def _same_inputs(entry: _PendingEntry, inputs: tuple[Tensor | None, ...]) -> bool:
    return len(entry.inputs) == len(inputs) and all(
        (None if ref is None else ref()) is given
        for ref, given in zip(entry.inputs, inputs, strict=True)
    )


def _compared(inputs: tuple[Tensor, Tensor, Tensor, Tensor | None, Tensor | None]) -> list[Tensor]:
    """The inputs as :func:`pending_batch` copies them (a missing flag: empty)."""
    preds, target, indexes, mask, judged = inputs
    empty = torch.empty(0, dtype=torch.bool, device=preds.device)
    flags = [empty if t is None else t.detach() for t in (mask, judged)]
    return [preds.detach(), target.detach(), indexes.detach().to(torch.int64), *flags]


def _equal(given: Tensor, copy: Tensor) -> bool:
    return (
        given.dtype == copy.dtype
        and given.shape == copy.shape
        and given.device == copy.device
        and bool(torch.equal(given, copy))
    )


class PendingRanking(FixedDtypes):
    """A metric's pending whole-query batches (the module docstring): held by
    :meth:`_hold`, ranked at the cap and by whatever reads or copies the states, so
    that the sums then hold every batch, added in update order."""

    request: RankingRequest
    keep_per_query: bool
    _sums_name: str
    _per_query_name: str
    #: the pending state's name (a state only with ``whole_queries=True``)
    _pending_name: str

    def _hold(
        self,
        preds: Tensor,
        target: Tensor,
        indexes: Tensor,
        mask: Tensor | None,
        judged: Tensor | None,
    ) -> None:
        """Keep a checked whole-query batch until it is ranked (at the cap: now)."""
        pending = getattr(self, self._pending_name)
        # proving a batch equal to the previous metric's copies reads values: with
        # validate_args=False only where that costs no device sync
        may_read = self.request.options.validate_args or host_reads_are_free(preds)
        copies = shared_pending((preds, target, indexes, mask, judged), may_read)
        pending.extend(copies)
        if pending_entries(pending) >= PENDING_ENTRIES:
            keep_alive(copies)
            self._rank_pending()

    def _rank_pending(self) -> None:
        """Rank the pending whole-query batches into the states (:mod:`.pending`).

        The batches are dropped from the pending state first: where the ranking of
        several together raises, each is ranked alone, in update order, and the
        first error raised once the others are in the sums.
        """
        # no pending state: a metric without whole_queries (or pickled before there was
        # one); a Tensor: the state once synchronised, ranked before the sync
        pending = getattr(self, getattr(self, "_pending_name", ""), None)
        if not isinstance(pending, list) or not pending:
            return
        found = runs(pending)
        pending.clear()  # in place: a compute group's metrics share the list
        failed: Exception | None = None
        for run in found:
            try:
                self._add_run(run)
            except Exception as error:  # any error of the ranking: raised below
                if len(run) == 1:
                    failed = failed or error
                    continue
                for batch in run:
                    try:
                        self._add_run([batch])
                    except Exception as alone:
                        failed = failed or alone
        if failed is not None:
            raise failed

    def _add_run(self, run: list[list[Tensor]]) -> None:
        sums, per_query = rank_run(self.request, run, self.keep_per_query)
        state = getattr(self, self._sums_name)
        for batch_sums in sums:  # in update order, as each batch ranked alone adds
            state.add_(batch_sums.to(state.device))
        for values in per_query:
            getattr(self, self._per_query_name).append(values.to(state.device))

    @property
    def metric_state(self) -> dict[str, list[Tensor] | Tensor]:
        """The states (TorchMetrics'), every pending whole-query batch ranked into them."""
        self._rank_pending()
        return super().metric_state

    def sync(self, *args: Any, **kwargs: Any) -> None:
        """TorchMetrics' ``sync``, after ranking the pending batches: the states it
        caches (and restores at ``unsync``) and gathers are the ranked ones."""
        self._rank_pending()
        super().sync(*args, **kwargs)

    def _sync_dist(self, *args: Any, **kwargs: Any) -> None:
        self._rank_pending()
        super()._sync_dist(*args, **kwargs)

    @torch.jit.unused
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """TorchMetrics' ``forward`` (the batch's value, the batch added to the states),
        after ranking the pending batches, so that the batch's sums come after theirs."""
        self._rank_pending()
        return super().forward(*args, **kwargs)

    def merge_state(self, incoming_state: dict[str, Any] | Metric) -> None:
        """TorchMetrics' ``merge_state``, after ranking the pending batches of both."""
        self._rank_pending()
        if isinstance(incoming_state, PendingRanking):
            incoming_state._rank_pending()
        super().merge_state(incoming_state)

    def state_dict(  # type: ignore[override]  # TorchMetrics' signature
        self,
        destination: dict[str, Any] | None = None,
        prefix: str = "",
        keep_vars: bool = False,
    ) -> dict[str, Any]:
        """TorchMetrics' ``state_dict``, after ranking the pending batches (an empty
        pending state is saved, which any version loads)."""
        self._rank_pending()
        return super().state_dict(destination=destination, prefix=prefix, keep_vars=keep_vars)


__all__ = [
    "FIELDS",
    "PENDING_ENTRIES",
    "pending_batch",
    "pending_entries",
    "plan_run",
    "rank_run",
    "runs",
]
