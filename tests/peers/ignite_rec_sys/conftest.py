# Copyright (c) 2018-present, PyTorch-Ignite team. All rights reserved.
# BSD-3-Clause: see LICENSE in this folder.
#
# The part of PyTorch-Ignite's tests/ignite/conftest.py (and tests/ignite/__init__.py)
# that tests/ignite/metrics/rec_sys uses: the ``available_device`` and
# ``distributed`` fixtures. Without pytest-xdist the process is rank 0 of a world of
# WORLD_SIZE (default 1); "gloo_cpu" then runs in a one-process gloo group on
# this machine, and the GPU, Horovod and XLA contexts skip where they are missing.
import os
import sys
import tempfile
import time
from pathlib import Path

import ignite.distributed as idist
import pytest
import torch
import torch.distributed as dist
from ignite.distributed.comp_models.base import _torch_version_gt_112


def is_mps_available_and_functional():
    if not _torch_version_gt_112:
        return False

    if not torch.backends.mps.is_available():
        return False
    try:
        # Try to allocate a small tensor on the MPS device
        torch.tensor([1.0], device="mps")
        return True
    except RuntimeError:
        return False


available_devices_list = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="Skip if no CUDA support"),
    ),
    pytest.param(
        "mps",
        marks=pytest.mark.skipif(
            not is_mps_available_and_functional(), reason="Skip if no MPS support"
        ),
    ),
]


@pytest.fixture(params=available_devices_list)
def available_device(request):
    return request.param


@pytest.fixture(scope="module")
def worker_id():
    # pytest-xdist's fixture, for runs without pytest-xdist
    return "master"


@pytest.fixture(scope="module")
def local_rank(worker_id):
    """use a different account in each xdist worker"""

    if "gw" in worker_id:
        lrank = int(worker_id.replace("gw", ""))
    elif worker_id == "master":
        lrank = 0
    else:
        raise RuntimeError(f"Can not get rank from worker_id={worker_id}")

    os.environ["LOCAL_RANK"] = f"{lrank}"

    yield lrank

    del os.environ["LOCAL_RANK"]


@pytest.fixture(scope="module")
def world_size():
    remove_env_var = False

    if "WORLD_SIZE" not in os.environ:
        os.environ["WORLD_SIZE"] = "1"
        remove_env_var = True

    yield int(os.environ["WORLD_SIZE"])

    if remove_env_var:
        del os.environ["WORLD_SIZE"]


def _create_dist_context(dist_info, lrank):
    dist.init_process_group(**dist_info)
    dist.barrier()
    if torch.cuda.is_available():
        torch.cuda.set_device(lrank)

    return {"local_rank": lrank, "world_size": dist_info["world_size"], "rank": dist_info["rank"]}


def _destroy_dist_context():
    if dist.get_rank() == 0:
        Path("/tmp/free_port").unlink(missing_ok=True)

    dist.barrier()

    dist.destroy_process_group()

    from ignite.distributed.utils import _SerialModel, _set_model

    # We need to set synced model to initial state
    _set_model(_SerialModel())


def _find_free_port():
    # Taken from https://github.com/facebookresearch/detectron2/blob/master/detectron2/engine/launch.py
    import socket

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def _setup_free_port(local_rank):
    port_file = "/tmp/free_port"

    if local_rank == 0:
        port = _find_free_port()
        with open(port_file, "w") as h:
            h.write(str(port))
        return port
    else:
        counter = 10
        while counter > 0:
            counter -= 1
            time.sleep(1)
            if not Path(port_file).exists():
                continue
            with open(port_file) as h:
                port = h.readline()
                return int(port)

        raise RuntimeError(f"Failed to fetch free port on local rank {local_rank}")


skip_if_no_gpu = pytest.mark.skipif(torch.cuda.device_count() < 1, reason="Skip if no GPU")
skip_if_has_not_native_dist_support = pytest.mark.skipif(
    not idist.has_native_dist_support, reason="Skip if no native dist support"
)
skip_if_has_not_xla_support = pytest.mark.skipif(
    not idist.has_xla_support, reason="Skip if no PyTorch XLA package"
)
skip_if_has_not_horovod_support = pytest.mark.skipif(
    not idist.has_hvd_support, reason="Skip if no Horovod dist support"
)


@pytest.fixture(
    params=[
        pytest.param(
            "nccl",
            marks=[pytest.mark.distributed, skip_if_has_not_native_dist_support, skip_if_no_gpu],
        ),
        pytest.param(
            "gloo_cpu", marks=[pytest.mark.distributed, skip_if_has_not_native_dist_support]
        ),
        pytest.param(
            "gloo",
            marks=[pytest.mark.distributed, skip_if_has_not_native_dist_support, skip_if_no_gpu],
        ),
        pytest.param(
            "horovod",
            marks=[
                pytest.mark.distributed,
                skip_if_has_not_horovod_support,
                pytest.mark.skip(reason="Ignite's Horovod launcher is not copied here"),
            ],
        ),
        pytest.param(
            "single_device_xla",
            marks=[
                pytest.mark.tpu,
                skip_if_has_not_xla_support,
                pytest.mark.skip(reason="Ignite's XLA launcher is not copied here"),
            ],
        ),
        pytest.param(
            "xla_nprocs",
            marks=[
                pytest.mark.tpu,
                skip_if_has_not_xla_support,
                pytest.mark.skip(reason="Ignite's XLA launcher is not copied here"),
            ],
        ),
    ],
    scope="class",
)
def distributed(request, local_rank, world_size):
    if request.param in ("nccl", "gloo_cpu", "gloo"):
        if "gloo" in request.param and sys.platform.startswith("win"):
            temp_file = tempfile.NamedTemporaryFile(delete=False)  # noqa: SIM115
            # can't use backslashes in f-strings
            backslash = "\\"
            init_method = f"file:///{temp_file.name.replace(backslash, '/')}"
        else:
            temp_file = None
            free_port = _setup_free_port(local_rank)
            init_method = "env://"
            os.environ["MASTER_ADDR"] = "localhost"
            os.environ["MASTER_PORT"] = str(free_port)

        dist_info = {
            "world_size": world_size,
            "rank": local_rank,
            "init_method": init_method,
        }

        if request.param == "nccl":
            dist_info["backend"] = "nccl"
        else:
            dist_info["backend"] = "gloo"
            from datetime import timedelta

            dist_info["timeout"] = timedelta(seconds=30)
        yield _create_dist_context(dist_info, local_rank)
        _destroy_dist_context()
        if temp_file:
            temp_file.close()
        else:
            os.environ.pop("MASTER_ADDR", None)
            os.environ.pop("MASTER_PORT", None)
    else:
        raise RuntimeError(
            f"Invalid parameter value for `distributed` fixture, given {request.param}"
        )
