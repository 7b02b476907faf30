"""When the kernel may read a tensor value on the host to save work.

On the CPU a read costs nothing; on an accelerator it would synchronise the
device with the host, so every path that reads has a read-free twin.
"""

from __future__ import annotations

from torch import Tensor


def host_reads_are_free(t: Tensor) -> bool:
    """Whether the kernel may read values of ``t`` on the host to save work.

    True on the CPU. On an accelerator a read would synchronise it with the
    host, so the kernel takes a path that needs no read (``validate_args=False``
    promises none).
    """
    return t.device.type == "cpu" and not ACCELERATOR_PATHS_ON_CPU


#: tests set it to run the accelerator (read-free) paths on the CPU
ACCELERATOR_PATHS_ON_CPU = False
