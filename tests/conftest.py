"""Shared fixtures for the test suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO_ROOT = Path(__file__).resolve().parent.parent

# trec_eval's own test collection (qrels, a run and trec_eval's printed
# outputs) lives beside the repository, not in it: ../shared/data/trec_eval.
TREC_EVAL_DATA = REPO_ROOT.parent / "shared" / "data" / "trec_eval"


@pytest.fixture(scope="session")
def trec_eval_dir() -> Path:
    """Path to trec_eval's test collection; skips the test when it is absent."""
    if not (TREC_EVAL_DATA / "qrels.test").is_file():
        pytest.skip(
            "../shared/data/trec_eval not found: trec_eval conformance data "
            "lives beside the repository, not in it"
        )
    return TREC_EVAL_DATA


# Hypothesis profiles, chosen with the HYPOTHESIS_PROFILE environment variable:
# "ci" (the default: short, the whole fuzz file in well under a minute) and
# "long" (thousands of examples, run by hand: HYPOTHESIS_PROFILE=long pytest
# tests/test_fuzz.py). Tests that set their own max_examples keep it; the
# fuzzer (tests/test_fuzz.py) scales each test's count from the profile's.
settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long",
    max_examples=2000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
