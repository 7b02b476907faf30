"""The peers' own test suites, run against this package's adapters.

``ignite_rec_sys/``: PyTorch-Ignite's ``tests/ignite/metrics/rec_sys`` (BSD-3-Clause).
``torchmetrics_retrieval/unittests/``: TorchMetrics' ``tests/unittests/retrieval``
and the part of its test helpers they use (Apache-2.0). Each copy swaps only the
imports of the metric classes (and functions); every deliberate difference is marked
``xfail(strict=True)`` in the copy and listed in its module docstring and in
``docs/migration_ignite.rst`` / ``docs/migration_torchmetrics.rst``.

This file registers the peers' markers (``--strict-markers`` is on).
"""

from __future__ import annotations


def pytest_configure(config):
    for line in (
        "distributed: Ignite: a test run in a distributed context",
        "multinode_distributed: Ignite: a test run across several nodes",
        "tpu: Ignite: a test run on a TPU",
        "DDP: TorchMetrics: a test run in its pool of DDP processes",
        "documented_difference(reason): TorchMetrics: a case checked against a documented rule",
    ):
        config.addinivalue_line("markers", line)
