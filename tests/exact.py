"""The tests' check that two calls gave the same numbers, to the bit."""

from __future__ import annotations

from collections.abc import Mapping

import torch


def assert_same_values(
    got: Mapping[str, torch.Tensor], want: Mapping[str, torch.Tensor], where: str = ""
) -> None:
    """Every key of ``want`` holds the same values in ``got``, to the bit (NaN where
    NaN); ``where`` says which run, in the message."""
    for key, values in want.items():
        torch.testing.assert_close(
            got[key], values, rtol=0, atol=0, equal_nan=True, msg=f"{key} {where}".rstrip()
        )
