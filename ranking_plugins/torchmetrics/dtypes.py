"""The TorchMetrics adapter's states keep their dtypes whatever is done to the module.

``.to(dtype)``, ``.half()``, ``set_dtype`` (and Lightning's
``precision="bf16-true"``, which casts a module's metrics) move the states
between devices but never cast them, so the sums stay float64, the scores
exact and the query ids int64.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

try:
    from torchmetrics import Metric
except ImportError as error:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "ranking_plugins.torchmetrics needs TorchMetrics; install it with "
        '`pip install "ranking-plugins[torchmetrics]"`'
    ) from error


class FixedDtypes(Metric):
    """A metric whose states follow the device, never a cast (see the module)."""

    def _storage_dtypes(self) -> dict[str, torch.dtype]:
        """Every state's storage dtype, by name."""
        raise NotImplementedError

    def _apply(
        self, fn: Callable[[Tensor], Tensor], exclude_state: Sequence[str] = ""
    ) -> torch.nn.Module:
        """Move the states with the module, never cast them.

        ``nn.Module.to(dtype)``, ``.half()``, ``.type()`` and TorchMetrics'
        ``set_dtype`` all come through here (Lightning's ``precision="bf16-true"``
        calls ``.to(torch.bfloat16)`` on the whole module). Every state of this
        metric keeps its storage dtype (float64 sums, exact scores, int64 query
        ids) and only follows the device; so do the cached results.
        """
        if exclude_state:
            return super()._apply(_device_only(fn), exclude_state)
        return super()._apply(_device_only(fn))

    def _restore_dtypes(self) -> None:
        """Every state back in its storage dtype on this device (after loading a state
        saved in a lower precision, say; what it already lost stays lost)."""
        for name, dtype in self._storage_dtypes().items():
            value = getattr(self, name)
            if isinstance(value, Tensor):
                setattr(self, name, value.to(self.device, dtype))
            else:
                setattr(self, name, [t.to(self.device, dtype) for t in value])


def _device_only(fn: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """``fn`` (a function ``nn.Module._apply`` hands on) without its casts.

    A tensor that ``fn`` would give another dtype only follows the device ``fn``
    would send it to (read off an empty tensor of its dtype); any other tensor
    gets ``fn`` itself. ``functools.wraps`` keeps ``fn``'s name, which
    TorchMetrics reads to recognise ``half()``, ``float()`` and the like.
    """

    @functools.wraps(fn)
    def move(tensor: Tensor) -> Tensor:
        probe = fn(tensor.new_empty(0))
        if probe.dtype == tensor.dtype:
            return fn(tensor)
        return tensor.to(device=probe.device)

    return move
