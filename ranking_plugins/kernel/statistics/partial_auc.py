"""The (partial) ROC AUC of the top k, exact under every tie policy.

TorchMetrics' ``retrieval_auroc(top_k=k, max_fpr=f)``: the ROC AUC of the
query's top k items (the whole list when k reaches past it), its area up to
a false positive rate f standardised by McClish's correction
0.5 (1 + (A - f²/2) / (f - f²/2)), and 0 when the top k holds relevant items
only or none.

With P relevant and N non-relevant items in the list, the ROC curve steps
right 1/N at each non-relevant item, at the height of the relevant items
above it over P. The area up to f is therefore Σ over relevant items p of
max(0, fN - ν_p) / (P N), ν_p the non-relevant items ranked before p (f = 1:
the ordered pairs). Under "average" a relevant member of group c has
ν_c + i non-relevant items before it, i uniform on 0..n_c (its place among
the group's n_c = t_c - r_c non-relevant members): :func:`window_gap_mean`.

A cutoff inside a group of relevant and non-relevant items makes P and N
random: given x relevant items among the group's m places in the top k
(hypergeometric), the top k is the groups before it and a group of m items,
x of them relevant, in random order; the value is summed over x. Those
(query, k) pairs are few and are summed apart (a host read to find them).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class AucSlots:
    """Where the relevant items stand, (Q, W) each: a ranked list's places or a count's
    relevant items. ``weight``: the expected relevant items the slot stands for (r_c / t_c
    at a place of group c, 1 for a counted relevant item, 0 for none); the others
    describe the slot's tie group (T_c, t_c, r_c, ρ_c)."""

    weight: Tensor
    start: Tensor
    size: Tensor
    relevant: Tensor
    relevant_before: Tensor


def window_gap_mean(window: Tensor, nonrelevant: Tensor) -> Tensor:
    """(1 / (n + 1)) Σ_{i=0..n} max(0, a - i), with a = ``window`` and n = ``nonrelevant``.

    The expected share of the false-positive window a relevant item covers when
    i, the group's non-relevant items before it, is uniform on 0..n. With
    c = #{i ≤ n: i < a} the sum is c·a - c(c - 1)/2, continuous in c at an integer
    a, so a rounding of a to just above an integer costs nothing.
    """
    count = torch.minimum(torch.ceil(window).clamp(min=0), nonrelevant + 1)
    return (count * window - count * (count - 1) / 2) / (nonrelevant + 1)


def _mcclish(area: Tensor, max_fpr: float | None) -> Tensor:
    if max_fpr is None or max_fpr == 1:  # TorchMetrics: the plain area
        return area
    least = max_fpr * max_fpr / 2
    return 0.5 * (1 + (area - least) / (max_fpr - least))


def _value(
    slots: AucSlots,
    full: Tensor,
    listed: Tensor,
    relevant_full: Tensor,
    x: Tensor,
    cut_start: Tensor,
    cut_places: Tensor,
    max_fpr: float | None,
) -> Tensor:
    """The value of each top list made of the full groups (``full`` (..., W) of the slots)
    and ``cut_places`` places of a group after ``cut_start`` items, ``x`` of them relevant."""
    f = 1.0 if max_fpr is None else max_fpr
    positives = relevant_full + x
    negatives = listed - positives
    window = f * negatives
    gap = window_gap_mean(
        window.unsqueeze(-1) - (slots.start - slots.relevant_before),
        slots.size - slots.relevant,
    )
    covered = torch.where(full, slots.weight * gap, 0.0).sum(dim=-1)
    covered = covered + x * window_gap_mean(window - (cut_start - relevant_full), cut_places - x)
    pairs = positives * negatives
    area = covered / torch.where(pairs > 0, pairs, 1.0)
    return torch.where(pairs > 0, _mcclish(area, max_fpr), 0.0)


def top_auc(
    slots: AucSlots, k: Tensor, num_ranked: Tensor, max_fpr: float | None, cuts_mixed: bool
) -> Tensor:
    """(Q, K) E[the standardised partial AUC of the top k] (see the module), 0 where the
    top k holds one class. ``cuts_mixed``: a k may cut a group of relevant and other
    items (under "average", not at the end of the lists); else no host read."""
    listed = torch.minimum(k, num_ranked.unsqueeze(1))  # (Q, K)
    s = AucSlots(*(field.unsqueeze(1) for field in vars(slots).values()))  # (Q, 1, W)
    end = s.start + s.size
    top = listed.unsqueeze(-1)
    full = (s.weight > 0) & (end <= top)  # (Q, K, W)
    relevant_full = torch.where(full, s.weight, 0.0).sum(dim=-1)
    cut = (s.weight > 0) & (s.start < top) & (end > top)
    cut_start = torch.where(cut, s.start, 0.0).amax(dim=-1) if cut.shape[-1] else listed * 0
    cut_size = torch.where(cut, s.size, 0.0).amax(dim=-1) if cut.shape[-1] else listed * 0
    cut_relevant = torch.where(cut, s.relevant, 0.0).amax(dim=-1) if cut.shape[-1] else listed * 0
    places = torch.where(cut_size > 0, listed - cut_start, 0.0)
    # a cut group of relevant items only adds its places; one without any adds nothing
    x = torch.where(cut_size == cut_relevant, places, 0.0)
    values = _value(s, full, listed, relevant_full, x, cut_start, places, max_fpr)
    if not cuts_mixed:
        return values
    mixed = (cut_relevant > 0) & (cut_size > cut_relevant)
    if not bool(mixed.any()):
        return values
    q, col = mixed.nonzero(as_tuple=True)
    r, t, m = cut_relevant[q, col], cut_size[q, col], places[q, col]
    n = t - r
    low = (m - n).clamp(min=0)
    high = torch.minimum(m, r)
    width = int((high - low).amax()) + 1
    draws = low.unsqueeze(1) + torch.arange(width, dtype=torch.float64, device=k.device)
    possible = draws <= high.unsqueeze(1)
    draws = torch.where(possible, draws, low.unsqueeze(1))
    chance = torch.exp(
        _log_choose(r.unsqueeze(1), draws)
        + _log_choose(n.unsqueeze(1), m.unsqueeze(1) - draws)
        - _log_choose(t, m).unsqueeze(1)
    )
    rows = AucSlots(*(field[q] for field in vars(s).values()))  # (M, 1, W)
    each = _value(
        rows,
        full[q, col].unsqueeze(1),
        listed[q, col].unsqueeze(1),
        relevant_full[q, col].unsqueeze(1),
        draws,
        cut_start[q, col].unsqueeze(1),
        m.unsqueeze(1),
        max_fpr,
    )  # (M, X)
    values = values.clone()
    values[q, col] = torch.where(possible, chance * each, 0.0).sum(dim=1)
    return values


def _log_choose(n: Tensor, k: Tensor) -> Tensor:
    return torch.lgamma(n + 1) - torch.lgamma(k + 1) - torch.lgamma(n - k + 1)


__all__ = ["AucSlots", "top_auc", "window_gap_mean"]
