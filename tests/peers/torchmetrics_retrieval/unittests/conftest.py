# Copyright The Lightning team.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
#
# TorchMetrics' tests/unittests/conftest.py (v1.9.0), reduced to what
# tests/unittests/retrieval uses. Changed: the pool of DDP processes. TorchMetrics
# starts one for the whole session with USE_PYTEST_POOL=1 and runs every test
# marked DDP in it (thousands: too slow for this project's CI); without it a DDP
# test runs exactly as its ddp=False twin. Here the pool (two spawned processes
# in one gloo group, on a free port) starts at the first DDP test that runs, and
# the first DDP case of each test function runs in it, and the first of each
# documented difference that function meets (checked against the rule, as its
# other cases: retrieval/differences.py); the metrics' sync over processes has
# its own tests (tests/test_torchmetrics_ddp.py, tests/test_adapter_grouped_ddp.py).
# The other DDP cases are skipped, saying so.
import os
import sys

import pytest
import torch

NUM_PROCESSES = 2  # torch.cuda.device_count() if torch.cuda.is_available() else 2
NUM_BATCHES = 2 * NUM_PROCESSES  # Need to be divisible with the number of processes
BATCH_SIZE = 32
NUM_CLASSES = 5
EXTRA_DIM = 3
THRESHOLD = 0.5

MAX_PORT = 8100
START_PORT = 8088
CURRENT_PORT = START_PORT
USE_PYTEST_POOL = False


@pytest.fixture
def use_deterministic_algorithms():
    """Set deterministic algorithms for the test."""
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(False)


def setup_ddp(rank, world_size):
    """Initialize ddp environment.

    If a particular test relies on the order of the processes in the pool to be [0, 1, 2, ...], then this function
    should be called inside the test to ensure that the processes are initialized in the same order they are used in
    the tests.

    Args:
        rank: the rank of the process
        world_size: the number of processes

    """
    global CURRENT_PORT

    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(CURRENT_PORT)

    CURRENT_PORT += 1
    if CURRENT_PORT > MAX_PORT:
        CURRENT_PORT = START_PORT

    if (
        torch.distributed.group.WORLD is not None
    ):  # if already initialized, destroy the process group
        torch.distributed.destroy_process_group()

    if torch.distributed.is_available() and sys.platform not in ("win32", "cygwin"):
        torch.distributed.init_process_group("gloo", rank=rank, world_size=world_size)


_DDP_CHOSEN: dict = {}


def _find_free_port():
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def _start_pool():
    """TorchMetrics' pytest_sessionstart, started at the first DDP test that runs."""
    if hasattr(pytest, "pool"):
        return
    import multiprocessing

    port = _find_free_port()
    pool = multiprocessing.get_context("spawn").Pool(processes=NUM_PROCESSES)
    pool.starmap(_setup_worker, [(rank, NUM_PROCESSES, port) for rank in range(NUM_PROCESSES)])
    pytest.pool = pool


def _setup_worker(rank, world_size, port):
    """setup_ddp on ``port``: a spawned worker imports this module afresh (START_PORT)."""
    global CURRENT_PORT
    CURRENT_PORT = port
    setup_ddp(rank, world_size)


def pytest_runtest_setup(item):
    """Run the first DDP case of each test, and of each documented difference it meets,
    in the pool; skip the rest."""
    if item.get_closest_marker("DDP") is None:
        return
    if sys.platform in ("win32", "cygwin"):
        pytest.skip("DDP not supported on windows")
    difference = item.get_closest_marker("documented_difference")
    key = (item.path, item.cls, item.originalname, difference and difference.args[0])
    if _DDP_CHOSEN.setdefault(key, item.nodeid) != item.nodeid:
        pytest.skip(
            "TorchMetrics' DDP cases: only the first of each test and documented difference "
            "runs here (CI time; the metrics' own DDP tests are tests/test_torchmetrics_ddp.py)"
        )
    _start_pool()


def pytest_sessionfinish():
    """TorchMetrics' pytest_sessionfinish: close the pool."""
    pool = getattr(pytest, "pool", None)
    if pool is not None:
        pool.close()
        pool.join()
        del pytest.pool
