"""The diversity measures on tensors: exact expectations over tied orders, and bad input."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

from ranking_plugins import ArgumentError, rank_metrics

NAMES = [
    "alpha_ndcg",
    "alpha_dcg",
    "err_ia",
    "nerr_ia",
    "nrbp",
    "nnrbp",
    "p_ia",
    "ap_ia",
    "subtopic_recall",
]


@pytest.mark.parametrize("seed", range(4))
def test_average_is_the_mean_over_tied_orders(seed: int) -> None:
    """ties="average" equals the mean over every order of each tie group (brute force)."""
    rng = random.Random(seed)
    n, s = 6, 3
    grades = torch.tensor(
        [[[rng.choice([0, 0, 1, 2]) for _ in range(s)] for _ in range(n)]], dtype=torch.float64
    )
    scores = torch.tensor([[float(rng.choice([1, 2, 3])) for _ in range(n)]])
    options = {"top_k": [2, 4], "alpha": 0.3, "beta": 0.7}
    average = rank_metrics(scores, grades, NAMES, ties="average", **options)
    total = dict.fromkeys(average, 0.0)
    orders = list(itertools.permutations(range(n)))
    for order in orders:
        distinct = scores * 100 + torch.tensor(order, dtype=torch.float64)
        one = rank_metrics(distinct, grades, NAMES, ties="first", **options)
        for key in total:
            total[key] += float(one[key])
    for key, value in average.items():
        assert float(value) == pytest.approx(total[key] / len(orders), abs=1e-12), key


def test_first_pessimistic_optimistic_bound_average() -> None:
    grades = torch.tensor([[[1, 0], [0, 1], [1, 1], [0, 0]]], dtype=torch.float64)
    scores = torch.ones(1, 4)
    values = {
        ties: float(
            rank_metrics(scores, grades, ["alpha_ndcg"], top_k=2, ties=ties)["alpha_ndcg@2"]
        )
        for ties in ("pessimistic", "average", "optimistic")
    }
    assert values["pessimistic"] <= values["average"] <= values["optimistic"]


def test_no_order_dependence_on_subtopics() -> None:
    """Permuting the subtopic axis (the qrels records' order) changes nothing, alpha 0.3."""
    rng = random.Random(7)
    grades = torch.tensor(
        [[[rng.choice([0, 1]) for _ in range(5)] for _ in range(12)] for _ in range(3)],
        dtype=torch.float64,
    )
    scores = torch.rand(3, 12, generator=torch.Generator().manual_seed(0))
    base = rank_metrics(scores, grades, NAMES, top_k=[3, 10], alpha=0.3, reduction="none")
    for perm in ([4, 3, 2, 1, 0], [1, 3, 0, 4, 2]):
        other = rank_metrics(
            scores, grades[..., perm], NAMES, top_k=[3, 10], alpha=0.3, reduction="none"
        )
        for key in base:
            assert torch.equal(base[key], other[key]), key


def test_any_cutoff_beyond_twenty() -> None:
    grades = torch.zeros(1, 40, 2)
    grades[0, 30, 0] = 1
    scores = -torch.arange(40.0).unsqueeze(0)
    found = rank_metrics(scores, grades, ["subtopic_recall", "alpha_ndcg"], top_k=[20, 31])
    assert float(found["subtopic_recall@20"]) == 0.0
    assert float(found["subtopic_recall@31"]) == 1.0
    assert float(found["alpha_ndcg@31"]) == pytest.approx(1 / torch.log2(torch.tensor(32.0)).item())


def test_no_subtopic_judgments_is_a_clear_error() -> None:
    with pytest.raises(ArgumentError, match=r"`target` must hold subtopic judgments"):
        rank_metrics(torch.rand(2, 3), torch.ones(2, 3), ["alpha_ndcg"], top_k=2)


def test_runs_without_subtopics_is_a_clear_error() -> None:
    from ranking_plugins import evaluate_run

    with pytest.raises(ValueError, match=r"need subtopic judgments"):
        evaluate_run({"q": {"d": 1}}, {"q": {"d": 1.0}}, ["alpha_nDCG@5"])


def test_cutoff_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="top_k"):
        rank_metrics(torch.rand(1, 3), torch.ones(1, 3, 2), ["alpha_ndcg"], top_k=0)


@pytest.mark.parametrize("alpha", [-0.1, 1.0, 1.5, float("nan")])
def test_alpha_outside_unit_interval_is_refused(alpha: float) -> None:
    with pytest.raises(ArgumentError, match=r"`alpha` must be a number in \[0, 1\)"):
        rank_metrics(torch.rand(1, 3), torch.ones(1, 3, 2), ["alpha_ndcg"], top_k=2, alpha=alpha)


def test_subtopic_target_of_another_shape_is_refused() -> None:
    with pytest.raises(ArgumentError, match=r"\(Q, N, S\) grade tensor"):
        rank_metrics(torch.rand(2, 3), torch.ones(2, 4, 2), ["alpha_ndcg"], top_k=2)


def _loop_target(target: torch.Tensor, memberships: torch.Tensor, intents: torch.Tensor) -> list:
    """target[q, n] * category[n, s] * intent[q, s], element by element."""
    q_count, n_count = target.shape
    return [
        [
            [
                float(target[q, n]) * float(memberships[n, s]) * float(intents[q, s])
                for s in range(intents.shape[1])
            ]
            for n in range(n_count)
        ]
        for q in range(q_count)
    ]


def test_intent_target_from_item_categories() -> None:
    from ranking_plugins.functional import intent_target

    generator = torch.Generator().manual_seed(3)
    target = torch.randint(0, 3, (4, 9), generator=generator)
    one = torch.randint(0, 3, (9,), generator=generator)
    several = torch.rand(9, 3, generator=generator) < 0.4
    intents = torch.rand(4, 3, generator=generator).round(decimals=1)
    one_hot = torch.zeros(9, 3)
    one_hot[torch.arange(9), one] = 1
    for categories, memberships in ((one, one_hot), (several, several)):
        built = intent_target(target, categories, intents)
        assert built.shape == (4, 9, 3)
        expected = torch.tensor(_loop_target(target, memberships, intents), dtype=built.dtype)
        assert torch.allclose(built, expected), categories.dtype
    # alpha-nDCG over genres: the built target is the (Q, N, S) form
    scores = torch.rand(4, 9, generator=generator)
    built = intent_target(target, several, intents > 0)
    hand = torch.tensor(_loop_target(target, several, intents > 0))
    found = rank_metrics(scores, built, NAMES, top_k=[3, 9], reduction="none")
    expected = rank_metrics(scores, hand, NAMES, top_k=[3, 9], reduction="none")
    for key in expected:
        assert torch.allclose(found[key], expected[key], atol=1e-12), key


@pytest.mark.parametrize(
    ("categories", "intents", "argument"),
    [
        (torch.tensor([0, 1, 3]), torch.ones(2, 3), "item_categories"),  # id >= S
        (torch.tensor([0, -1, 1]), torch.ones(2, 3), "item_categories"),
        (torch.tensor([0, 1]), torch.ones(2, 3), "item_categories"),  # N = 2 != 3
        (torch.ones(3, 2), torch.ones(2, 3), "item_categories"),  # S = 2 != 3
        (torch.tensor([0, 1, 2]), torch.ones(3, 3), "query_intents"),  # Q = 3 != 2
        (
            torch.tensor([0, 1, 2]),
            torch.tensor([[1.0, float("nan"), 0], [1, 1, 1]]),
            "query_intents",
        ),
    ],
)
def test_intent_target_refuses_bad_input(
    categories: torch.Tensor, intents: torch.Tensor, argument: str
) -> None:
    from ranking_plugins.functional import intent_target

    with pytest.raises(ArgumentError, match=f"`{argument}`"):
        intent_target(torch.ones(2, 3), categories, intents)
