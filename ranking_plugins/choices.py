"""The values the package's options take, in a module that imports nothing.

Each tuple is written here once and imported by the module whose rule it is
(the kernel's tie policies, the validation of the options, the file readers,
the paired tests), so that the ``ranking-plugins`` command's parser, its
``--help`` and its usage errors come without importing torch.
"""

#: what equal scores mean (the kernel's tie policies)
TIES = ("average", "first", "pessimistic", "optimistic")
#: the measures reported when none is asked (``ranking-plugins evaluate`` without ``-m``,
#: :func:`ranking_plugins.evaluate_run` without ``measures``)
DEFAULT_METRICS = ("ndcg@10", "mrr", "map", "precision@10", "recall@100")
#: what a query in the run but not in the qrels does
UNJUDGED_QUERIES = ("error", "skip")
#: what a query in the qrels but not in the run does
UNRETRIEVED_QUERIES = ("skip", "count")
#: what a query without relevant documents does
EMPTY_TARGET_ACTIONS = ("neg", "pos", "skip", "error")
#: nDCG's gain of a grade
GAINS = ("exponential", "linear")
#: which query fall-out calls empty: one without relevant items (the package's) or,
#: as TorchMetrics, one without non-relevant items
FALL_OUT_EMPTY = ("no_relevant", "no_nonrelevant")
#: what map@k divides by
AP_DENOMINATORS = ("relevant", "min_k_relevant")
#: the formats of a qrels or run file (``auto``: from its name, else its first line)
FILE_FORMATS = ("auto", "trec", "tsv", "jsonl")
#: the paired significance tests of :func:`ranking_plugins.compare.compare`
TESTS = ("t", "wilcoxon", "randomization", "bootstrap")
#: its corrections for multiple comparisons
CORRECTIONS = ("holm", "bonferroni", "none")

__all__ = [
    "AP_DENOMINATORS",
    "CORRECTIONS",
    "DEFAULT_METRICS",
    "EMPTY_TARGET_ACTIONS",
    "FALL_OUT_EMPTY",
    "FILE_FORMATS",
    "GAINS",
    "TESTS",
    "TIES",
    "UNJUDGED_QUERIES",
    "UNRETRIEVED_QUERIES",
]
