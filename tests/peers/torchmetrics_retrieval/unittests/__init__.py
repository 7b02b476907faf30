# Copyright The Lightning team.
#
# Licensed under the Apache License, Version 2.0 (the "License"): see LICENSE
# in tests/peers/torchmetrics_retrieval.
#
# TorchMetrics' tests/unittests/__init__.py (Lightning-AI/torchmetrics v1.9.0),
# reduced to what tests/unittests/retrieval uses. Changed: the reference results
# are not cached on disk (TorchMetrics wraps them in `cachier`, which is not a
# dependency here): `_reference_cachier` calls the reference as it is.
import warnings
from typing import NamedTuple

import numpy
import torch
from torch import Tensor

from unittests.conftest import (
    BATCH_SIZE,
    EXTRA_DIM,
    NUM_BATCHES,
    NUM_CLASSES,
    NUM_PROCESSES,
    THRESHOLD,
    USE_PYTEST_POOL,
    setup_ddp,
)

# adding compatibility for numpy >= 1.24
for tp_name, tp_ins in [("object", object), ("bool", bool), ("int", int), ("float", float)]:
    if not hasattr(numpy, tp_name):
        setattr(numpy, tp_name, tp_ins)


def _reference_cachier(func):
    return func


# ignore FutureWarnings while testing (mainly appearing with DDP runs)
warnings.filterwarnings("ignore", category=FutureWarning, module="sklearn.*")
warnings.filterwarnings("ignore", category=UserWarning, module="sklearn.*")


if torch.cuda.is_available():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


class _Input(NamedTuple):
    preds: Tensor
    target: Tensor


class _GroupInput(NamedTuple):
    preds: Tensor
    target: Tensor
    groups: Tensor


__all__ = [
    "BATCH_SIZE",
    "EXTRA_DIM",
    "NUM_BATCHES",
    "NUM_CLASSES",
    "NUM_PROCESSES",
    "THRESHOLD",
    "USE_PYTEST_POOL",
    "_GroupInput",
    "_Input",
    "setup_ddp",
]
