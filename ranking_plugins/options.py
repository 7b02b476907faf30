"""Every option of the package, each defined once: its default, its meaning, its check.

:class:`Options` is the one validated, immutable record of the options that
change the numbers. Every entry point builds it: :func:`ranking_plugins.rank_metrics`
from its keywords, the TorchMetrics and Ignite adapters from theirs (Ignite's
``ignore_zero_hits`` and ``gain_function`` translated), the Lightning callback
through the TorchMetrics adapter, and the ``ranking-plugins`` command from its
flags (each flag's ``dest`` is the option's name). Each check is a rule of
:mod:`ranking_plugins._validation`; nothing downstream checks an option again
(the TorchMetrics adapter asks three of the same rules first, to put
TorchMetrics' words before the package's).

Adding an option is one :func:`option` field below, plus its key in
:class:`OptionKeywords` (the keywords' types, for ``**options``), plus a
translation where a framework spells it differently. The kernel reads it
from the record where it acts.

>>> from ranking_plugins.options import Options
>>> Options(ties="first").ties
'first'
>>> Options(ties="random")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ranking_plugins.ArgumentError: `ties` must be one of ['average', ...], got 'random'
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ranking_plugins import _validation as validation
from ranking_plugins.kernel import TIES, GainRule

#: a field's check: (the option's name, the given value) -> the value to keep, or raise
Check = Callable[[str, Any], Any]


def option(default: object, doc: str, check: Check) -> Any:
    """A field of :class:`Options`: its default, its one-line meaning and its check."""
    return field(default=default, metadata={"doc": doc, "check": check})


def _choice(*choices: str, optional: bool = False) -> Check:
    def check(name: str, value: object) -> object:
        if optional and value is None:
            return None
        return validation.check_choice(name, value, choices)

    return check


def _rule(
    problem: Callable[[object], validation.Problem | None], convert: Callable[[Any], Any]
) -> Check:
    """A field's check from a shared rule of :mod:`ranking_plugins._validation`."""

    def check(name: str, value: object) -> object:
        validation.check(name, problem(value))
        return value if value is None else convert(value)

    return check


_flag = _rule(validation.flag_problem, bool)
_finite_number_or_none = _rule(validation.finite_number_problem, float)
_persistence = _rule(validation.unit_interval_problem, float)
_max_fpr = _rule(validation.max_fpr_problem, float)
_redundancy = _rule(validation.redundancy_problem, float)
_patience = _rule(validation.closed_unit_interval_problem, float)


@dataclass(frozen=True, kw_only=True)
class Options:
    """The options that change the numbers, validated when made (see the module)."""

    ties: str = option(
        "average",
        "order of tied scores: the expectation over their orders (``average``), "
        "index order (``first``), relevant items last or first (``pessimistic``, "
        "``optimistic``)",
        _choice(*TIES),
    )
    relevance_threshold: float | None = option(
        None,
        "grades at or above it are relevant; None: grades above 0",
        _finite_number_or_none,
    )
    empty_target_action: str = option(
        "neg",
        "what a query without relevant items counts as: ``neg`` (the metric's worst "
        "value), ``pos`` (1), ``skip`` (left out of the mean) or ``error``",
        _choice(*validation.EMPTY_TARGET_ACTIONS),
    )
    gain: str = option(
        "linear",
        "the gain of grade g (NDCG, DCG, RBP, G): ``linear`` (g; trec_eval's, ranx's, "
        "TorchMetrics' and scikit-learn's) or ``exponential`` (2^g - 1)",
        _choice(*validation.GAINS),
    )
    ap_denominator: str = option(
        "relevant",
        "what AP@k divides by: ``relevant`` (R, trec_eval's map_cut) or "
        "``min_k_relevant`` (min(k, R), RecBole's and Ignite's)",
        _choice(*validation.AP_DENOMINATORS),
    )
    adaptive_k: bool = option(False, "precision divides by min(k, number of ranked items)", _flag)
    weighted: bool = option(
        False, "each query weighs its number of relevant items in the mean", _flag
    )
    rbp_persistence: float = option(
        0.8,
        "RBP's persistence p in (0, 1), the chance of reading on (ir_measures' 0.8; "
        "trec_eval's and the command's 0.9)",
        _persistence,
    )
    alpha: float = option(
        0.5,
        "the diversity measures' redundancy penalty in [0, 1): an item's gain for a "
        "subtopic already met c times above it is (1 - alpha)^c (ndeval's and ir_measures' 0.5)",
        _redundancy,
    )
    beta: float = option(
        0.5,
        "NRBP's patience in [0, 1], the chance of reading on (ndeval's and ir_measures' 0.5)",
        _patience,
    )
    fall_out_empty: str = option(
        "no_relevant",
        "which query fall-out calls empty: one without relevant items (``no_relevant``, as "
        "every metric) or without non-relevant ones (``no_nonrelevant``, TorchMetrics' "
        "RetrievalFallOut, which computes the fall-out of a query without relevant items)",
        _choice(*validation.FALL_OUT_EMPTY),
    )
    max_fpr: float | None = option(
        None,
        "``auc`` and ``auroc``: the area up to this false positive rate in (0, 1], "
        "standardised by McClish's correction (TorchMetrics' ``max_fpr``); None: the whole area",
        _max_fpr,
    )
    target_format: str | None = option(
        None,
        "``dense`` or ``indices`` when the target's shape is ambiguous; None: read from the shapes",
        _choice(*validation.TARGET_FORMATS, optional=True),
    )
    validate_args: bool = option(
        True,
        "also run the checks that read tensor values (NaN scores, item ids out of "
        "range); they synchronise an accelerator",
        _flag,
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, f.metadata["check"](f.name, getattr(self, f.name)))

    @classmethod
    def create(cls, caller: str = "", **given: Any) -> Options:
        """The record from keywords; an unknown keyword is a TypeError with a guess."""
        unknown = [name for name in given if name not in OPTION_NAMES]
        if unknown:
            raise TypeError(unknown_keywords(caller or cls.__name__, unknown, OPTION_NAMES))
        return cls(**given)

    def replace(self, **changes: Any) -> Options:
        """A copy with ``changes`` (checked as when made)."""
        return dataclasses.replace(self, **changes)

    @property
    def rule(self) -> GainRule:
        """Which grades are relevant and the gain they earn, for the kernel."""
        return GainRule(self.relevance_threshold, self.gain)


class OptionKeywords(TypedDict, total=False):
    """The keywords of :class:`Options`, typed, for ``**options`` (one key per field)."""

    ties: str
    relevance_threshold: float | None
    empty_target_action: str
    gain: str
    ap_denominator: str
    adaptive_k: bool
    weighted: bool
    rbp_persistence: float
    alpha: float
    beta: float
    fall_out_empty: str
    max_fpr: float | None
    target_format: str | None
    validate_args: bool


#: the options' names, in the record's order
OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Options))


def unknown_keywords(caller: str, unknown: Sequence[str], accepted: Sequence[str]) -> str:
    """``caller() got an unexpected keyword argument 'x' (did you mean 'y'?); ...``."""
    named = []
    for name in unknown:
        guess = difflib.get_close_matches(name, accepted, n=1, cutoff=0.6) or [
            a for a in accepted if a.startswith(name) or name.startswith(a)
        ]
        named.append(f"{name!r}" + (f" (did you mean {guess[0]!r}?)" if guess else ""))
    what = "unexpected keyword arguments" if len(unknown) > 1 else "an unexpected keyword argument"
    return f"{caller}() got {what} {', '.join(named)}; it accepts: {', '.join(accepted)}"


def _document(cls: type) -> None:
    """Append each field's default and meaning to the class docstring (written once above)."""
    lines = ["", "", "Fields (keyword-only):", ""]
    for f in dataclasses.fields(cls):
        lines.append(f"* ``{f.name}`` (default ``{f.default!r}``): {f.metadata['doc']}.")
    cls.__doc__ = (cls.__doc__ or "") + "\n".join(lines)


_document(Options)

__all__ = ["OPTION_NAMES", "OptionKeywords", "Options", "option", "unknown_keywords"]
