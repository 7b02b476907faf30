"""What an evaluation says besides its numbers: the queries left out, in words.

The command prints these on stderr (``ranking-plugins: note: ...``); a caller
from Python gets the same sentences. No torch here.

>>> listing([f"q{i}" for i in range(12)])
'q0, q1, q2, q3, q4, q5, q6, q7, q8, q9, ... (2 more)'
"""

from __future__ import annotations

from collections.abc import Sequence

#: how many ids a listing shows
LISTED = 10


def listing(ids: Sequence[str], limit: int = LISTED) -> str:
    """The first ``limit`` ids, then how many more there are."""
    shown = ", ".join(ids[:limit])
    return shown + (f", ... ({len(ids) - limit} more)" if len(ids) > limit else "")


def queries(n: int) -> str:
    """``1 query``, ``2 queries``."""
    return f"{n} {'query' if n == 1 else 'queries'}"


def left_out_notes(
    unjudged: Sequence[str], unretrieved: Sequence[str], counted: bool, run: str = "the run"
) -> list[str]:
    """Which queries were left out or counted empty: never silently.

    ``unjudged``: the run's queries the qrels lack (left out); ``unretrieved``:
    the qrels' queries ``run`` has no line for, ``counted`` as retrieving
    nothing (trec_eval ``-c``) or left out.
    """
    notes = []
    if unjudged:
        one = len(unjudged) == 1
        notes.append(
            f"{queries(len(unjudged))} of {run} {'is' if one else 'are'} not in the qrels and "
            f"{'was' if one else 'were'} left out: {listing(unjudged)}"
        )
    if unretrieved:
        if counted:
            what = "counted as retrieving nothing"
        else:
            what = "left out (--unretrieved-queries count counts them as retrieving nothing)"
        notes.append(
            f"{queries(len(unretrieved))} of the qrels "
            f"{'has' if len(unretrieved) == 1 else 'have'} no line in {run}, "
            f"{what}: {listing(unretrieved)}"
        )
    return notes


__all__ = ["LISTED", "left_out_notes", "listing", "queries"]
