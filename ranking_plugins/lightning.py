"""A Lightning callback that computes and logs ranking metrics at the end of each epoch.

It replaces the hand-written ``validation_epoch_end`` loop: return the scores
and the relevance from ``validation_step`` / ``test_step`` and the callback
accumulates them in a :class:`ranking_plugins.torchmetrics.RankingMetrics` on
the module's device, then logs ``"val/mrr@10"``, ``"test/ndcg@5"``, … through
the LightningModule, so that every logger, checkpoint monitor and
``trainer.callback_metrics`` sees them. With several processes the sums (and
the grouped layout's triples) are gathered before the numbers are computed.

>>> import torch
>>> import lightning.pytorch as pl
>>> from ranking_plugins.lightning import RankingMetricsCallback
>>> class Scorer(pl.LightningModule):
...     def __init__(self):
...         super().__init__()
...         self.layer = torch.nn.Linear(4, 6)
...
...     def validation_step(self, batch, batch_idx):
...         features, target = batch
...         return {"preds": self.layer(features), "target": target}
>>> from torch.utils.data import DataLoader, TensorDataset
>>> items = TensorDataset(torch.randn(6, 4), torch.randint(0, 6, (6,)))  # (features, next item)
>>> data = DataLoader(items, batch_size=3)
>>> trainer = pl.Trainer(
...     callbacks=[RankingMetricsCallback(metrics=["mrr", "hit_rate"], top_k=[1, 5])],
...     logger=False,
...     enable_progress_bar=False,
...     enable_model_summary=False,
... )
>>> _ = trainer.validate(Scorer(), data, verbose=False)
>>> sorted(trainer.callback_metrics)
['val/hit_rate@1', 'val/hit_rate@5', 'val/mrr@1', 'val/mrr@5']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from typing_extensions import Unpack

from ranking_plugins import _validation as validation
from ranking_plugins.compare import bootstrap_interval
from ranking_plugins.request import TopK

try:
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import Callback
except ImportError as error:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "ranking_plugins.lightning needs Lightning; install it with "
        '`pip install "ranking-plugins[lightning]"`'
    ) from error

from ranking_plugins.torchmetrics import RankingMetrics, RankingOptions

__all__ = ["RankingMetricsCallback"]

#: the stages the callback can evaluate, and the prefix of their logged keys
STAGE_PREFIX = {"validate": "val", "test": "test"}

#: the hook that logs each stage's values (Lightning's ``fx`` of those entries)
EPOCH_END_HOOK = {"validate": "on_validation_epoch_end", "test": "on_test_epoch_end"}

#: what ``output_transform`` returns: ``(preds, target)``, ``(preds, target, mask)``
#: or a mapping with ``preds``, ``target`` and optionally ``mask`` / ``indexes``
StepInputs = Sequence[Tensor | None] | Mapping[str, Tensor | None]


class RankingMetricsCallback(Callback):
    """Log ranking metrics of ``validation_step`` / ``test_step`` outputs at epoch end.

    Args:
        metrics: metric names (see :data:`ranking_plugins.metrics.METRICS`).
        top_k: a cutoff, a sequence of cutoffs, or None (the whole list); None
            inside a sequence adds the whole list (``[10, None]``).
        stages: which loops to evaluate: ``"validate"`` (the validation loop of
            ``fit`` and ``trainer.validate``, logged as ``val/...``) and/or
            ``"test"`` (logged as ``test/...``).
        output_transform: ``output_transform(outputs, batch)`` returns the
            update's inputs from what the step returned: ``(preds, target)``,
            ``(preds, target, mask)``, or a mapping with ``preds``, ``target``
            and optionally ``mask`` / ``indexes``. By default the step's output
            itself must be such a mapping. ``preds`` may be an
            :class:`ranking_plugins.EmbeddingScores` (user and item embeddings:
            the whole catalogue is ranked without building the score matrix).
        prog_bar: also show the values in the progress bar.
        confidence: also log a confidence interval of each mean at this level
            (0.95, say) as ``"{prefix}/{key}_ci_low"`` and ``"_ci_high"``: the
            percentile interval of a paired bootstrap over the queries (the
            per-query values are kept for it, ``keep_per_query=True``; queries
            that do not count are left out; NaN with fewer than 2). None (the
            default) logs no interval and keeps no per-query values.
        resamples: bootstrap resamples of the interval (seeded: every process
            and every run logs the same interval for the same values).
        name: put into every key after the stage (``"val/{name}/mrr@10"``), so
            that two callbacks (masked and unmasked, say) or a value the module
            logs itself cannot share a key. None (the default): ``"val/mrr@10"``.
        options: every option of :class:`~ranking_plugins.torchmetrics.RankingMetrics`
            (``ties``, ``empty_target_action``, ``ignore_index``, ``gain``, ...),
            and the item inputs of the exposure metrics (``item_popularity``,
            ``tail_items``, ``item_features``, ``item_categories``, ``num_items``;
            :doc:`/beyond_accuracy`), given once and moved with the module.

    Keys are ``"{prefix}/{metric}@{k}"`` (``"{prefix}/{name}/{metric}@{k}"``
    with ``name``); with several dataloaders each gets its own state and the
    keys end in ``/dataloader_idx_{i}``, as Lightning names them. A key that
    another ``RankingMetricsCallback`` of the trainer also logs is refused at
    ``setup``; one the module (or another callback) logs in the same loop is
    refused when it shows, before or right after this callback logs: a
    ValueError naming the key and where it was logged, rather than one value
    silently replacing (or being averaged with) the other. The sanity check's
    batches are evaluated and thrown away, so they never reach the first
    epoch's numbers. The last logged values are kept in :attr:`last_results`.
    """

    def __init__(
        self,
        metrics: str | Sequence[str] = ("mrr", "ndcg", "hit_rate"),
        top_k: TopK = (1, 5, 10),
        stages: str | Sequence[str] = ("validate", "test"),
        output_transform: Callable[[Any, Any], StepInputs] | None = None,
        prog_bar: bool = False,
        confidence: float | None = None,
        resamples: int = 1000,
        name: str | None = None,
        **options: Unpack[RankingOptions],
    ) -> None:
        super().__init__()
        if name is not None and (not isinstance(name, str) or not name.strip("/")):
            raise ValueError(f"`name` must be None or a non-empty str, got {name!r}")
        self.name = name
        stage_list = [stages] if isinstance(stages, str) else list(stages)
        if not stage_list or any(s not in STAGE_PREFIX for s in stage_list):
            raise ValueError(
                f"`stages` must name one or more of {list(STAGE_PREFIX)}, got {stages!r}"
            )
        if output_transform is not None and not callable(output_transform):
            raise TypeError(
                f"`output_transform` must be callable or None, got {output_transform!r}"
            )
        if not isinstance(prog_bar, bool):
            raise TypeError(f"`prog_bar` must be a bool, got {prog_bar!r}")
        self.metric_names = metrics
        self.top_k = top_k
        self.stages = tuple(stage_list)
        self.output_transform = output_transform
        # compare()'s rules (a ValueError whatever is wrong, as there)
        level = None if confidence is None else validation.unit_interval_problem(confidence)
        if level is not None:
            raise validation.ArgumentError("confidence", level.or_none().text)
        count = validation.positive_int_problem(resamples)
        if count is not None:
            raise validation.ArgumentError("resamples", count.text)
        if confidence is not None and options.get("weighted", False):
            raise ValueError(
                "`confidence` gives the interval of the plain mean over queries; it does "
                "not apply with weighted=True"
            )
        self.prog_bar = prog_bar
        self.confidence = confidence
        self.resamples = resamples
        if confidence is not None:
            options = {**options, "keep_per_query": True}
        self.options = options
        # every option checked now, not at epoch end
        self._keys = RankingMetrics(metrics, top_k, **options).keys
        #: per stage, one RankingMetrics per dataloader
        self.states: dict[str, list[RankingMetrics]] = {}
        #: the values logged at the end of the last epoch of each stage
        self.last_results: dict[str, dict[str, Tensor]] = {}

    # ------------------------------------------------------------------ hooks

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        """Refuse a key another ``RankingMetricsCallback`` of ``trainer`` logs too."""
        callbacks = list(trainer.callbacks)  # type: ignore[attr-defined]  # set at run time
        for other in callbacks:
            if other is self or not isinstance(other, RankingMetricsCallback):
                continue
            for evaluated in (stage for stage in self.stages if stage in other.stages):
                shared = [key for key in self.names(evaluated) if key in other.names(evaluated)]
                if shared:
                    raise ValueError(
                        f"RankingMetricsCallback: trainer.callbacks[{callbacks.index(self)}] "
                        f"and trainer.callbacks[{callbacks.index(other)}] both log "
                        f"{shared[0]!r}, so one value would silently replace the other; "
                        "give each its own `name=` (its keys then read "
                        f"'{STAGE_PREFIX[evaluated]}/<name>/...')"
                    )

    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start("validate", trainer, pl_module)

    def on_test_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start("test", trainer, pl_module)

    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._update("validate", outputs, batch, dataloader_idx)

    def on_test_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._update("test", outputs, batch, dataloader_idx)

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._end("validate", trainer, pl_module)

    def on_test_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._end("test", trainer, pl_module)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._refuse_logged_after("validate", trainer)

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._refuse_logged_after("test", trainer)

    # ------------------------------------------------------------------- keys

    def names(self, stage: str, suffix: str = "") -> list[str]:
        """The keys logged for ``stage`` (``suffix``: ``"/dataloader_idx_{i}"`` or "")."""
        prefix = STAGE_PREFIX[stage] + ("" if self.name is None else f"/{self.name}")
        ends = [""] if self.confidence is None else ["", "_ci_low", "_ci_high"]
        return [f"{prefix}/{key}{end}{suffix}" for end in ends for key in self._keys]

    def _refuse_logged(self, trainer: pl.Trainer, names: Mapping[str, Any]) -> None:
        """A ValueError for a key of ``names`` already logged in this loop (before ours)."""
        for entry in _live_entries(trainer):
            meta = entry.meta
            shown = meta.name
            if meta.add_dataloader_idx and meta.dataloader_idx is not None:
                shown += f"/dataloader_idx_{meta.dataloader_idx}"
            if shown in names:
                raise ValueError(
                    f"RankingMetricsCallback: {shown!r} was already logged in {meta.fx} "
                    "(by the LightningModule or another callback), and the callback logs "
                    f"its own value under that key: one would silently replace the other. "
                    "Pass `name=` to the callback (its keys then read "
                    f"'{shown.split('/')[0]}/<name>/...') or log yours under another key"
                )

    def _refuse_logged_after(self, stage: str, trainer: pl.Trainer) -> None:
        """A ValueError for a key logged again, after this callback, in its epoch-end hook.

        Lightning averages two logs of one key in one hook (with the same
        arguments; others it refuses itself); the callback logs each key once
        with ``batch_size=1``, so a larger count means another writer.
        """
        if stage not in self.stages or trainer.sanity_checking:
            return  # nothing logged by this callback in this run of the loop
        names = self.last_results.get(stage, {})
        for entry in _live_entries(trainer):
            meta = entry.meta
            if meta.fx == EPOCH_END_HOOK[stage] and meta.name in names:
                count = getattr(entry, "cumulated_batch_size", None)
                if isinstance(count, Tensor) and int(count) > 1:
                    raise ValueError(
                        f"RankingMetricsCallback: {meta.name!r} was logged again in "
                        f"{meta.fx} after the callback logged it (by the LightningModule "
                        "or another callback), so Lightning averaged the two values. Pass "
                        "`name=` to the callback or log yours under another key"
                    )

    # ------------------------------------------------------------------- work

    def _start(self, stage: str, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Fresh states, one per dataloader, on the module's device.

        Every process makes all of them, even for a dataloader it has no
        batch of, so that every process takes part in every synchronisation.
        """
        if stage not in self.stages:
            return
        batches = trainer.num_test_batches if stage == "test" else trainer.num_val_batches
        count = max(len(batches), 1)
        states = self.states.get(stage, [])
        states = states[:count] + [
            RankingMetrics(self.metric_names, self.top_k, **self.options)
            for _ in range(count - len(states))
        ]
        for state in states:
            state.reset()
            state.to(pl_module.device)
        self.states[stage] = states

    def _update(self, stage: str, outputs: Any, batch: Any, dataloader_idx: int) -> None:
        if stage not in self.stages:
            return
        states = self.states[stage]
        if dataloader_idx >= len(states):  # a dataloader Lightning did not announce
            states.extend(
                RankingMetrics(self.metric_names, self.top_k, **self.options).to(states[0].device)
                for _ in range(dataloader_idx + 1 - len(states))
            )
        inputs = outputs if self.output_transform is None else self.output_transform(outputs, batch)
        preds, target, indexes, mask = _unpack(inputs, stage, self.output_transform is None)
        # which items carry a judgment: an optional "judged" key of a mapping
        judged = inputs.get("judged") if isinstance(inputs, Mapping) else None
        states[dataloader_idx].update(preds, target, indexes=indexes, mask=mask, judged=judged)

    def _end(self, stage: str, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if stage not in self.stages:
            return
        states = self.states.get(stage, [])
        if trainer.sanity_checking:
            for state in states:
                state.reset()
            return
        logged: dict[str, Tensor] = {}
        for index, state in enumerate(states):
            suffix = f"/dataloader_idx_{index}" if len(states) > 1 else ""
            values = state.compute()  # gathered over every process
            assert isinstance(values, dict)
            columns = list(values.values())
            if self.confidence is not None:
                intervals = self._intervals(state)
                columns += [intervals[key][0] for key in values]
                columns += [intervals[key][1] for key in values]
            logged.update(zip(self.names(stage, suffix), columns, strict=True))
        self._refuse_logged(trainer, logged)
        for name, value in logged.items():
            pl_module.log(
                name,
                value,
                prog_bar=self.prog_bar,
                logger=None,  # every configured logger; no warning when there is none
                on_step=False,
                on_epoch=True,
                # already equal on every process: the mean over processes is the value
                sync_dist=True,
                add_dataloader_idx=False,
                batch_size=1,
            )
        self.last_results[stage] = logged

    def _intervals(self, state: RankingMetrics) -> dict[str, tuple[Tensor, Tensor]]:
        """The bootstrap interval of each key's mean, from the gathered per-query values."""
        assert self.confidence is not None
        intervals = {}
        for key, values in state.compute_per_query().items():
            counted = values[~values.isnan()].cpu()
            if counted.numel() < 2:
                nan = torch.tensor(float("nan"), dtype=torch.float64)
                intervals[key] = (nan, nan.clone())
                continue
            low, high = bootstrap_interval(counted, self.confidence, self.resamples, seed=0)
            device = values.device
            intervals[key] = (low[0].to(device), high[0].to(device))
        return intervals


def _live_entries(trainer: pl.Trainer) -> list[Any]:
    """What the running loop logged so far (Lightning's result entries, not yet reset).

    Private to Lightning (``trainer._results``): read defensively, so that a
    Lightning without it only loses the check.
    """
    results = getattr(trainer, "_results", None)
    if not isinstance(results, Mapping):
        return []
    return [
        entry
        for entry in results.values()
        if not getattr(entry, "has_reset", True) and hasattr(entry, "meta")
    ]


def _unpack(
    inputs: Any, stage: str, from_step: bool
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """(preds, target, indexes, mask) from a step's output or ``output_transform``'s."""
    step = "validation_step" if stage == "validate" else "test_step"
    if isinstance(inputs, Mapping):
        if "preds" not in inputs or "target" not in inputs:
            raise ValueError(
                f"RankingMetricsCallback: the {'output of ' + step if from_step else 'mapping'} "
                f"must have 'preds' and 'target' keys, got keys {sorted(map(str, inputs))}"
                + (". Return them, or pass `output_transform`." if from_step else "")
            )
        return inputs["preds"], inputs["target"], inputs.get("indexes"), inputs.get("mask")
    if not from_step and isinstance(inputs, Sequence) and len(inputs) in (2, 3):
        preds, target, *rest = inputs
        return preds, target, None, rest[0] if rest else None
    if from_step:
        raise ValueError(
            f"RankingMetricsCallback: {step} must return a dict with 'preds' and 'target' "
            f"(and optionally 'mask' or 'indexes'), got {type(inputs).__name__}; "
            "or pass `output_transform(outputs, batch)`"
        )
    raise ValueError(
        "RankingMetricsCallback: `output_transform` must return (preds, target), "
        "(preds, target, mask) or a mapping with 'preds' and 'target', "
        f"got {type(inputs).__name__}"
    )
