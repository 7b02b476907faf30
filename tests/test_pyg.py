"""ranking_plugins.pyg against the real torch_geometric.metrics ``LinkPred*`` classes.

The oracle is the installed torch_geometric (2.8.x): every metric on random
ranked lists, weighted and unweighted, split across updates, the collection;
score matrices with ties against ``rank_metrics`` under each tie policy; bad
inputs; two gloo processes against one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("torch_geometric")
pytest.importorskip("torchmetrics")

import torch_geometric.metrics as G
from processes import spawn_and_wait

import ranking_plugins.pyg as R
from ranking_plugins import ArgumentError, rank_metrics
from ranking_plugins.kernel import ItemInputs
from ranking_plugins.options import Options
from ranking_plugins.pyg import inputs as Inputs
from ranking_plugins.pyg import ranked as P
from ranking_plugins.pyg.metrics import PYG_DEFAULTS, evaluate_links
from ranking_plugins.request import RankingRequest

ACCURACY = ("Precision", "Recall", "F1", "MAP", "NDCG", "MRR", "HitRatio")
TABLE_NAMES = {
    "Precision": "precision",
    "Recall": "recall",
    "F1": "f1",
    "MAP": "map",
    "NDCG": "ndcg",
    "MRR": "mrr",
    "HitRatio": "hit_rate",
}


def problem(
    seed: int, examples: int = 40, items: int = 25, width: int = 10, edges: int = 120
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Ranked lists (no repeated item in a row), distinct edges (some examples have
    none), weights of both signs (PyG drops those <= 0)."""
    gen = torch.Generator().manual_seed(seed)
    ranked = torch.stack([torch.randperm(items, generator=gen)[:width] for _ in range(examples)])
    rows = torch.randint(0, examples - 3, (edges,), generator=gen)  # the last 3: no edge
    cols = torch.randint(0, items, (edges,), generator=gen)
    keys = torch.unique(rows * items + cols)
    weight = torch.rand(keys.shape, generator=gen) * 4 - 0.5
    return ranked, torch.stack([keys // items, keys % items]), weight


def split(n: int) -> list[slice]:
    return [slice(0, n // 3), slice(n // 3, n // 2), slice(n // 2, n)]


def batches(
    ranked: torch.Tensor, index: torch.Tensor, weight: torch.Tensor
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The problem in three updates, each with its examples renumbered from 0."""
    out = []
    for part in split(ranked.shape[0]):
        inside = (index[0] >= part.start) & (index[0] < part.stop)
        local = torch.stack([index[0][inside] - part.start, index[1][inside]])
        out.append((ranked[part], local, weight[inside]))
    return out


def close(mine: torch.Tensor, theirs: torch.Tensor) -> bool:
    return abs(float(mine) - float(theirs)) <= 1e-5 * max(1.0, abs(float(theirs)))


@pytest.mark.parametrize("name", ACCURACY)
@pytest.mark.parametrize("k", [1, 4, 10, 12])
def test_accuracy_metrics_equal_pyg_across_updates(name: str, k: int) -> None:
    ranked, index, weight = problem(k)
    mine, theirs = getattr(R, "LinkPred" + name)(k), getattr(G, "LinkPred" + name)(k)
    for pred, edges, w in batches(ranked, index, weight):
        # unweighted metrics ignore the weights, as PyG's do
        mine.update(pred, edges, w)
        theirs.update(pred, edges, w)
    assert close(mine.compute(), theirs.compute()), (name, k)
    mine.reset()
    assert float(mine.compute()) == 0.0  # PyG's value before any example


@pytest.mark.parametrize("k", [1, 3, 10])
def test_weighted_ndcg_equals_pyg(k: int) -> None:
    ranked, index, weight = problem(100 + k)
    mine, theirs = R.LinkPredNDCG(k, weighted=True), G.LinkPredNDCG(k, weighted=True)
    for pred, edges, w in batches(ranked, index, weight):
        mine.update(pred, edges, w)
        theirs.update(pred, edges, w)
    assert close(mine.compute(), theirs.compute())
    with pytest.raises(ArgumentError, match="edge_label_weight"):
        mine.update(ranked, index)


def test_map_trec_eval_option_divides_by_relevant() -> None:
    """``ap_denominator="relevant"``: trec_eval's map_cut (rank_metrics' default MAP)."""
    ranked, index, _ = problem(7, items=12, width=12)
    scores = torch.zeros(ranked.shape[0], 12)
    scores.scatter_(1, ranked, torch.arange(12, 0, -1, dtype=torch.float32).expand_as(ranked))
    grades = torch.zeros_like(scores)
    grades[index[0], index[1]] = 1.0
    mine = R.LinkPredMAP(5, ap_denominator="relevant")
    mine.update(ranked, index)
    expected = rank_metrics(scores, grades, "map", 5, empty_target_action="skip")["map@5"]
    assert close(mine.compute(), expected)
    pyg_convention = R.LinkPredMAP(5)
    pyg_convention.update(ranked, index)
    assert not close(pyg_convention.compute(), expected)  # the option changes the number


def test_exposure_metrics_equal_pyg() -> None:
    ranked, index, _ = problem(3, examples=60, items=30, width=8)
    gen = torch.Generator().manual_seed(5)
    category = torch.randint(0, 5, (30,), generator=gen)
    popularity = torch.rand(30, generator=gen) * 100
    pairs = [
        (R.LinkPredCoverage(5, num_dst_nodes=30), G.LinkPredCoverage(5, num_dst_nodes=30)),
        (R.LinkPredDiversity(6, category=category), G.LinkPredDiversity(6, category=category)),
        (
            R.LinkPredAveragePopularity(4, popularity=popularity),
            G.LinkPredAveragePopularity(4, popularity=popularity),
        ),
        (R.LinkPredPersonalization(5), G.LinkPredPersonalization(5, max_src_nodes=None)),
        (
            R.LinkPredPersonalization(5, max_src_nodes=25),
            G.LinkPredPersonalization(5, max_src_nodes=25),
        ),
    ]
    for mine, theirs in pairs:
        for pred, edges, _ in batches(ranked, index, torch.ones(index.shape[1])):
            mine.update(pred, edges)
            theirs.update(pred, edges)
        assert close(mine.compute(), theirs.compute()), type(mine).__name__


def _brute_force_listed_edges(ranked: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    where = {(int(r), int(c)): e for e, (r, c) in enumerate(index.T.tolist())}
    return torch.tensor(
        [[where.get((q, int(item)), -1) for item in row] for q, row in enumerate(ranked)],
        dtype=torch.int64,
    )


@pytest.mark.parametrize("table_bytes", [None, 40, 1 << 20])
def test_the_edges_at_the_listed_places_by_table_and_by_sorting(
    monkeypatch: pytest.MonkeyPatch, table_bytes: int | None
) -> None:
    """Every way of finding the hits among the listed places: one table, tables of a
    few examples each, sorting (None); an item listed twice is a hit twice; a hit's
    weight is its edge's."""
    ranked, index, _ = problem(13, examples=30, items=20, width=8)
    ranked[4, 5] = ranked[4, 1]  # listed twice
    index = torch.cat([index, torch.tensor([[4], [int(ranked[4, 1])]])], dim=1)
    index = torch.unique(index, dim=1)  # the edge may be there already
    if table_bytes is None:
        monkeypatch.setattr(P, "MAX_TABLE_BLOCKS", 0)
    else:
        monkeypatch.setattr(P, "TABLE_BYTES", table_bytes)
        monkeypatch.setattr(P, "MAX_TABLE_BLOCKS", 1000)
    expected = _brute_force_listed_edges(ranked, index)
    hits = P.listed_hits(ranked, index[0], index[1], 20)
    assert torch.equal(hits, expected >= 0)
    assert int(hits[4].sum()) >= 2
    weight = torch.rand(index.shape[1], dtype=torch.float64) + 0.5
    expected_weights = torch.where(expected >= 0, weight[expected.clamp(min=0)], 0.0)
    assert torch.equal(
        P.hit_weights(ranked, hits, index[0], index[1], weight, 20), expected_weights
    )


def _listed_scores(ranked: torch.Tensor, num_items: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The lists as a score matrix: strictly decreasing scores where listed, a mask."""
    scores = torch.zeros(ranked.shape[0], num_items)
    width = ranked.shape[1]
    scores.scatter_(1, ranked, torch.arange(width, 0, -1, dtype=torch.float32).expand_as(ranked))
    mask = torch.zeros(ranked.shape[0], num_items, dtype=torch.bool).scatter_(1, ranked, True)
    return scores, mask


def _same_bits(mine: Any, general: Any) -> None:
    assert list(mine.results) == list(general.results)
    for key in general.results:
        a, b = mine.results[key], general.results[key]
        torch.testing.assert_close(a.values, b.values, rtol=0, atol=0, equal_nan=True)
        assert torch.equal(a.counted, b.counted), key


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("width", [3, 10])
@pytest.mark.parametrize("options", [{}, {"ap_denominator": "relevant", "gain": "exponential"}])
def test_ranked_lists_read_as_lists_equal_the_ranking_of_their_scores(
    weighted: bool, width: int, options: dict[str, Any]
) -> None:
    """The lists read as they are give the kernel's numbers for the same lists given
    as scores with a mask (the unlisted ground truth masked out), to the bit."""
    ranked, index, weight = problem(17, examples=50, items=25, width=width)
    rows, cols, w = Inputs.positive_edges(index[0], index[1], weight if weighted else None)
    names = ["precision", "recall", "f1", "map", "ndcg", "mrr", "hit_rate"]
    request = RankingRequest.create(
        names, [1, 4, 10, 12], Options.create("t", **{**PYG_DEFAULTS, **options})
    )
    mine = evaluate_links(request, ranked, rows, cols, w)
    scores, mask = _listed_scores(ranked, 25)
    grades = Inputs.dense_grades(scores, rows, cols, w)
    _same_bits(mine, request.evaluate(scores, grades, mask=mask))


def test_exposure_of_ranked_lists_equals_the_ranking_of_their_scores() -> None:
    ranked, _, _ = problem(19, examples=50, items=30, width=8)
    gen = torch.Generator().manual_seed(6)
    items = ItemInputs.create(
        item_categories=torch.randint(0, 4, (30,), generator=gen),
        item_popularity=torch.rand(30, generator=gen) * 10,
    )
    for k in (3, 8, 11):
        request = RankingRequest.create(
            ["coverage", "diversity", "arp", "personalisation"],
            k,
            Options.create("t", **PYG_DEFAULTS),
            items=items,
        )
        mine = request.read(P.top_items(ranked[:, :k], 30, request.options.rule))
        scores, mask = _listed_scores(ranked[:, :k], 30)
        general = request.evaluate(scores, torch.zeros_like(scores), mask=mask)
        _same_bits(mine, general)
        assert mine.exposure is not None and general.exposure is not None
        assert torch.equal(mine.exposure.sums, general.exposure.sums)
        assert torch.equal(mine.exposure.queries, general.exposure.queries)
        # the exposure alone (coverage, personalization): from the lists' items directly
        direct = P.listed_exposure(ranked[:, :k], 30)
        assert torch.equal(direct.sums, general.exposure.sums)
        assert torch.equal(direct.queries, general.exposure.queries)


def test_collection_keys_and_values_equal_pyg() -> None:
    ranked, index, weight = problem(11, items=30)
    category = torch.arange(30) % 4

    def members(lib: Any) -> list[Any]:
        return [
            lib.LinkPredMAP(k=10),
            lib.LinkPredPrecision(k=3),
            lib.LinkPredRecall(k=5),
            lib.LinkPredNDCG(k=5),
            lib.LinkPredNDCG(k=5, weighted=True),
            lib.LinkPredMRR(k=2),
            lib.LinkPredCoverage(k=4, num_dst_nodes=30),
            lib.LinkPredDiversity(k=4, category=category),
        ]

    mine, theirs = R.LinkPredMetricCollection(members(R)), G.LinkPredMetricCollection(members(G))
    assert mine.max_k == theirs.max_k and mine.weighted == theirs.weighted
    for pred, edges, w in batches(ranked, index, weight):
        mine.update(pred, edges, w)
        theirs.update(pred, edges, w)
    got, expected = mine.compute(), theirs.compute()
    assert list(got) == list(expected)
    for key in expected:
        assert close(got[key], expected[key]), key
    mine.reset()
    assert all(float(v) == 0.0 for v in mine.compute().values())
    named = R.LinkPredMetricCollection({"map": R.LinkPredMAP(k=10)})
    named.update(ranked, index, weight)  # weights <= 0 dropped, as the collection does
    assert close(named.compute()["map"], expected["LinkPredMAP@10"])


def _tied_scores(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 4, (30, 12), generator=gen).float()  # many ties
    grades = (torch.rand(30, 12, generator=gen) < 0.25).float()
    grades[-2:] = 0  # examples without ground truth
    rows, cols = grades.nonzero(as_tuple=True)
    return scores, torch.stack([rows, cols]), grades


@pytest.mark.parametrize("ties", ["average", "first", "pessimistic", "optimistic"])
@pytest.mark.parametrize("name", ACCURACY)
def test_score_matrix_with_ties_follows_the_tie_policy(name: str, ties: str) -> None:
    scores, index, grades = _tied_scores(3)
    mine = getattr(R, "LinkPred" + name)(4, ties=ties)
    mine.update(scores[:11], index[:, index[0] < 11])
    later = index[:, index[0] >= 11]
    mine.update(scores[11:], torch.stack([later[0] - 11, later[1]]))
    table = TABLE_NAMES[name]
    expected = rank_metrics(scores, grades, table, 4, ties=ties, **PYG_DEFAULTS)[f"{table}@4"]
    assert close(mine.compute(), expected)


def test_tie_free_score_matrix_equals_pyg_on_its_ranking() -> None:
    gen = torch.Generator().manual_seed(4)
    scores = torch.rand(20, 15, generator=gen)
    _, index, _ = problem(4, examples=20, items=15)
    for name in ACCURACY:
        mine, theirs = getattr(R, "LinkPred" + name)(5), getattr(G, "LinkPred" + name)(5)
        mine.update(scores, index)
        theirs.update(scores.topk(5, dim=1).indices, index)
        assert close(mine.compute(), theirs.compute()), name
    coverage = R.LinkPredCoverage(3, num_dst_nodes=15)
    coverage.update(scores, index)
    expected = G.LinkPredCoverage(3, num_dst_nodes=15)
    expected.update(scores.topk(3, dim=1).indices, index)
    assert close(coverage.compute(), expected.compute())


def test_an_update_without_examples_changes_nothing() -> None:
    ranked, index, _ = problem(6)
    nothing = (torch.zeros(0, 5, dtype=torch.int64), torch.zeros(2, 0, dtype=torch.int64))
    for make in (lambda: R.LinkPredNDCG(5), lambda: R.LinkPredCoverage(5, num_dst_nodes=25)):
        once, twice = make(), make()
        once.update(ranked, index)
        twice.update(ranked, index)
        twice.update(*nothing)
        assert float(twice.compute()) == float(once.compute())


def test_bad_inputs_name_the_argument() -> None:
    ranked, index, _ = problem(2, items=20)
    with pytest.raises(ArgumentError, match="`k`"):
        R.LinkPredMAP(0)
    with pytest.raises(ArgumentError, match="`pred_index_mat`"):
        R.LinkPredMAP(3).update(ranked - 1, index)  # an id -1
    with pytest.raises(ArgumentError, match=r"`pred_index_mat`.*20 catalogue items"):
        R.LinkPredCoverage(3, num_dst_nodes=20).update(ranked + 1, index)
    with pytest.raises(ArgumentError, match="`pred_index_mat`"):
        R.LinkPredMAP(3).update(ranked[0], index)
    with pytest.raises(ArgumentError, match=r"`edge_label_index`.*examples of the batch"):
        R.LinkPredMAP(3).update(ranked[:5], index)
    with pytest.raises(ArgumentError, match=r"`edge_label_index`.*twice"):
        R.LinkPredMAP(3).update(ranked, torch.cat([index, index[:, :1]], dim=1))
    with pytest.raises(ArgumentError, match="`edge_label_index`"):
        R.LinkPredMAP(3).update(ranked, index[0])
    with pytest.raises(ArgumentError, match="`edge_label_weight`"):
        R.LinkPredNDCG(3, weighted=True).update(ranked, index, torch.ones(2))
    with pytest.raises(ArgumentError, match="`weighted`"):
        R.LinkPredRecall(3, weighted=True)
    with pytest.raises(ArgumentError, match="`weighted`"):
        R.LinkPredMAP(3, weighted=True)
    with pytest.raises(ArgumentError, match="`num_dst_nodes`"):
        R.LinkPredCoverage(3, num_dst_nodes=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_cuda_device_equals_the_cpu() -> None:
    ranked, index, weight = problem(8)
    for weighted in (False, True):
        cpu, gpu = R.LinkPredNDCG(5, weighted=weighted), R.LinkPredNDCG(5, weighted=weighted)
        gpu = gpu.to("cuda")
        cpu.update(ranked, index, weight)
        gpu.update(ranked.cuda(), index.cuda(), weight.cuda())
        assert gpu.compute().device.type == "cuda"
        assert close(gpu.compute().cpu(), cpu.compute())


def _ddp_members(category: torch.Tensor) -> list[Any]:
    return [
        R.LinkPredMAP(k=5),
        R.LinkPredNDCG(k=5, weighted=True),
        R.LinkPredCoverage(k=4, num_dst_nodes=25),
        R.LinkPredDiversity(k=4, category=category),
        R.LinkPredPersonalization(k=4),
    ]


def _ddp_worker(rank: int, init_file: str, out_dir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        ranked, index, weight = problem(21)
        parts = batches(ranked, index, weight)
        collection = R.LinkPredMetricCollection(_ddp_members(torch.arange(25) % 3))
        for pred, edges, w in parts[:1] if rank == 0 else parts[1:]:  # uneven shares
            collection.update(pred, edges, w)
        torch.save(collection.compute(), Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(
    not torch.distributed.is_available(), reason="torch.distributed is not available"
)
def test_two_gloo_processes_equal_one(tmp_path: Path) -> None:
    spawn_and_wait(_ddp_worker, (str(tmp_path / "init"), str(tmp_path)), nprocs=2)
    ranked, index, weight = problem(21)
    one = R.LinkPredMetricCollection(_ddp_members(torch.arange(25) % 3))
    for pred, edges, w in batches(ranked, index, weight):
        one.update(pred, edges, w)
    expected = one.compute()
    for rank in range(2):
        got = torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)
        assert list(got) == list(expected)
        for key in expected:
            assert close(got[key], expected[key]), (rank, key)
