"""Prefix sums of values that are 0 but at a few places of each row (:class:`PlacedSums`).

On the CPU, :class:`~ranking_plugins.kernel.statistics.rank_stats.RankStats`
sums the AP terms and the first hits of long lists at their few non-zero
places only, instead of over every place of every list.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class PlacedSums:
    """Prefix sums along rows of values that are 0 but at a few places of each row.

    ``places`` (Q, W): each row's places (1-based positions), ascending, then
    ``inf``; ``sums`` (Q, W + 1): the sums down to each place, after a 0. The
    values are summed in the order of the list, skipping only zeros, so a sum
    is that of the whole row to the bit.
    """

    places: Tensor
    sums: Tensor

    @staticmethod
    def of(rows: Tensor, columns: Tensor, values: Tensor, num_queries: int) -> PlacedSums:
        """From each value's row and column (``nonzero``'s order: by row, then column)."""
        counts = torch.bincount(rows, minlength=num_queries)
        width = int(counts.max()) if counts.numel() else 0
        slot = torch.arange(rows.numel(), device=rows.device) - (counts.cumsum(0) - counts)[rows]
        shape = (num_queries, width)
        places = torch.full(shape, math.inf, dtype=torch.float64, device=rows.device)
        places[rows, slot] = (columns + 1).to(torch.float64)
        dense = torch.zeros(shape, dtype=torch.float64, device=rows.device)
        dense[rows, slot] = values
        sums = dense.new_zeros((num_queries, width + 1))
        torch.cumsum(dense, dim=1, out=sums[:, 1:])
        return PlacedSums(places, sums)

    def at(self, top: Tensor) -> Tensor:
        """(Q, K): each row's sum over its first ``top`` positions (float64 integers)."""
        return self.sums.gather(1, torch.searchsorted(self.places, top, right=True))
