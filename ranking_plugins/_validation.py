"""Argument checks shared by every entry point.

Checks that only look at shapes, dtypes and Python arguments are always run
(they cost nothing and never synchronise a device). Checks that read tensor
values live in :func:`check_values` and run only with ``validate_args=True``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from numbers import Integral

import torch
from torch import Tensor

EMPTY_TARGET_ACTIONS = ("neg", "pos", "skip", "error")
REDUCTIONS = ("mean", "none")
GAINS = ("exponential", "linear")
AP_DENOMINATORS = ("relevant", "min_k_relevant")
TARGET_FORMATS = ("dense", "indices")


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise a ValueError naming ``name``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"`{name}` must be one of {list(choices)}, got {value!r}")
    return value


def check_tensor(name: str, value: object) -> Tensor:
    """``value`` if it is an ordinary tensor: strided (dense) layout, not nested."""
    if not isinstance(value, Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor, got {type(value).__name__}")
    if value.is_nested:
        raise TypeError(
            f"`{name}` must be a dense (strided) tensor, got a nested tensor; pad its "
            "rows to one length (torch.nested.to_padded_tensor) and say which entries "
            "are padding (a `mask`, or -1 item ids)"
        )
    if value.layout != torch.strided:
        raise TypeError(
            f"`{name}` must be a dense (strided) tensor, got layout {value.layout}; "
            "convert it with .to_dense()"
        )
    return value


def check_preds_dtype(preds: Tensor) -> None:
    if preds.dtype == torch.bool or preds.is_complex():
        raise TypeError(
            f"`preds` must hold real scores (a floating point or integer dtype), got {preds.dtype}"
        )


def is_integer_dtype(dtype: torch.dtype) -> bool:
    return not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)


def normalize_top_k(top_k: object) -> tuple[int, ...] | None:
    """``None``, or the requested cutoffs sorted ascending without duplicates."""
    if top_k is None:
        return None
    values: Iterable[object]
    if isinstance(top_k, (Integral, bool)) or (isinstance(top_k, Tensor) and top_k.ndim == 0):
        values = [top_k]
    elif isinstance(top_k, (Sequence, Tensor)) and not isinstance(top_k, str):
        values = list(top_k)
        if not values:
            raise ValueError("`top_k` must be a positive int, a non-empty sequence of them or None")
    else:
        raise TypeError(
            "`top_k` must be a positive int, a sequence of positive ints or None, "
            f"got {type(top_k).__name__}"
        )
    ks: set[int] = set()
    for k in values:
        if isinstance(k, Tensor) and k.ndim == 0 and is_integer_dtype(k.dtype):
            k = int(k.item())
        if isinstance(k, bool) or not isinstance(k, Integral):
            raise TypeError(f"every `top_k` must be a positive int, got {k!r}")
        if k <= 0:
            raise ValueError(f"every `top_k` must be a positive int, got {k}")
        ks.add(int(k))
    return tuple(sorted(ks))


def check_same_device(**tensors: Tensor | None) -> None:
    present = {name: t for name, t in tensors.items() if t is not None}
    devices = {t.device for t in present.values()}
    if len(devices) > 1:
        listing = ", ".join(f"`{name}` on {t.device}" for name, t in present.items())
        raise ValueError(f"all inputs must be on one device, got {listing}")


def check_values(
    preds: Tensor,
    grades: Tensor | None,
    item_ids: Tensor | None,
    num_items: int,
) -> None:
    """Checks that read tensor values (and so synchronise an accelerator)."""
    if has_nan(preds):
        raise ValueError(NAN_PREDS)
    if grades is not None and has_nan(grades):
        raise ValueError("`target` must not contain NaN grades")
    if item_ids is not None:
        check_item_ids("target", item_ids, num_items)


def check_item_ids(name: str, item_ids: Tensor, num_items: int) -> None:
    """Item ids in [0, num_items) or -1 (padding); reads the values."""
    if item_ids.numel() > 0:
        low, high = int(item_ids.min()), int(item_ids.max())
        if low < -1 or high >= num_items:
            raise ValueError(
                f"`{name}` item indices must lie in [0, {num_items}) (or be -1 for padding), "
                f"got values in [{low}, {high}]"
            )


#: the error for NaN scores, wherever it is found (here, or in a pass of the kernel)
NAN_PREDS = "`preds` must not contain NaN"


def check_no_nan_scores(scores: Tensor) -> None:
    """Raise the NaN-scores error if ``scores`` (a few values, e.g. each row's top) hold one.

    The kernel calls it on values its own passes already brought out (a row's
    NaN comes first out of a descending sort or a top-k), instead of a pass of
    its own over the whole score matrix; reads one value.
    """
    if scores.is_floating_point() and scores.numel() > 0 and bool(scores.isnan().any()):
        raise ValueError(NAN_PREDS)


def has_nan(values: Tensor) -> bool:
    """Whether ``values`` holds a NaN (False for an empty tensor); reads one value."""
    # max propagates NaN: one reduction, no (Q, N) temporary as isnan() would make
    return values.is_floating_point() and values.numel() > 0 and bool(values.amax().isnan())
