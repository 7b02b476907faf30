"""The dense layout: scores (Q, N) and a grade for every item (Q, N)."""

from __future__ import annotations

from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.kernel.inputs.checks import check_dense, check_grades
from ranking_plugins.kernel.inputs.parts import (
    Batch,
    RankingInput,
    nan_check_deferred,
    nan_possible,
    one_part,
)
from ranking_plugins.kernel.inputs.relevance import DenseGrades, GainRule


def dense(
    preds: Tensor,
    target: Tensor,
    mask: Tensor | None,
    rule: GainRule,
    validate_args: bool,
    judged: Tensor | None = None,
    depth: int | None = None,
    first_hits: bool = False,
) -> Batch:
    """Checked (Q, N) scores and (Q, N) grades as one part; ``judged``: (Q, N) bool or None.

    ``depth``: how deep the rows will be ranked (:class:`DenseGrades`' ``select_depth``);
    ``first_hits``: the metrics read the first hits alone, no ideal list."""
    check_dense(preds, target)
    deferred = nan_check_deferred(preds, mask, validate_args)
    grades = DenseGrades(target, rule, judged, select_depth=depth, ideal_read=not first_hits)
    if validate_args:
        if not deferred:
            validation.check_values(preds, None, None, preds.shape[1])
        # the grades' row maxima come with the counts every ranking reads anyway
        check_grades(target, rule, preds.shape[1], largest=grades.largest)
    return one_part(RankingInput(preds, mask, grades, deferred, nan_possible(preds, validate_args)))
