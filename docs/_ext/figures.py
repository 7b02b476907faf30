"""The site's figures, drawn when the docs build from the package's own outputs.

A Sphinx extension (``docs/conf.py`` lists it): on ``builder-inited`` it writes
every figure into ``docs/_figures/`` (not committed) before any page is read,
so a page's ``.. image:: /_figures/ties.png`` always shows what this version
of the package computes. Each figure runs the same code as the page beside it
(the tie example of concepts.rst, the worked example of compare.rst, the two
models of beyond_accuracy.rst, the metric of torchmetrics.rst); the speed-ups
are read out of ``benchmarks/RESULTS.md``, and ``headline.inc`` quotes them
with their workload and machine for the landing page, so no page holds a
number that the benchmarks no longer say.

Run on its own (``python docs/_ext/figures.py``) it writes the same files.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "_figures"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"

DPI = 110


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9, "axes.spines.top": False, "axes.spines.right": False})
    return plt


def _save(fig: Any, name: str) -> Path:
    path = OUT / name
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    _plt().close(fig)
    return path


# --------------------------------------------------------------------------- ties


def ties() -> Path:
    """concepts.rst's tied list: the ranks each policy gives, and the metrics they make."""
    import torch

    from ranking_plugins import rank_metrics
    from ranking_plugins.kernel import TIES

    plt = _plt()
    preds = torch.tensor([[0.9, 0.5, 0.5, 0.5, 0.1]])
    target = torch.tensor([[0, 0, 1, 0, 0]])
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.2, 2.9), width_ratios=(1, 1.5))
    for item, score in enumerate(preds[0].tolist()):
        relevant = bool(target[0, item])
        left.bar(item, score, color="C2" if relevant else "0.75")
        if relevant:
            left.text(item, score / 2, "relevant", ha="center", rotation=90, fontsize=8)
    left.axhspan(0.48, 0.52, xmin=0.2, xmax=0.8, color="C1", alpha=0.35, linewidth=0)
    left.text(2, 0.6, "tie group: ranks 2-4", ha="center", fontsize=8, color="C1")
    left.set_xticks(range(5), [f"item {i}" for i in range(5)], fontsize=8)
    left.set_ylabel("score")
    left.set_title("one query: items 1-3 tie", fontsize=9)

    metrics = ("mrr", "ndcg", "hit_rate")
    names = {"mrr": "MRR", "ndcg": "NDCG@3", "hit_rate": "HitRate@2"}
    width = 0.8 / len(TIES)
    for index, policy in enumerate(TIES):
        values = [
            float(rank_metrics(preds, target, [metric], top_k=k, ties=policy)[key])
            for metric, k, key in (
                ("mrr", None, "mrr"),
                ("ndcg", 3, "ndcg@3"),
                ("hit_rate", 2, "hit_rate@2"),
            )
        ]
        positions = [m + (index - (len(TIES) - 1) / 2) * width for m in range(len(metrics))]
        right.bar(positions, values, width, label=policy, color=f"C{index}")
    right.set_xticks(range(len(metrics)), [names[m] for m in metrics])
    right.set_ylim(0, 1.05)
    right.set_ylabel("value")
    right.legend(title="ties=", fontsize=8, title_fontsize=8, ncols=2, loc="upper left")
    right.set_title("the same list under the four policies", fontsize=9)
    fig.tight_layout()
    return _save(fig, "ties.png")


# --------------------------------------------------------------------------- compare


def compare_forest() -> Path:
    """compare.rst's worked example, drawn by ``ComparisonReport.plot()``."""
    import torch

    from ranking_plugins import rank_metrics
    from ranking_plugins.compare import compare

    generator = torch.Generator().manual_seed(0)
    target = (torch.rand(50, 20, generator=generator) < 0.15).long()
    noise = torch.rand(50, 20, generator=generator)
    scores = {
        "baseline": noise,
        "better": noise + 0.4 * target,
        "jitter": noise + 0.02 * torch.rand(50, 20, generator=generator),
    }
    systems = {
        name: rank_metrics(s, target, ["ndcg", "mrr"], top_k=10, reduction="none")
        for name, s in scores.items()
    }
    report = compare(systems, baseline="baseline", test="t", correction="holm")
    _plt()
    fig, _ = report.plot()
    return _save(fig, "compare.png")


# --------------------------------------------------------------------------- beyond accuracy


def beyond_accuracy() -> Path:
    """beyond_accuracy.rst's two models at k = 1, 2, 4: NDCG against coverage and novelty."""
    import torch

    from ranking_plugins import rank_metrics

    popularity = torch.tensor([50.0, 40.0, 30.0, 5.0, 4.0, 3.0, 2.0, 1.0])
    target = torch.tensor([0, 3, 5, 1, 6, 4])
    models = {
        "popular": popularity.expand(6, 8),
        "personal": torch.tensor(
            [
                [0.9, 0.1, 0.2, 0.8, 0.0, 0.1, 0.3, 0.2],
                [0.1, 0.2, 0.1, 0.7, 0.9, 0.0, 0.2, 0.1],
                [0.2, 0.1, 0.6, 0.1, 0.0, 0.3, 0.9, 0.1],
                [0.3, 0.8, 0.1, 0.2, 0.1, 0.9, 0.0, 0.2],
                [0.1, 0.0, 0.2, 0.1, 0.3, 0.2, 0.8, 0.9],
                [0.9, 0.2, 0.1, 0.0, 0.8, 0.1, 0.2, 0.3],
            ]
        ),
    }
    ks = [1, 2, 4]
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(8.2, 3.0), sharey=True)
    for colour, (model, preds) in enumerate(models.items()):
        results = rank_metrics(
            preds, target, ["ndcg", "coverage", "novelty"], top_k=ks, item_popularity=popularity
        )
        ndcg = [float(results[f"ndcg@{k}"]) for k in ks]
        for ax, other in zip(axes, ("coverage", "novelty"), strict=True):
            xs = [float(results[f"{other}@{k}"]) for k in ks]
            ax.plot(xs, ndcg, "o-", color=f"C{colour}", label=model)
            for k, x, y in zip(ks, xs, ndcg, strict=True):
                ax.annotate(
                    f"k={k}", (x, y), textcoords="offset points", xytext=(4, -10), fontsize=7
                )
    axes[0].set_xlabel("coverage@k (share of the catalogue shown)")
    axes[1].set_xlabel("novelty@k (bits of self-information)")
    axes[0].set_ylabel("NDCG@k")
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle("accuracy against coverage and novelty: one ranking per model", fontsize=9)
    fig.tight_layout()
    return _save(fig, "beyond_accuracy.png")


# --------------------------------------------------------------------------- metric@k


def metric_at_k() -> Path:
    """torchmetrics.rst's ``RankingMetrics`` over more cutoffs, drawn by its ``plot()``."""
    import torch

    from ranking_plugins.torchmetrics import RankingMetrics

    torch.manual_seed(0)
    metric = RankingMetrics(["hit_rate", "ndcg", "mrr", "precision"], top_k=[1, 2, 5, 10, 20])
    for _ in range(3):
        preds = torch.randn(8, 50)
        next_item = torch.randint(0, 50, (8,))
        preds[torch.arange(8), next_item] += 1.0
        metric.update(preds, next_item)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 3.2))
    metric.plot(ax=ax)
    return _save(fig, "metric_at_k.png")


# --------------------------------------------------------------------------- speed-ups


@dataclass(frozen=True)
class Speedup:
    """One peer's time over ours, read out of one section of RESULTS.md."""

    peer: str
    section: str  # the start of the section's heading
    ours: str  # the row holding our time (or the first column of a "peer / ours" row)
    theirs: str  # the peer's row
    workload: str  # what was timed, in words
    column: str  # the column holding the times ("peer / ours" when the file has the ratio)
    page: str  # the docs page that shows it


#: The headline comparisons. Each names its rows exactly: a renamed row fails the
#: build (a KeyError naming it) instead of quoting a stale number.
SPEEDUPS = (
    Speedup(
        "torchmetrics.retrieval",
        "1. dense binary",
        "rank_metrics",
        "torchmetrics.retrieval (36 objects)",
        "6 metrics x 6 k, 64 queries x 20,000 items",
        "peer / ours",
        "migration_torchmetrics",
    ),
    Speedup(
        "Ignite rec_sys",
        "1. dense binary",
        "rank_metrics",
        "ignite rec_sys HitRate + NDCG",
        "HitRate + NDCG (Ignite's 2 of our 6 metrics), 1,024 queries x 20,000 items",
        "peer / ours",
        "migration_ignite",
    ),
    Speedup(
        "ranx",
        "Issue 25",
        "`evaluate_run(dicts)`",
        "ranx `Qrels(dict)`, `Run(dict)`, `evaluate`",
        "2M run lines from Python dicts, 5 measures",
        "seconds",
        "runs",
    ),
    Speedup(
        "pytrec_eval",
        "Issue 25",
        "`evaluate_run(dicts)`",
        "pytrec_eval `RelevanceEvaluator(...).evaluate(run)`",
        "2M run lines from Python dicts, 5 measures",
        "seconds",
        "runs",
    ),
    Speedup(
        "hand-written topk",
        "1. dense binary",
        "rank_metrics",
        "hand-written topk + gather",
        "HR/MRR/NDCG, 1,024 queries x 20,000 items",
        "peer / ours",
        "migration_handwritten",
    ),
)


def _plot_results() -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import plot_results
    finally:
        sys.path.pop(0)
    return plot_results


def machine(text: str | None = None) -> str:
    """RESULTS.md's ``Machine:`` line (or ``text``'s), without its date and load."""
    text = RESULTS.read_text(encoding="utf-8") if text is None else text
    match = re.search(r"^Machine: (.*)$", text, re.MULTILINE)
    if match is None:
        raise KeyError(f"{RESULTS} has no 'Machine:' line")
    return match.group(1).split(", 20")[0]  # the date and load after it change per run


def measured(text: str | None = None) -> list[tuple[Speedup, float]]:
    """Each headline comparison and its ratio (peer time / ours) as RESULTS.md (or ``text``)
    has it; a KeyError naming the section and rows when one is not there."""
    pr = _plot_results()
    results = pr.parse_results(RESULTS.read_text(encoding="utf-8") if text is None else text)
    out = []
    for speedup in SPEEDUPS:
        sections = [s for s in results.sections if s.title.startswith(speedup.section)]
        if not sections:
            raise KeyError(f"RESULTS.md has no section starting {speedup.section!r}")
        ratio = None
        for table in sections[0].tables:
            column = table.column(speedup.column)
            if column is None:
                continue
            if speedup.column == "peer / ours":
                for row in table.rows:
                    if row[0] == speedup.ours and row[1] == speedup.theirs:
                        ratio = pr._number(row[column])
            else:
                times = {row[0]: pr._number(row[column]) for row in table.rows}
                if speedup.ours in times and speedup.theirs in times:
                    ratio = times[speedup.theirs] / times[speedup.ours]
            if ratio is not None:
                break
        if ratio is None:
            raise KeyError(
                f"RESULTS.md's section {speedup.section!r} has no {speedup.column!r} value "
                f"for {speedup.ours!r} against {speedup.theirs!r}"
            )
        out.append((speedup, ratio))
    return out


def _times(ratio: float) -> str:
    return f"{ratio:,.0f}x" if ratio >= 10 else f"{ratio:.1f}x"


def speedups() -> Path:
    """One bar per peer: its time over ours, log scale, with the workload beside it."""
    found = measured()
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.2, 0.5 + 0.55 * len(found)))
    positions = list(range(len(found)))[::-1]
    for y, (speedup, ratio) in zip(positions, found, strict=True):
        ax.barh(y, ratio, color="C0")
        ax.text(ratio * 1.08, y, f"{_times(ratio)}  ({speedup.workload})", va="center", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(0.8, max(r for _, r in found) * 300)  # room for the labels
    ax.axvline(1.0, color="0.4", linewidth=1)
    ax.set_yticks(positions, [s.peer for s, _ in found])
    ax.set_xlabel(f"peer's time / ranking-plugins' time (log scale; {machine()})")
    fig.tight_layout()
    return _save(fig, "speedups.png")


def headline() -> Path:
    """``headline.inc``: the ratios as an rst list, for the landing page to include."""
    lines = [f"Measured on {machine()} (benchmarks/RESULTS.md, :doc:`performance`):", ""]
    for speedup, ratio in measured():
        lines.append(
            f"- **{_times(ratio)} faster than {speedup.peer}**: {speedup.workload} "
            f"(:doc:`{speedup.page}`)"
        )
    path = OUT / "headline.inc"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


FIGURES: tuple[Callable[[], Path], ...] = (
    ties,
    compare_forest,
    beyond_accuracy,
    metric_at_k,
    speedups,
    headline,
)


def write_all() -> list[Path]:
    OUT.mkdir(parents=True, exist_ok=True)
    return [figure() for figure in FIGURES]


def _on_builder_inited(app: Any) -> None:
    write_all()


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _on_builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    for written in write_all():
        print(written)
