"""Each TorchMetrics class takes the options its metrics read and refuses the others by
name, as TorchMetrics refuses a keyword its class does not take
(``RetrievalMRR(max_fpr=0.1)`` computed plain MRR; ``RetrievalRecall(adaptive_k=True)``
plain recall)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

pytest.importorskip("torchmetrics")

import torchmetrics.retrieval as tm

from ranking_plugins import torchmetrics as rp
from ranking_plugins.torchmetrics.arguments import METRIC_OPTIONS

#: a value of each option away from its default in the TorchMetrics adapter
CHANGED: dict[str, Any] = {
    "gain": "exponential",
    "ap_denominator": "min_k_relevant",
    "adaptive_k": True,
    "fall_out_empty": "no_relevant",
    "max_fpr": 0.5,
    "rbp_persistence": 0.5,
}

#: the classes of one metric: (class, its metric name in RankingMetrics, its top_k)
SINGLE = [
    (rp.HitRate, "hit_rate", 3),
    (rp.MRR, "mrr", 3),
    (rp.NDCG, "ndcg", 3),
    (rp.MAP, "map", 3),
    (rp.Precision, "precision", 7),
    (rp.Recall, "recall", 3),
    (rp.F1, "f1", 7),
    (rp.FallOut, "fall_out", 3),
    (rp.RPrecision, "r_precision", None),
    (rp.MeanRank, "mean_rank", None),
    (rp.AUC, "auc", None),
]


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Graded queries of 4 ... 6 items (grouped), some without relevant or non-relevant
    items, with ties."""
    generator = torch.Generator().manual_seed(3)
    sizes = torch.tensor([4, 6, 5, 6, 4, 5])
    indexes = torch.repeat_interleave(torch.arange(len(sizes)), sizes)
    preds = torch.randint(0, 4, (int(sizes.sum()),), generator=generator).float()
    target = torch.randint(0, 3, (int(sizes.sum()),), generator=generator)
    target[indexes == 0] = 0
    target[indexes == 1] = 2
    return preds, target, indexes


def _value(metric: str, top_k: int | None, **options: Any) -> torch.Tensor:
    computed = rp.RankingMetrics([metric], top_k=top_k, **options)
    computed.update(*_inputs())
    return torch.stack(list(computed.compute().values()))


def test_the_issue_cases_are_refused_as_torchmetrics() -> None:
    for make, reference in (
        (lambda: rp.RetrievalMRR(max_fpr=0.1), lambda: tm.RetrievalMRR(max_fpr=0.1)),
        (
            lambda: rp.RetrievalRecall(adaptive_k=True),
            lambda: tm.RetrievalRecall(adaptive_k=True),
        ),
    ):
        with pytest.raises(ValueError, match="Unexpected keyword arguments") as theirs:
            reference()
        with pytest.raises(ValueError) as ours:
            make()
        assert str(ours.value).startswith(str(theirs.value))
    with pytest.raises(ValueError, match=r"RetrievalMRR\(\) takes no `max_fpr`"):
        rp.RetrievalMRR(max_fpr=0.1)


@pytest.mark.parametrize(("cls", "metric", "top_k"), SINGLE)
@pytest.mark.parametrize("option", METRIC_OPTIONS)
def test_a_class_takes_exactly_the_options_its_metric_reads(cls, metric, top_k, option) -> None:
    """An option taken changes the value on these inputs; one refused would not have
    (RankingMetrics, which takes every option, shows it)."""
    changed = _value(metric, top_k, **{option: CHANGED[option]})
    default = _value(metric, top_k)
    keywords = {} if top_k is None else {"top_k": top_k}
    if option in cls.metric_options:
        cls(**keywords, **{option: CHANGED[option]})
        assert not torch.equal(changed, default), "an option taken must change the numbers"
    else:
        torch.testing.assert_close(changed, default, equal_nan=True)
        with pytest.raises(ValueError, match=rf"takes no `{option}`: what it computes"):
            cls(**keywords, **{option: CHANGED[option]})


@pytest.mark.parametrize(
    ("make", "option"),
    [
        (lambda **kw: rp.RetrievalPrecision(**kw), "adaptive_k"),
        (lambda **kw: rp.RetrievalAUROC(**kw), "max_fpr"),
        (lambda **kw: rp.RetrievalPrecisionRecallCurve(**kw), "adaptive_k"),
        (lambda **kw: rp.RetrievalRecallAtFixedPrecision(0.5, **kw), "adaptive_k"),
        (lambda **kw: rp.RetrievalNormalizedDCG(**kw), "gain"),
    ],
)
def test_the_options_torchmetrics_classes_take_are_kept(make, option) -> None:
    make(**{option: CHANGED[option]})


@pytest.mark.parametrize(
    "make",
    [lambda **kw: rp.RetrievalPrecisionRecallCurve(**kw), lambda **kw: rp.RankingMetrics(**kw)],
)
def test_torchmetrics_metric_keywords_are_kept(make) -> None:
    metric = make(compute_on_cpu=True, dist_sync_on_step=True, sync_on_compute=False)
    assert metric.compute_on_cpu and metric.dist_sync_on_step and not metric.sync_on_compute


def test_the_curves_refuse_an_option_of_other_metrics() -> None:
    with pytest.raises(ValueError, match=r"RetrievalPrecisionRecallCurve\(\) takes no `gain`"):
        rp.RetrievalPrecisionRecallCurve(gain="exponential")
    # the whole catalogue of options stays with RankingMetrics
    rp.RankingMetrics(["precision", "recall"], top_k=2, **CHANGED)
