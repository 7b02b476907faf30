"""ranking_plugins.sentence_transformers against sentence-transformers' own evaluator.

The oracle is the installed sentence-transformers (6.x): its
``InformationRetrievalEvaluator`` on a model built offline (a
``StaticEmbedding`` over a word-level tokenizer, random weights), every key and
value, CSV file and ``primary_metric``; graded relevance, the tie policies and
the package's other metrics against ``rank_metrics`` on the dense score matrix;
bad input; two gloo processes against one.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("sentence_transformers")

from processes import spawn_and_wait
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.evaluation import (
    InformationRetrievalEvaluator as PeerEvaluator,
)
from sentence_transformers.sentence_transformer.modules import StaticEmbedding
from sentence_transformers.util.similarity import cos_sim, dot_score
from tokenizers import Tokenizer, models, pre_tokenizers

from ranking_plugins import ArgumentError, rank_metrics
from ranking_plugins.sentence_transformers import InformationRetrievalEvaluator

WORDS = [f"w{i}" for i in range(300)]


def tiny_model(seed: int = 0, dim: int = 16, integer: bool = False) -> SentenceTransformer:
    """A static embedding model over a word-level vocabulary, random weights, offline."""
    vocab = {"[UNK]": 0, **{word: i + 1 for i, word in enumerate(WORDS)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    gen = torch.Generator().manual_seed(seed)
    weights = (
        torch.randint(-3, 4, (len(vocab), dim), generator=gen).float()
        if integer
        else torch.randn(len(vocab), dim, generator=gen)
    )
    return SentenceTransformer(
        modules=[StaticEmbedding(tokenizer, embedding_weights=weights)], device="cpu"
    )


@pytest.fixture(scope="module")
def model() -> SentenceTransformer:
    return tiny_model()


def problem(
    seed: int, docs: int = 150, queries: int = 40, words: int = 4, graded: bool = False
) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    """Queries, corpus (ids not in sorted insertion order) and relevant documents:
    some queries without any, one empty set, a query id with no query."""
    r = random.Random(seed)
    corpus = {f"d{i}": " ".join(r.choices(WORDS, k=words)) for i in r.sample(range(docs), docs)}
    texts = {f"q{i}": " ".join(r.choices(WORDS, k=3)) for i in range(queries)}
    ids = sorted(corpus)
    relevant: dict[str, Any] = {}
    for i in range(queries - 5):
        chosen = r.sample(ids, r.randint(1, 6))
        relevant[f"q{i}"] = {d: r.choice([0, 1, 2, 3]) for d in chosen} if graded else set(chosen)
    relevant[f"q{queries - 5}"] = set()
    relevant["not-a-query"] = {ids[0]}
    return texts, corpus, relevant


def assert_same(ours: dict[str, float], theirs: dict[str, float]) -> None:
    assert list(ours) == list(theirs)
    for key, value in theirs.items():
        assert ours[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key


CASES: list[dict[str, Any]] = [
    {},
    {
        "mrr_at_k": [1, 7, 20],
        "ndcg_at_k": [2, 5, 150],
        "accuracy_at_k": [4],
        "precision_recall_at_k": [2, 30],
        "map_at_k": [3, 10, 149],
        "corpus_chunk_size": 7,
        "name": "small-chunks",
    },
    {"truncate_dim": 5, "corpus_chunk_size": 33, "map_at_k": [10, 50]},
    {"score_functions": {"dot": dot_score}, "corpus_chunk_size": 64},
    {"score_functions": {"dot": dot_score, "cosine": cos_sim}, "ndcg_at_k": [3, 20]},
    {"score_functions": {"cosine": cos_sim, "dot": dot_score}, "main_score_function": "dot"},
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_every_key_and_value_equal_sentence_transformers(
    case: int, model: SentenceTransformer, tmp_path: Path
) -> None:
    queries, corpus, relevant = problem(case)
    kwargs = CASES[case]
    peer = PeerEvaluator(queries, corpus, relevant, **kwargs)
    ours = InformationRetrievalEvaluator(queries, corpus, relevant, **kwargs)
    for epoch in (0, 1):  # the second call appends to the CSV file
        expected = peer(model, str(tmp_path / "peer"), epoch=epoch, steps=5)
        got = ours(model, str(tmp_path / "ours"), epoch=epoch, steps=5)
        assert_same(got, expected)
    assert ours.primary_metric == peer.primary_metric
    (peer_csv,) = (tmp_path / "peer").iterdir()
    (our_csv,) = (tmp_path / "ours").iterdir()
    assert our_csv.name == peer_csv.name
    peer_rows = [line.split(",") for line in peer_csv.read_text().splitlines()]
    our_rows = [line.split(",") for line in our_csv.read_text().splitlines()]
    assert our_rows[0] == peer_rows[0]
    for mine, theirs in zip(our_rows[1:], peer_rows[1:], strict=True):
        assert [float(v) for v in mine] == pytest.approx([float(v) for v in theirs], rel=1e-12)


def test_ties_follow_sentence_transformers_order_by_corpus_id() -> None:
    # integer weights and 4-word documents: exact dot products, many tied documents
    # (repeated texts), so (-score, corpus id) decides most places
    model = tiny_model(3, dim=4, integer=True)
    r = random.Random(7)
    texts = [" ".join(r.choices(WORDS[:12], k=4)) for _ in range(12)]
    corpus = {f"doc{i:03d}": r.choice(texts) for i in r.sample(range(120), 120)}
    queries = {f"q{i}": " ".join(r.choices(WORDS[:12], k=4)) for i in range(20)}
    relevant = {qid: set(r.sample(sorted(corpus), 5)) for qid in queries}
    kwargs: dict[str, Any] = {
        "score_functions": {"dot": dot_score},
        "corpus_chunk_size": 13,
        "ndcg_at_k": [1, 5, 30],
        "map_at_k": [10, 100],
    }
    expected = PeerEvaluator(queries, corpus, relevant, **kwargs)(model)
    got = InformationRetrievalEvaluator(queries, corpus, relevant, **kwargs)(model)
    assert_same(got, expected)
    # the tie policy changes the numbers on these ties
    average = InformationRetrievalEvaluator(queries, corpus, relevant, **kwargs, ties="average")
    assert average(model) != got


def dense_problem(
    model: SentenceTransformer,
    queries: dict[str, str],
    corpus: dict[str, str],
    relevant: dict[str, Any],
) -> tuple[torch.Tensor, torch.Tensor]:
    """The (Q, N) cosine scores and grades of the evaluated queries, corpus in id order."""
    qids = [q for q in queries if q in relevant and len(relevant[q]) > 0]
    ids = sorted(corpus)
    query_emb = model.encode_query([queries[q] for q in qids], convert_to_tensor=True)
    corpus_emb = model.encode_document([corpus[d] for d in ids], convert_to_tensor=True)
    grades = torch.zeros(len(qids), len(ids), dtype=torch.float64)
    for q, qid in enumerate(qids):
        docs = relevant[qid]
        for doc_id in docs:
            grades[q, ids.index(doc_id)] = docs[doc_id] if isinstance(docs, dict) else 1.0
    return cos_sim(query_emb, corpus_emb), grades


@pytest.mark.parametrize("ties", ["first", "average"])
@pytest.mark.parametrize("gain", ["linear", "exponential"])
def test_graded_relevant_docs_give_graded_ndcg(
    model: SentenceTransformer, ties: str, gain: str
) -> None:
    queries, corpus, relevant = problem(11, graded=True)
    evaluator = InformationRetrievalEvaluator(
        queries, corpus, relevant, ndcg_at_k=[3, 10], map_at_k=[10], ties=ties, gain=gain
    )
    got = evaluator(model)
    scores, grades = dense_problem(model, queries, corpus, relevant)
    options = {"ties": ties, "gain": gain, "ap_denominator": "min_k_relevant"}
    options["empty_target_action"] = "skip"  # grade-0-only queries: nothing relevant
    expected = rank_metrics(scores, grades, ["ndcg", "map", "recall"], [3, 5, 10], **options)
    for key in ("ndcg@3", "ndcg@10", "map@10", "recall@5"):
        assert got[f"cosine_{key}"] == pytest.approx(float(expected[key]), rel=1e-12), key
    # grades make a difference: the same documents as a set give binary NDCG
    as_sets = {
        qid: {d for d, g in docs.items() if g > 0} if isinstance(docs, dict) else docs
        for qid, docs in relevant.items()
    }
    binary = InformationRetrievalEvaluator(queries, corpus, as_sets, ndcg_at_k=[3, 10], ties=ties)
    assert binary(model)["cosine_ndcg@10"] != got["cosine_ndcg@10"]


@pytest.mark.parametrize("ties", ["average", "pessimistic", "optimistic"])
def test_tie_policies_and_other_metrics_equal_rank_metrics(ties: str) -> None:
    model = tiny_model(5, dim=3, integer=True)  # few distinct scores: ties everywhere
    queries, corpus, relevant = problem(13, docs=60, words=2)
    evaluator = InformationRetrievalEvaluator(
        queries,
        corpus,
        relevant,
        mrr_at_k=[5],
        ndcg_at_k=[10],
        map_at_k=[20],
        corpus_chunk_size=16,
        ties=ties,
        ap_denominator="relevant",
        metrics={"err": [5], "r_precision": [None], "ndcg": [7]},
    )
    got = evaluator(model)
    scores, grades = dense_problem(model, queries, corpus, relevant)
    options = {"ties": ties, "ap_denominator": "relevant", "empty_target_action": "skip"}
    expected = rank_metrics(
        scores,
        grades > 0,
        [("mrr", 5), ("ndcg", 10), ("map", 20), ("err", 5), ("r_precision", None), ("ndcg", 7)],
        None,
        **options,
    )
    for key, value in expected.items():
        assert got[f"cosine_{key}"] == pytest.approx(float(value), rel=1e-12), key
    # a k of one of sentence-transformers' metrics joins its group; other metrics come last
    assert (
        list(got)[-5:]
        == [
            "cosine_ndcg@10",
            "cosine_ndcg@7",
            "cosine_mrr@5",
            "cosine_map@20",
            "cosine_err@5",
            "cosine_r_precision",
        ][-5:]
    )


def test_bad_inputs_name_the_argument() -> None:
    queries, corpus, relevant = problem(1, docs=20)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"relevant_docs": {"q0": {"d1", "nowhere"}}}, "relevant_docs"),
        ({"relevant_docs": {"q0": {"d1": 1, "d404": 2}}}, "relevant_docs"),
        ({"relevant_docs": {"q0": set(), "zz": {"d1"}}}, "relevant_docs"),
        ({"corpus": {}}, "corpus"),
        ({"queries": {}}, "queries"),
        ({"map_at_k": [21]}, "map_at_k"),
        ({"ndcg_at_k": [0]}, "ndcg_at_k"),
        ({"accuracy_at_k": []}, "accuracy_at_k"),
        ({"corpus_chunk_size": 0}, "corpus_chunk_size"),
        ({"write_predictions": True}, "write_predictions"),
        ({"metrics": {"ndcg": 5}}, "metrics"),
    ]
    for change, argument in cases:
        kwargs: dict[str, Any] = {
            "queries": queries,
            "corpus": corpus,
            "relevant_docs": relevant,
            "map_at_k": [20],
            **change,
        }
        with pytest.raises(ArgumentError) as raised:
            InformationRetrievalEvaluator(**kwargs)
        assert raised.value.argument == argument, (change, str(raised.value))
    with pytest.raises(ValueError, match="not_a_metric"):
        InformationRetrievalEvaluator(
            queries, corpus, relevant, map_at_k=[20], metrics={"not_a_metric": [5]}
        )
    with pytest.raises(TypeError, match="tie"):
        InformationRetrievalEvaluator(queries, corpus, relevant, map_at_k=[20], tie="first")


def _ddp_evaluator(**kwargs: Any) -> InformationRetrievalEvaluator:
    queries, corpus, relevant = problem(17, docs=90, queries=25)
    return InformationRetrievalEvaluator(
        queries,
        corpus,
        relevant,
        ndcg_at_k=[5, 10],
        map_at_k=[10, 90],
        corpus_chunk_size=16,
        score_functions={"cosine": cos_sim, "dot": dot_score},
        **kwargs,
    )


def _ddp_worker(rank: int, init: str, out_dir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=2)
    try:
        evaluator = _ddp_evaluator(shard_corpus=True)
        values = evaluator(tiny_model(), output_path=str(Path(out_dir) / f"csv{rank}"))
        torch.save(values, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(
    not torch.distributed.is_available(), reason="torch.distributed is not available"
)
def test_two_gloo_processes_equal_one(tmp_path: Path, model: SentenceTransformer) -> None:
    spawn_and_wait(_ddp_worker, (str(tmp_path / "init"), str(tmp_path)), nprocs=2)
    expected = _ddp_evaluator()(model)
    for rank in range(2):
        got = torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)
        assert_same(got, expected)
    assert (tmp_path / "csv0").is_dir() and not (tmp_path / "csv1").exists()
