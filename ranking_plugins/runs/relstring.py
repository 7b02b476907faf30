"""trec_eval's ``relstring``: each query's first grades as a string (not a metric).

trec_eval prints, per query, one character for each of the first N retrieved
documents (``-m relstring.N``, N = 10 by default and with ``-m all_trec``), in
its own order (score descending, then document id descending): the grade when
it is 0..9, ``>`` above 9, ``-`` for a document the qrels do not list, ``.``
for one they list with a negative grade (in the pool, not judged), as
``m_relstring.c``. The command prints it with ``--format trec_eval -q`` only,
in trec_eval's layout; it has no value in the other formats or the "all" line.

>>> relstring([b"d3", b"d1", b"d2", b"d4"], [1.0, 1.0, 0.5, 0.2], {b"d1": 2, b"d4": -1}, 10)
'-2-.'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ranking_plugins.runs.joining import as_trec_eval_scores
from ranking_plugins.runs.reading import Records

#: trec_eval's name, and its default length
RELSTRING = "relstring"
RELSTRING_LENGTH = 10


def relstring_length(token: str) -> int | None:
    """N of ``relstring`` or ``relstring.N``; None when ``token`` is neither.

    >>> relstring_length("relstring.20"), relstring_length("relstring"), relstring_length("P")
    (20, 10, None)
    """
    name, dot, param = token.partition(".")
    if name != RELSTRING:
        return None
    if not dot:
        return RELSTRING_LENGTH
    if not param.isdigit() or int(param) <= 0:
        raise ValueError(f"the length in {token!r} must be a positive integer")
    return int(param)


def relstring(
    docnos: Sequence[bytes], scores: Sequence[float], grades: Mapping[bytes, float], length: int
) -> str:
    """One query's string: its first ``length`` documents in trec_eval's order."""
    order = sorted(zip(scores, docnos, strict=True), reverse=True)[:length]
    return "".join(_character(grades.get(docno)) for _, docno in order)


def _character(grade: float | None) -> str:
    if grade is None:
        return "-"
    if grade < 0:
        return "."
    return ">" if grade > 9 else str(int(grade))


def relstrings(qrels: Records, run: Records, qids: Sequence[str], length: int) -> dict[str, str]:
    """The string of each of ``qids`` (the queries evaluated), from the files' records."""
    judged: dict[bytes, dict[bytes, float]] = {}
    for qid, docno, grade in zip(
        qrels.qids.to_pylist(), qrels.docnos.to_pylist(), qrels.values.tolist(), strict=True
    ):
        judged.setdefault(qid, {})[docno] = grade
    retrieved: dict[bytes, tuple[list[bytes], list[float]]] = {}
    for qid, docno, score in zip(
        run.qids.to_pylist(),
        run.docnos.to_pylist(),
        as_trec_eval_scores(run.values).tolist(),  # trec_eval's order reads C floats
        strict=True,
    ):
        docs, scores = retrieved.setdefault(qid, ([], []))
        docs.append(docno)
        scores.append(score)
    strings = {}
    for qid in qids:
        key = qid.encode()
        docs, scores = retrieved.get(key, ([], []))
        strings[qid] = relstring(docs, scores, judged.get(key, {}), length)
    return strings


__all__ = ["RELSTRING", "RELSTRING_LENGTH", "relstring", "relstring_length", "relstrings"]
