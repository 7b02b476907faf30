"""What a TorchMetrics user hands the metrics' constructors, checked in TorchMetrics'
words: ``top_k``, ``empty_target_action``, ``ignore_index``, ``aggregation`` and
the options a class does not read (TorchMetrics' "Unexpected keyword arguments").

Glue only: every rule is the package's (:mod:`ranking_plugins._validation`,
:mod:`ranking_plugins.options`); this module words the errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ranking_plugins import _validation as validation
from ranking_plugins.torchmetrics.functional import _check_adaptive_k, _check_top_k
from ranking_plugins.totals import AGGREGATIONS


def _check_arguments(
    top_k: object,
    empty_target_action: object,
    ignore_index: object,
    adaptive_k: object,
    aggregation: object = "mean",
) -> None:
    """The constructor arguments ``torchmetrics.retrieval`` checks, in its order, each
    by the package's rule (:mod:`ranking_plugins._validation`) in TorchMetrics' words."""
    problem = validation.choice_problem(empty_target_action, validation.EMPTY_TARGET_ACTIONS)
    if problem is not None:
        raise ValueError(
            f"Argument `empty_target_action` received a wrong value `{empty_target_action}`. "
            f"`empty_target_action` {problem.text}"
        )
    if ignore_index is not None and (
        isinstance(ignore_index, bool) or not isinstance(ignore_index, int)
    ):
        raise ValueError(
            "Argument `ignore_index` must be an integer or None. "
            f"`ignore_index` must be an int or None, got {ignore_index!r}"
        )
    if not (
        callable(aggregation) or (isinstance(aggregation, str) and aggregation in AGGREGATIONS)
    ):
        raise ValueError(
            "Argument `aggregation` must be one of `mean`, `median`, `min`, `max` or a custom "
            f"callable function which takes tensor of values, but got {aggregation}. "
            f"`aggregation` must be one of {list(AGGREGATIONS)} or a callable "
            f"f(values, dim=None), got {aggregation!r}"
        )
    _check_top_k(top_k, items_in_package_words=True)
    _check_adaptive_k(adaptive_k)


#: the options that only some metrics read (each class of one metric takes those its
#: metric reads); every other option changes every metric
METRIC_OPTIONS = (
    "gain",
    "ap_denominator",
    "adaptive_k",
    "fall_out_empty",
    "max_fpr",
    "rbp_persistence",
)


def _refuse_unread_options(owner: str, reads: Sequence[str], given: Sequence[str]) -> None:
    """TorchMetrics' ValueError for a keyword a class does not take, where ``owner``'s
    metrics read none of the :data:`METRIC_OPTIONS` given but ``reads``: kept, it would
    be ignored (``RetrievalMRR(max_fpr=0.1)`` computing plain MRR)."""
    unread = [name for name in given if name in METRIC_OPTIONS and name not in reads]
    if not unread:
        return
    names = ", ".join(f"`{name}`" for name in unread)
    takes = ", ".join(f"`{name}`" for name in reads) if reads else "none of them"
    raise ValueError(
        f"Unexpected keyword arguments: {names}. {owner}() takes no {names}: what it computes "
        f"does not read {'them' if len(unread) > 1 else 'it'}. Of the options only some "
        f"metrics read ({', '.join(METRIC_OPTIONS)}), it takes {takes}; "
        "RankingMetrics takes them all"
    )


def _is_mean(aggregation: object) -> bool:
    """Whether ``aggregation`` is the mean, the running sums' (not a callable, whatever it does)."""
    return isinstance(aggregation, str) and aggregation == "mean"


def _aggregation_name(aggregation: object) -> str:
    return repr(aggregation) if isinstance(aggregation, str) else "a callable"


def _retrieval_keywords(
    empty_target_action: str, ignore_index: int | None, aggregation: object, **given: object
) -> dict[str, Any]:
    """The keywords of the class above. The AUROC arguments are forwarded only away
    from TorchMetrics' defaults, so that a class that does not take them refuses
    them by name and one that does gets them; every class takes ``aggregation``."""
    keywords: dict[str, Any] = {
        "empty_target_action": empty_target_action,
        "ignore_index": ignore_index,
        "aggregation": aggregation,
    }
    keywords.update({name: value for name, value in given.items() if value is not None})
    return keywords
