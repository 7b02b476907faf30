"""Differential fuzzing across layouts and entry points (issue 11).

One ranking problem (a few queries and items, scores with many ties and
``-inf``, grades from their whole range, every option) is expressed in each
layout and entry point: dense ``(Q, N)`` in several score dtypes, item ids,
grouped, :class:`~ranking_plugins.EmbeddingScores`, the TorchMetrics and
Ignite adapters, the command and the Lightning callback. Every one must give
the brute-force reference's numbers (``reference.py``, through the oracle of
``fuzz_problems.py``) or raise ValueError/TypeError where the reference
raises or the input may be refused (a gain that overflows float64): never
another exception, never a NaN where the reference has a number.

The metrics of item exposure (coverage, gini, entropy, personalisation,
novelty, arp, tail_share, diversity) are drawn by ``test_exposure`` and
``test_exposure_long_lists``, with the item inputs they read, against
``reference.reference_exposure`` (through ``fuzz_problems.exposure_oracle``).

The number of examples comes from the hypothesis profile (``conftest.py``):
``HYPOTHESIS_PROFILE=ci`` (the default, short) or ``long`` (by hand).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import io
import itertools
import json
import math
import pickle
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from fuzz_problems import (
    CATEGORY_LABELS,
    EXPOSURE_MEASURES,
    INF,
    RANK_MEASURES,
    SCORE_POOLS,
    Expected,
    ItemDraw,
    Problem,
    Query,
    assert_values,
    checked,
    dense_inputs,
    describe,
    exposure_oracle,
    grade_dtypes_for,
    grouped_inputs,
    item_draws,
    item_id_target,
    judged_flags,
    listed_grades,
    options,
    oracle,
    problems,
    score_dtypes_for,
    score_list,
    score_tensor,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from reference import ALL_METRICS, CATALOGUE_EXPOSURE, NO_K_METRICS, TREC_MEASURES

import ranking_plugins
from ranking_plugins import EmbeddingScores, functional
from ranking_plugins.metrics import METRICS

SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def examples(weight: float) -> int:
    """``weight`` times the profile's ``max_examples`` (the tests differ in cost)."""
    return max(1, round(settings.default.max_examples * weight))


RANK_OPTIONS = (
    "ties",
    "relevance_threshold",
    "empty_target_action",
    "gain",
    "ap_denominator",
    "adaptive_k",
    "weighted",
    "rbp_persistence",  # drawn only with the measures that read it
    "fall_out_empty",
)


def rank_kwargs(opts: dict[str, Any]) -> dict[str, Any]:
    return {k: opts[k] for k in RANK_OPTIONS if k in opts}


# --------------------------------------------------------------------------- #
# rewriting a tensor behind the last-batch cache's back (issue 11, item 1)
# --------------------------------------------------------------------------- #
class Buffers:
    """One persistent tensor per (role, shape, dtype), rewritten in place
    between uses, as a data loader that reuses its output buffers does:
    through a numpy array that shares its memory (``torch.from_numpy``) or
    through ``.data`` (neither bumps the tensor's version counter), or with
    ``copy_`` (which does). "fresh" hands out the tensors as they are."""

    def __init__(self, mode: str) -> None:
        self.mode = mode  # "fresh" | "numpy" | "data" | "copy_"
        self.held: dict[tuple[Any, ...], tuple[torch.Tensor, Any]] = {}

    def __call__(self, t: torch.Tensor | None, role: str = "") -> torch.Tensor | None:
        if self.mode == "fresh" or t is None:
            return t
        key = (role, tuple(t.shape), t.dtype)
        if key not in self.held:
            if self.mode == "numpy" and t.dtype != torch.bfloat16:
                array = t.numpy().copy()
                self.held[key] = (torch.from_numpy(array), array)
            else:
                self.held[key] = (t.clone(), None)
            return self.held[key][0]
        tensor, array = self.held[key]
        if array is not None:
            array[...] = t.numpy()
        elif self.mode == "copy_":
            tensor.copy_(t)
        else:
            tensor.data.copy_(t)
        return tensor


BUFFER_MODES = ("fresh", "fresh", "numpy", "data", "copy_")

#: the sizes of the blocks large inputs are processed in (rows ranked a block
#: at a time; counting in row blocks), set tiny so that small problems take
#: the block-by-block paths too (a renamed constant is just not patched)
BLOCK_CONSTANTS = (
    ("ranking_plugins.kernel.ranked_batch", "WHOLE_ROW_BLOCK_ELEMENTS"),
    ("ranking_plugins.kernel.statistics.counting", "_BLOCK_ELEMENTS"),
    ("ranking_plugins.kernel.flags", "ACCELERATOR_BLOCK_ELEMENTS"),
    # the top grades from blocks' maxima, and EmbeddingScores' target scores by rows
    ("ranking_plugins.kernel.inputs.relevance", "_BLOCK"),
    ("ranking_plugins.kernel.inputs.relevance", "_BLOCKS_PER_CHOSEN"),
    ("ranking_plugins.kernel.inputs.relevance", "_MAXIMA_ELEMENTS"),
    ("ranking_plugins.kernel.catalogue.chunked", "QUERY_ROWS_AT_LEAST"),
    # AP's and RR's sums at their places only, past this many places of a batch
    ("ranking_plugins.kernel.statistics.rank_stats", "PLACED_SUMS_ELEMENTS"),
)


@contextlib.contextmanager
def block_sizes(data: st.DataObject) -> Any:
    """Run the body with the block sizes as they are, or with blocks of 1..12 elements."""
    elements = data.draw(st.one_of(st.none(), st.integers(1, 12)), label="block elements")
    saved = []
    if elements is not None:
        for module_name, name in BLOCK_CONSTANTS:
            module = importlib.import_module(module_name)
            if hasattr(module, name):
                saved.append((module, name, getattr(module, name)))
                setattr(module, name, elements)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def with_block_sizes(test: Callable[[st.DataObject], None]) -> Callable[[st.DataObject], None]:
    """The test body under :func:`block_sizes` (drawn first)."""

    @functools.wraps(test)
    def wrapped(data: st.DataObject) -> None:
        with block_sizes(data):
            test(data)

    return wrapped


def decoy(t: torch.Tensor) -> torch.Tensor:
    """Another valid input of the same shape and dtype (to fill the cache)."""
    return t.flip(-1) if t.ndim else t


# --------------------------------------------------------------------------- #
# 1. dense (Q, N) through rank_metrics and the single-metric functions
# --------------------------------------------------------------------------- #
@settings(max_examples=examples(5), **SETTINGS)
@given(data=st.data())
@with_block_sizes
def test_dense(data: st.DataObject) -> None:
    """Every metric of the rank kernel (the first release's, trec_eval's and the
    measures of judged items, with a random ``judged`` flag per item), under
    every tie policy; the first-release single-metric function of one of them."""
    problem = data.draw(problems(), label="problem")
    opts = data.draw(options(problem.all_grades(), measures=RANK_MEASURES), label="options")
    flags = data.draw(judged_flags(problem), label="judged")
    score_dtype = data.draw(st.sampled_from(score_dtypes_for(problem.all_scores())), label="preds")
    grade_dtype = data.draw(
        st.sampled_from(grade_dtypes_for(problem.all_grades(), problem.grade_kind)), label="target"
    )
    preds, target, mask = dense_inputs(problem, score_dtype, grade_dtype)
    judged = None if flags is None else torch.tensor(flags, dtype=torch.bool).reshape(preds.shape)
    target_format = data.draw(st.sampled_from([None, None, "dense"]), label="target_format")
    expected = oracle(preds, target, opts, mask=mask, target_format=target_format, judged=judged)
    validate_args = expected.may_raise or data.draw(st.integers(0, 3)) > 0
    buffer_mode = data.draw(st.sampled_from(BUFFER_MODES), label="buffer")
    kwargs = dict(
        rank_kwargs(opts), mask=mask, target_format=target_format, validate_args=validate_args
    )
    what = describe(
        score_dtype=score_dtype,
        grade_dtype=grade_dtype,
        buffer=buffer_mode,
        judged=flags,
    )

    buffers = Buffers(buffer_mode)
    if buffer_mode != "fresh":
        # the same buffers held other scores, grades and judged flags in the call before
        with contextlib.suppress(ValueError, TypeError):
            ranking_plugins.rank_metrics(
                buffers(decoy(preds), "preds"),
                buffers(decoy(target), "target"),
                opts["metrics"],
                opts["top_k"],
                judged=buffers(None if judged is None else decoy(judged), "judged"),
                **kwargs,
            )
        preds_in, target_in = buffers(preds, "preds"), buffers(target, "target")
        judged_in = buffers(judged, "judged")
    else:
        preds_in, target_in, judged_in = preds, target, judged

    for reduction in ("none", "mean"):
        want = expected.none if reduction == "none" else expected.mean
        checked(
            lambda reduction=reduction: ranking_plugins.rank_metrics(
                preds_in,
                target_in,
                opts["metrics"],
                opts["top_k"],
                reduction=reduction,
                judged=judged_in,
                **kwargs,
            ),
            expected,
            f"rank_metrics dense reduction={reduction} ({what})",
            lambda got, want=want, reduction=reduction: assert_values(
                got, want, f"rank_metrics dense reduction={reduction} ({what})"
            ),
        )

    # the single-metric function of a first-release metric (its own reference:
    # with empty_target_action="error" only its own undefined values raise); it
    # takes no `judged`, so every item is judged
    first_release = [name for name in opts["metrics"] if name in ALL_METRICS]
    if not first_release:
        return
    name = first_release[0]
    fn = getattr(functional, name)
    single = dict(kwargs)
    expected = oracle(
        preds, target, dict(opts, metrics=(name,)), mask=mask, target_format=target_format
    )
    if name in NO_K_METRICS:
        call = lambda: fn(preds, target, **single)  # noqa: E731
        keys = [name]
    else:
        call = lambda: fn(preds, target, opts["top_k"], **single)  # noqa: E731
        keys = [k for k in expected.keys if k == name or k.startswith(name + "@")]

    def compare_single(got: torch.Tensor) -> None:
        # stacked along k when top_k is a sequence, as the functions document
        stacked = name not in NO_K_METRICS and isinstance(opts["top_k"], list)
        want = [expected.mean[k] for k in keys]
        want = torch.stack(want) if stacked else want[0]
        assert got.dtype == torch.float64, got.dtype
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9, equal_nan=True)

    checked(call, expected, f"functional.{name} ({what})", compare_single)


# --------------------------------------------------------------------------- #
# 2. item ids (Q,) / (Q, T)
# --------------------------------------------------------------------------- #
@st.composite
def item_id_lists(draw: st.DrawFn, q: int, n: int) -> tuple[list[list[int]], int, bool]:
    """Per query the listed ids (-1 padding anywhere, repeats), the width T and
    whether the target is 1-D (Q,)."""
    one_d = n > 0 and draw(st.integers(0, 3)) == 0
    if one_d:
        return [[draw(st.integers(0, n - 1))] for _ in range(q)], 1, True
    width = draw(st.integers(1, 4))
    rows = [
        draw(st.lists(st.integers(-1, n - 1), min_size=width, max_size=width)) for _ in range(q)
    ]
    return rows, width, False


@settings(max_examples=examples(2), **SETTINGS)
@given(data=st.data())
@with_block_sizes
def test_item_ids(data: st.DataObject) -> None:
    problem = data.draw(problems(grade_kinds=("bool",), extreme=False), label="problem")
    q, n = problem.num_queries, problem.num_items
    assert n is not None
    opts = data.draw(options([0, 1]), label="options")
    rows, width, one_d = data.draw(item_id_lists(q, n), label="item_ids")
    id_dtype = data.draw(st.sampled_from([torch.int64, torch.int32]), label="id_dtype")
    target = item_id_target(rows, width, one_d, id_dtype)
    score_dtype = data.draw(st.sampled_from(score_dtypes_for(problem.all_scores())), label="preds")
    preds, _, mask = dense_inputs(problem, score_dtype, torch.bool)
    ambiguous = not one_d and width == n
    target_format = "indices" if ambiguous or data.draw(st.booleans()) else None
    # the reference sees grade 1 for a listed item and -inf (unjudged) for the others
    grades = listed_grades(target, q, n)
    expected = oracle(preds, grades, opts, mask=mask, target_format="dense")
    what = describe(score_dtype=score_dtype, target=target.tolist(), target_format=target_format)
    for reduction in ("none", "mean"):
        want = expected.none if reduction == "none" else expected.mean
        checked(
            lambda reduction=reduction: ranking_plugins.rank_metrics(
                preds,
                target,
                opts["metrics"],
                opts["top_k"],
                mask=mask,
                target_format=target_format,
                reduction=reduction,
                **rank_kwargs(opts),
            ),
            expected,
            f"rank_metrics item ids reduction={reduction} ({what})",
            lambda got, want=want, reduction=reduction: assert_values(
                got, want, f"rank_metrics item ids reduction={reduction} ({what})"
            ),
        )
    # The same problem as dense 0/1 grades: only while grade 0 is not relevant.
    # Under a threshold <= 0 an unlisted item (unjudged) and a dense grade 0
    # (judged, relevant) are not the same problem, so they are not compared.
    threshold = opts["relevance_threshold"]
    if threshold is None or 0 < threshold <= 1:
        dense = grades > 0
        checked(
            lambda: ranking_plugins.rank_metrics(
                preds, dense, opts["metrics"], opts["top_k"], mask=mask, **rank_kwargs(opts)
            ),
            expected,
            f"rank_metrics dense 0/1 of the item ids ({what})",
            lambda got: assert_values(got, expected.mean, f"dense 0/1 of the item ids ({what})"),
        )


# --------------------------------------------------------------------------- #
# 3. grouped (M,) with indexes: lists of different lengths, entries shuffled
# --------------------------------------------------------------------------- #
@st.composite
def grouped_cases(draw: st.DrawFn, problem: Problem) -> dict[str, Any]:
    m = sum(len(query) for query in problem.queries)
    qids = draw(
        st.lists(
            st.one_of(st.integers(0, 20), st.integers(0, 2**40)),
            min_size=problem.num_queries,
            max_size=problem.num_queries,
            unique=True,
        )
    )
    order = draw(st.permutations(list(range(m))))
    index_dtype = (
        torch.int64
        if max(qids, default=0) >= 2**31
        else draw(st.sampled_from([torch.int64, torch.int32]))
    )
    score_dtype = draw(st.sampled_from(score_dtypes_for(problem.all_scores())))
    grade_dtype = draw(st.sampled_from(grade_dtypes_for(problem.all_grades(), problem.grade_kind)))
    preds, target, indexes, mask = grouped_inputs(
        problem, order, qids, score_dtype, grade_dtype, index_dtype
    )
    return dict(
        preds=preds,
        target=target,
        indexes=indexes,
        mask=mask,
        what=describe(score_dtype=score_dtype, grade_dtype=grade_dtype, qids=qids, order=order),
    )


@settings(max_examples=examples(2), **SETTINGS)
@given(data=st.data())
@with_block_sizes
def test_grouped(data: st.DataObject) -> None:
    problem = data.draw(problems(ragged=True), label="problem")
    case = data.draw(grouped_cases(problem), label="grouped")
    opts = data.draw(options(problem.all_grades()), label="options")
    preds, target, indexes, mask = case["preds"], case["target"], case["indexes"], case["mask"]
    expected = oracle(preds, target, opts, indexes=indexes, mask=mask)
    for reduction in ("none", "mean"):
        want = expected.none if reduction == "none" else expected.mean
        checked(
            lambda reduction=reduction: ranking_plugins.rank_metrics(
                preds,
                target,
                opts["metrics"],
                opts["top_k"],
                indexes=indexes,
                mask=mask,
                reduction=reduction,
                **rank_kwargs(opts),
            ),
            expected,
            f"rank_metrics grouped reduction={reduction} ({case['what']})",
            lambda got, want=want, reduction=reduction: assert_values(
                got, want, f"rank_metrics grouped reduction={reduction} ({case['what']})"
            ),
        )


# --------------------------------------------------------------------------- #
# 3b. long lists (more than 255 items: count_true's uint8 blocks, deep cutoffs)
# --------------------------------------------------------------------------- #
@settings(max_examples=examples(0.25), **SETTINGS)
@given(data=st.data())
@with_block_sizes
def test_long_lists(data: st.DataObject) -> None:
    """Two queries of 250..400 items, dense or grouped, scores with many ties.

    One order per tie policy ("average" would make the reference enumerate
    every order of groups of dozens of items), generated from a drawn seed.
    """
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    generator = torch.Generator().manual_seed(seed)
    q = data.draw(st.integers(1, 2), label="queries")
    sizes = [data.draw(st.integers(250, 400), label="items") for _ in range(q)]
    distinct = data.draw(st.sampled_from([2, 5, 40, 1000]), label="distinct scores")
    share = data.draw(st.sampled_from([0.0, 0.02, 0.3, 1.0]), label="relevant share")
    kind = data.draw(st.sampled_from(["bool", "int", "float"]), label="grades")
    opts = data.draw(options([0, 1, 2]), label="options")
    opts["ties"] = data.draw(st.sampled_from(["first", "pessimistic", "optimistic"]), label="ties")
    queries = []
    for n in sizes:
        scores = torch.randint(0, distinct, (n,), generator=generator).to(torch.float64)
        scores[torch.rand(n, generator=generator) < 0.05] = -INF
        relevant = torch.rand(n, generator=generator) < share
        grades = relevant * torch.randint(1, 4, (n,), generator=generator)
        if kind == "bool":
            grades = grades > 0
        elif kind == "float":
            grades = grades * 0.5 - (~relevant) * 0.5
        ranked = torch.rand(n, generator=generator) < 0.9
        queries.append(Query(scores.tolist(), grades.tolist(), ranked.tolist()))
    problem = Problem(queries, kind, data.draw(st.booleans(), label="masked"), None)
    if not problem.masked:
        for query in problem.queries:
            query.ranked = [True] * len(query)
    if data.draw(st.booleans(), label="dense") and len(set(sizes)) == 1:
        problem.num_items = sizes[0]
        dtype = torch.bool if kind == "bool" else torch.float64
        preds, target, mask = dense_inputs(problem, "float64", dtype)
        layout = dict(mask=mask)
    else:
        case = data.draw(grouped_cases(problem), label="grouped")
        preds, target = case["preds"], case["target"]
        layout = dict(indexes=case["indexes"], mask=case["mask"])
    expected = oracle(preds, target, opts, **layout)
    for reduction in ("none", "mean"):
        want = expected.none if reduction == "none" else expected.mean
        checked(
            lambda reduction=reduction: ranking_plugins.rank_metrics(
                preds,
                target,
                opts["metrics"],
                opts["top_k"],
                reduction=reduction,
                **layout,
                **rank_kwargs(opts),
            ),
            expected,
            f"rank_metrics long lists reduction={reduction} (seed={seed})",
            lambda got, want=want, reduction=reduction: assert_values(
                got, want, f"rank_metrics long lists reduction={reduction} (seed={seed})"
            ),
        )


# --------------------------------------------------------------------------- #
# 4. EmbeddingScores, with score matrices known exactly
# --------------------------------------------------------------------------- #
class GatherScores:
    """score_fn for one-hot query rows: query i's score of item j is
    ``item_emb[j, i]``, copied (exact for every dtype, ``-inf`` and int64 too)."""

    def __call__(self, query_emb: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        if query_emb.shape[1] == 0:
            which = torch.zeros(query_emb.shape[0], dtype=torch.int64)
        else:
            which = query_emb.argmax(dim=1)
        return items.T[which]

    def __repr__(self) -> str:
        return "GatherScores()"


@dataclass(frozen=True)
class WideDot:
    """Dot product computed in a wider dtype than the embeddings (issue 11, item 5)."""

    dtype: torch.dtype

    def __call__(self, query_emb: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        return query_emb.to(self.dtype) @ items.to(self.dtype).T


@dataclass
class EmbeddingCase:
    mode: str
    query_emb: torch.Tensor
    item_emb: torch.Tensor
    score_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None
    scores: torch.Tensor  # the matrix score_fn(query_emb, item_emb), built once
    may_refuse: bool = False  # mixed dtypes: a ValueError/TypeError is an answer


FINITE_POOLS = ["ties", "binary", "fine", "wide", "distinct"]


@st.composite
def embedding_cases(draw: st.DrawFn, q: int, n: int) -> EmbeddingCase:
    mode = draw(st.sampled_from(["onehot_dot", "gather", "two_hot_wide", "int_grid", "mixed"]))
    finite = mode in ("onehot_dot", "two_hot_wide", "mixed")
    if mode == "two_hot_wide":  # within the range of bfloat16 and float16
        pools = ["ties", "binary", "fine", "distinct"]
    else:
        pools = FINITE_POOLS if finite else sorted(SCORE_POOLS)
    pool = draw(st.sampled_from(pools))
    rows = [draw(score_list(n, pool)) for _ in range(q)]
    if finite:
        rows = [[0.0 if v == -INF else v for v in row] for row in rows]
    by_item = [rows[i][j] for j in range(n) for i in range(q)]  # (N, Q), row-major
    if mode in ("onehot_dot", "gather", "mixed"):
        names = [
            name
            for name in score_dtypes_for(by_item)
            if mode == "gather" or name in ("float32", "float64", "float16", "bfloat16")
        ]
        name = "float64" if mode == "mixed" else draw(st.sampled_from(names))
        item_emb = score_tensor(by_item, (n, q), name)
        assert item_emb is not None
        query_dtype = torch.float32 if mode in ("gather", "mixed") else item_emb.dtype
        query_emb = torch.eye(q, dtype=query_dtype)
        score_fn = GatherScores() if mode == "gather" else None
        if mode == "mixed":  # float32 queries, float64 items (issue 11, item 12)
            scores = query_emb.to(torch.float64) @ item_emb.T
            return EmbeddingCase(mode, query_emb, item_emb, None, scores, may_refuse=True)
    elif mode == "two_hot_wide":
        low = draw(st.sampled_from([torch.bfloat16, torch.float16]))
        wide = draw(st.sampled_from([torch.float32, torch.float64]))
        exact = torch.tensor(by_item, dtype=torch.float64).reshape(n, q)
        high = exact.to(low)
        rest = (exact - high.to(torch.float64)).to(low)
        item_emb = torch.stack([high, rest], dim=2).reshape(n, 2 * q)
        query_emb = torch.eye(q, dtype=low).repeat_interleave(2, dim=1)
        score_fn = WideDot(wide)
    else:  # int_grid: small integer embeddings, duplicated item rows: exact ties
        dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.bfloat16]))
        d = draw(st.integers(1, 3))
        cell = st.integers(-2, 2)
        query_emb = torch.tensor(
            [draw(st.lists(cell, min_size=d, max_size=d)) for _ in range(q)], dtype=dtype
        ).reshape(q, d)
        distinct = [draw(st.lists(cell, min_size=d, max_size=d)) for _ in range(3)]
        item_emb = torch.tensor(
            [distinct[draw(st.integers(0, 2))] for _ in range(n)], dtype=dtype
        ).reshape(n, d)
        score_fn = None
    scores = (score_fn or (lambda a, b: a @ b.T))(query_emb, item_emb)
    return EmbeddingCase(mode, query_emb, item_emb, score_fn, scores)


def exclude_mask(exclude: torch.Tensor, q: int, n: int) -> torch.Tensor:
    mask = torch.ones(q, n, dtype=torch.bool)
    for row, ids in enumerate(exclude.tolist()):
        for item in ids:
            if item >= 0:
                mask[row, item] = False
    return mask


@st.composite
def embedding_problems(draw: st.DrawFn) -> dict[str, Any]:
    q = draw(st.integers(0, 4)) if draw(st.integers(0, 9)) == 0 else draw(st.integers(1, 4))
    n = draw(st.integers(0, 5)) if draw(st.integers(0, 9)) == 0 else draw(st.integers(1, 5))
    case = draw(embedding_cases(q, n))
    rows, width, one_d = draw(item_id_lists(q, n))
    target = item_id_target(rows, width, one_d, torch.int64)
    exclude = None
    if draw(st.booleans()):
        x = draw(st.integers(1, 3))
        exclude = torch.tensor(
            [draw(st.lists(st.integers(-1, n - 1), min_size=x, max_size=x)) for _ in range(q)],
            dtype=torch.int64,
        ).reshape(q, x)
    chunk_size = draw(st.integers(1, n + 1))
    return dict(q=q, n=n, case=case, target=target, exclude=exclude, chunk_size=chunk_size)


@settings(max_examples=examples(2), **SETTINGS)
@given(data=st.data())
@with_block_sizes
def test_embedding_scores(data: st.DataObject) -> None:
    """The embedding path gives exactly what ``score_fn(query_emb, item_emb)``
    as one dense matrix gives (through the reference, and through rank_metrics)."""
    p = data.draw(embedding_problems(), label="embeddings")
    opts = data.draw(options([0, 1]), label="options")
    case, target, exclude = p["case"], p["target"], p["exclude"]
    q, n = p["q"], p["n"]
    mask = None if exclude is None else exclude_mask(exclude, q, n)
    grades = listed_grades(target, q, n)
    expected = oracle(case.scores, grades, opts, mask=mask, target_format="dense")
    if case.may_refuse:
        expected.may_raise = True
    what = describe(
        mode=case.mode,
        query_dtype=case.query_emb.dtype,
        item_dtype=case.item_emb.dtype,
        scores=case.scores.tolist(),
        target=target.tolist(),
        exclude=None if exclude is None else exclude.tolist(),
        chunk_size=p["chunk_size"],
    )
    scores = EmbeddingScores(
        case.query_emb, case.item_emb, case.score_fn, exclude=exclude, chunk_size=p["chunk_size"]
    )
    for reduction in ("none", "mean"):
        want = expected.none if reduction == "none" else expected.mean
        checked(
            lambda reduction=reduction: ranking_plugins.rank_metrics(
                scores,
                target,
                opts["metrics"],
                opts["top_k"],
                reduction=reduction,
                **rank_kwargs(opts),
            ),
            expected,
            f"EmbeddingScores reduction={reduction} ({what})",
            lambda got, want=want, reduction=reduction: assert_values(
                got, want, f"EmbeddingScores reduction={reduction} ({what})"
            ),
        )
    if not case.may_refuse:
        checked(
            lambda: ranking_plugins.rank_metrics(
                case.scores,
                target,
                opts["metrics"],
                opts["top_k"],
                mask=mask,
                target_format="indices",
                **rank_kwargs(opts),
            ),
            expected,
            f"rank_metrics on the dense score_fn(query_emb, item_emb) ({what})",
            lambda got: assert_values(got, expected.mean, f"dense score matrix ({what})"),
        )


# --------------------------------------------------------------------------- #
# 4b. the metrics of item exposure (issue 14): dense, item ids, EmbeddingScores
# --------------------------------------------------------------------------- #
@contextlib.contextmanager
def accelerator_paths(on: bool) -> Any:
    """Run the body on the paths an accelerator takes (no reads on the host)."""
    from ranking_plugins.kernel import host_reads

    saved = host_reads.ACCELERATOR_PATHS_ON_CPU
    host_reads.ACCELERATOR_PATHS_ON_CPU = on
    try:
        yield
    finally:
        host_reads.ACCELERATOR_PATHS_ON_CPU = saved


@st.composite
def exposure_metric_sets(draw: st.DrawFn, beside: Sequence[str]) -> tuple[str, ...]:
    """All eight exposure metrics, or 1..4 of them; in one draw of four, beside
    one or two of ``beside`` (their numbers must not change)."""
    names = list(
        draw(
            st.one_of(
                st.just(EXPOSURE_MEASURES),
                st.lists(st.sampled_from(EXPOSURE_MEASURES), min_size=1, max_size=4, unique=True),
            )
        )
    )
    if draw(st.integers(0, 3)) == 0:
        for name in draw(st.lists(st.sampled_from(list(beside)), min_size=1, max_size=2)):
            if name not in names:
                names.insert(draw(st.integers(0, len(names))), name)
    return tuple(names)


#: a cutoff is needed (None, in one draw of ten, is refused), up to past the lists
EXPOSURE_TOP_KS = st.integers(0, 9).flatmap(
    lambda x: (
        st.just(None)
        if x == 5  # (hypothesis favours the ends of a range)
        else st.integers(1, 7)
        if x < 5
        else st.lists(st.integers(1, 7), min_size=1, max_size=3)
    )
)
EXPOSURE_LAYOUTS = ("dense", "dense", "dense", "dense", "indices", "embedding", "grouped")


@settings(max_examples=examples(10), **SETTINGS)
@given(data=st.data())
@with_block_sizes
def test_exposure(data: st.DataObject) -> None:
    """The exposure metrics (coverage, gini, entropy, personalisation, novelty, arp,
    tail_share, diversity) under every tie policy, with masks, judged flags and
    every item input, against ``reference.reference_exposure``: through
    rank_metrics (both reductions), the single-metric function and the
    TorchMetrics adapter over several updates (the exposure merged)."""
    layout = data.draw(st.sampled_from(EXPOSURE_LAYOUTS), label="layout")
    # item ids: an unlisted item is judged and never relevant, which the oracle's grades
    # (-inf: not judged) model for every measure but those of judged items
    beside = RANK_MEASURES if layout in ("dense", "grouped") else (*ALL_METRICS, *TREC_MEASURES)
    metrics = data.draw(exposure_metric_sets(beside), label="metrics")
    judged = mask = None
    target_format = oracle_format = None
    flags = None
    if layout == "embedding":
        p = data.draw(embedding_problems(), label="embeddings")
        case, target, exclude, q, n = p["case"], p["target"], p["exclude"], p["q"], p["n"]
        preds: Any = EmbeddingScores(
            case.query_emb,
            case.item_emb,
            case.score_fn,
            exclude=exclude,
            chunk_size=p["chunk_size"],
        )
        ref_preds, ref_target = case.scores, listed_grades(target, q, n)
        mask = None if exclude is None else exclude_mask(exclude, q, n)
        oracle_format, grades = "dense", [0, 1]
        what = describe(layout=layout, mode=case.mode, scores=case.scores.tolist(),
                        target=target.tolist(), exclude=None if exclude is None else exclude.tolist())  # fmt: skip
    elif layout == "grouped":
        problem = data.draw(problems(ragged=True, extreme=False), label="problem")
        case = data.draw(grouped_cases(problem), label="grouped")
        preds, target, mask = case["preds"], case["target"], case["mask"]
        q, n, grades = problem.num_queries, 0, problem.all_grades()
        what = describe(layout=layout) + ", " + case["what"]
    else:
        indices = layout == "indices"
        problem = data.draw(
            problems(grade_kinds=("bool",) if indices else ("bool", "int", "float"), extreme=False),
            label="problem",
        )
        q, n = problem.num_queries, problem.num_items
        assert n is not None
        score_dtype = data.draw(
            st.sampled_from(score_dtypes_for(problem.all_scores())), label="preds"
        )
        if indices:
            rows, width, one_d = data.draw(item_id_lists(q, n), label="item_ids")
            target = item_id_target(rows, width, one_d, torch.int64)
            preds, _, mask = dense_inputs(problem, score_dtype, torch.bool)
            ref_target, oracle_format, grades = listed_grades(target, q, n), "dense", [0, 1]
            if (not one_d and width == n) or data.draw(st.booleans()):
                target_format = "indices"
        else:
            grade_dtype = data.draw(
                st.sampled_from(grade_dtypes_for(problem.all_grades(), problem.grade_kind)),
                label="target",
            )
            preds, target, mask = dense_inputs(problem, score_dtype, grade_dtype)
            ref_target, grades = target, problem.all_grades()
            flags = data.draw(judged_flags(problem), label="judged")
            if flags is not None:
                judged = torch.tensor(flags, dtype=torch.bool).reshape(preds.shape)
        ref_preds = preds
        what = describe(layout=layout, score_dtype=score_dtype, target=target.tolist(),
                        judged=flags, target_format=target_format)  # fmt: skip
    opts = data.draw(options(grades, measures=RANK_MEASURES), label="options")
    opts["metrics"] = metrics
    opts["top_k"] = data.draw(EXPOSURE_TOP_KS, label="top_k")
    threshold = opts["relevance_threshold"]
    if threshold is not None and not math.isfinite(threshold):  # (refused) rarely
        opts["relevance_threshold"] = threshold if data.draw(st.integers(0, 4)) == 2 else None
    items = data.draw(item_draws(n, metrics), label="items")
    item_kw = items.keywords()
    if layout == "grouped":
        expected = Expected(must_raise=True, why="the grouped layout has no catalogue items")
    else:
        expected = exposure_oracle(
            ref_preds,
            ref_target,
            opts,
            items,
            mask=mask,
            target_format=oracle_format,
            judged=judged,
        )
    if layout == "embedding" and (case.may_refuse or n == 0):
        # (an empty item table: refused, "the exposure metrics need a ranking that
        # lists the items", where (Q, 0) scores give NaN; noted, left as it is)
        expected.may_raise = True
    accelerator = data.draw(st.booleans(), label="accelerator paths")
    event(
        f"exposure {layout}: {('refused: ' + expected.why[:40]) if expected.must_raise else 'numbers'}"
    )
    what = f"{what}, items={item_kw}, accelerator paths={accelerator}"
    layout_kw: dict[str, Any] = dict(mask=None if layout == "embedding" else mask)
    if layout == "grouped":
        layout_kw["indexes"] = case["indexes"]
    if target_format:
        layout_kw["target_format"] = target_format
    kwargs = dict(rank_kwargs(opts), **layout_kw, **item_kw)

    with accelerator_paths(accelerator):
        for reduction in ("mean", "none"):
            want = expected
            if reduction == "none" and any(m in CATALOGUE_EXPOSURE for m in metrics):
                want = dataclasses.replace(expected, must_raise=True, why="reduction='none'")
            checked(
                lambda reduction=reduction: ranking_plugins.rank_metrics(
                    preds,
                    target,
                    opts["metrics"],
                    opts["top_k"],
                    reduction=reduction,
                    judged=judged,
                    **kwargs,
                ),
                want,
                f"rank_metrics reduction={reduction} ({what})",
                lambda got, reduction=reduction: assert_values(
                    got,
                    expected.none if reduction == "none" else expected.mean,
                    f"rank_metrics reduction={reduction} ({what})",
                ),
            )
        if layout == "grouped":
            return
        if layout != "embedding":
            # the single-metric function of one exposure metric (it takes no `judged`)
            name = data.draw(
                st.sampled_from([m for m in metrics if m in EXPOSURE_MEASURES]), label="function"
            )
            single = exposure_oracle(
                ref_preds, ref_target, dict(opts, metrics=(name,)), items,
                mask=mask, target_format=oracle_format,
            )  # fmt: skip
            fn = getattr(functional, name)

            def compare_single(got: torch.Tensor) -> None:
                want = torch.stack(list(single.mean.values()))
                want = want if isinstance(opts["top_k"], list) else want[0]
                assert got.dtype == torch.float64, got.dtype
                torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9, equal_nan=True,
                                           msg=lambda m: f"functional.{name} ({what}): {m}")  # fmt: skip

            checked(
                lambda: fn(preds, target, opts["top_k"], **kwargs),
                single,
                f"functional.{name} ({what})",
                compare_single,
            )

        # an adapter, the queries in one update or one each (the exposure merged);
        # the adapters take no `judged`
        adapter = exposure_oracle(
            ref_preds, ref_target, opts, items, mask=mask, target_format=oracle_format
        )
        adapter.may_raise |= expected.may_raise
        if n == 0:
            adapter.may_raise = True  # `num_items` must be positive
        parts = data.draw(st.sampled_from(["one", "cut"]), label="updates")
        bounds = [(0, q)] if parts == "one" or q == 0 else [(i, i + 1) for i in range(q)]
        sizes = {} if item_kw or n == 0 else {"num_items": n}
        format_kw = {"target_format": target_format} if target_format else {}

        def rows(low: int, high: int) -> tuple[Any, torch.Tensor, torch.Tensor | None]:
            if layout == "embedding":
                return (
                    EmbeddingScores(
                        case.query_emb[low:high], case.item_emb, case.score_fn,
                        exclude=None if exclude is None else exclude[low:high],
                        chunk_size=p["chunk_size"],
                    ),
                    target[low:high],
                    None,
                )  # fmt: skip
            return preds[low:high], target[low:high], None if mask is None else mask[low:high]

        which = data.draw(st.sampled_from(["torchmetrics", "ignite"]), label="adapter")
        # n == 0: both adapters refuse an empty catalogue (a ValueError, may_raise above;
        # test_beyond_accuracy_adapters.py::test_an_adapter_refuses_an_empty_catalogue)
        if which == "torchmetrics":
            from ranking_plugins.torchmetrics import RankingMetrics

            def run() -> dict[str, Any]:
                metric = RankingMetrics(
                    opts["metrics"], opts["top_k"], **format_kw, **rank_kwargs(opts), **item_kw, **sizes
                )  # fmt: skip
                for low, high in bounds:
                    scores, labels, hidden = rows(low, high)
                    metric.update(scores, labels, mask=hidden)
                return metric.compute()

            errors: tuple[type[BaseException], ...] = (ValueError, TypeError)
        else:
            from ignite.exceptions import NotComputableError

            from ranking_plugins.ignite import RankingMetrics as IgniteRankingMetrics

            ignite_kw = rank_kwargs(opts)
            ignite_kw["gain_function"] = (
                "exp_rank" if ignite_kw.pop("gain") == "exponential" else "linear_rank"
            )

            def run() -> dict[str, Any]:
                metric = IgniteRankingMetrics(
                    opts["metrics"], opts["top_k"], **format_kw, **ignite_kw, **item_kw, **sizes
                )
                for low, high in bounds:
                    scores, labels, hidden = rows(low, high)
                    output = {"y_pred": scores, "y": labels}
                    metric.update(output if hidden is None else {**output, "mask": hidden})
                return dict(metric.compute())

            # Ignite's contract: NotComputableError when no query counted
            nothing = bool(adapter.mean) and all(
                math.isnan(float(v)) for v in adapter.mean.values()
            )
            adapter.may_raise |= nothing
            errors = (
                (ValueError, TypeError, NotComputableError) if nothing else (ValueError, TypeError)
            )

        checked(
            run,
            adapter,
            f"{which} RankingMetrics, {parts} update(s) ({what})",
            lambda got: assert_values(got, adapter.mean, f"{which} ({what})", float64=False),
            errors,
        )


@settings(max_examples=examples(0.5), **SETTINGS)
@given(data=st.data())
@with_block_sizes
def test_exposure_long_lists(data: st.DataObject) -> None:
    """The exposure metrics on 1..3 queries of 250..400 items (one catalogue), scores
    with many ties, cutoffs past a whole row; one order per tie policy ("average"
    would make the reference enumerate the orders of groups of dozens of items)."""
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    generator = torch.Generator().manual_seed(seed)
    q = data.draw(st.integers(1, 3), label="queries")
    n = data.draw(st.integers(250, 400), label="items")
    distinct = data.draw(st.sampled_from([2, 5, 40, 1000]), label="distinct scores")
    preds = torch.randint(0, distinct, (q, n), generator=generator).to(torch.float64)
    preds[torch.rand(q, n, generator=generator) < 0.05] = -INF
    target = torch.randint(0, 4, (q, n), generator=generator) * (
        torch.rand(q, n, generator=generator) < 0.3
    )
    mask = torch.rand(q, n, generator=generator) < 0.9 if data.draw(st.booleans()) else None
    popularity = torch.randint(1, 50, (n,), generator=generator).to(torch.float64)
    items = ItemDraw(
        popularity=popularity.tolist(),
        tail=(popularity < 10).tolist(),
        num_items=n,
    )
    if data.draw(st.booleans(), label="features"):
        items.features = torch.randint(-2, 3, (n, 3), generator=generator).double().tolist()
    else:
        items.categories = torch.randint(0, 5, (n,), generator=generator).tolist()
        if data.draw(st.integers(0, 3), label="category labels") == 0:
            labels = data.draw(
                st.lists(st.sampled_from(CATEGORY_LABELS), min_size=5, max_size=5, unique=True)
            )
            items.categories = [labels[c] for c in items.categories]
    opts = data.draw(options([0, 1, 2, 3]), label="options")
    opts["metrics"] = EXPOSURE_MEASURES
    opts["top_k"] = data.draw(
        st.lists(st.sampled_from([1, 10, 50, 400]), min_size=1, max_size=3), label="top_k"
    )
    opts["ties"] = data.draw(st.sampled_from(["first", "pessimistic", "optimistic"]), label="ties")
    threshold = opts["relevance_threshold"]
    if threshold is not None and not math.isfinite(threshold):
        opts["relevance_threshold"] = None
    accelerator = data.draw(st.booleans(), label="accelerator paths")
    expected = exposure_oracle(preds, target, opts, items, mask=mask)
    what = f"long lists (seed={seed}, accelerator paths={accelerator})"
    with accelerator_paths(accelerator):
        checked(
            lambda: ranking_plugins.rank_metrics(
                preds, target, opts["metrics"], opts["top_k"], mask=mask,
                **rank_kwargs(opts), **items.keywords(),
            ),
            expected,
            what,
            lambda got: assert_values(got, expected.mean, what),
        )  # fmt: skip


# --------------------------------------------------------------------------- #
# batches for the adapters: one problem cut into several updates
# --------------------------------------------------------------------------- #
@dataclass
class Batched:
    """A whole problem (for the oracle) and its updates (dicts of inputs)."""

    layout: str
    expected: Expected
    batches: list[dict[str, Any]]
    what: str


def cut(draw: st.DrawFn, size: int, max_parts: int = 4) -> list[tuple[int, int]]:
    """[0, size) cut into consecutive non-empty ranges (one empty if size is 0):
    1..max_parts anywhere, or all of one length (the shape a reused buffer needs)."""
    if size == 0:
        return [(0, 0)]
    if draw(st.booleans()):
        step = draw(st.integers(1, size))
        bounds = [*range(0, size, step), size]
    else:
        inner = draw(st.lists(st.integers(1, size - 1), max_size=max_parts - 1)) if size > 1 else []
        bounds = [0, *sorted(set(inner)), size]
    return list(itertools.pairwise(bounds))


def rows_of(t: torch.Tensor | None, low: int, high: int) -> torch.Tensor | None:
    return None if t is None else t[low:high]


@st.composite
def batched(
    draw: st.DrawFn,
    layouts: Sequence[str],
    *,
    whole_queries: bool,
) -> tuple[Batched, dict[str, Any]]:
    """A problem in one layout cut into updates, and the options. Grouped
    updates hold whole queries when ``whole_queries`` (Ignite ranks each
    update on its own), else any run of entries (TorchMetrics joins them)."""
    layout = draw(st.sampled_from(list(layouts)))
    if layout == "embedding":
        p = draw(embedding_problems())
        case, target, exclude = p["case"], p["target"], p["exclude"]
        q, n = p["q"], p["n"]
        opts = draw(options([0, 1]))
        mask = None if exclude is None else exclude_mask(exclude, q, n)
        grades = listed_grades(target, q, n)
        expected = oracle(case.scores, grades, opts, mask=mask, target_format="dense")
        expected.may_raise |= case.may_refuse
        batches = [
            dict(
                embedding=dict(
                    query_emb=case.query_emb[low:high],
                    item_emb=case.item_emb,
                    score_fn=case.score_fn,
                    exclude=rows_of(exclude, low, high),
                    chunk_size=p["chunk_size"],
                ),
                target=target[low:high],
            )
            for low, high in cut(draw, q)
        ]
        what = describe(
            layout=layout, mode=case.mode, scores=case.scores.tolist(), target=target.tolist()
        )
        return Batched(layout, expected, batches, what), opts

    if layout == "grouped":
        problem = draw(problems(ragged=True, empty_ok=False))
    elif layout == "indices":
        problem = draw(problems(grade_kinds=("bool",), extreme=False))
    else:
        problem = draw(problems())
    opts = draw(options(problem.all_grades() if layout != "indices" else [0, 1]))
    batches = []
    if layout == "grouped":
        case = draw(grouped_cases(problem))
        preds, target, indexes, mask = case["preds"], case["target"], case["indexes"], case["mask"]
        expected = oracle(preds, target, opts, indexes=indexes, mask=mask)
        if whole_queries:
            # whole queries per update, entries of a query in their order
            ids = indexes.tolist()
            distinct = list(dict.fromkeys(ids))
            parts = []
            for low, high in cut(draw, len(distinct)):
                chosen = set(distinct[low:high])
                parts.append(torch.tensor([i in chosen for i in ids], dtype=torch.bool))
        else:
            parts = [slice(low, high) for low, high in cut(draw, preds.numel())]
        for part in parts:
            batches.append(
                dict(
                    preds=preds[part],
                    target=target[part],
                    indexes=indexes[part],
                    mask=None if mask is None else mask[part],
                )
            )
        return Batched(layout, expected, batches, case["what"]), opts

    score_dtype = draw(st.sampled_from(score_dtypes_for(problem.all_scores())))
    q, n = problem.num_queries, problem.num_items
    assert n is not None
    if layout == "dense":
        grade_dtype = draw(
            st.sampled_from(grade_dtypes_for(problem.all_grades(), problem.grade_kind))
        )
        preds, target, mask = dense_inputs(problem, score_dtype, grade_dtype)
        expected = oracle(preds, target, opts, mask=mask)
        target_format = None
        what = describe(layout=layout, score_dtype=score_dtype, grade_dtype=grade_dtype)
    else:
        preds, _, mask = dense_inputs(problem, score_dtype, torch.bool)
        rows, width, one_d = draw(item_id_lists(q, n))
        target = item_id_target(rows, width, one_d, torch.int64)
        grades = listed_grades(target, q, n)
        expected = oracle(preds, grades, opts, mask=mask, target_format="dense")
        target_format = "indices"
        what = describe(layout=layout, score_dtype=score_dtype, target=target.tolist())
    for low, high in cut(draw, q):
        batch = dict(preds=preds[low:high], target=target[low:high], mask=rows_of(mask, low, high))
        if target_format:
            batch["target_format"] = target_format
        batches.append(batch)
    return Batched(layout, expected, batches, what), opts


def draw_batched(
    data: st.DataObject, layouts: Sequence[str], **kw: Any
) -> tuple[Batched, dict[str, Any]]:
    return data.draw(batched(layouts, **kw), label="batches")


def feed(batch: dict[str, Any], buffers: Buffers) -> dict[str, Any]:
    """The inputs of one update, made when it is fed: each tensor goes through
    ``buffers`` (so a reused buffer is rewritten only now), and EmbeddingScores
    are built around the (buffered) query embeddings."""
    if "embedding" in batch:
        emb = dict(batch["embedding"])
        emb["query_emb"] = buffers(emb["query_emb"], "query_emb")
        emb["exclude"] = buffers(emb["exclude"], "exclude")
        return dict(preds=EmbeddingScores(**emb), target=buffers(batch["target"], "target"))
    return {
        key: buffers(batch.get(key), key)
        for key in ("preds", "target", "indexes", "mask")
        if batch.get(key) is not None
    }


# --------------------------------------------------------------------------- #
# 5. TorchMetrics adapter: several updates, also after .to(bfloat16) / .half()
# --------------------------------------------------------------------------- #
CONVERSIONS: dict[str, Callable[[Any], Any]] = {
    "none": lambda m: m,
    "to(bfloat16)": lambda m: m.to(torch.bfloat16),
    "half()": lambda m: m.half(),
    "to(float16)": lambda m: m.to(torch.float16),
    "set_dtype(bfloat16)": lambda m: m.set_dtype(torch.bfloat16),
    "double()": lambda m: m.double(),
}


@settings(max_examples=examples(1.5), **SETTINGS)
@given(data=st.data())
@with_block_sizes
def test_torchmetrics_adapter(data: st.DataObject) -> None:
    from ranking_plugins.torchmetrics import RankingMetrics

    b, opts = draw_batched(data, ("dense", "indices", "grouped", "embedding"), whole_queries=False)
    buffers = Buffers(data.draw(st.sampled_from(BUFFER_MODES), label="buffers"))
    conversion = data.draw(st.sampled_from(sorted(CONVERSIONS)), label="conversion")
    convert_at = data.draw(st.integers(0, len(b.batches)), label="convert_at")
    target_format = b.batches[0].get("target_format")

    def run() -> dict[str, torch.Tensor]:
        metric = RankingMetrics(
            opts["metrics"], opts["top_k"], target_format=target_format, **rank_kwargs(opts)
        )
        for i, batch in enumerate(b.batches):
            if i == convert_at:
                metric = CONVERSIONS[conversion](metric)
            inputs = feed(batch, buffers)
            metric.update(
                inputs["preds"],
                inputs["target"],
                indexes=inputs.get("indexes"),
                mask=inputs.get("mask"),
            )
        if convert_at == len(b.batches):
            metric = CONVERSIONS[conversion](metric)
        return metric.compute()

    what = (
        f"torchmetrics.RankingMetrics, {conversion} before update {convert_at}, "
        f"buffers {buffers.mode} ({b.what})"
    )
    checked(run, b.expected, what, lambda got: assert_values(got, b.expected.mean, what))


@settings(max_examples=examples(0.5), **SETTINGS)
@given(data=st.data())
@with_block_sizes
def test_torchmetrics_adapter_whole_queries(data: st.DataObject) -> None:
    """``whole_queries=True``: pending batches ranked together at a drawn cap, the
    metric converted, saved and loaded, or copied between updates."""
    from ranking_plugins.torchmetrics import RankingMetrics, pending

    b, opts = draw_batched(data, ("grouped",), whole_queries=True)
    buffers = Buffers(data.draw(st.sampled_from(BUFFER_MODES), label="buffers"))
    conversion = data.draw(st.sampled_from(sorted(CONVERSIONS)), label="conversion")
    convert_at = data.draw(st.integers(0, len(b.batches)), label="convert_at")
    cap = data.draw(st.sampled_from([1, 16, 10**9]), label="pending cap")
    carry = data.draw(st.sampled_from(["none", "state_dict", "pickle", "clone"]), label="carry")

    def carried(metric: Any) -> Any:
        if carry == "pickle":
            return pickle.loads(pickle.dumps(metric))
        if carry == "clone":
            return metric.clone()
        if carry == "state_dict":
            metric.persistent(True)
            fresh = RankingMetrics(
                opts["metrics"], opts["top_k"], whole_queries=True, **rank_kwargs(opts)
            )
            fresh.load_state_dict(metric.state_dict())
            fresh._update_count = metric._update_count
            return fresh
        return metric

    def run() -> dict[str, torch.Tensor]:
        metric = RankingMetrics(
            opts["metrics"], opts["top_k"], whole_queries=True, **rank_kwargs(opts)
        )
        for i, batch in enumerate(b.batches):
            if i == convert_at:
                metric = carried(CONVERSIONS[conversion](metric))
            inputs = feed(batch, buffers)
            metric.update(
                inputs["preds"],
                inputs["target"],
                indexes=inputs.get("indexes"),
                mask=inputs.get("mask"),
            )
        if convert_at == len(b.batches):
            metric = carried(CONVERSIONS[conversion](metric))
        return metric.compute()

    what = (
        f"torchmetrics.RankingMetrics(whole_queries=True), pending cap {cap}, {conversion} "
        f"and {carry} before update {convert_at}, buffers {buffers.mode} ({b.what})"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pending, "PENDING_ENTRIES", cap)
        checked(run, b.expected, what, lambda got: assert_values(got, b.expected.mean, what))


# --------------------------------------------------------------------------- #
# 6. Ignite adapter on a real Engine
# --------------------------------------------------------------------------- #
@settings(max_examples=examples(1), **SETTINGS)
@given(data=st.data())
@with_block_sizes
def test_ignite_adapter(data: st.DataObject) -> None:
    from ignite.engine import Engine
    from ignite.exceptions import NotComputableError

    from ranking_plugins.ignite import RankingMetrics

    b, opts = draw_batched(data, ("dense", "indices", "grouped", "embedding"), whole_queries=True)
    buffers = Buffers(data.draw(st.sampled_from(BUFFER_MODES), label="buffers"))
    action = opts["empty_target_action"]
    spelling = data.draw(st.booleans(), label="ignore_zero_hits spelling") and action in (
        "skip",
        "neg",
    )
    kw: dict[str, Any] = dict(
        ties=opts["ties"],
        relevance_threshold=opts["relevance_threshold"],
        gain_function="exp_rank" if opts["gain"] == "exponential" else "linear_rank",
        ap_denominator=opts["ap_denominator"],
        adaptive_k=opts["adaptive_k"],
        weighted=opts["weighted"],
    )
    if "fall_out_empty" in opts:
        kw["fall_out_empty"] = opts["fall_out_empty"]
    if spelling:
        kw["ignore_zero_hits"] = action == "skip"
    else:
        kw["empty_target_action"] = action
    target_format = b.batches[0].get("target_format")
    if target_format:
        kw["target_format"] = target_format
    expected = b.expected
    # the package's spelling of the gain, and a misspelt keyword (issue 11, item 4):
    # honoured or refused, never silently ignored
    keyword = data.draw(st.sampled_from(["ignite", "ignite", "package", "typo"]), label="keyword")
    if keyword == "package":
        del kw["gain_function"]
        kw["gain"] = opts["gain"]
        expected = dataclasses.replace(expected, may_raise=True)
    elif keyword == "typo":
        kw["tie"] = kw.pop("ties")
        expected = dataclasses.replace(expected, must_raise=True, why="unknown keyword `tie`")
    styles = [
        data.draw(st.sampled_from(["dict", "tuple"]), label="output style") for _ in b.batches
    ]

    def process(engine: Engine, i: int) -> Any:
        """The engine's output for batch i, its buffers rewritten only now."""
        inputs = feed(b.batches[i], buffers)
        if styles[i] == "tuple" and "indexes" not in inputs:
            out = (inputs["preds"], inputs["target"])
            return out if inputs.get("mask") is None else (*out, inputs["mask"])
        out = {"y_pred": inputs["preds"], "y": inputs["target"]}
        out.update({key: inputs[key] for key in ("mask", "indexes") if key in inputs})
        return out

    means = expected.mean
    nothing_counted = bool(means) and all(math.isnan(float(v)) for v in means.values())
    what = (
        f"ignite.RankingMetrics on an Engine ({describe(**kw)}; buffers {buffers.mode}; {b.what})"
    )

    def run() -> dict[str, float]:
        metric = RankingMetrics(opts["metrics"], opts["top_k"], **kw)
        engine = Engine(process)
        metric.attach(engine, "ranking")
        state = engine.run(list(range(len(b.batches))), max_epochs=1)
        return {key: state.metrics[key] for key in metric.keys}

    # Ignite's contract: NotComputableError when no query counted
    errors = (
        (ValueError, TypeError, NotComputableError) if nothing_counted else (ValueError, TypeError)
    )
    if nothing_counted and not (expected.must_raise or expected.may_raise):
        with pytest.raises(NotComputableError):
            run()
        return
    checked(run, expected, what, lambda got: assert_values(got, means, what, float64=False), errors)


# --------------------------------------------------------------------------- #
# 7. the command: qrels and run files, evaluate --format json --per-query
# --------------------------------------------------------------------------- #
def docno(item: int) -> str:
    """Lower item index, higher docno: trec_eval's tie break (docno descending)
    is then the reference's "first" (lower index first)."""
    return f"doc{99 - item:02d}"


def grade_text(grade: Any, kind: str, file_format: str) -> str:
    if kind == "bool":
        return "1" if grade else "0"
    if kind == "int" or file_format == "trec":  # TREC grades are integers
        return str(int(grade))
    return repr(float(grade))


@settings(max_examples=examples(4), **SETTINGS)
@given(data=st.data())
@with_block_sizes
def test_cli(data: st.DataObject) -> None:
    from ranking_plugins.cli import main

    problem = data.draw(problems(ragged=data.draw(st.booleans()), empty_ok=False), label="problem")
    opts = data.draw(
        options(problem.all_grades(), cli=True, measures=RANK_MEASURES), label="options"
    )
    kind = problem.grade_kind
    # each retrieved document is judged or not; an unretrieved one only exists if judged
    judged = [
        data.draw(
            st.lists(st.integers(0, 5), min_size=len(q), max_size=len(q)).map(
                lambda xs: [x > 0 for x in xs]
            )
        )
        for q in problem.queries
    ]
    unretrieved = data.draw(st.sampled_from(["skip", "count"]), label="unretrieved")
    # trec_eval -J: a retrieved document absent from the qrels, or there with a negative
    # grade (in the pool, not judged), leaves the ranking
    judged_only = data.draw(st.integers(0, 3), label="-J") == 1
    integral = kind != "float" or all(
        math.isfinite(float(g)) and float(g) == int(float(g)) for g in problem.all_grades()
    )
    qrels_format = data.draw(
        st.sampled_from(["trec", "tsv", "jsonl"] if integral else ["tsv", "jsonl"])
    )
    run_format = data.draw(st.sampled_from(["trec", "tsv", "jsonl"]))

    qrels_lines, run_lines = [], []
    # (qid, scores, grades, ranked, judged) of the queries the command evaluates; judged:
    # in the qrels (every unretrieved document there is: the command adds them all)
    ref_queries = []
    infinite_grade = False
    for q, query in enumerate(problem.queries):
        qid = f"q{q}"
        scores, grades, ranked, in_qrels_flags = [], [], [], []
        for j in range(len(query)):
            s, g, r, jd = (
                query.scores[j],
                query.grades[j],
                query.ranked[j],
                judged[q][j] or not query.ranked[j],
            )
            if jd:
                text = grade_text(g, kind, qrels_format)
                if qrels_format == "trec":
                    qrels_lines.append(f"{qid} 0 {docno(j)} {text}")
                elif qrels_format == "tsv":
                    qrels_lines.append(f"{qid}\t{docno(j)}\t{text}")
                else:
                    qrels_lines.append(
                        json.dumps(
                            {
                                "query_id": qid,
                                "doc_id": docno(j),
                                "relevance": float(g) if kind == "float" else int(g),
                            }
                        )
                    )
                infinite_grade |= math.isinf(float(g))
            if r:
                if run_format == "trec":
                    run_lines.append(f"{qid} Q0 {docno(j)} {j + 1} {s!r} fuzz")
                elif run_format == "tsv":
                    run_lines.append(f"{qid}\t{docno(j)}\t{s!r}")
                else:
                    run_lines.append(json.dumps({"query_id": qid, "doc_id": docno(j), "score": s}))
            if r or jd:
                scores.append(s)
                # a retrieved document absent from the qrels is unjudged: never relevant
                grades.append(float(g) if jd else -INF)
                ranked.append(bool(r) and (not judged_only or (jd and float(g) >= 0)))
                in_qrels_flags.append(bool(jd))
        in_qrels = any(
            jd for jd in (judged[q][j] or not query.ranked[j] for j in range(len(query)))
        )
        in_run = any(query.ranked)
        if in_qrels and (in_run or unretrieved == "count"):
            ref_queries.append((qid, scores, grades, ranked, in_qrels_flags))

    argv_tail = [
        "--ties",
        opts["ties"],
        "--gain",
        opts["gain"],
        "--empty-target-action",
        opts["empty_target_action"],
        "--ap-denominator",
        opts["ap_denominator"],
        # the command's default p is trec_eval's 0.9, the package's 0.8
        f"--rbp-persistence={opts.get('rbp_persistence', 0.8)!r}",
        "--unjudged-queries",
        "skip",
        "--unretrieved-queries",
        unretrieved,
        "--format",
        "json",
        "--per-query",
        *(["--judged-only"] if judged_only else []),
    ]
    if opts["relevance_threshold"] is not None:
        argv_tail.append(f"--relevance-threshold={opts['relevance_threshold']!r}")
    top_k = opts["top_k"]
    for name in opts["metrics"]:
        if not METRICS[name].at_k or top_k is None:
            argv_tail += ["-m", name]
        else:
            ks = [top_k] if isinstance(top_k, int) else top_k
            argv_tail += ["-m", f"{name}@{','.join(map(str, ks))}"]

    # the reference, on the queries the command evaluates (sorted by id, as it prints them)
    if ref_queries:
        flat = [
            (i, s, g, r, jd)
            for i, (_, ss, gs, rs, jds) in enumerate(ref_queries)
            for s, g, r, jd in zip(ss, gs, rs, jds)
        ]
        ref_scores = torch.tensor([f[1] for f in flat], dtype=torch.float64)
        if opts["ties"] == "first":
            # where the command reproduces trec_eval it reads scores as C floats: two
            # equal as float32 tie (issue 24; docs/cli.rst)
            ref_scores = ref_scores.float().double()
        expected = oracle(
            ref_scores,
            torch.tensor([f[2] for f in flat], dtype=torch.float64),
            opts,
            indexes=torch.tensor([f[0] for f in flat], dtype=torch.int64),
            mask=torch.tensor([f[3] for f in flat], dtype=torch.bool),
            judged=torch.tensor([f[4] for f in flat], dtype=torch.bool),
        )
    else:
        expected = Expected(must_raise=True, why="no query is both in the run and in the qrels")
    if infinite_grade or not qrels_lines or not run_lines:
        expected.must_raise, expected.why = True, "an infinite grade, or an empty file"

    with tempfile.TemporaryDirectory() as tmp:
        qrels_path = (
            Path(tmp) / f"qrels.{ {'trec': 'txt', 'tsv': 'tsv', 'jsonl': 'jsonl'}[qrels_format] }"
        )
        run_path = (
            Path(tmp) / f"run.{ {'trec': 'txt', 'tsv': 'tsv', 'jsonl': 'jsonl'}[run_format] }"
        )
        qrels_path.write_text("".join(line + "\n" for line in qrels_lines))
        run_path.write_text("".join(line + "\n" for line in run_lines))
        argv = [
            "evaluate",
            str(qrels_path),
            str(run_path),
            "--qrels-format",
            qrels_format,
            "--run-format",
            run_format,
            *argv_tail,
        ]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as done:  # argparse: a usage error
                status = done.code if isinstance(done.code, int) else 1
    what = (
        f"ranking-plugins {' '.join(argv[3:])}\nqrels:\n"
        + "\n".join(qrels_lines)
        + "\nrun:\n"
        + "\n".join(run_lines)
    )
    threshold = opts["relevance_threshold"]
    if threshold is not None and not math.isfinite(threshold):
        assert status == 2, f"{what}\nexit status {status} for a non-finite -l: {err.getvalue()}"
        return
    by_gain = [name for name in opts["metrics"] if METRICS[name].relevant_by_gain]
    if by_gain and threshold is not None and threshold <= 0:  # ndcg_rel, rndcg: a usage error
        assert status == 2, f"{what}\nexit status {status} for -l <= 0: {err.getvalue()}"
        return
    assert status in (0, 1), f"{what}\nexit status {status}: {err.getvalue()}"
    if status == 1:
        assert expected.must_raise or expected.may_raise, (
            f"{what}\nexit status 1 where the reference gives numbers: {err.getvalue()}"
        )
        assert "ranking-plugins: error:" in err.getvalue(), err.getvalue()
        return
    assert not expected.must_raise, f"{what}\nstatus 0 where it must fail: {expected.why}"
    document = json.loads(out.getvalue())
    nan = lambda v: math.nan if v is None else v  # noqa: E731
    # the command prints the keys in the order of its -m options (a JSON object:
    # the order carries no meaning), so they are compared as a set
    got_mean = {key: nan(v) for key, v in sorted(document["metrics"].items())}
    assert_values(got_mean, dict(sorted(expected.mean.items())), f"{what}\nmeans", float64=False)
    per_query = document["per_query"]
    assert list(per_query) == [qid for qid, *_ in ref_queries], (what, list(per_query))
    for key in expected.none:
        got = torch.tensor(
            [nan(per_query[qid][key]) for qid, *_ in ref_queries], dtype=torch.float64
        )
        torch.testing.assert_close(
            got,
            expected.none[key],
            rtol=1e-9,
            atol=1e-9,
            equal_nan=True,
            msg=lambda m, key=key: f"{what}\n{key}: {m}",
        )


# --------------------------------------------------------------------------- #
# 7b. the command's trec_eval layout against pytrec_eval (issue 24)
# --------------------------------------------------------------------------- #
#: score values, each with the spellings a run file may give it (trec_eval reads
#: them with atof); 0.30000001 and 0.3 differ in float64 and tie as C floats
TREC_SCORES: dict[float, tuple[str, ...]] = {
    3.0: ("3", "3.0", "+3", "3e0", "0.3e1", "3."),
    2.0: ("2", "2.0", "+2.0", "2E0"),
    1.0: ("1", "1.0", "1e0", "10e-1"),
    0.0: ("0", "-0", "0.0", "+0", "-0.0", "0e7"),
    0.3: ("0.3", ".3", "3e-1"),
    0.30000001: ("0.30000001",),
    -1.5: ("-1.5", "-15e-1", "-1.50"),
}
#: docnos whose byte order is not their numeric one (trec_eval's tie break compares them)
TREC_DOCNOS = ("d1", "d2", "d9", "d10", "d11", "d100", "D5", "d1a", "doc-7", "x")
TREC_QIDS = ("q1", "q2", "q10", "301", "q1b")
#: pytrec_eval's values that trec_eval's layout prints per query and in the all line
#: (relstring and runid are strings, gm_* an all-line aggregate of logs)
_NOT_PER_QUERY = ("runid", "relstring", "num_q", "gm_map", "gm_bpref")


@dataclass
class TrecQuery:
    qid: str
    #: (docno, score text) of the run, in ranked-file order
    run: list[tuple[str, str]]
    #: docno -> grade of the qrels
    qrels: dict[str, int]


@st.composite
def trec_queries(draw: st.DrawFn, qid: str, level: int, both: bool) -> TrecQuery:
    """A query: free, with a list exactly one longer than R, or one -J empties.
    ``both``: in the run and in the qrels (else possibly in one of them only)."""
    shape = draw(st.sampled_from(["free", "free", "r_plus_1", "j_empty"]), label="shape")
    docs = draw(st.lists(st.sampled_from(TREC_DOCNOS), min_size=2, max_size=8, unique=True))
    spell = lambda: draw(  # noqa: E731
        st.sampled_from(list(TREC_SCORES)).flatmap(lambda v: st.sampled_from(TREC_SCORES[v]))
    )
    relevant = st.integers(level, 3)
    not_relevant = st.integers(-1, level - 1)
    run: list[tuple[str, str]] = []
    qrels: dict[str, int] = {}
    if shape == "free":
        for doc in docs:
            where = draw(st.sampled_from(["run", "qrels", "both", "both"]))
            if where != "qrels":
                run.append((doc, spell()))
            if where != "run":
                qrels[doc] = draw(st.integers(-1, 3))
    elif shape == "r_plus_1":  # m retrieved, all judged, R = m - 1 relevant
        m = draw(st.integers(1, len(docs)))
        hits = draw(st.integers(max(0, 2 * m - 1 - len(docs)), m - 1))
        for j, doc in enumerate(docs[:m]):
            run.append((doc, spell()))
            qrels[doc] = draw(relevant if j < hits else not_relevant)
        for doc in docs[m : m + (m - 1 - hits)]:
            qrels[doc] = draw(relevant)
        run = draw(st.permutations(run))
    else:  # j_empty: nothing retrieved is judged
        cut = draw(st.integers(1, len(docs) - 1))
        run = [(doc, spell()) for doc in docs[:cut]]
        qrels = {doc: draw(st.integers(-1, 3)) for doc in docs[cut:]}
    if both and not run:
        run.append((docs[-1], spell()))
    if both and not qrels:
        qrels[docs[0]] = draw(st.integers(-1, 3))
    if qrels and max(qrels.values()) < 0:
        # pytrec_eval crashes (or hangs) on a query whose every grade is negative
        qrels[next(iter(qrels))] = 0
    event(f"trec_eval layout: query shape {shape}")
    return TrecQuery(qid, run, qrels)


def _float32_tie(query: TrecQuery) -> bool:
    """Two retrieved scores that differ in float64 and are equal as C floats."""
    values = {float(text) for _, text in query.run}
    return len({torch.tensor(v, dtype=torch.float32).item() for v in values}) < len(values)


def _ranked(query: TrecQuery, judged_only: bool) -> list[str]:
    return [d for d, _ in query.run if not judged_only or query.qrels.get(d, -1) >= 0]


def _skipped(measure: str, query: TrecQuery, level: int, mode: str) -> str | None:
    """Why (measure, query) is left out of the comparison, or None."""
    judged_only = mode == "-J"
    interpolated = measure.startswith("iprec_at_recall_") or measure == "11pt_avg"
    if interpolated and not (judged_only and not _ranked(query, True)):
        # pytrec_eval bundles trec_eval 9.0.x: its recall cut is int(x·R + 0.9), trec_eval
        # 10's (and the package's) lround(x·R); compared where the two cuts agree
        relevant = sum(g >= level for g in query.qrels.values())
        levels = _recall_levels(measure)
        if any(
            max(1, math.floor(x * relevant + 0.5)) != max(1, int(x * relevant + 0.9))
            for x in levels
        ):
            return "pytrec_eval's older recall cut"
    return None


def _recall_levels(measure: str) -> list[float]:
    if measure == "11pt_avg":
        return [x / 10 for x in range(11)]
    return [float(measure.rpartition("_")[2])]


def _emptied_interpolated(measure: str, query: TrecQuery, level: int) -> float:
    """trec_eval 10 on a list -J empties (pytrec_eval's 9.0.x says 0): 0/0, nan, at a
    level whose cut lround(x·R) is 0; 11pt_avg then nan too (x = 0 always is)."""
    relevant = sum(g >= level for g in query.qrels.values())
    cut_zero = any(math.floor(x * relevant + 0.5) == 0 for x in _recall_levels(measure))
    return math.nan if cut_zero else 0.0


def _printed_matches(printed: str, expected: float) -> bool:
    """trec_eval's %.4f of ``expected`` (either side of a rounding boundary), or its nan."""
    if math.isnan(expected):
        return printed == "nan"
    if printed == "nan":
        return False
    got = float(printed)
    return any(abs(got - float(f"{expected + e:.4f}")) < 1e-12 for e in (-1e-9, 0.0, 1e-9))


@settings(max_examples=examples(3), **SETTINGS)
@given(data=st.data())
def test_trec_eval_layout(data: st.DataObject) -> None:
    """``evaluate --format trec_eval -q -m all_trec`` (plain, -J, -l N) against
    pytrec_eval on random collections: tie-heavy scores written several ways,
    float32-only ties, lists one longer than R, queries -J empties, CRLF line
    ends and a query's lines apart in the file."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    from ranking_plugins.cli import main

    mode = data.draw(st.sampled_from(["plain", "-J", "-l"]), label="mode")
    level = data.draw(st.sampled_from([2, 3]), label="level") if mode == "-l" else 1
    qids = data.draw(st.lists(st.sampled_from(TREC_QIDS), min_size=1, max_size=4, unique=True))
    queries = [
        data.draw(trec_queries(qid, level, both=i == 0), label=f"query {qid}")
        for i, qid in enumerate(qids)
    ]
    run_lines = [
        f"{q.qid} Q0 {doc} {rank} {text} fuzz"
        for q in queries
        for rank, (doc, text) in enumerate(q.run, start=1)
    ]
    qrels_lines = [f"{q.qid} 0 {doc} {grade}" for q in queries for doc, grade in q.qrels.items()]
    if data.draw(st.booleans(), label="interleaved"):
        run_lines = data.draw(st.permutations(run_lines), label="run order")
        qrels_lines = data.draw(st.permutations(qrels_lines), label="qrels order")
    ends = data.draw(st.sampled_from(["\n", "\r\n"]), label="run line end")
    qrels_ends = data.draw(st.sampled_from(["\n", "\r\n"]), label="qrels line end")
    event(f"trec_eval layout: mode {mode}")
    event(f"trec_eval layout: line ends run {ends!r}, qrels {qrels_ends!r}")

    qrels = {q.qid: dict(q.qrels) for q in queries if q.qrels}
    run = {q.qid: {d: float(t) for d, t in q.run} for q in queries if q.run}
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels,
        pytrec_eval.supported_measures,
        relevance_level=level,
        judged_docs_only_flag=mode == "-J",
    )
    expected = evaluator.evaluate(run)
    flags = {"plain": [], "-J": ["-J"], "-l": ["-l", str(level)]}[mode]
    with tempfile.TemporaryDirectory() as tmp:
        qrels_path, run_path = Path(tmp) / "qrels.txt", Path(tmp) / "run.txt"
        qrels_path.write_bytes("".join(line + qrels_ends for line in qrels_lines).encode())
        run_path.write_bytes("".join(line + ends for line in run_lines).encode())
        argv = ["evaluate", str(qrels_path), str(run_path), "--format", "trec_eval", "-q"]
        # trec_eval leaves out a query of the run that the qrels lack; the command
        # refuses it unless told to skip it
        argv += ["-m", "all_trec", "--unjudged-queries", "skip", *flags]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as done:
                status = done.code if isinstance(done.code, int) else 1
    what = (
        f"ranking-plugins {' '.join(argv[3:])}\nqrels:\n"
        + "\n".join(qrels_lines)
        + "\nrun:\n"
        + "\n".join(run_lines)
    )
    assert status == 0, f"{what}\nexit status {status}: {err.getvalue()}"
    printed: dict[str, dict[str, str]] = {}
    for line in out.getvalue().splitlines():
        name, qid, value = (part.strip() for part in line.split("\t"))
        printed.setdefault(qid, {})[name] = value
    assert set(printed) - {"all"} == set(expected), (what, sorted(printed), sorted(expected))
    by_qid = {q.qid: q for q in queries}
    measures = sorted(set(next(iter(expected.values()))) - set(_NOT_PER_QUERY))
    mismatches = []
    for measure in measures:
        per_query, whole = [], True
        for qid, values in expected.items():
            value = values[measure]
            query = by_qid[qid]
            interpolated = measure.startswith("iprec_at_recall_") or measure == "11pt_avg"
            if interpolated and mode == "-J" and not _ranked(query, True):
                value = _emptied_interpolated(measure, query, level)
            per_query.append(value)
            why = _skipped(measure, query, level, mode)
            if why is not None:
                event(f"trec_eval layout: skipped ({why})")
                whole = False
                continue
            got = printed[qid].get(measure)
            if got is None or not _printed_matches(got, value):
                mismatches.append(f"{measure} {qid}: expected {value!r}, got {got}")
        if whole:
            mean = pytrec_eval.compute_aggregated_measure(measure, per_query)
            got = printed["all"].get(measure)
            if got is None or not _printed_matches(got, mean):
                mismatches.append(f"{measure} all: pytrec_eval {mean!r}, got {got}")
    for measure in ("gm_map", "gm_bpref"):
        if not any(_skipped(measure, by_qid[qid], level, mode) for qid in expected):
            mean = pytrec_eval.compute_aggregated_measure(
                measure, [values[measure] for values in expected.values()]
            )
            if not _printed_matches(printed["all"][measure], mean):
                mismatches.append(f"{measure} all: pytrec_eval {mean!r}, got {printed['all']}")
    assert printed["all"]["num_q"] == str(len(expected)), what
    assert not mismatches, what + "\n" + "\n".join(mismatches)


# --------------------------------------------------------------------------- #
# 8. the Lightning callback (and a TorchMetrics attribute) under a Trainer
# --------------------------------------------------------------------------- #
def as_step_input(batch: dict[str, Any], precision: str) -> dict[str, Any]:
    """The batch as a step receives it: ``bf16-true`` turns floating tensors to bfloat16."""
    out = {k: v for k, v in batch.items() if k in ("preds", "target", "mask", "indexes")}
    out = {k: v for k, v in out.items() if v is not None}
    if precision == "bf16-true":
        out = {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in out.items()}
    return out


def expected_of(batches: list[dict[str, Any]], layout: str, opts: dict[str, Any]) -> Expected:
    """The oracle on the concatenation of ``batches``."""
    cat = lambda key: torch.cat([b[key] for b in batches])  # noqa: E731
    mask = cat("mask") if "mask" in batches[0] else None
    if layout == "grouped":
        return oracle(cat("preds"), cat("target"), opts, indexes=cat("indexes"), mask=mask)
    preds, target = cat("preds"), cat("target")
    if layout == "indices":
        grades = listed_grades(target, preds.shape[0], preds.shape[1])
        return oracle(preds, grades, opts, mask=mask, target_format="dense")
    return oracle(preds, target, opts, mask=mask)


@settings(max_examples=examples(0.1), **SETTINGS)
@given(data=st.data())
def test_lightning_callback(data: st.DataObject) -> None:
    pl = pytest.importorskip("lightning.pytorch")
    from torch.utils.data import DataLoader

    from ranking_plugins.lightning import RankingMetricsCallback
    from ranking_plugins.torchmetrics import RankingMetrics

    b, opts = draw_batched(data, ("dense", "indices", "grouped"), whole_queries=False)
    precision = data.draw(st.sampled_from(["32-true", "bf16-true"]), label="precision")
    target_format = b.batches[0].get("target_format")
    extra = {"target_format": target_format} if target_format else {}
    steps = [as_step_input(batch, precision) for batch in b.batches]
    expected = expected_of(steps, b.layout, opts)

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)
            # the TorchMetrics way: a metric as an attribute, converted with the module
            self.metric = RankingMetrics(
                opts["metrics"], opts["top_k"], **rank_kwargs(opts), **extra
            )
            self.computed: dict[str, torch.Tensor] = {}

        def validation_step(self, batch: dict[str, Any], batch_idx: int) -> dict[str, Any]:
            self.metric.update(
                batch["preds"],
                batch["target"],
                indexes=batch.get("indexes"),
                mask=batch.get("mask"),
            )
            return batch

        def on_validation_epoch_end(self) -> None:
            self.computed = self.metric.compute()

    loader = DataLoader([as_step_input(batch, "32-true") for batch in b.batches], batch_size=None)
    what = f"Lightning precision={precision} ({b.what})"

    def run() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        callback = RankingMetricsCallback(
            opts["metrics"], opts["top_k"], stages="validate", **rank_kwargs(opts), **extra
        )
        module = Module()
        trainer = pl.Trainer(
            callbacks=[callback],
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            enable_checkpointing=False,
            num_sanity_val_steps=0,
            accelerator="cpu",
            devices=1,
            precision=precision,
        )
        trainer.validate(module, loader, verbose=False)
        logged = callback.last_results["validate"]
        return {key.removeprefix("val/"): value for key, value in logged.items()}, module.computed

    def compare(got: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]) -> None:
        assert_values(got[0], expected.mean, f"callback: {what}", float64=False)
        assert_values(got[1], expected.mean, f"TorchMetrics attribute: {what}")

    checked(run, expected, what, compare)


# --------------------------------------------------------------------------- #
# 9. compare on degenerate inputs (issue 24)
# --------------------------------------------------------------------------- #
COMPARE_KEYS = ("ndcg@10", "fall_out@10", "mrr", "mean_rank")


def _empty_neg(key: str) -> float:
    """The value "neg" gives an empty query: the kernel's, its metric's worst."""
    name = key.partition("@")[0]
    return METRICS[name].empty_neg if name in METRICS else 0.0


@settings(max_examples=examples(3), **SETTINGS)
@given(data=st.data())
def test_compare_degenerate(data: st.DataObject) -> None:
    """``compare`` on zero, one and two queries, identical systems (every difference
    zero) and NaN values under each ``empty_target_action``, against the means,
    drops and refusals its docstring promises and the bounds every report keeps."""
    from ranking_plugins.compare import TESTS, compare

    queries = data.draw(st.sampled_from([0, 1, 2, 2, 2, 3, 5]), label="queries")
    names = ["a", "b", "c"][: data.draw(st.integers(2, 3), label="systems")]
    keys = data.draw(
        st.one_of(st.just([""]), st.lists(st.sampled_from(COMPARE_KEYS), min_size=1, unique=True)),
        label="metrics",
    )
    nan_share = data.draw(st.sampled_from([0, 0, 1, 3]), label="nan share")
    cell = (
        st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0])
        if nan_share == 0
        else st.one_of(
            st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0]),
            st.just(math.nan) if nan_share == 3 else st.nothing(),
            st.just(math.nan),
        )
    )
    identical = data.draw(st.booleans(), label="identical systems")
    values: dict[str, dict[str, list[float]]] = {}
    for s, name in enumerate(names):
        if identical and s:
            values[name] = {key: list(column) for key, column in values[names[0]].items()}
        else:
            values[name] = {
                key: data.draw(st.lists(cell, min_size=queries, max_size=queries)) for key in keys
            }
    action = data.draw(st.sampled_from(["skip", "neg", "pos", "error"]), label="action")
    test = data.draw(st.sampled_from(TESTS), label="test")
    baseline = data.draw(st.sampled_from([None, *names]), label="baseline")
    qids = [f"q{i}" for i in range(queries)]
    with_ids = data.draw(st.booleans(), label="query ids")
    systems = {
        name: (
            torch.tensor(values[name][""], dtype=torch.float64)
            if keys == [""]
            else {k: torch.tensor(v, dtype=torch.float64) for k, v in values[name].items()}
        )
        for name in names
    }
    empty = [
        any(math.isnan(values[name][key][i]) for name in names for key in keys)
        for i in range(queries)
    ]
    event(f"compare: {queries} queries, {action}, {'NaN' if any(empty) else 'no NaN'}")
    if identical:
        event("compare: identical systems")
    what = describe(values=values, action=action, test=test, baseline=baseline)

    def run() -> Any:
        return compare(
            systems,
            query_ids=qids if with_ids else None,
            test=test,
            baseline=baseline,
            empty_target_action=action,
            permutations=64,
            resamples=200,
            seed=3,
        )

    kept = [i for i in range(queries) if not (empty[i] and action == "skip")]
    if queries < 2:  # refused before any value is read
        with pytest.raises(ValueError, match=r"at least 2 queries"):
            run()
        return
    if action == "error" and any(empty):
        with pytest.raises(ValueError, match=repr(qids[empty.index(True)]) if with_ids else None):
            run()
        return
    if len(kept) < 2:
        with pytest.raises(ValueError, match=r"2 queries|fewer than 2"):
            run()
        return
    report = run()
    fill = {key: 1.0 if action == "pos" else _empty_neg(key) for key in keys}
    column = lambda name, key: [  # noqa: E731
        fill[key] if math.isnan(values[name][key][i]) else values[name][key][i] for i in kept
    ]
    assert report.queries == len(kept), what
    dropped = [qids[i] for i in range(queries) if empty[i]] if action == "skip" else []
    assert report.dropped_queries == (dropped if with_ids else [str(int(q[1:])) for q in dropped])
    pairs = (
        [(baseline, n) for n in names if n != baseline]
        if baseline is not None
        else list(itertools.combinations(names, 2))
    )
    assert [(r.metric, r.baseline, r.system) for r in report.rows] == [
        (key, b, s) for key in keys for b, s in pairs
    ], what
    for row in report.rows:
        for name, got in ((row.system, row.system_mean), (row.baseline, row.baseline_mean)):
            mean = math.fsum(column(name, row.metric)) / len(kept)
            assert math.isclose(got, mean, abs_tol=1e-12), (what, row)
        assert math.isclose(row.difference, row.system_mean - row.baseline_mean, abs_tol=1e-12), (
            what,
            row,
        )
        assert 0.0 <= row.p_value <= row.adjusted_p_value <= 1.0, (what, row)
        assert row.significant == (row.adjusted_p_value < report.alpha), (what, row)
        assert row.ci_low <= row.difference + 1e-12 and row.difference <= row.ci_high + 1e-12, (
            what,
            row,
        )
        same = column(row.system, row.metric) == column(row.baseline, row.metric)
        if same:  # every difference zero: nothing to find
            assert (row.p_value, row.difference, row.effect_size) == (1.0, 0.0, 0.0), (what, row)
            assert (row.ci_low, row.ci_high) == (0.0, 0.0), (what, row)
            assert not row.significant, (what, row)
    for text in (report.to_json(), report.to_csv(), report.to_table(), report.to_latex()):
        assert isinstance(text, str) and text, what
    json.loads(report.to_json())
