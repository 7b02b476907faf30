"""A small reader for TREC qrels, runs and trec_eval output, for the tests.

Formats (whitespace separated):
  qrels:  qid iter docno grade
  run:    qid Q0 docno rank score runid   (rank is ignored; order is by score)
  trec_eval -q output: measure qid value
"""

from __future__ import annotations

import random
from pathlib import Path

import torch

# trec_eval prints %.4f: a correct value is within half a unit of the last
# printed digit (the tiny slack only absorbs the float error of the literal).
TOL_PRINTED = 5e-5 + 1e-12

#: trec_eval's published outputs of its test collection, as parametrize ids:
#: id -> (qrels file, trec_eval output file, relevance threshold (trec_eval -l))
CASES = {
    "aq": ("qrels.test", "out.test.aq", None),
    "aql-l2": ("qrels.rel_level", "out.test.aql", 2),
}

# trec_eval measure family -> (this package's metric, takes a cutoff)
FAMILIES = {
    "P": ("precision", True),
    "recall": ("recall", True),
    "success": ("hit_rate", True),
    "recip_rank": ("mrr", False),
    "map": ("map", False),
    "map_cut": ("map", True),
    "ndcg": ("ndcg", False),
    "ndcg_cut": ("ndcg", True),
    "Rprec": ("r_precision", False),
}
# trec_eval's nDCG ignores the relevance level (-l): its gains are the raw grades
UNTHRESHOLDED = {"ndcg", "ndcg_cut"}
# the cutoffs of trec_eval's output files, and the measures asked of pytrec_eval
CUTOFFS = [5, 10, 15, 20, 30, 100, 200, 500, 1000]
_CUT = ",".join(map(str, CUTOFFS))
PYTREC_EVAL_MEASURES = {
    f"P.{_CUT}",
    f"recall.{_CUT}",
    "success.1,5,10",
    "recip_rank",
    "map",
    f"map_cut.{_CUT}",
    "ndcg",
    f"ndcg_cut.{_CUT}",
    "Rprec",
}

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]


def read_qrels(path: str | Path) -> Qrels:
    qrels: Qrels = {}
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        qid, _iter, docno, grade = line.split()
        docs = qrels.setdefault(qid, {})
        if docno in docs:
            raise ValueError(f"duplicate qrels entry {qid} {docno}")
        docs[docno] = int(grade)
    return qrels


def read_run(path: str | Path) -> Run:
    run: Run = {}
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        qid, _q0, docno, _rank, score, _runid = line.split()
        docs = run.setdefault(qid, {})
        if docno in docs:
            raise ValueError(f"duplicate run entry {qid} {docno}")
        docs[docno] = float(score)  # trec_eval parses scores as double
    return run


def read_trec_eval_output(path: str | Path) -> dict[str, dict[str, str]]:
    """``{qid or "all": {measure: value string}}`` from ``trec_eval -q`` output."""
    out: dict[str, dict[str, str]] = {}
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        measure, qid, value = line.split("\t")
        out.setdefault(qid, {})[measure.strip()] = value.strip()
    return out


def to_tensors(
    qrels: Qrels, run: Run, qids: list[str] | None = None
) -> tuple[list[str], torch.Tensor, torch.Tensor, torch.Tensor]:
    """Dense ``(qids, preds, target, mask)`` for the queries of ``qids``.

    Columns of a query are the union of its judged and retrieved docs, in
    docno DESCENDING string order, so that ``ties="first"`` (lower column
    first) reproduces trec_eval's tie break (docno descending first).
    ``preds`` is the run score (float64, 0 where not retrieved), ``mask`` is
    True where retrieved, ``target`` is the qrels grade (0 if unjudged).
    Queries are padded to a common width with masked, grade-0 columns.
    """
    if qids is None:
        qids = sorted(run)
    columns = []
    for qid in qids:
        docnos = set(qrels.get(qid, {})) | set(run.get(qid, {}))
        columns.append(sorted(docnos, reverse=True))
    n = max(len(c) for c in columns)
    preds = torch.zeros(len(qids), n, dtype=torch.float64)
    target = torch.zeros(len(qids), n, dtype=torch.int64)
    mask = torch.zeros(len(qids), n, dtype=torch.bool)
    for q, (qid, docnos) in enumerate(zip(qids, columns)):
        judged = qrels.get(qid, {})
        scores = run.get(qid, {})
        for j, docno in enumerate(docnos):
            target[q, j] = judged.get(docno, 0)
            if docno in scores:
                preds[q, j] = scores[docno]
                mask[q, j] = True
    return qids, preds, target, mask


def random_collection(
    seed: int, queries: int, columns: int = 30, grades: tuple[int, ...] = (0, 0, 1, 2)
) -> tuple[
    dict[str, dict[str, int]],
    dict[str, dict[str, float]],
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
]:
    """A random collection as files would hold it and as dense inputs, no ties.

    ``(qrels, run, preds, target, mask, judged)``: about 70% of the documents
    retrieved (``mask``) and 60% judged (``judged``, their grade drawn from
    ``grades``; the others grade 0 and absent from ``qrels``), so that the
    collection holds unjudged and unretrieved documents; ``d001`` is judged
    (grade 0 when not drawn) and every query retrieves a document.
    """
    rng = random.Random(seed)
    preds = torch.zeros(queries, columns, dtype=torch.float64)
    target = torch.zeros(queries, columns, dtype=torch.int64)
    mask = torch.zeros(queries, columns, dtype=torch.bool)
    judged = torch.zeros(queries, columns, dtype=torch.bool)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(queries):
        qid = f"q{q}"
        scores = rng.sample(range(1000), columns)
        judgments: dict[str, int] = {}
        docs: dict[str, float] = {}
        for j in range(columns):
            docno = f"d{j:03d}"
            preds[q, j] = scores[j] / 7.0
            if rng.random() < 0.7:
                mask[q, j] = True
                docs[docno] = scores[j] / 7.0
            if rng.random() < 0.6:
                grade = rng.choice(grades)
                judgments[docno] = grade
                target[q, j] = grade
                judged[q, j] = True
        if not docs:
            mask[q, 0] = True
            docs["d000"] = float(preds[q, 0])
        if "d001" not in judgments:
            judgments["d001"] = 0
            judged[q, 1] = True
        qrels[qid], run[qid] = judgments, docs
    return qrels, run, preds, target, mask, judged
