"""A drop-in for sentence-transformers' ``InformationRetrievalEvaluator`` (6.x).

The same constructor, ``__call__(model, output_path=None, epoch=-1,
steps=-1)``, result keys (``{name}_{score function}_{metric}@{k}``), CSV file
and ``primary_metric``, usable as the trainer's ``evaluator``; the model
encodes, the package scores and ranks: the corpus embeddings go to
:class:`~ranking_plugins.EmbeddingScores` (no queries x corpus score
matrix), and every metric of every k comes from one count of each relevant
document's rank. The numbers are sentence-transformers' by default. See
:doc:`/sentence_transformers`.

Where it differs from sentence-transformers on purpose:

* ``relevant_docs`` may be graded, ``{qid: {doc_id: grade}}``: graded NDCG
  (sentence-transformers reads the keys as a set);
* the package's options are keywords: ``ties="average"`` (or
  ``"pessimistic"``, ``"optimistic"``) in place of its tie order, which is the
  default (``ties="first"`` on the corpus in ascending id order),
  ``ap_denominator="relevant"`` for trec_eval's MAP (its MAP@k divides by
  min(k, R)), ``gain``, ``relevance_threshold``;
* ``metrics={"err": [10], ...}``: any metric of the package, beside its own;
* ``shard_corpus=True`` under ``torch.distributed``: each process encodes and
  scores its share of the corpus and queries, every process gets the values;
* a document id of ``relevant_docs`` that is not in ``corpus``, an empty
  ``corpus`` or ``queries``, no query with a relevant document, a k larger
  than the corpus: an :class:`~ranking_plugins.ArgumentError` naming the
  argument; ``write_predictions=True`` is refused (no ranked lists are kept);
* the corpus is held in ascending id order (``self.corpus_ids``), the order
  of the rows of a ``corpus_embeddings`` given to ``compute_all_metrics``.

>>> import torch
>>> from sentence_transformers import SentenceTransformer
>>> from sentence_transformers.sentence_transformer.modules import StaticEmbedding
>>> from tokenizers import Tokenizer, models, pre_tokenizers
>>> from ranking_plugins.sentence_transformers import InformationRetrievalEvaluator
>>> words = ["cat", "dog", "fish", "bird", "tree", "rock"]
>>> tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="rock"))
>>> tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
>>> weights = torch.randn(len(words), 8, generator=torch.Generator().manual_seed(0))
>>> model = SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_weights=weights)])
>>> corpus = {"d1": "cat dog", "d2": "fish bird", "d3": "tree rock", "d4": "dog fish",
...           "d5": "bird tree"}
>>> queries = {"q1": "cat", "q2": "bird", "q3": "rock"}
>>> relevant_docs = {"q1": {"d1", "d4"}, "q2": {"d2"}, "q3": {"d3", "d5"}}
>>> evaluator = InformationRetrievalEvaluator(
...     queries, corpus, relevant_docs, mrr_at_k=[3], ndcg_at_k=[3], accuracy_at_k=[1],
...     precision_recall_at_k=[2], map_at_k=[5], name="toy")
>>> results = evaluator(model)
>>> {key: round(value, 4) for key, value in results.items()}
{'toy_cosine_accuracy@1': 0.6667, 'toy_cosine_precision@2': 0.3333, \
'toy_cosine_recall@2': 0.3333, 'toy_cosine_ndcg@3': 0.511, 'toy_cosine_mrr@3': 0.6667, \
'toy_cosine_map@5': 0.5944}
>>> evaluator.primary_metric
'toy_cosine_ndcg@3'
"""

from ranking_plugins.sentence_transformers.evaluator import (
    SENTENCE_TRANSFORMERS_DEFAULTS,
    InformationRetrievalEvaluator,
)

__all__ = ["SENTENCE_TRANSFORMERS_DEFAULTS", "InformationRetrievalEvaluator"]
