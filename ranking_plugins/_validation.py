"""Argument checks shared by every entry point.

Checks that only look at shapes, dtypes and Python arguments are always run
(they cost nothing and never synchronise a device). Checks that read tensor
values live in :func:`check_values` and run only with ``validate_args=True``.

Each rule on an argument's value is one ``*_problem(value)`` function: None
where the value is good, else a :class:`Problem` (what is wrong, and whether
it is a wrong type or a wrong value). Every entry point calls the same one and
words the refusal its own way: the library as ``ValueError("`name` ...")``
(:meth:`Problem.error`), the command as a usage error naming its flag, the
Ignite and TorchMetrics adapters with their framework's message first.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from numbers import Integral, Real

import torch
from torch import Tensor

# the options' values, kept where the command's parser reads them without torch
from ranking_plugins.choices import AP_DENOMINATORS as AP_DENOMINATORS
from ranking_plugins.choices import EMPTY_TARGET_ACTIONS as EMPTY_TARGET_ACTIONS
from ranking_plugins.choices import FALL_OUT_EMPTY as FALL_OUT_EMPTY
from ranking_plugins.choices import GAINS as GAINS

REDUCTIONS = ("mean", "none")
TARGET_FORMATS = ("dense", "indices")


class ArgumentError(ValueError):
    """A refused argument value: ``argument`` names it, ``problem`` says what is wrong.

    A ``ValueError``, public as ``ranking_plugins.ArgumentError``. The command
    catches it to say the same with its flag's name (a usage error).
    """

    # the name users see in tracebacks and catch: the public one, not this module's
    __module__ = "ranking_plugins"

    def __init__(self, argument: str, problem: str) -> None:
        super().__init__(f"`{argument}` {problem}")
        self.argument = argument
        self.problem = problem

    def __reduce__(self) -> tuple[type[ArgumentError], tuple[str, str]]:
        # two arguments, not the message: a pickled error (a worker's) is rebuilt whole
        return type(self), (self.argument, self.problem)


@dataclass(frozen=True)
class Problem:
    """What is wrong with a value: ``text`` follows the argument's name."""

    #: e.g. ``"must be a positive int, got 0"``
    text: str
    #: the value is of the wrong kind (a TypeError in the library), not a wrong value
    wrong_type: bool = False
    #: which part of a rule failed, for the adapters that word each part their way
    kind: str = ""

    def or_none(self) -> Problem:
        """The same problem where None is accepted too: ``must be None or ...``."""
        return dataclasses.replace(
            self, text=f"must be None or {self.text.removeprefix('must be ')}"
        )

    def error(self, argument: str) -> Exception:
        """The library's error: ``TypeError`` or :class:`ArgumentError`, naming ``argument``."""
        if self.wrong_type:
            return TypeError(f"`{argument}` {self.text}")
        return ArgumentError(argument, self.text)


def choice_problem(value: object, choices: Sequence[str]) -> Problem | None:
    """``value`` must be one of the strings ``choices``."""
    if isinstance(value, str) and value in choices:
        return None
    return Problem(f"must be one of {list(choices)}, got {value!r}")


def flag_problem(value: object) -> Problem | None:
    """``value`` must be a bool (not 0 or 1)."""
    if isinstance(value, bool):
        return None
    return Problem(f"must be a bool, got {value!r}", wrong_type=True)


def positive_int_problem(value: object) -> Problem | None:
    """``value`` must be an int >= 1 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        return Problem(f"must be a positive int, got {value!r}", wrong_type=True)
    if value < 1:
        return Problem(f"must be a positive int, got {value!r}")
    return None


def unit_interval_problem(value: object) -> Problem | None:
    """``value`` must be a number in (0, 1), both ends excluded (a level, a persistence)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        return Problem(f"must be a number in (0, 1), got {value!r}", wrong_type=True)
    if not 0 < float(value) < 1:  # NaN too
        return Problem(f"must be a number in (0, 1), got {value!r}")
    return None


def redundancy_problem(value: object) -> Problem | None:
    """``value`` must be a number in [0, 1) (alpha-nDCG's alpha: 1 would make every
    repeated subtopic worth nothing, and the greedy ideal list undefined)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        return Problem(f"must be a number in [0, 1), got {value!r}", wrong_type=True)
    if not 0 <= float(value) < 1:  # NaN too
        return Problem(f"must be a number in [0, 1), got {value!r}")
    return None


def closed_unit_interval_problem(value: object) -> Problem | None:
    """``value`` must be a number in [0, 1] (NRBP's patience beta)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        return Problem(f"must be a number in [0, 1], got {value!r}", wrong_type=True)
    if not 0 <= float(value) <= 1:  # NaN too
        return Problem(f"must be a number in [0, 1], got {value!r}")
    return None


def max_fpr_problem(value: object) -> Problem | None:
    """``value`` must be None or a number in (0, 1] (a false positive rate; 1: the whole area)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Real):
        return Problem(f"must be None or a number in (0, 1], got {value!r}", wrong_type=True)
    if not 0 < float(value) <= 1:  # NaN too
        return Problem(f"must be None or a number in (0, 1], got {value!r}")
    return None


def finite_number_problem(value: object) -> Problem | None:
    """``value`` must be a finite number or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Real):
        return Problem(f"must be a number or None, got {value!r}", wrong_type=True)
    if not math.isfinite(float(value)):
        return Problem(f"must be a finite number or None, got {value!r}")
    return None


def check(argument: str, problem: Problem | None) -> None:
    """Raise the library's error for ``problem`` (if any), naming ``argument``."""
    if problem is not None:
        raise problem.error(argument)


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise a ValueError naming ``name``."""
    check(name, choice_problem(value, choices))
    return str(value)


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


def top_k_problem(top_k: object) -> Problem | None:
    """``top_k`` must be None, a positive int or a non-empty sequence of them, where
    None also stands for the whole list (``[10, None]``: @10 and the whole list).

    ``kind`` says which part failed: ``"type"`` (neither an int nor a sequence),
    ``"empty"``, ``"item"`` (a k that is not an int) or ``"value"`` (a k < 1).
    """
    if top_k is None:
        return None
    values = _top_k_values(top_k)
    if values is None:
        return Problem(
            "must be a positive int, a sequence of positive ints or None, "
            f"got {type(top_k).__name__}",
            wrong_type=True,
            kind="type",
        )
    if not values:
        return Problem(
            f"must be a positive int, a non-empty sequence of them or None, got {top_k!r}",
            kind="empty",
        )
    for k in values:
        if k is None and not is_single_k(top_k):
            continue
        if isinstance(k, bool) or not isinstance(k, Integral):
            return Problem(
                f"must hold positive ints (or None, the whole list) only, got {k!r}",
                wrong_type=True,
                kind="item",
            )
        if k <= 0:
            return Problem(
                f"must hold positive ints (or None, the whole list) only, got {k}", kind="value"
            )
    return None


def whole_list_in(top_k: object) -> bool:
    """Whether a sequence ``top_k`` holds None, the whole list beside its cutoffs."""
    return (
        isinstance(top_k, Sequence) and not isinstance(top_k, str) and any(k is None for k in top_k)
    )


def is_single_k(top_k: object) -> bool:
    """Whether ``top_k`` is one k (an int, a NumPy integer, a 0-d tensor), not a sequence."""
    return isinstance(top_k, (Integral, bool)) or (isinstance(top_k, Tensor) and top_k.ndim == 0)


def _top_k_values(top_k: object) -> list[object] | None:
    """The ks of ``top_k`` (a 0-d integer tensor as its int), or None where it is
    neither a k nor a sequence of them."""
    ks: Iterable[object]
    if is_single_k(top_k):
        ks = [top_k]
    elif isinstance(top_k, (Sequence, Tensor)) and not isinstance(top_k, str):
        ks = top_k
    else:
        return None
    return [
        int(k.item()) if isinstance(k, Tensor) and k.ndim == 0 and is_integer_dtype(k.dtype) else k
        for k in ks
    ]


def normalize_top_k(top_k: object) -> tuple[int, ...] | None:
    """``None``, or the requested cutoffs sorted ascending without duplicates (a None
    among them, the whole list, left out: None where it is the only one)."""
    check("top_k", top_k_problem(top_k))
    if top_k is None:
        return None
    ks = {int(k) for k in _top_k_values(top_k) or () if k is not None}  # type: ignore[call-overload]
    return tuple(sorted(ks)) if ks else None


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
        raise ValueError(NAN_GRADES)
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
#: the error for NaN grades, wherever it is found (here, or in the kernel's gain check)
NAN_GRADES = "`target` must not contain NaN grades"


def check_no_nan_scores(scores: Tensor) -> None:
    """Raise the NaN-scores error if ``scores`` (a few values, e.g. each row's top) hold one.

    The kernel calls it on values its own passes already brought out (a row's
    NaN comes first out of a descending sort or a top-k), instead of a pass of
    its own over the whole score matrix; reads one value.
    """
    if scores.is_floating_point() and scores.numel() > 0 and bool(scores.isnan().any()):
        raise ValueError(NAN_PREDS)


def nan_flag(values: Tensor) -> Tensor | None:
    """Whether ``values`` holds a NaN, as a 0-d bool tensor on its device, not read.

    None where it cannot hold one (not floating point, or empty). A caller that
    checks many tensors on an accelerator gathers the flags and reads them once.
    """
    if not values.is_floating_point() or values.numel() == 0:
        return None
    # max propagates NaN: one reduction, no (Q, N) temporary as isnan() would make
    return values.amax().isnan()


def has_nan(values: Tensor) -> bool:
    """Whether ``values`` holds a NaN (False for an empty tensor); reads one value."""
    flag = nan_flag(values)
    return flag is not None and bool(flag)
