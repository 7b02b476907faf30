"""TorchMetrics' names and signatures: the ``Retrieval*`` aliases of the TorchMetrics
adapters and ``ranking_plugins.torchmetrics_functional`` (issue 26, item 4).

TorchMetrics' own tests of both run in ``tests/peers/torchmetrics_retrieval``; these
check what those do not: that every name and signature is TorchMetrics', positional
arguments included, and the forms this package adds (several ks).
"""

from __future__ import annotations

import inspect

import pytest
import torch

pytest.importorskip("torchmetrics")

import torchmetrics.functional.retrieval as tm_functional
import torchmetrics.retrieval as tm_retrieval

import ranking_plugins.torchmetrics as adapters
from ranking_plugins import rank_metrics
from ranking_plugins import torchmetrics_functional as functional

#: TorchMetrics' class -> the adapter class its alias is
ALIASES = {
    "RetrievalMRR": adapters.MRR,
    "RetrievalNormalizedDCG": adapters.NDCG,
    "RetrievalMAP": adapters.MAP,
    "RetrievalHitRate": adapters.HitRate,
    "RetrievalPrecision": adapters.Precision,
    "RetrievalRecall": adapters.Recall,
    "RetrievalFallOut": adapters.FallOut,
    "RetrievalRPrecision": adapters.RPrecision,
    "RetrievalAUROC": adapters.AUC,
    # the curves exist under TorchMetrics' names only
    "RetrievalPrecisionRecallCurve": adapters.RetrievalPrecisionRecallCurve,
    "RetrievalRecallAtFixedPrecision": adapters.RetrievalRecallAtFixedPrecision,
}


def _parameters(function) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def test_every_retrieval_class_of_torchmetrics_has_its_alias():
    assert set(tm_retrieval.__all__) == set(ALIASES)
    assert set(ALIASES) <= set(adapters.__all__)


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_alias_takes_torchmetrics_signature(name):
    alias = getattr(adapters, name)
    assert issubclass(alias, ALIASES[name])
    assert _parameters(alias.__init__) == _parameters(getattr(tm_retrieval, name).__init__)


def test_functional_has_every_function_of_torchmetrics_with_its_signature():
    assert sorted(functional.__all__) == sorted(tm_functional.__all__)
    for name in functional.__all__:
        ours = _parameters(getattr(functional, name))
        theirs = _parameters(getattr(tm_functional, name))
        assert ours == theirs, name


def _grouped(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    indexes = torch.arange(6).repeat_interleave(7)
    preds = torch.rand(42, generator=generator)  # no ties: both libraries agree
    target = torch.randint(0, 2, (42,), generator=generator)
    target[indexes == 5] = 0  # one query without relevant items
    return preds, target, indexes


@pytest.mark.parametrize(
    ("name", "positional"),
    [
        ("RetrievalMRR", ("pos", -100, 3)),
        ("RetrievalNormalizedDCG", ("skip", -100, 2)),
        ("RetrievalHitRate", ("neg", -100, 1)),
        ("RetrievalRecall", ("pos", None, 4)),
        ("RetrievalPrecision", ("neg", -100, 10, True)),
        ("RetrievalRPrecision", ("pos", None)),
        ("RetrievalMAP", ("skip", None)),
    ],
)
def test_positional_arguments_land_where_torchmetrics_puts_them(name, positional):
    preds, target, indexes = _grouped()
    if positional[1] is not None:
        target[::9] = positional[1]  # ignored entries: `ignore_index` read from its place
    ours = getattr(adapters, name)(*positional)(preds, target, indexes=indexes)
    theirs = getattr(tm_retrieval, name)(*positional)(preds, target, indexes=indexes)
    torch.testing.assert_close(ours, theirs.double(), rtol=0.0, atol=1e-6)


def test_fall_out_alias_defaults_to_torchmetrics_action():
    assert adapters.RetrievalFallOut().request.options.empty_target_action == "pos"
    assert adapters.FallOut().request.options.empty_target_action == "neg"


def test_alias_takes_several_ks_as_its_adapter():
    preds, target, indexes = _grouped()
    values = adapters.RetrievalNormalizedDCG(top_k=[1, 3])(preds, target, indexes=indexes)
    expected = adapters.NDCG(top_k=[1, 3])(preds, target, indexes=indexes)
    assert values.keys() == expected.keys() == {"ndcg@1", "ndcg@3"}
    for key in values:
        torch.testing.assert_close(values[key], expected[key], rtol=0.0, atol=0.0)


def test_aliases_refuse_what_their_adapter_refuses_by_name():
    with pytest.raises(ValueError, match="`max_fpr`"):
        adapters.RetrievalAUROC(max_fpr=1.5)
    with pytest.raises(ValueError, match="`empty_target_action`"):
        adapters.RetrievalMRR("sometimes")


@pytest.mark.parametrize("top_k, max_fpr", [(None, 0.5), (3, None), (3, 0.4)])
def test_auroc_takes_top_k_and_max_fpr_as_torchmetrics(top_k, max_fpr):
    """RetrievalAUROC(top_k, max_fpr) and retrieval_auroc: TorchMetrics' values."""
    generator = torch.Generator().manual_seed(5)
    preds = torch.rand(24, generator=generator, dtype=torch.float64)
    target = torch.rand(24, generator=generator) > 0.6
    indexes = torch.arange(24) // 8
    ours = adapters.RetrievalAUROC(top_k=top_k, max_fpr=max_fpr)
    theirs = tm_retrieval.RetrievalAUROC(top_k=top_k, max_fpr=max_fpr)
    ours.update(preds, target, indexes=indexes)
    theirs.update(preds, target, indexes=indexes)
    torch.testing.assert_close(ours.compute().float(), theirs.compute().float())
    for q in range(3):
        rows = indexes == q
        expected = tm_functional.retrieval_auroc(
            preds[rows], target[rows], top_k=top_k, max_fpr=max_fpr
        )
        got = functional.retrieval_auroc(preds[rows], target[rows], top_k=top_k, max_fpr=max_fpr)
        torch.testing.assert_close(got, expected.double())


# ------------------------------------------------------------------ functional

# the functions whose numbers equal TorchMetrics' on tie-free scores with positive
# scores and binary targets, at every k (MAP@k and fall-out of a query without
# relevant items are documented differences, checked in the peers' suite)
SAME = [
    "retrieval_reciprocal_rank",
    "retrieval_normalized_dcg",
    "retrieval_hit_rate",
    "retrieval_precision",
    "retrieval_recall",
]


@pytest.mark.parametrize("name", SAME)
@pytest.mark.parametrize("top_k", [None, 1, 3, 20])
def test_functional_equals_torchmetrics(name, top_k):
    generator = torch.Generator().manual_seed(1)
    for _ in range(5):
        preds = torch.rand(12, generator=generator)
        target = torch.randint(0, 2, (12,), generator=generator)
        ours = getattr(functional, name)(preds, target, top_k=top_k)
        theirs = getattr(tm_functional, name)(preds, target, top_k=top_k)
        assert ours.dtype == torch.float64 and ours.shape == ()
        torch.testing.assert_close(ours, theirs.double(), rtol=0.0, atol=1e-6)


def test_functional_whole_list_metrics_equal_torchmetrics():
    generator = torch.Generator().manual_seed(2)
    for _ in range(5):
        preds = torch.rand(3, 4, generator=generator)  # any shape: read flattened
        target = torch.randint(0, 2, (3, 4), generator=generator)
        for name in ("retrieval_r_precision", "retrieval_auroc", "retrieval_average_precision"):
            ours = getattr(functional, name)(preds, target)
            theirs = getattr(tm_functional, name)(preds, target)
            torch.testing.assert_close(ours, theirs.double(), rtol=0.0, atol=1e-6)


@pytest.mark.parametrize("max_k", [None, 1, 5, 15])
@pytest.mark.parametrize("adaptive_k", [False, True])
def test_precision_recall_curve_equals_torchmetrics(max_k, adaptive_k):
    generator = torch.Generator().manual_seed(3)
    preds = torch.rand(8, generator=generator)
    target = torch.tensor([0, 1, 0, 0, 1, 1, 0, 0])
    ours = functional.retrieval_precision_recall_curve(preds, target, max_k, adaptive_k)
    theirs = tm_functional.retrieval_precision_recall_curve(preds, target, max_k, adaptive_k)
    torch.testing.assert_close(ours[0], theirs[0].double(), rtol=0.0, atol=1e-6)
    torch.testing.assert_close(ours[1], theirs[1].double(), rtol=0.0, atol=1e-6)
    assert torch.equal(ours[2], theirs[2])


def test_functional_values_are_the_kernels():
    """Ties and the rules are the package's: the values of rank_metrics on one query."""
    preds = torch.tensor([0.5, 0.5, 0.2, 0.9, 0.1])
    target = torch.tensor([1, 0, 0, 0, 1])
    for name, metric in [
        ("retrieval_reciprocal_rank", "mrr"),
        ("retrieval_average_precision", "map"),
    ]:
        (expected,) = rank_metrics(preds[None], target[None], [metric], 2, gain="linear").values()
        assert getattr(functional, name)(preds, target, top_k=2).item() == expected.item()


def test_several_ks_stack_in_the_order_given():
    preds = torch.tensor([0.5, 0.3, 0.2, 0.1])
    target = torch.tensor([0, 1, 0, 1])
    values = functional.retrieval_recall(preds, target, top_k=[4, 1, 2, 4])
    singles = [functional.retrieval_recall(preds, target, top_k=k) for k in (4, 1, 2, 4)]
    assert torch.equal(values, torch.stack(singles))
    assert values.tolist() == [1.0, 0.0, 0.5, 1.0]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: functional.retrieval_hit_rate(torch.rand(3), torch.ones(4)),
            "`preds` and `target` must be of the same shape",
        ),
        (
            lambda: functional.retrieval_hit_rate(torch.tensor(0.5), torch.tensor(1)),
            "non-empty and non-scalar",
        ),
        (
            lambda: functional.retrieval_recall(torch.ones(3, dtype=torch.bool), torch.ones(3)),
            "`preds` must be a tensor of floats",
        ),
        (
            lambda: functional.retrieval_recall(torch.rand(3), torch.ones(3), top_k=0),
            "`top_k` has to be a positive integer or None",
        ),
        (
            lambda: functional.retrieval_recall(torch.rand(3), torch.ones(3), top_k=[2, 1.5]),
            "`top_k` has to be a positive integer or None",
        ),
        (
            lambda: functional.retrieval_precision(torch.rand(3), torch.ones(3), adaptive_k=1),
            "`adaptive_k` has to be a boolean",
        ),
        (
            lambda: functional.retrieval_precision_recall_curve(torch.rand(3), torch.ones(3), 0),
            "`max_k` has to be a positive integer or None",
        ),
        (
            lambda: functional.retrieval_auroc(torch.rand(3), torch.ones(3), max_fpr=1.5),
            "`max_fpr`",
        ),
        (
            lambda: functional.retrieval_recall(torch.tensor([0.1, float("nan")]), torch.ones(2)),
            "`preds` must not contain NaN",
        ),
    ],
)
def test_functional_refusals_name_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_functional_takes_what_the_kernel_takes():
    """Integer scores and graded targets (a grade > 0 is relevant); an empty query."""
    preds = torch.tensor([5, 3, 2, 1])
    graded = torch.tensor([0, 3, 0, 1])
    binary = (graded > 0).long()
    for name in functional.__all__:
        if name in ("retrieval_precision_recall_curve", "retrieval_normalized_dcg"):
            continue  # a tuple; graded gains
        function = getattr(functional, name)
        assert torch.equal(function(preds, graded), function(preds.double(), binary)), name
        empty = function(torch.zeros(0), torch.zeros(0))
        assert empty.item() == (1.0 if name == "retrieval_fall_out" else 0.0), name
