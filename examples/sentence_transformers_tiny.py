"""Train a tiny sentence-transformers model offline and evaluate it with both evaluators.

No download: the model is a ``StaticEmbedding`` (a mean of word vectors) over
a word-level tokenizer made here, with random weights. The task is made up
too: each document is a few words of a topic, and a query asks for its topic
with other words of it. A few hundred steps of ``MultipleNegativesRankingLoss``
on (query, relevant document) pairs pull each query towards its documents; the
evaluator is run before and after, sentence-transformers' own and this
package's, which give the same numbers.

    python examples/sentence_transformers_tiny.py
"""

from __future__ import annotations

import random

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.evaluation import (
    InformationRetrievalEvaluator as TheirEvaluator,
)
from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
from sentence_transformers.sentence_transformer.modules import StaticEmbedding
from tokenizers import Tokenizer, models, pre_tokenizers

from ranking_plugins.sentence_transformers import InformationRetrievalEvaluator

TOPICS, WORDS_PER_TOPIC, DOCS_PER_TOPIC = 40, 12, 8


def tiny_model(vocabulary: list[str], dim: int = 32) -> SentenceTransformer:
    vocab = {"[UNK]": 0, **{word: i + 1 for i, word in enumerate(vocabulary)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    weights = torch.randn(len(vocab), dim, generator=torch.Generator().manual_seed(0))
    module = StaticEmbedding(tokenizer, embedding_weights=weights)
    return SentenceTransformer(modules=[module], device="cpu")


def task() -> tuple[dict[str, str], dict[str, str], dict[str, set[str]], list[str]]:
    """Queries, corpus and relevant documents of a made-up topical collection."""
    r = random.Random(0)
    topics = [[f"t{t}w{w}" for w in range(WORDS_PER_TOPIC)] for t in range(TOPICS)]
    corpus, queries, relevant = {}, {}, {}
    for t, words in enumerate(topics):
        docs = {f"doc{t:02d}-{d}": " ".join(r.sample(words, 4)) for d in range(DOCS_PER_TOPIC)}
        corpus.update(docs)
        queries[f"q{t:02d}"] = " ".join(r.sample(words, 2))
        relevant[f"q{t:02d}"] = set(docs)
    vocabulary = [word for words in topics for word in words]
    return queries, corpus, relevant, vocabulary


def train(model: SentenceTransformer, pairs: list[tuple[str, str]], steps: int) -> None:
    """A plain training loop (no ``datasets``): in-batch negatives, 16 pairs a batch."""
    loss = MultipleNegativesRankingLoss(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    r = random.Random(1)
    model.train()
    for _ in range(steps):
        batch = r.sample(pairs, 16)
        features = [
            model.preprocess([a for a, _ in batch]),
            model.preprocess([b for _, b in batch]),
        ]
        optimizer.zero_grad()
        loss(features, torch.empty(0)).backward()
        optimizer.step()
    model.eval()


def evaluate(model: SentenceTransformer, when: str) -> None:
    queries, corpus, relevant, _ = task()
    settings = {"ndcg_at_k": [10], "map_at_k": [10], "name": "topics"}
    theirs = TheirEvaluator(queries, corpus, relevant, **settings)(model)
    ours = InformationRetrievalEvaluator(queries, corpus, relevant, **settings)(model)
    for key in ("topics_cosine_ndcg@10", "topics_cosine_map@10", "topics_cosine_mrr@10"):
        print(f"{when:6} {key:24} sentence-transformers {theirs[key]:.4f}  ours {ours[key]:.4f}")
    same = list(ours) == list(theirs) and all(abs(ours[k] - theirs[k]) < 1e-12 for k in theirs)
    print(f"{when:6} every key and value the same: {same}")


def main() -> None:
    _, corpus, relevant, vocabulary = task()
    model = tiny_model(vocabulary)
    # training pairs: other words of each topic than the evaluation queries'
    r = random.Random(2)
    pairs = [
        (" ".join(r.sample(corpus[doc].split(), 2)), corpus[doc])
        for docs in relevant.values()
        for doc in sorted(docs)
    ]
    evaluate(model, "before")
    train(model, pairs, steps=200)
    evaluate(model, "after")


if __name__ == "__main__":
    main()
