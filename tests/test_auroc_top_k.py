"""Issue 26, item 2: AUROC's ``top_k`` (``auroc@k``) and ``max_fpr`` as TorchMetrics defines
them, exact under every tie policy."""

from __future__ import annotations

import random

import pytest
import torch
from host_reads import forbid_host_reads
from reference import is_relevant, reference_auroc
from torchmetrics.functional.retrieval import retrieval_auroc
from torchmetrics.retrieval import RetrievalAUROC

from ranking_plugins import rank_metrics
from ranking_plugins.torchmetrics import AUC

TIES = ("average", "first", "pessimistic", "optimistic")
MAX_FPRS = (None, 0.1, 0.25, 0.5, 0.77, 1.0)


@pytest.fixture
def float64_default():
    """TorchMetrics divides integer counts in the default dtype: float64 gives its exact value."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


@pytest.mark.parametrize("max_fpr", MAX_FPRS)
def test_auroc_at_k_is_torchmetrics_retrieval_auroc_without_ties(float64_default, max_fpr) -> None:
    generator = torch.Generator().manual_seed(26)
    checked = 0
    for _ in range(60):
        n = int(torch.randint(2, 14, (), generator=generator))
        preds = torch.rand(n, dtype=torch.float64, generator=generator)  # no ties
        target = torch.randint(0, 2, (n,), generator=generator)
        if not bool(target.any()):
            continue
        for k in (None, 1, 2, 4, n, n + 3):
            want = retrieval_auroc(preds, target, top_k=k, max_fpr=max_fpr)
            got = rank_metrics(preds[None], target[None], ["auroc"], k, max_fpr=max_fpr)
            key = "auroc" if k is None else f"auroc@{k}"
            torch.testing.assert_close(got[key], want.to(torch.float64), rtol=0, atol=1e-15)
            checked += 1
    assert checked > 300


@pytest.mark.parametrize("max_fpr", [None, 0.25])
@pytest.mark.parametrize("top_k", [None, 1, 3, 10])
def test_the_adapter_takes_retrieval_aurocs_arguments(top_k, max_fpr) -> None:
    generator = torch.Generator().manual_seed(1)
    indexes = torch.randint(0, 12, (200,), generator=generator)
    preds = torch.rand(200, dtype=torch.float64, generator=generator)
    target = torch.randint(0, 2, (200,), generator=generator)
    # queries whose whole list holds one class differ without top_k (documented)
    for q in indexes.unique():
        members = indexes == q
        target[members.nonzero()[0]] = 1
        target[members.nonzero()[-1]] = 0 if int(members.sum()) > 1 else 1
    ours = AUC(top_k=top_k, max_fpr=max_fpr)
    theirs = RetrievalAUROC(top_k=top_k, max_fpr=max_fpr)
    for part in torch.arange(200).chunk(3):
        ours.update(preds[part], target[part], indexes=indexes[part])
        theirs.update(preds[part], target[part], indexes=indexes[part])
    # RetrievalAUROC keeps its scores as float32: its rounding, not ours
    torch.testing.assert_close(ours.compute(), theirs.compute().double(), rtol=0, atol=1e-6)


def _tied_queries(seed: int, count: int):
    rng = random.Random(seed)
    for _ in range(count):
        n = rng.randint(1, 8)
        scores = [rng.choice([0.1, 0.2, 0.3, 0.5]) for _ in range(n)]  # small tie groups
        grades = [rng.choice([0, 0, 1, 2]) for _ in range(n)]
        ranked = [rng.random() > 0.15 for _ in range(n)]
        yield scores, grades, ranked, rng.randint(1, n + 2), rng.choice(MAX_FPRS)


@pytest.mark.parametrize("ties", TIES)
def test_auroc_at_k_is_the_expectation_over_the_orders_of_tie_groups(ties: str) -> None:
    """Brute force over every order of every tie group; cutoffs inside mixed groups too."""
    for scores, grades, ranked, k, max_fpr in _tied_queries(TIES.index(ties), 150):
        want = reference_auroc(scores, grades, ranked, k, max_fpr, ties=ties)
        got = rank_metrics(
            torch.tensor([scores]),
            torch.tensor([grades]),
            ["auroc"],
            [k],
            mask=torch.tensor([ranked]),
            ties=ties,
            max_fpr=max_fpr,
            empty_target_action="skip",
        )[f"auroc@{k}"]
        if want is None:
            assert got.isnan(), (scores, grades, ranked, k, max_fpr)
        else:
            assert float(got) == pytest.approx(want, abs=1e-12), (scores, grades, ranked, k)


@pytest.mark.parametrize("ties", TIES)
def test_partial_auc_of_the_whole_list_is_the_expectation_over_orders(ties: str) -> None:
    """``auc`` with ``max_fpr``: undefined where the ranked items hold one class, as ``auc``."""
    for scores, grades, ranked, _, max_fpr in _tied_queries(7 + len(ties), 150):
        classes = {is_relevant(g, None) for g, r in zip(grades, ranked, strict=True) if r}
        want = reference_auroc(scores, grades, ranked, None, max_fpr, ties=ties)
        got = rank_metrics(
            torch.tensor([scores]),
            torch.tensor([grades]),
            ["auc"],
            None,
            mask=torch.tensor([ranked]),
            ties=ties,
            max_fpr=max_fpr,
            empty_target_action="skip",
        )["auc"]
        if want is None or len(classes) < 2:
            assert got.isnan()
        else:
            assert float(got) == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("ties", TIES)
def test_item_index_targets_give_the_dense_targets_values(ties: str) -> None:
    """Counted ranks (item ids) and a ranked list read the same statistic."""
    generator = torch.Generator().manual_seed(3)
    preds = torch.randint(0, 4, (16, 9), generator=generator).double()  # many ties
    items = torch.stack([torch.randperm(9, generator=generator)[:3] for _ in range(16)])
    dense = torch.zeros(16, 9).scatter_(1, items, 1.0)
    for max_fpr in (None, 0.3):
        options = {"ties": ties, "max_fpr": max_fpr}
        counted = rank_metrics(preds, items, ["auroc", "auc"], [1, 3, 5, 20], **options)
        ranked = rank_metrics(preds, dense, ["auroc", "auc"], [1, 3, 5, 20], **options)
        for key, value in ranked.items():
            torch.testing.assert_close(counted[key], value, rtol=0, atol=1e-12)


@pytest.mark.parametrize("bad", [0, 0.0, -0.5, 1.5, float("nan"), True])
def test_max_fpr_out_of_range_is_refused(bad: object) -> None:
    error = TypeError if isinstance(bad, bool) else ValueError
    with pytest.raises(error, match=r"`max_fpr` must be None or a number in \(0, 1\]"):
        AUC(max_fpr=bad)  # type: ignore[arg-type]
    with pytest.raises(error, match="`max_fpr`"):
        rank_metrics(torch.rand(1, 3), torch.ones(1, 3), ["auc"], None, max_fpr=bad)


@pytest.mark.parametrize("ties", ["first", "pessimistic", "optimistic"])
def test_auroc_reads_the_host_only_under_average(ties: str, monkeypatch) -> None:
    """Its groups of alike items need no host read (the entry's ``host_under_average``)."""
    generator = torch.Generator().manual_seed(0)
    preds = torch.randint(0, 3, (4, 8), generator=generator).float()  # ties in every row
    target = torch.randint(0, 2, (4, 8), generator=generator)
    with forbid_host_reads(monkeypatch):
        rank_metrics(
            preds, target, ["auroc", "auc"], 3, ties=ties, max_fpr=0.5, validate_args=False
        )
