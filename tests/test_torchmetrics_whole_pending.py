"""``whole_queries=True`` ranks its batches several at a time (``pending.py``).

The sums must be those of ranking every batch alone and adding its totals in
update order, to the bit, whatever the cap; the pending batches must be ranked
before anything reads or copies the states.
"""

from __future__ import annotations

import math
import pickle
from typing import Any

import pytest
import torch
from torchmetrics import MetricCollection
from torchmetrics.wrappers import BootStrapper, MetricTracker

from ranking_plugins.batch_cache import last_batch
from ranking_plugins.torchmetrics import MAP, MRR, NDCG, RankingMetrics, pending
from ranking_plugins.totals import Totals, per_query_matrix

Batch = dict[str, Any]


def batches(
    seed: int,
    updates: int = 6,
    integer: bool = False,
    judged: bool = False,
    uniform: bool = False,
    queries: int | None = None,
    ordered: bool = False,
) -> list[Batch]:
    """Whole-query batches of ids in any order, the same id in several batches (each
    batch's own query), some batches without a mask; lists of uneven lengths, or
    (``uniform``) of one length but in one batch, which the pending batches' ranking
    tells apart; ``queries`` in every batch (None: 1 to 8); ``ordered``: ids rising
    within and across batches, as a loader in query order gives them."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for number in range(updates):
        count = int(torch.randint(1, 9, (1,), generator=gen)) if queries is None else queries
        lengths = torch.randint(1, 40, (count,), generator=gen)
        if uniform:
            lengths.fill_(9 if number == 4 else 13)
        elif number == 2:
            lengths[0] = 300  # a long list beside short ones: several length classes
        ids = torch.randperm(12, generator=gen)[:count] * 5 - 7
        if ordered:  # a loader in query order: ids rise within and across batches
            ids = torch.arange(count) + 20 * number
        indexes = torch.repeat_interleave(ids, lengths)
        if number % 2 and not ordered:  # out of order entries
            indexes = indexes[torch.randperm(indexes.numel(), generator=gen)]
        size = indexes.numel()
        preds = torch.randn(size, generator=gen)
        if integer:
            preds = (preds * 2).round().long()  # many ties
        batch: Batch = {
            "preds": preds,
            "target": torch.randint(0, 4, (size,), generator=gen),
            "indexes": indexes,
        }
        if number % 3:
            batch["mask"] = torch.rand(size, generator=gen) < 0.9
        if judged:
            batch["judged"] = torch.rand(size, generator=gen) < 0.7
        out.append(batch)
    return out


def expected_sums(metric: Any, data: list[Batch]) -> tuple[torch.Tensor, torch.Tensor]:
    """Each batch ranked alone by the request, its totals added in update order, and
    every query's values; the metric's ``ignore_index`` applied as ``update`` does."""
    request = metric.request
    keys = request.query_keys
    sums = torch.zeros(5, len(keys), dtype=torch.float64)
    per_query = []
    for batch in data:
        batch = dict(batch)
        if metric.ignore_index is not None:
            keep = batch["target"] != metric.ignore_index
            batch = {name: value[keep] for name, value in batch.items()}
        if batch["preds"].numel() == 0:
            continue
        evaluation = request.evaluate(
            batch.pop("preds"), batch.pop("target"), indexes=batch.pop("indexes"), **batch
        )
        sums.add_(Totals.of(evaluation, keys, request.options.weighted).sums)
        per_query.append(per_query_matrix(evaluation, keys))
    return sums, torch.cat(per_query)


def feed(metric: Any, data: list[Batch]) -> None:
    for batch in data:
        metric.update(**batch)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal to the bit (NaN where NaN)."""
    return a.shape == b.shape and bool(
        ((a == b) | (a.isnan() & b.isnan())).all() & (torch.signbit(a) == torch.signbit(b)).all()
    )


OPTIONS: list[dict[str, Any]] = [
    {},
    {"ties": "first", "empty_target_action": "skip"},
    {"ties": "pessimistic", "ignore_index": 2, "gain": "exponential"},
    {"relevance_threshold": 2, "weighted": True, "validate_args": False},
    {"empty_target_action": "pos", "adaptive_k": True},
]

METRICS = ("mrr", "ndcg", "map", "recall", "precision", "auc", "r_precision", "mean_rank", "err")


@pytest.mark.parametrize("cap", [1, 50, 400, 2**20])
@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("integer", [False, True], ids=["float scores", "int scores"])
@pytest.mark.parametrize(
    "shape",
    [
        (False, None, False),
        (True, None, False),
        (True, 5, False),
        (False, None, True),
        (True, 5, True),
    ],
    ids=[
        "uneven lists",
        "one length",
        "one length, 5 queries a batch",
        "uneven lists, ids in order",
        "one length, 5 queries a batch, ids in order",
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_sums_are_each_batch_ranked_alone_to_the_bit(
    monkeypatch: pytest.MonkeyPatch,
    cap: int,
    options: dict[str, Any],
    integer: bool,
    shape: tuple[bool, int | None, bool],
    seed: int,
) -> None:
    monkeypatch.setattr(pending, "PENDING_ENTRIES", cap)
    data = batches(seed, integer=integer, uniform=shape[0], queries=shape[1], ordered=shape[2])
    metric = RankingMetrics(
        METRICS, top_k=[1, 5, None], whole_queries=True, keep_per_query=True, **options
    )
    feed(metric, data)
    sums, per_query = expected_sums(metric, data)
    state = metric.metric_state  # ranks what is pending
    assert not state[metric._pending_name]
    assert same(state[metric._sums_name], sums)
    got = torch.cat(state[metric._per_query_name])
    assert same(got, per_query)


@pytest.mark.parametrize("seed", [0, 1])
def test_judged_batches_to_the_bit(seed: int) -> None:
    data = batches(seed, judged=True)
    data[1].pop("judged")  # a batch without: ranked apart from the others, in turn
    metric = RankingMetrics(("bpref", "infap", "ndcg"), top_k=[5, None], whole_queries=True)
    feed(metric, data)
    assert same(metric.totals.sums, expected_sums(metric, data)[0])


@pytest.mark.usefixtures("never_at_cap")
def test_batches_of_one_list_length_ranked_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches whose lists all have one length share one kernel call; a batch of another
    length, or of uneven lengths, is ranked alone."""
    calls = counted_ranks(monkeypatch)
    data = batches(5, uniform=True)  # batch 4 of another length
    for batch in data:
        batch.pop("mask", None)
    data.append(batches(6)[2])  # uneven lengths
    metric = MRR(whole_queries=True)
    feed(metric, data)
    assert same(metric.totals.sums, expected_sums(metric, data)[0])
    sizes = [batch["preds"].numel() for batch in data]
    assert calls == [sum(sizes[:4]), sizes[4], sizes[5], sizes[6]]


@pytest.mark.usefixtures("never_at_cap")
@pytest.mark.parametrize(
    "first", [13, 9, 26], ids=["first batch like the others", "first apart", "same sizes"]
)
def test_ids_in_order_ranked_in_one_call(monkeypatch: pytest.MonkeyPatch, first: int) -> None:
    """Ids in query order, lists of one length: one kernel call, whichever batch's length
    differs (a length read off the first query is checked against every query)."""
    calls = counted_ranks(monkeypatch)
    data = batches(9, uniform=True, queries=4, ordered=True)  # batch 4: lists of 9
    for batch in data:
        batch.pop("mask", None)
    if first == 9:
        data = [data[4], *data[:4], *data[5:]]
        data[0]["indexes"] = data[0]["indexes"] - 200  # below the others, in order
    if first == 26:  # batch 4 as two lists of 26 (the size of four of 13)
        data[4] = dict(data[0])
        data[4]["indexes"] = torch.arange(2).repeat_interleave(26) + 80
    metric = MRR(whole_queries=True)
    feed(metric, data)
    assert same(metric.totals.sums, expected_sums(metric, data)[0])
    sizes = [batch["preds"].numel() for batch in data]
    if first in (13, 26):
        assert calls == [sum(sizes[:4]), sizes[4], sizes[5]]
    else:
        assert calls == [sizes[0], sum(sizes[1:])]


def test_float_and_integer_scores_each_ranked_in_their_dtype() -> None:
    data = batches(0) + batches(1, integer=True) + batches(2)
    metric = RankingMetrics(("mrr", "ndcg"), whole_queries=True)
    feed(metric, data)
    assert same(metric.totals.sums, expected_sums(metric, data)[0])


def test_ids_spread_over_the_whole_int64_range() -> None:
    data = batches(3)
    data[0]["indexes"] = data[0]["indexes"] * 2**58  # the range times batches overflows
    metric = RankingMetrics(("mrr", "map"), whole_queries=True)
    feed(metric, data)
    assert same(metric.totals.sums, expected_sums(metric, data)[0])


def test_pending_until_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pending, "PENDING_ENTRIES", 10**9)
    metric = MRR(whole_queries=True)
    data = batches(0)
    feed(metric, data)
    held = getattr(metric, metric._pending_name)
    assert len(held) == pending.FIELDS * len(data)
    assert not bool(getattr(metric, metric._sums_name).any())  # nothing ranked yet
    monkeypatch.setattr(pending, "PENDING_ENTRIES", 1)
    metric.update(**data[0])  # at the cap: every pending batch ranked
    assert not getattr(metric, metric._pending_name)
    assert same(metric.totals.sums, expected_sums(metric, [*data, data[0]])[0])


def test_update_keeps_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """A buffer rewritten after ``update`` changes nothing pending."""
    data = batches(4)
    reference = NDCG(whole_queries=True)
    feed(reference, data)
    metric = NDCG(whole_queries=True)
    for batch in data:
        metric.update(**batch)
        for value in batch.values():
            value.zero_() if value.dtype != torch.bool else value.fill_(False)
    assert same(metric.compute(), reference.compute())


# -- the points where the pending batches must be ranked --------------------------


def counted_ranks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The entries of every kernel ranking of pending batches, appended as they happen."""
    calls: list[int] = []
    rank = pending._kernel_rank

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[1].numel())
        return rank(*args, **kwargs)

    monkeypatch.setattr(pending, "_kernel_rank", counted)
    return calls


@pytest.fixture
def never_at_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing ranked at ``update``: only where the states are read."""
    monkeypatch.setattr(pending, "PENDING_ENTRIES", 10**9)


def fresh(**kwargs: Any) -> Any:
    return RankingMetrics(("mrr", "ndcg"), top_k=[3, None], whole_queries=True, **kwargs)


def expected_value(data: list[Batch]) -> dict[str, torch.Tensor]:
    metric = fresh()
    sums = expected_sums(metric, data)[0]
    return dict(zip(metric.keys, Totals(metric.request.query_keys, sums).mean(), strict=True))


def assert_values(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert got.keys() == want.keys()
    for key in want:
        assert same(got[key].reshape(()), want[key].reshape(())), key


@pytest.mark.usefixtures("never_at_cap")
def test_compute_ranks_what_is_pending() -> None:
    data = batches(0)
    metric = fresh()
    feed(metric, data)
    assert_values(metric.compute(), expected_value(data))
    assert not getattr(metric, metric._pending_name)


@pytest.mark.usefixtures("never_at_cap")
def test_forward_ranks_what_is_pending_first() -> None:
    """forward saves the states, resets, updates, computes and adds the saved states."""
    data = batches(1)
    metric = fresh()
    feed(metric, data[:-1])
    value = metric(**data[-1])
    assert_values(value, expected_value(data[-1:]))
    assert not getattr(metric, metric._pending_name)
    assert same(metric.totals.sums, expected_sums(metric, data)[0])


@pytest.mark.usefixtures("never_at_cap")
def test_state_dict_round_trip() -> None:
    data = batches(2)
    metric = fresh()
    metric.persistent(True)
    feed(metric, data)
    saved = metric.state_dict()
    assert saved[metric._pending_name] == []
    loaded = fresh()
    loaded.load_state_dict(saved)
    assert_values(loaded.compute(), expected_value(data))


@pytest.mark.usefixtures("never_at_cap")
def test_merge_state_ranks_both_sides() -> None:
    data = batches(3)
    left, right = fresh(), fresh()
    feed(left, data[:3])
    feed(right, data[3:])
    left.merge_state(right)
    assert not getattr(right, right._pending_name)
    assert not getattr(left, left._pending_name)
    # TorchMetrics adds the incoming sums and this metric's
    want = expected_sums(right, data[3:])[0] + expected_sums(left, data[:3])[0]
    assert same(left.totals.sums, want)


@pytest.mark.usefixtures("never_at_cap")
def test_metric_state_and_totals_rank_what_is_pending() -> None:
    data = batches(4)
    metric = fresh()
    feed(metric, data)
    sums = expected_sums(metric, data)[0]
    assert same(metric.metric_state[metric._sums_name], sums)
    other = fresh()
    feed(other, data)
    assert same(other.totals.sums, sums)


@pytest.mark.usefixtures("never_at_cap")
def test_pickle_and_clone_keep_what_is_pending() -> None:
    data = batches(5)
    metric = fresh()
    feed(metric, data)
    assert getattr(metric, metric._pending_name)
    want = expected_value(data)
    assert_values(pickle.loads(pickle.dumps(metric)).compute(), want)
    assert_values(metric.clone().compute(), want)


@pytest.mark.usefixtures("never_at_cap")
def test_reset_drops_what_is_pending() -> None:
    metric = fresh()
    feed(metric, batches(0))
    metric.reset()
    assert not getattr(metric, metric._pending_name)
    data = batches(1)
    feed(metric, data)
    assert_values(metric.compute(), expected_value(data))


@pytest.mark.usefixtures("never_at_cap")
def test_compute_group_members_share_what_is_pending() -> None:
    """Metrics of the same sums form one compute group: the collection updates the
    first; any member's compute ranks the shared pending batches once."""
    data = batches(6)
    collection = MetricCollection({"a": fresh(), "b": fresh()})
    feed(collection, data)
    assert collection.compute_groups == {0: ["a", "b"]}
    want = expected_value(data)
    # the second alone first: it ranks the batches its first member holds
    b = collection._modules["b"]
    assert_values(b.compute(), want)
    values = collection.compute()
    for name in ("a", "b"):
        assert_values({key[2:]: v for key, v in values.items() if key[0] == name}, want)
    copied = collection["a"]  # a deep copy of the group's states
    assert_values(copied.compute(), want)


@pytest.mark.usefixtures("never_at_cap")
def test_compute_group_of_other_values_refused() -> None:
    collection = MetricCollection(
        {"mrr": MRR(whole_queries=True), "ndcg": NDCG(whole_queries=True)},
        compute_groups=[["mrr", "ndcg"]],
    )
    feed(collection, batches(0))
    with pytest.raises(ValueError, match="compute_groups"):
        collection.compute()


@pytest.mark.usefixtures("never_at_cap")
def test_tracker_and_bootstrapper() -> None:
    data = batches(7)
    tracker = MetricTracker(MRR(whole_queries=True))
    for part in (data[:3], data[3:]):
        tracker.increment()
        feed(tracker, part)
    want = [float(expected_value(part)["mrr"]) for part in (data[:3], data[3:])]
    got = tracker.compute_all()
    assert [float(v) for v in got] == want
    boot = BootStrapper(MRR(whole_queries=True), num_bootstraps=3)
    feed(boot, data)
    found = boot.compute()
    assert all(math.isfinite(float(v)) for v in found.values())


def test_empty_query_refused_at_its_update() -> None:
    metric = MRR(whole_queries=True, empty_target_action="error")
    good = batches(0)[0]
    metric.update(**good)
    with pytest.raises(ValueError, match="no positive target"):
        metric.update(torch.tensor([0.5, 0.2]), torch.tensor([0, 0]), indexes=torch.tensor([1, 1]))


def test_nan_grades_refused_at_update() -> None:
    metric = NDCG(whole_queries=True)
    with pytest.raises(ValueError, match="NaN grades"):
        metric.update(
            torch.tensor([0.1, 0.2]), torch.tensor([1.0, math.nan]), indexes=torch.tensor([0, 0])
        )


def test_an_error_of_the_ranking_keeps_the_other_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """An error only the ranking finds (a gain past float64) raises where the batches are
    ranked; the batches before and after it are in the sums, as if each ranked alone."""
    monkeypatch.setattr(pending, "PENDING_ENTRIES", 10**9)
    data = batches(8)
    bad = {
        "preds": torch.tensor([0.3, 0.1]),
        "target": torch.tensor([2000.0, 1.0]),
        "indexes": torch.tensor([4, 4]),
    }
    metric = NDCG(whole_queries=True, gain="exponential")
    feed(metric, data[:3])
    metric.update(**bad)
    feed(metric, data[3:])
    with pytest.raises(ValueError, match="overflows float64"):
        metric.compute()
    assert not getattr(metric, metric._pending_name)
    assert same(metric.totals.sums, expected_sums(metric, data)[0])


# -- the metrics of a collection share the pending copies and their ranking ---------


def whole_collection(**options: Any) -> MetricCollection:
    return MetricCollection(
        {
            "mrr": MRR(whole_queries=True, **options),
            "ndcg": NDCG(whole_queries=True, **options),
            "map": MAP(whole_queries=True, **options),
        }
    )


@pytest.mark.parametrize("cap", [1, 60, 10**9])
@pytest.mark.parametrize(
    "options", [{}, {"ties": "first"}, {"validate_args": False}, {"ignore_index": 2}], ids=str
)
@pytest.mark.parametrize("uniform", [False, True], ids=["uneven lists", "one length"])
def test_collection_ranks_each_run_once(
    monkeypatch: pytest.MonkeyPatch, cap: int, options: dict[str, Any], uniform: bool
) -> None:
    """A collection of whole_queries metrics ranks its pending batches as often as one
    metric does (the next metrics read the first one's ranking of the same copies),
    and each metric's sums are each batch ranked alone, to the bit."""
    monkeypatch.setattr(pending, "PENDING_ENTRIES", cap)
    calls = counted_ranks(monkeypatch)
    data = batches(3, uniform=uniform, updates=8)
    last_batch.clear()
    single = MAP(whole_queries=True, **options)
    feed(single, data)
    single.compute()
    alone = list(calls)
    calls.clear()
    last_batch.clear()
    collection = whole_collection(**options)
    feed(collection, data)
    collection.compute()
    if "ignore_index" in options:  # each metric drops the entries into tensors of its own
        assert len(calls) == 3 * len(alone)
    else:
        assert calls == alone
    for metric in collection.values():
        assert not getattr(metric, metric._pending_name)
        assert same(metric.totals.sums, expected_sums(metric, data)[0])


@pytest.mark.usefixtures("never_at_cap")
def test_collection_shares_the_copies() -> None:
    """The next metric given the same input objects keeps the first one's copies."""
    data = batches(4)
    collection = whole_collection()
    feed(collection, data)
    held = [getattr(metric, metric._pending_name) for metric in collection.values()]
    assert len(held[0]) == pending.FIELDS * len(data)
    for other in held[1:]:
        assert all(a is b for a, b in zip(held[0], other, strict=True))


def interleaved(first: Any, second: Any, data: list[Batch]) -> list[Batch]:
    """Each batch to ``first``, then rewritten in place (scores and grades), then to
    ``second``; the batches as ``second`` got them."""
    rewritten = []
    for batch in data:
        first.update(**batch)
        batch["preds"].neg_()
        batch["target"].fill_(1)
        second.update(**batch)
        rewritten.append({name: value.clone() for name, value in batch.items()})
    return rewritten


@pytest.mark.usefixtures("never_at_cap")
def test_copies_not_shared_once_the_input_changed() -> None:
    """A batch rewritten in place between two metrics' updates is copied again: the
    first metric's copies no longer prove equal to it."""
    data = batches(5)
    original = [{name: value.clone() for name, value in batch.items()} for batch in data]
    first, second = MRR(whole_queries=True), NDCG(whole_queries=True)
    rewritten = interleaved(first, second, data)
    held = [getattr(metric, metric._pending_name) for metric in (first, second)]
    assert not any(a is b for a, b in zip(*held, strict=True))
    assert same(first.totals.sums, expected_sums(first, original)[0])
    assert same(second.totals.sums, expected_sums(second, rewritten)[0])


@pytest.mark.usefixtures("never_at_cap")
def test_copies_not_shared_where_reading_is_not_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """With validate_args=False where host reads are not free (an accelerator), no
    proof of equality is made: each metric copies the batch itself."""
    monkeypatch.setattr(pending, "host_reads_are_free", lambda tensor: False)
    data = batches(6)
    collection = whole_collection(validate_args=False)
    feed(collection, data)
    held = [getattr(metric, metric._pending_name) for metric in collection.values()]
    assert not any(a is b for a, b in zip(held[0], held[1], strict=True))
    for metric in collection.values():
        assert same(metric.totals.sums, expected_sums(metric, data)[0])


@pytest.mark.parametrize("cap", [1, 10**9])
def test_collection_of_other_rankings(monkeypatch: pytest.MonkeyPatch, cap: int) -> None:
    """Metrics that rank otherwise (another ``ties``, a ranking too shallow for the next
    metric) never read each other's ranking: each is its batches ranked alone."""
    monkeypatch.setattr(pending, "PENDING_ENTRIES", cap)
    data = batches(9, updates=8, integer=True)  # ties: "first" ranks otherwise
    collection = MetricCollection(
        {
            "a": NDCG(whole_queries=True, top_k=2),
            "b": MAP(whole_queries=True),
            "c": MAP(whole_queries=True, ties="first"),
            "d": NDCG(whole_queries=True, top_k=3),
        }
    )
    feed(collection, data)
    collection.compute()
    for metric in collection.values():
        assert same(metric.totals.sums, expected_sums(metric, data)[0])
