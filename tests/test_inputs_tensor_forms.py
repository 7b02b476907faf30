"""Tensors of a form the kernel cannot read are named, never crash inside torch (issue 11, item 12).

Sparse (COO, CSR) and nested tensors, as any input of any entry point; and
embeddings the dot product cannot multiply (bool, complex, integer off the
CPU), or a ``score_fn`` that returns something other than real scores. Each
is a ValueError or TypeError naming the argument and what was expected; mixed
floating point embeddings are multiplied in their common dtype.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from ranking_plugins import EmbeddingScores, functional, rank_metrics
from ranking_plugins.metrics import METRICS

NAMES = [  # the exposure and the diversity metrics have tests of their own
    name for name, metric in METRICS.items() if not metric.exposure and not metric.intents
]


def _nested(rows: torch.Tensor) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "nested tensors are in prototype stage"
        return torch.nested.nested_tensor(list(rows))


def _csr(t: torch.Tensor) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "sparse CSR support is in beta state"
        return t.to_sparse_csr()


FORMS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sparse_coo": lambda t: t.to_sparse(),
    "sparse_csr": _csr,
    "nested": _nested,
}


def _dense() -> dict[str, torch.Tensor]:
    preds = torch.tensor([[0.9, 0.1, 0.5, 0.3], [0.2, 0.8, 0.4, 0.6]])
    target = torch.tensor([[1, 0, 0, 1], [0, 0, 1, 0]])
    return {"preds": preds, "target": target, "mask": torch.ones(2, 4, dtype=torch.bool)}


def _grouped() -> dict[str, torch.Tensor]:
    return {
        "preds": torch.tensor([0.2, 0.3, 0.5, 0.1, 0.3, 0.5]),
        "target": torch.tensor([0, 0, 1, 0, 1, 1]),
        "indexes": torch.tensor([0, 0, 0, 1, 1, 1]),
    }


CASES = [
    (layout, argument, form)
    for layout, arguments in (("dense", ("preds", "target", "mask")), ("grouped", ("indexes",)))
    for argument in arguments
    for form in FORMS
    if not (form == "sparse_csr" and layout == "grouped")  # CSR is 2-D only
]


def _inputs(layout: str, argument: str, form: str) -> dict[str, torch.Tensor]:
    inputs = _dense() if layout == "dense" else _grouped()
    inputs[argument] = FORMS[form](inputs[argument])
    return inputs


def _via_rank_metrics(inputs: dict[str, Any], validate_args: bool) -> object:
    return rank_metrics(**inputs, metrics=NAMES, top_k=[1, 3], validate_args=validate_args)


def _via_functional(inputs: dict[str, Any], validate_args: bool) -> object:
    return functional.ndcg(**inputs, top_k=3, validate_args=validate_args)


def _via_torchmetrics(inputs: dict[str, Any], validate_args: bool) -> object:
    pytest.importorskip("torchmetrics")
    from ranking_plugins import torchmetrics as rp

    metric = rp.RankingMetrics(["mrr", "ndcg"], top_k=3, validate_args=validate_args)
    metric.update(**inputs)
    return metric.compute()


def _via_ignite(inputs: dict[str, Any], validate_args: bool) -> object:
    pytest.importorskip("ignite")
    from ranking_plugins import ignite as ri

    metric = ri.MRR(top_k=[3], validate_args=validate_args)
    output = {"y_pred": inputs["preds"], "y": inputs["target"]}
    output |= {key: inputs[key] for key in ("mask", "indexes") if key in inputs}
    metric.update(output)
    return metric.compute()


ENTRIES = {
    "rank_metrics": _via_rank_metrics,
    "functional": _via_functional,
    "torchmetrics": _via_torchmetrics,
    "ignite": _via_ignite,
}


@pytest.mark.parametrize("validate_args", [True, False], ids=["validate", "no-validate"])
@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize(("layout", "argument", "form"), CASES)
def test_sparse_and_nested_inputs_are_named(
    layout: str, argument: str, form: str, entry: str, validate_args: bool
) -> None:
    inputs = _inputs(layout, argument, form)
    with pytest.raises(TypeError, match=rf"`{argument}` must be a dense \(strided\) tensor"):
        ENTRIES[entry](inputs, validate_args)


@pytest.mark.parametrize("argument", ["target", "mask"])
@pytest.mark.parametrize("form", ["sparse_coo", "nested"])
def test_a_sparse_input_next_to_a_repeated_preds_is_named(argument: str, form: str) -> None:
    inputs = _dense()
    for _ in range(3):  # the same preds object again and again: the last batch is kept
        rank_metrics(**inputs, metrics="mrr", top_k=3)
    inputs[argument] = FORMS[form](inputs[argument])
    with pytest.raises(TypeError, match=rf"`{argument}` must be a dense \(strided\) tensor"):
        rank_metrics(**inputs, metrics="mrr", top_k=3)


# ------------------------------------------------------------------ embeddings


@pytest.mark.parametrize("argument", ["query_emb", "item_emb", "exclude"])
@pytest.mark.parametrize("form", ["sparse_coo", "nested"])
def test_sparse_and_nested_embeddings_are_named(argument: str, form: str) -> None:
    tensors = {
        "query_emb": torch.randn(2, 3),
        "item_emb": torch.randn(5, 3),
        "exclude": torch.tensor([[0, -1], [1, 2]]),
    }
    tensors[argument] = FORMS[form](tensors[argument])
    with pytest.raises(TypeError, match=rf"`{argument}` must be a dense \(strided\) tensor"):
        EmbeddingScores(**tensors)


@pytest.mark.parametrize("form", ["sparse_coo", "nested"])
def test_a_sparse_or_nested_target_for_embeddings_is_named(form: str) -> None:
    scores = EmbeddingScores(torch.randn(2, 3), torch.randn(5, 3))
    target = FORMS[form](torch.tensor([[1, -1], [2, 4]]))
    with pytest.raises(TypeError, match=r"`target` must be a dense \(strided\) tensor"):
        rank_metrics(scores, target, "mrr", 3)


@pytest.mark.parametrize(
    ("query_dtype", "item_dtype"),
    [
        (torch.float32, torch.float64),
        (torch.float64, torch.float32),
        (torch.bfloat16, torch.float32),
        (torch.float16, torch.float64),
        (torch.int64, torch.float64),
    ],
)
def test_embeddings_of_two_real_dtypes_are_multiplied_in_their_common_dtype(
    query_dtype: torch.dtype, item_dtype: torch.dtype
) -> None:
    generator = torch.Generator().manual_seed(0)
    users = torch.randint(-3, 4, (4, 3), generator=generator).to(query_dtype)
    items = torch.randint(-3, 4, (9, 3), generator=generator).to(item_dtype)
    target = torch.tensor([[0, 5], [3, -1], [8, 1], [2, 2]])
    common = torch.promote_types(query_dtype, item_dtype)
    dense = users.to(common) @ items.to(common).T
    for chunk_size in (2, 9):
        got = rank_metrics(
            EmbeddingScores(users, items, chunk_size=chunk_size), target, NAMES, [1, 4]
        )
        want = rank_metrics(dense, target, NAMES, [1, 4])
        for key in want:
            torch.testing.assert_close(got[key], want[key], rtol=0, atol=1e-12)


@pytest.mark.parametrize("argument", ["query_emb", "item_emb"])
@pytest.mark.parametrize("dtype", [torch.bool, torch.complex64])
def test_bool_and_complex_embeddings_need_a_score_function(
    argument: str, dtype: torch.dtype
) -> None:
    tensors = {"query_emb": torch.randn(2, 3), "item_emb": torch.randn(5, 3)}
    tensors[argument] = tensors[argument].to(dtype)
    with pytest.raises(TypeError, match=rf"`{argument}` must hold real numbers.*`score_fn`"):
        EmbeddingScores(**tensors)


def test_bool_and_complex_embeddings_work_with_a_score_function_of_real_output() -> None:
    users = torch.tensor([[1, 0, 1], [0, 1, 1]], dtype=torch.bool)
    items = torch.tensor([[1, 0, 0], [1, 0, 1], [0, 1, 1], [0, 0, 0]], dtype=torch.bool)

    def overlap(query: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
        return (query.unsqueeze(1) & chunk.unsqueeze(0)).sum(dim=2)

    target = torch.tensor([1, 2])
    got = rank_metrics(EmbeddingScores(users, items, score_fn=overlap, chunk_size=3), target)
    assert got == rank_metrics(overlap(users, items), target)

    waves = torch.polar(torch.ones(2, 2), torch.tensor([[0.0, 1.0], [2.0, 0.5]]))
    catalogue = torch.polar(torch.ones(5, 2), torch.arange(10.0).view(5, 2))

    def real_part(query: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
        return (query @ chunk.conj().T).real

    target = torch.tensor([3, 0])
    got = rank_metrics(EmbeddingScores(waves, catalogue, score_fn=real_part), target, "mrr", 5)
    assert got == rank_metrics(real_part(waves, catalogue), target, "mrr", 5)


def test_integer_embeddings_off_the_cpu_are_named() -> None:
    # torch multiplies integer matrices on the CPU only (the meta device stands in for a GPU)
    users = torch.zeros(2, 3, dtype=torch.int64, device="meta")
    items = torch.zeros(5, 3, dtype=torch.int64, device="meta")
    with pytest.raises(TypeError, match=r"`query_emb`.*integer.*CPU"):
        EmbeddingScores(users, items)


@pytest.mark.parametrize(
    ("output", "words"),
    [
        (lambda s: s.to(torch.complex64), "`score_fn` must return real scores"),
        (lambda s: s > 0, "`score_fn` must return real scores"),
        (lambda s: s.to_sparse(), r"`score_fn` must return a dense \(strided\) tensor"),
        (lambda s: s.to("meta"), "`score_fn` must return scores on the embeddings' device"),
        (lambda s: s.tolist(), "`score_fn` must return scores of shape"),
    ],
    ids=["complex", "bool", "sparse", "device", "list"],
)
@pytest.mark.parametrize("validate_args", [True, False])
def test_score_function_outputs_that_are_not_real_scores_are_named(
    output: Callable[[torch.Tensor], Any], words: str, validate_args: bool
) -> None:
    scores = EmbeddingScores(
        torch.randn(2, 3), torch.randn(5, 3), score_fn=lambda q, c: output(q @ c.T), chunk_size=2
    )
    error = ValueError if words.endswith(("device", "shape")) else TypeError
    with pytest.raises(error, match=words):
        rank_metrics(scores, torch.tensor([1, 4]), "mrr", 3, validate_args=validate_args)
