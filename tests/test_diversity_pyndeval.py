"""The diversity measures against pyndeval (ndeval's C code) through ir_measures.

Random subtopic collections (2-5 subtopics, grades 0-2, unjudged documents, a
query the run lacks, one without any relevant subtopic); one measure per
ir_measures call (several with different parameters in one call give zeros).
Ties are broken as ndeval breaks them (document id ascending) by giving the
package distinct scores in ndeval's order.
"""

from __future__ import annotations

import math
import random

import pytest

ir_measures = pytest.importorskip("ir_measures")
pytest.importorskip("pyndeval")

from ranking_plugins import evaluate_run  # noqa: E402

MEASURES = [
    "alpha_nDCG@{k}",
    "alpha_nDCG(alpha=0.3)@{k}",
    "alpha_DCG@{k}",
    "ERR_IA@{k}",
    "nERR_IA@{k}",
    "P_IA@{k}",
    "StRecall@{k}",
    "NRBP",
    "nNRBP(alpha=0.8, beta=0.3)",
    "AP_IA",
]


def _collection(seed: int) -> tuple[list, list, list]:
    rng = random.Random(seed)
    qrels, run, ndeval_run = [], [], []
    for q in range(6):
        subtopics = rng.randint(2, 5)
        documents = [f"d{rng.randint(0, 60):02d}" for _ in range(rng.randint(5, 30))]
        documents = sorted(set(documents))
        for doc in documents:
            for s in range(subtopics):
                if rng.random() < 0.5 and q != 4:  # query 4: no relevant subtopic
                    qrels.append(ir_measures.Qrel(str(q), doc, rng.randint(0, 2), str(s + 1)))
                elif q == 4 and rng.random() < 0.3:
                    qrels.append(ir_measures.Qrel(str(q), doc, 0, str(s + 1)))
        if q == 5:
            continue  # judged, never retrieved
        # retrieved: some judged, some unjudged, scores with ties
        retrieved = sorted(
            set(
                rng.sample(documents, k=min(len(documents), 8))
                + [f"u{i}" for i in range(rng.randint(0, 6))]
            )
        )
        scores = {doc: float(rng.randint(0, 4)) for doc in retrieved}
        order = sorted(retrieved, key=lambda doc: (-scores[doc], doc))  # ndeval's tie break
        for place, doc in enumerate(order):
            ndeval_run.append(ir_measures.ScoredDoc(str(q), doc, scores[doc]))
            run.append(ir_measures.ScoredDoc(str(q), doc, float(len(order) - place)))
    return qrels, run, ndeval_run


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pyndeval_per_query_and_mean(seed: int) -> None:
    qrels, run, ndeval_run = _collection(seed)
    names = [m.format(k=k) for m in MEASURES for k in ((5, 10, 20) if "{k}" in m else (None,))]
    names = list(dict.fromkeys(names))
    for name in names:
        measure = ir_measures.parse_measure(name)
        expected = {
            m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, ndeval_run)
        }
        got = evaluate_run(
            qrels,
            run,
            [measure],
            ties="first",
            unjudged_queries="skip",
            unretrieved_queries="count",
        )
        for qid, value in expected.items():
            mine = got.per_query[str(measure)][qid]
            if math.isnan(value):  # nNRBP of a query without a relevant subtopic: 0 / 0
                assert mine == 0.0, (name, qid)
                continue
            assert mine == pytest.approx(value, abs=1e-9), (name, qid)
        finite = [v for v in expected.values() if not math.isnan(v)]
        if len(finite) == len(expected):
            mean = sum(finite) / len(finite)
            assert got.means[str(measure)] == pytest.approx(mean, abs=1e-9), name


def test_the_ir_measures_drop_in_routes_them_to_the_kernel() -> None:
    from ranking_plugins.ir_measures import calc_aggregate

    qrels, run, ndeval_run = _collection(3)
    for name in ("alpha_nDCG@10", "NRBP(alpha=0.3, beta=0.8)", "StRecall@5"):
        measure = ir_measures.parse_measure(name)
        expected = ir_measures.calc_aggregate([measure], qrels, ndeval_run)[measure]
        assert calc_aggregate([measure], qrels, run)[measure] == pytest.approx(expected, abs=1e-9)


def test_the_drop_in_groups_the_subtopic_qrels_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """One evaluation with diversity and other measures reads each document's largest
    grade (``SubtopicQrels.records``) for both, grouped once."""
    from ranking_plugins.ir_measures import calc_aggregate
    from ranking_plugins.runs.diversity import SubtopicQrels

    made = []
    largest_grades = SubtopicQrels._largest_grades

    def counted(self: SubtopicQrels) -> object:
        made.append(self)
        return largest_grades(self)

    monkeypatch.setattr(SubtopicQrels, "_largest_grades", counted)
    qrels, run, _ = _collection(3)
    measures = [ir_measures.parse_measure(name) for name in ("alpha_nDCG@10", "P@5")]
    results = calc_aggregate(measures, qrels, run)
    assert len(made) == 1
    # each measure as asked alone: P@5 on each document's largest grade
    monkeypatch.setattr(SubtopicQrels, "_largest_grades", largest_grades)
    largest: dict[tuple[str, str], int] = {}
    for qrel in qrels:
        key = (qrel.query_id, qrel.doc_id)
        largest[key] = max(largest.get(key, qrel.relevance), qrel.relevance)
    plain = [ir_measures.Qrel(q, d, grade) for (q, d), grade in largest.items()]
    alpha_ndcg, precision = measures
    assert results[alpha_ndcg] == calc_aggregate([alpha_ndcg], qrels, run)[alpha_ndcg]
    assert results[precision] == calc_aggregate([precision], plain, run)[precision]
