"""Per-row counting of flags and of comparisons, the kernel's most frequent reductions."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ranking_plugins.kernel.host_reads import host_reads_are_free

#: a comparison with an ``out`` argument: torch.gt, torch.lt, torch.ge, torch.eq
Comparison = Callable[..., Tensor]

#: float32 holds every integer up to 2^24: per-row sums of 0/1 values in rows
#: shorter than this are exact whatever the order of the additions
FLOAT_EXACT_COUNT = 1 << 24

#: elements per block of comparisons, so that a block of the input and its
#: float flags stay in cache (4 MiB each: the last level) between the
#: comparisons made on it; smaller blocks cost more in per-operation and
#: thread start-up overhead than they save (benchmarks/bench_kernel.py)
COMPARE_BLOCK_ELEMENTS = 1 << 20

#: elements per block on an accelerator, where a block is not kept in a cache
#: but costs a kernel launch each (benchmarks/profile_gpu.py): it only bounds
#: the flags' memory (256 MiB of float32)
ACCELERATOR_BLOCK_ELEMENTS = 1 << 26


def count_true(flags: Tensor) -> Tensor:
    """Number of True per row, int64 (Q,).

    A plain ``sum`` widens every bool to int64 first, several times slower than
    the pass itself. Eight flags are read as one int64 word: a sum of at most
    255 words keeps each byte below 256, so no byte carries into the next, and
    the bytes of those sums add up to the count. Rows that cannot be read as
    words (not aligned) are summed byte by byte, in uint8 blocks of 255. On an
    accelerator (:func:`host_reads_are_free` false) it is one plain sum.
    """
    if not host_reads_are_free(flags):
        # on an accelerator the word trick's dozen operations cost a launch each,
        # more than the one reduction they save memory traffic on
        return flags.sum(dim=-1)
    as_bytes = flags.view(torch.uint8)
    width = as_bytes.shape[-1]
    whole = width // 8 * 8
    if as_bytes.ndim == 2 and whole and as_bytes.stride(-1) == 1:
        try:
            words = as_bytes[:, :whole].view(torch.int64)
        except RuntimeError:  # rows not aligned on 8 bytes
            pass
        else:
            grouped = words.shape[1] // 255 * 255
            sums = torch.cat(
                [
                    words[:, :grouped].unflatten(1, (grouped // 255, 255)).sum(dim=2),
                    words[:, grouped:].sum(dim=1, keepdim=True),
                ],
                dim=1,
            )
            return sums.view(torch.uint8).sum(dim=1) + as_bytes[:, whole:].sum(dim=1)
    block = 255
    whole = width // block * block
    blocks = as_bytes[:, :whole].unflatten(1, (whole // block, block))
    return blocks.sum(dim=2, dtype=torch.uint8).sum(dim=1) + as_bytes[:, whole:].sum(dim=1)


def compare_rows(width: int, on: Tensor, cpu_elements: int | None = None) -> int:
    """Rows per block of comparisons for rows of ``width`` items of ``on``'s device.

    ``cpu_elements``: the block's elements on the CPU (default
    :data:`COMPARE_BLOCK_ELEMENTS`); on an accelerator :data:`ACCELERATOR_BLOCK_ELEMENTS`.
    """
    if host_reads_are_free(on):  # the CPU's paths
        elements = COMPARE_BLOCK_ELEMENTS if cpu_elements is None else cpu_elements
    else:
        elements = ACCELERATOR_BLOCK_ELEMENTS
    return max(1, elements // max(width, 1))


def counts_fit_in_float(width: int) -> bool:
    """Whether per-row counts over ``width`` items are exact as float32 sums."""
    return width < FLOAT_EXACT_COUNT


def broadcast_shape(first: tuple[int, ...], second: tuple[int, ...]) -> torch.Size:
    """The shape two tensors of these (broadcastable) shapes broadcast to.

    Written out because ``torch.broadcast_shapes`` imports sympy on its first
    call: a quarter of a second or more that a user's first call would pay.
    """
    rank = max(len(first), len(second))
    a = (1,) * (rank - len(first)) + tuple(first)
    b = (1,) * (rank - len(second)) + tuple(second)
    return torch.Size(y if x == 1 else x for x, y in zip(a, b, strict=True))


def count_compared(
    op: Comparison, block: Tensor, other: object, buffer: Tensor, out: Tensor
) -> None:
    """Write in ``out`` (float32, the comparison's shape less its last dimension)
    the items along the last dimension with ``op(item, other)``.

    ``block`` (rows, C) against ``other`` (a value, or one per row), or
    (rows, 1, C) against (rows, K, 1) for K values per row at once. The flags
    are written as float 0/1 into ``buffer`` (float32, at least the
    comparison's shape) and summed: a comparison that writes floats runs
    several times faster than one that writes bools, and the sums are exact
    for rows shorter than 2^24 (:func:`counts_fit_in_float`).
    """
    shape = broadcast_shape(block.shape, tuple(getattr(other, "shape", ())))
    flags = buffer[tuple(slice(0, size) for size in shape)]
    op(block, other, out=flags)
    torch.sum(flags, dim=-1, out=out)
