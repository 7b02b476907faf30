"""What is known about the catalogue's items: the inputs of the metrics of item exposure.

The beyond-accuracy metrics (novelty, arp, tail_share, diversity) weigh the
items of each top k by something about the item: its popularity, whether it
is in the long tail, its features or its category. Those are given once, for
the whole catalogue of ``N`` items, when a metric is made; :class:`ItemInputs`
holds them, checked, as float64 (or bool, int64) tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import TypedDict

import torch
from torch import Tensor

from ranking_plugins.kernel.inputs.checks import check_item_inputs

#: the keyword of each item input, as every entry point spells it
ITEM_INPUTS = ("item_popularity", "tail_items", "item_features", "item_categories")
#: the adapters' item keywords: the inputs, and ``num_items``, which sizes the
#: exposure state of a catalogue-level metric when no input says N
ITEM_KEYWORDS = (*ITEM_INPUTS, "num_items")


class ItemKeywords(TypedDict, total=False):
    """The item inputs of the exposure metrics, keywords of every entry point."""

    item_popularity: Tensor | None
    tail_items: Tensor | None
    item_features: Tensor | None
    item_categories: Tensor | None


class AdapterItemKeywords(ItemKeywords, total=False):
    """:class:`ItemKeywords` and ``num_items``, given once to an adapter's metric."""

    num_items: int | None


@dataclass(frozen=True)
class ItemInputs:
    """The item inputs that were given (each None when not), checked (see :meth:`create`)."""

    popularity: Tensor | None = None  # (N,) float64, non-negative
    tail: Tensor | None = None  # (N,) bool
    features: Tensor | None = None  # (N, d) floating point
    categories: Tensor | None = None  # (N,) int64 labels 0..C-1, C <= N (ids relabelled)
    #: N as given by ``num_items`` (an adapter's exposure state needs it when no
    #: other item input says it)
    size: int | None = None

    @classmethod
    def create(
        cls,
        item_popularity: Tensor | None = None,
        tail_items: Tensor | None = None,
        item_features: Tensor | None = None,
        item_categories: Tensor | None = None,
        num_items: int | None = None,
    ) -> ItemInputs:
        """Check each given input and that they agree on N (:func:`check_item_inputs`)."""
        popularity, tail, features, categories = check_item_inputs(
            item_popularity, tail_items, item_features, item_categories, num_items
        )
        if categories is not None:
            # ids are labels (any int64, negative too): relabelled 0..C-1 here, so that a
            # count table per category is C <= N wide, not as wide as the largest id
            categories = torch.unique(categories.to(torch.int64), return_inverse=True)[1]
        return cls(popularity, tail, features, categories, num_items)

    @property
    def num_items(self) -> int | None:
        """N, when any input was given."""
        if self.size is not None:
            return self.size
        for t in (self.popularity, self.tail, self.features, self.categories):
            if t is not None:
                return int(t.shape[0])
        return None

    def given(self, name: str) -> bool:
        """Whether the input of keyword ``name`` (:data:`ITEM_INPUTS`) was given."""
        return getattr(self, _FIELDS[name]) is not None

    def to(self, device: torch.device | str) -> ItemInputs:
        """The same inputs on ``device``."""
        return replace(
            self,
            **{
                f: getattr(self, f).to(device)
                for f in _FIELDS.values()
                if getattr(self, f) is not None
            },
        )

    def check_catalogue(self, num_items: int) -> None:
        """The inputs describe the ``num_items`` items of the scores."""
        n = self.num_items
        if n is not None and n != num_items:
            names = [name for name in ITEM_INPUTS if self.given(name)] or ["num_items"]
            raise ValueError(
                f"{', '.join(f'`{name}`' for name in names)}: {n} items given, but the "
                f"scores rank {num_items} items (one column per catalogue item)"
            )

    # -- the per-item weights the metrics read -------------------------------

    @cached_property
    def self_information(self) -> Tensor:
        """(N,) -log2 p(i), p the item's share of the popularity."""
        assert self.popularity is not None
        # log2(Σ) - log2(p), not -log2(p / Σ): a share below float64's range (1e-300 of
        # 1e300) underflowed to 0, and its self-information of ~1993 bits to inf
        return torch.log2(self.popularity.sum()) - torch.log2(self.popularity)

    @cached_property
    def num_categories(self) -> int:
        """C: the categories are labelled 0..C-1 (read once, on the host)."""
        assert self.categories is not None
        return int(self.categories.max()) + 1 if self.categories.numel() else 1

    @cached_property
    def unit_vectors(self) -> Tensor:
        """(N + 1, d) float64 rows whose dot products are the cosine similarity of two items.

        Each row of the features scaled to norm 1 (a zero row stays zero,
        similar to nothing). The last row is zero: what a place without an item
        (padding) reads. Categories have none: their pairs are counted, not
        summed as one-hot rows (N x C, nearly N x N when most items have a
        category of their own).
        """
        assert self.features is not None
        rows = self.features.shape[0]
        vectors = torch.zeros(
            rows + 1, self.features.shape[1], dtype=torch.float64, device=self.features.device
        )
        vectors[:rows] = self.features
        # each row divided by its largest |entry| first: the squares of 1e200 (or of
        # 5e-324) leave float64, and such a row's norm of inf (or 0) made it a zero row
        largest = vectors[:rows].abs().amax(dim=1, keepdim=True)
        vectors[:rows] /= torch.where(largest > 0, largest, 1.0)
        norm = torch.linalg.vector_norm(vectors[:rows], dim=1, keepdim=True)
        vectors[:rows] /= torch.where(norm > 0, norm, 1.0)
        return vectors

    @cached_property
    def unit_norms(self) -> Tensor:
        """(N + 1,) the squared norms of :attr:`unit_vectors` (1, or 0 for a zero row)."""
        return (self.unit_vectors * self.unit_vectors).sum(dim=1)


_FIELDS = dict(zip(ITEM_INPUTS, ("popularity", "tail", "features", "categories"), strict=True))
#: the :class:`ItemInputs` field of each item input, in :data:`ITEM_INPUTS` order
ITEM_FIELDS = tuple(_FIELDS.values())

NO_ITEM_INPUTS = ItemInputs()

__all__ = [
    "ITEM_FIELDS",
    "ITEM_INPUTS",
    "ITEM_KEYWORDS",
    "NO_ITEM_INPUTS",
    "AdapterItemKeywords",
    "ItemInputs",
    "ItemKeywords",
]
