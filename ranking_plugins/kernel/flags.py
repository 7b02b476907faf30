"""Per-row counting of flags, the kernel's most frequent reduction."""

from __future__ import annotations

import torch
from torch import Tensor


def count_true(flags: Tensor) -> Tensor:
    """Number of True per row, int64 (Q,).

    A plain ``sum`` widens every bool to int64 first, several times slower than
    the pass itself; blocks of 255 bytes summed in uint8 cannot overflow.
    """
    block = 255
    as_bytes = flags.view(torch.uint8)
    whole = as_bytes.shape[-1] // block * block
    blocks = as_bytes[:, :whole].unflatten(1, (whole // block, block))
    return blocks.sum(dim=2, dtype=torch.uint8).sum(dim=1) + as_bytes[:, whole:].sum(dim=1)
