"""Make every host read of a tensor value fail, to show a code path never synchronises.

On the CPU nothing synchronises, so the calls that would on an accelerator
(``.item()``, ``bool()``, ``int()``, ``.tolist()``, ``.nonzero()``, boolean-mask
indexing) are patched to raise, and the kernel is told to take its accelerator
paths (``ranking_plugins.kernel.host_reads.ACCELERATOR_PATHS_ON_CPU``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from ranking_plugins.kernel import host_reads


@contextlib.contextmanager
def forbid_host_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def forbidden(name: str) -> Callable[..., Any]:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"read a tensor value on the host: Tensor.{name}")

        return fail

    original_getitem = torch.Tensor.__getitem__

    def getitem(self: torch.Tensor, index: Any) -> Any:
        if isinstance(index, torch.Tensor) and index.dtype == torch.bool:
            raise AssertionError("indexed with a boolean mask (reads its count on the host)")
        return original_getitem(self, index)

    with monkeypatch.context() as patch:
        patch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", True)
        for name in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "nonzero"):
            patch.setattr(torch.Tensor, name, forbidden(name))
        patch.setattr(torch.Tensor, "__getitem__", getitem)
        patch.setattr(torch, "nonzero", forbidden("nonzero"))
        yield
