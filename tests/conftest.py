"""Shared fixtures for the test suite."""

from __future__ import annotations

from pathlib import Path

import pytest

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
