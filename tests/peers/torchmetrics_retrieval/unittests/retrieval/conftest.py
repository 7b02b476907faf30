"""TorchMetrics' retrieval tests against ``ranking_plugins.torchmetrics``: the differences.

The test files of this folder are TorchMetrics' own (v1.9.0), with only the imports
swapped (``from ranking_plugins.torchmetrics import RetrievalMRR``, ``from
ranking_plugins.torchmetrics_functional import retrieval_reciprocal_rank``, ...;
``test_precision_recall_curve.py`` also imports TorchMetrics' ``_retrieval_aggregate``
from ``helpers.py``, where the same function is, not from ``torchmetrics``). The
helpers differ from TorchMetrics' in three places, each said where it is: an argument at TorchMetrics' default that a class here
does not take is left out (``helpers.py``), TorchScript compiles each metric
class and argument set once (``_helpers/testers.py``), and the inputs are
seeded (``_inputs.py``).

The differences documented in ``docs/migration_torchmetrics.rst`` are
decided, modelled and checked by ``differences.py``: a case that meets one
must fail as TorchMetrics wrote it, and then the package's values must be the
documented rule's (see there). This file applies the marks, and prints at the
end of the run how many passed as such checks, by reason.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from unittests.retrieval import differences

HERE = Path(__file__).parent

_CHECKED: Counter = Counter()


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in item.path.parents and isinstance(item, pytest.Function):
            differences.mark(item)


def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed:
        for key, reason in report.user_properties:
            if key == "documented_difference":
                _CHECKED[reason] += 1


def pytest_terminal_summary(terminalreporter):
    if _CHECKED:
        terminalreporter.write_sep(
            "-", f"{sum(_CHECKED.values())} passed checked against a documented rule"
        )
        for reason, count in _CHECKED.most_common():
            terminalreporter.write_line(f"{count:5d}  {reason}")
