"""Running the multi-process tests: workers on gloo, launched and waited for.

Every launcher fails the test, with the workers' output, when a run exits
non-zero or hangs past its timeout (a collective that one process never
reaches would otherwise hang the suite).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch.multiprocessing as mp

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    """A TCP port free on this machine now, for a process group's rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(command: list[str], what: str, timeout: float, **kwargs: Any) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"the {what} hung:\n{error.stderr}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def run_worker_script(script: str, nproc: int, out_dir: Path, timeout: float = 240) -> None:
    """``python tests/SCRIPT NPROC OUT_DIR PORT``: a worker script that starts
    ``nproc`` processes itself (:func:`parallel_main`) and writes to ``out_dir``."""
    command = [sys.executable, str(HERE / script), str(nproc), str(out_dir), str(free_port())]
    _run(command, f"{nproc}-process run", timeout, cwd=HERE.parent)


def parallel_main(worker: Callable[..., None]) -> None:
    """A worker script's ``main``: ``worker(local_rank, out_dir)`` in every process of
    ``ignite.distributed.Parallel`` on gloo, from ``NPROC OUT_DIR PORT`` arguments."""
    import ignite.distributed as idist

    nproc, out_dir, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    with idist.Parallel(backend="gloo", nproc_per_node=nproc, master_port=port) as parallel:
        parallel.run(worker, out_dir)


def run_lightning_script(script: str, out_dir: Path, timeout: float = 240) -> None:
    """``python tests/SCRIPT OUT_DIR`` in ``out_dir``: a script whose ``Trainer``
    launches its own DDP processes (so no ``LOCAL_RANK`` may leak into it)."""
    env = dict(os.environ)
    env.pop("LOCAL_RANK", None)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
    command = [sys.executable, str(HERE / script), str(out_dir)]
    _run(command, "ddp run", timeout, cwd=out_dir, env=env)


def spawn_and_wait(
    function: Callable[..., None], args: Sequence[Any], nprocs: int, timeout: float = 180
) -> None:
    """``function(rank, *args)`` in ``nprocs`` spawned processes, killed past ``timeout``."""
    context = mp.start_processes(
        function, args=tuple(args), nprocs=nprocs, join=False, start_method="spawn"
    )
    deadline = time.monotonic() + timeout
    while not context.join(timeout=5):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"the {nprocs}-process run hung")
