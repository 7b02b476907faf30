"""What an Ignite user hands the metrics: options, ``top_k``, the engine's output.

Each rule keeps Ignite's error (type and message) first where Ignite refuses
the same value, then says what this package takes; :mod:`ranking_plugins.ignite`
holds the metrics, :mod:`ranking_plugins.ignite.base` their state and the engine glue.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.embeddings import EmbeddingInput
from ranking_plugins.kernel import ITEM_KEYWORDS
from ranking_plugins.options import OPTION_NAMES, Options, unknown_keywords

#: Ignite's names for the gain functions of NDCG, and this package's
GAIN_FUNCTIONS = {"exp_rank": "exponential", "linear_rank": "linear"}


#: Ignite's spelling of this package's options (the rest keep their names)
IGNITE_NAMES = {"gain": "gain_function"}

#: the options every metric here takes by keyword, in Ignite's spelling
IGNITE_OPTION_NAMES = tuple(IGNITE_NAMES.get(name, name) for name in OPTION_NAMES)


def accepted_keywords(cls: type) -> list[str]:
    """The keywords ``cls(...)`` takes: its own parameters, then the options."""
    named = [
        name
        for name, parameter in inspect.signature(cls).parameters.items()
        if parameter.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    options = [*IGNITE_OPTION_NAMES, "keep_per_query", *ITEM_KEYWORDS]
    return named + [name for name in options if name not in named]


def refuse_unknown(cls: type, given: Sequence[str]) -> None:
    """A TypeError naming every keyword ``cls`` does not take, with a guess for each."""
    accepted = accepted_keywords(cls)
    unknown = [name for name in given if name not in accepted]
    if unknown:
        raise TypeError(unknown_keywords(cls.__name__, unknown, accepted))


def options_of(ignore_zero_hits: bool, given: Mapping[str, Any]) -> Options:
    """The options record from Ignite's spelling of them."""
    options = {
        name: given[IGNITE_NAMES.get(name, name)]
        for name in OPTION_NAMES
        if IGNITE_NAMES.get(name, name) in given
    }
    options["empty_target_action"] = empty_target_action_of(
        ignore_zero_hits, options.get("empty_target_action")
    )
    options["gain"] = gain_of_function(options.get("gain", "exp_rank"))
    return Options(**options)


def empty_target_action_of(ignore_zero_hits: bool, empty_target_action: str | None) -> str:
    if not isinstance(ignore_zero_hits, bool):
        raise TypeError(f"`ignore_zero_hits` must be a bool, got {ignore_zero_hits!r}")
    if empty_target_action is not None:
        return empty_target_action
    return "skip" if ignore_zero_hits else "neg"


def gain_of_function(gain_function: object) -> str:
    if not isinstance(gain_function, str) or gain_function not in GAIN_FUNCTIONS:
        # Ignite's message first (its NDCG raises the same ValueError), then ours
        raise ValueError(
            "gain_function must be either 'exp_rank' or 'linear_rank', but given "
            f"{gain_function}: `gain_function` must be one of {list(GAIN_FUNCTIONS)} "
            "('exp_rank' is the gain 2^g - 1, 'linear_rank' the grade g)"
        )
    return GAIN_FUNCTIONS[gain_function]


_TOP_K_FORMS = (
    "ranking_plugins takes a positive int, a list (or any sequence) of positive ints, "
    "or None for the whole list (also inside a list: [10, None])"
)


#: Ignite's message for each part of the ``top_k`` rule Ignite refuses too (a tuple
#: or None, which Ignite does not take, stay accepted; a non-int k gets the package's)
_IGNITE_TOP_K = {
    "type": "top_k must be either int or a list[int], but given {top_k!r}",
    "empty": "top_k must have at least one positive value, but given an empty {type_name}",
    "value": "top_k must be list of positive integers only, but given {top_k!r}",
}


def check_top_k(top_k: object) -> None:
    """The package's ``top_k`` rule, with Ignite's ``ValueError`` and message first
    where Ignite refuses the value too."""
    problem = validation.top_k_problem(top_k)
    if problem is None:
        return
    if problem.kind not in _IGNITE_TOP_K:
        raise problem.error("top_k")
    ignite = _IGNITE_TOP_K[problem.kind].format(top_k=top_k, type_name=type(top_k).__name__)
    raise ValueError(f"{ignite}; `top_k` {problem.text} ({_TOP_K_FORMS})")


def check_same_shape(y_pred: object, y: object, target_format: str | None) -> None:
    """Ignite's ``ValueError`` for a ``y`` that cannot be read as item ids.

    Ignite wants ``y`` shaped like ``y_pred``; this package reads a ``y`` of
    another shape as item ids, which are integers. A floating-point or bool
    ``y`` of another shape is neither, and gets Ignite's error (reading no value).
    """
    if (
        target_format != "indices"
        and isinstance(y_pred, Tensor)
        and isinstance(y, Tensor)
        and y_pred.layout == y.layout == torch.strided
        and not (y_pred.is_nested or y.is_nested)
        and y.shape != y_pred.shape
        and (y.dtype.is_floating_point or y.dtype.is_complex or y.dtype == torch.bool)
    ):
        raise ValueError(
            f"y_pred and y must be in the same shape, got {y_pred.shape} != {y.shape}. "
            "A `y` (`target`) of another shape than `y_pred` is read as item ids, "
            f"which must be an integer tensor (Q,) or (Q, T); got dtype {y.dtype}"
        )


def _describe(value: object) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"a {type(value).__name__}"


_EXPECTED_OUTPUT = (
    "`(y_pred, y)`, `(y_pred, y, mask)` or a dict with the keys 'y_pred' and 'y' "
    "(optionally 'mask' and 'indexes')"
)

Batch = tuple[Tensor | EmbeddingInput, Tensor, Tensor | None, Tensor | None]


def judged_of(output: object, owner: str) -> Tensor | None:
    """The optional ``"judged"`` entry of a dict output, or None."""
    judged = output.get("judged") if isinstance(output, Mapping) else None
    if judged is not None and not isinstance(judged, Tensor):
        raise TypeError(
            f"{owner}: `judged` in the engine output must be a torch.Tensor or None, "
            f"got {type(judged).__name__}"
        )
    return judged


def unpack(output: object, owner: str) -> Batch:
    """``(y_pred, y, mask, indexes)`` from an engine output, or a clear error."""
    if isinstance(output, Mapping):
        missing = [key for key in ("y_pred", "y") if key not in output]
        if missing:
            raise ValueError(
                f"{owner}: the engine output must be {_EXPECTED_OUTPUT}; "
                f"the dict has no {missing} (its keys: {list(output)})"
            )
        parts = {key: output.get(key) for key in ("y_pred", "y", "mask", "indexes")}
    elif isinstance(output, (tuple, list)) and len(output) in (2, 3):
        parts = dict(zip(("y_pred", "y", "mask"), output, strict=False))
        parts.setdefault("mask", None)
        parts["indexes"] = None
    else:
        # Ignite's message first for a tuple of the wrong length, then ours
        ignite = (
            f"output should be in format `(y_pred,y)` but got tuple of {len(output)} tensors. "
            if isinstance(output, (tuple, list))
            else ""
        )
        raise ValueError(
            f"{ignite}{owner}: the engine output must be {_EXPECTED_OUTPUT}, "
            f"got {_describe(output)}; "
            "use `output_transform` to pick these out of the engine's output"
        )
    for key, value in parts.items():
        required = key in ("y_pred", "y")
        if key == "y_pred" and isinstance(value, EmbeddingInput):
            continue  # scores described by embeddings, walked chunk by chunk by the kernel
        if (required or value is not None) and not isinstance(value, Tensor):
            raise TypeError(
                f"{owner}: `{key}` in the engine output must be a torch.Tensor"
                f"{'' if required else ' or None'}, got {type(value).__name__}"
            )
    return parts["y_pred"], parts["y"], parts["mask"], parts["indexes"]  # type: ignore[return-value]


def is_list_pair(output: object) -> bool:
    """Ignite's unrollable output: two lists of per-query tensors."""
    return (
        isinstance(output, (tuple, list))
        and len(output) == 2
        and all(
            isinstance(part, (tuple, list)) and all(isinstance(t, Tensor) for t in part)
            for part in output
        )
    )
