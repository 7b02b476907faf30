"""Bad inputs raise ValueError / TypeError naming the argument, never an internal error.

SPEC section 5: every public entry point checks shapes, dtypes and arguments
(always, whatever ``validate_args`` says) and, with ``validate_args=True``,
the values it has to read (NaN scores, item ids out of range). The message
names the argument at fault. Each case below is run through ``rank_metrics``
and through a function of ``ranking_plugins.functional``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

import ranking_plugins
from ranking_plugins import functional

AT_K_METRICS = ("hit_rate", "mrr", "precision", "recall", "f1", "map", "ndcg", "fall_out")
WHOLE_LIST_METRICS = ("auc", "r_precision", "mean_rank")
ALL_METRICS = AT_K_METRICS + WHOLE_LIST_METRICS

Call = Callable[..., Any]


def via_rank_metrics(preds: Any, target: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("metrics", ALL_METRICS)
    return ranking_plugins.rank_metrics(preds, target, **kwargs)


def via_functional_ndcg(preds: Any, target: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("top_k", 10)
    return functional.ndcg(preds, target, **kwargs)


def via_functional_mrr(preds: Any, target: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("top_k", None)
    return functional.mrr(preds, target, **kwargs)


ENTRY_POINTS = {
    "rank_metrics": via_rank_metrics,
    "functional.ndcg": via_functional_ndcg,
    "functional.mrr": via_functional_mrr,
}


@pytest.fixture(params=list(ENTRY_POINTS), ids=list(ENTRY_POINTS))
def entry(request: pytest.FixtureRequest) -> Call:
    return ENTRY_POINTS[request.param]


def raises_naming(argument: str) -> Any:
    """pytest.raises for ValueError/TypeError whose message names ``argument``."""
    return pytest.raises((ValueError, TypeError), match=rf"(?i)\b{argument}\b")


# ----------------------------------------------------------------- valid inputs


def dense_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    preds = torch.tensor([[0.9, 0.1, 0.5, 0.3], [0.2, 0.8, 0.4, 0.6]])
    target = torch.tensor([[1, 0, 0, 1], [0, 0, 1, 0]])
    return preds, target


def grouped_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    preds = torch.tensor([0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2])
    target = torch.tensor([False, False, True, False, True, False, True])
    indexes = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    return preds, target, indexes


# --------------------------------------------------------- shapes and dimensions

SHAPE_CASES: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "preds 3-D": (
        "preds",
        lambda: {"preds": torch.rand(2, 3, 4), "target": torch.ones(2, 3, 4)},
    ),
    "preds 0-D": ("preds", lambda: {"preds": torch.tensor(0.5), "target": torch.tensor(1)}),
    "dense target 3-D": (
        "target",
        lambda: {"preds": torch.rand(2, 4), "target": torch.ones(2, 4, 1)},
    ),
    "float target of another shape": (
        "target",
        lambda: {"preds": torch.rand(2, 4), "target": torch.ones(2, 5)},
    ),
    "index target with another number of rows": (
        "target",
        lambda: {"preds": torch.rand(2, 4), "target": torch.tensor([[0, 1], [1, 2], [2, 3]])},
    ),
    "index target 3-D": (
        "target",
        lambda: {"preds": torch.rand(2, 4), "target": torch.zeros(2, 1, 1, dtype=torch.long)},
    ),
    "target_format dense with another shape": (
        "target",
        lambda: {
            "preds": torch.rand(2, 4),
            "target": torch.tensor([[0, 1], [1, 2]]),
            "target_format": "dense",
        },
    ),
    "mask of another shape": (
        "mask",
        lambda: {
            "preds": torch.rand(2, 4),
            "target": torch.ones(2, 4),
            "mask": torch.ones(2, 3, dtype=torch.bool),
        },
    ),
    "grouped: target of another length": (
        "target",
        lambda: {
            "preds": torch.rand(6),
            "target": torch.ones(5),
            "indexes": torch.zeros(6, dtype=torch.long),
        },
    ),
    "grouped: target 2-D": (
        "target",
        lambda: {
            "preds": torch.rand(6),
            "target": torch.ones(6, 1),
            "indexes": torch.zeros(6, dtype=torch.long),
        },
    ),
    "grouped: indexes of another length": (
        "indexes",
        lambda: {
            "preds": torch.rand(6),
            "target": torch.ones(6),
            "indexes": torch.zeros(5, dtype=torch.long),
        },
    ),
    "grouped: mask of another length": (
        "mask",
        lambda: {
            "preds": torch.rand(6),
            "target": torch.ones(6),
            "indexes": torch.zeros(6, dtype=torch.long),
            "mask": torch.ones(5, dtype=torch.bool),
        },
    ),
    "grouped: no indexes": ("indexes", lambda: {"preds": torch.rand(6), "target": torch.ones(6)}),
    "grouped: float indexes": (
        "indexes",
        lambda: {"preds": torch.rand(6), "target": torch.ones(6), "indexes": torch.zeros(6)},
    ),
}


@pytest.mark.parametrize("validate_args", [True, False], ids=["validate", "no-validate"])
@pytest.mark.parametrize("case", list(SHAPE_CASES))
def test_shape_errors_name_the_argument(entry: Call, case: str, validate_args: bool) -> None:
    argument, make = SHAPE_CASES[case]
    kwargs = make()
    with raises_naming(argument):
        entry(kwargs.pop("preds"), kwargs.pop("target"), validate_args=validate_args, **kwargs)


# ------------------------------------------------------------------------- dtypes

DTYPE_CASES: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "complex preds": (
        "preds",
        lambda: {"preds": torch.rand(2, 4, dtype=torch.complex64), "target": torch.ones(2, 4)},
    ),
    "bool preds": (
        "preds",
        lambda: {"preds": torch.rand(2, 4) > 0.5, "target": torch.ones(2, 4)},
    ),
    "int mask": (
        "mask",
        lambda: {
            "preds": torch.rand(2, 4),
            "target": torch.ones(2, 4),
            "mask": torch.ones(2, 4, dtype=torch.long),
        },
    ),
    "float mask": (
        "mask",
        lambda: {"preds": torch.rand(2, 4), "target": torch.ones(2, 4), "mask": torch.ones(2, 4)},
    ),
    "float index target (target_format='indices')": (
        "target",
        lambda: {
            "preds": torch.rand(2, 4),
            "target": torch.tensor([[0.0, 1.0], [2.0, 3.0]]),
            "target_format": "indices",
        },
    ),
    "float 1-D index target": (
        "target",
        lambda: {"preds": torch.rand(2, 4), "target": torch.tensor([0.0, 1.0])},
    ),
}


@pytest.mark.parametrize("validate_args", [True, False], ids=["validate", "no-validate"])
@pytest.mark.parametrize("case", list(DTYPE_CASES))
def test_dtype_errors_name_the_argument(entry: Call, case: str, validate_args: bool) -> None:
    argument, make = DTYPE_CASES[case]
    kwargs = make()
    with raises_naming(argument):
        entry(kwargs.pop("preds"), kwargs.pop("target"), validate_args=validate_args, **kwargs)


# -------------------------------------------------------------- non-tensor inputs

NON_TENSOR_CASES: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "preds list": (
        "preds",
        lambda: {"preds": [[0.9, 0.1], [0.2, 0.8]], "target": torch.tensor([[1, 0], [0, 1]])},
    ),
    "target list": (
        "target",
        lambda: {"preds": torch.rand(2, 2), "target": [[1, 0], [0, 1]]},
    ),
    "preds None": ("preds", lambda: {"preds": None, "target": torch.ones(2, 2)}),
    "target float": ("target", lambda: {"preds": torch.rand(2, 2), "target": 1.0}),
    "mask list": (
        "mask",
        lambda: {
            "preds": torch.rand(2, 2),
            "target": torch.ones(2, 2),
            "mask": [[True, True], [True, False]],
        },
    ),
    "indexes list": (
        "indexes",
        lambda: {"preds": torch.rand(4), "target": torch.ones(4), "indexes": [0, 0, 1, 1]},
    ),
}


@pytest.mark.parametrize("case", list(NON_TENSOR_CASES))
def test_non_tensor_inputs_name_the_argument(entry: Call, case: str) -> None:
    argument, make = NON_TENSOR_CASES[case]
    kwargs = make()
    with raises_naming(argument):
        entry(kwargs.pop("preds"), kwargs.pop("target"), **kwargs)


def test_numpy_preds_name_the_argument(entry: Call) -> None:
    np = pytest.importorskip("numpy")
    with raises_naming("preds"):
        entry(np.random.rand(2, 4), torch.ones(2, 4))


# -------------------------------------------------------------------------- top_k

BAD_TOP_K: dict[str, object] = {
    "zero": 0,
    "negative": -1,
    "float": 2.0,
    "empty sequence": [],
    "empty tuple": (),
    "bool True": True,
    "bool False": False,
    "sequence with zero": [5, 0],
    "sequence with negative": [1, -3],
    "sequence with float": [1, 2.5],
    "sequence with bool": [1, True],
    "string": "5",
    "float tensor": torch.tensor(2.0),
}


@pytest.mark.parametrize("validate_args", [True, False], ids=["validate", "no-validate"])
@pytest.mark.parametrize("top_k", list(BAD_TOP_K.values()), ids=list(BAD_TOP_K))
def test_bad_top_k(entry: Call, top_k: object, validate_args: bool) -> None:
    preds, target = dense_inputs()
    with raises_naming("top_k"):
        entry(preds, target, top_k=top_k, validate_args=validate_args)


@pytest.mark.parametrize("metric", ALL_METRICS)
def test_every_functional_metric_rejects_bad_top_k(metric: str) -> None:
    preds, target = dense_inputs()
    with raises_naming("top_k"):
        getattr(functional, metric)(preds, target, top_k=0)


@pytest.mark.parametrize("top_k", [3, [1, 5], None])
@pytest.mark.parametrize("metric", WHOLE_LIST_METRICS)
def test_whole_list_functional_metrics_say_they_take_no_top_k(metric: str, top_k: object) -> None:
    # issue 11, item 13: not "got multiple values for argument 'top_k'"
    preds, target = dense_inputs()
    with pytest.raises(TypeError, match=rf"^{metric}\(\) takes no `top_k`.*whole"):
        getattr(functional, metric)(preds, target, top_k=top_k)


# ------------------------------------------------------- choices among fixed names

BAD_CHOICES: dict[str, object] = {
    "ties": "random",
    "gain": "cubic",
    "reduction": "median",
    "empty_target_action": "ignore",
    "ap_denominator": "k",
    "target_format": "sparse",
}


@pytest.mark.parametrize("validate_args", [True, False], ids=["validate", "no-validate"])
@pytest.mark.parametrize("argument", list(BAD_CHOICES))
def test_unknown_choice_names_the_argument(entry: Call, argument: str, validate_args: bool) -> None:
    preds, target = dense_inputs()
    with raises_naming(argument):
        entry(preds, target, validate_args=validate_args, **{argument: BAD_CHOICES[argument]})


@pytest.mark.parametrize("argument", list(BAD_CHOICES))
def test_non_string_choice_names_the_argument(entry: Call, argument: str) -> None:
    preds, target = dense_inputs()
    with raises_naming(argument):
        entry(preds, target, **{argument: 1})


@pytest.mark.parametrize(
    "metrics",
    [("mrr", "nope"), ("precission",), (1,), ("hit_rate", None)],
    ids=["unknown", "misspelt", "int", "None"],
)
def test_unknown_metric_names_metrics(metrics: tuple[object, ...]) -> None:
    preds, target = dense_inputs()
    with raises_naming("metrics"):
        ranking_plugins.rank_metrics(preds, target, metrics=metrics)


# --------------------------------------------------- value checks (validate_args)


def test_nan_preds(entry: Call) -> None:
    preds, target = dense_inputs()
    preds[1, 2] = math.nan
    with raises_naming("preds"):
        entry(preds, target, validate_args=True)


def test_nan_preds_grouped(entry: Call) -> None:
    preds, target, indexes = grouped_inputs()
    preds[3] = math.nan
    with raises_naming("preds"):
        entry(preds, target, indexes=indexes, validate_args=True)


@pytest.mark.parametrize("metric", ALL_METRICS)
def test_every_functional_metric_rejects_nan_preds(metric: str) -> None:
    preds, target = dense_inputs()
    preds[0, 0] = math.nan
    with raises_naming("preds"):
        getattr(functional, metric)(preds, target)


def test_nan_grades_name_target(entry: Call) -> None:
    preds, target = dense_inputs()
    grades = target.double()
    grades[0, 1] = math.nan
    with raises_naming("target"):
        entry(preds, grades, validate_args=True)


INDEX_VALUE_CASES: dict[str, dict[str, Any]] = {
    "id == N": {"target": torch.tensor([[0, 4], [1, 2]])},
    "id > N": {"target": torch.tensor([[0, 1], [1, 100]])},
    "id -2": {"target": torch.tensor([[0, -2], [1, 2]])},
    "1-D id == N": {"target": torch.tensor([4, 0])},
    "1-D id -5": {"target": torch.tensor([-5, 0])},
    "id == N, target_format='indices'": {
        "target": torch.tensor([[0, 1, 2, 4], [0, 1, 2, 3]]),
        "target_format": "indices",
    },
    "int32 id == N": {"target": torch.tensor([[0, 4], [1, 2]], dtype=torch.int32)},
}


@pytest.mark.parametrize("case", list(INDEX_VALUE_CASES))
def test_index_target_out_of_range(entry: Call, case: str) -> None:
    preds = torch.rand(2, 4)
    with raises_naming("target"):
        entry(preds, validate_args=True, **INDEX_VALUE_CASES[case])


def test_bool_index_target_names_target(entry: Call) -> None:
    preds = torch.rand(2, 4)
    target = torch.tensor([[True, False], [False, True]])
    with raises_naming("target"):
        entry(preds, target, target_format="indices")


def test_index_layout_with_1d_preds_names_an_argument(entry: Call) -> None:
    preds, target, indexes = grouped_inputs()
    with pytest.raises((ValueError, TypeError), match=r"target_format|preds|target"):
        entry(preds, target.long(), indexes=indexes, target_format="indices")


# ----------------------------------------------------------- empty_target_action


def test_empty_query_with_error_action(entry: Call) -> None:
    preds, target = dense_inputs()
    target[1] = 0
    with pytest.raises(ValueError, match=r"target"):
        entry(preds, target, empty_target_action="error")


def test_empty_query_with_error_action_index_layout(entry: Call) -> None:
    preds = torch.rand(2, 4)
    target = torch.tensor([[0, 2], [-1, -1]])  # the second query lists only padding
    with pytest.raises(ValueError, match=r"target"):
        entry(preds, target, empty_target_action="error")


def test_error_action_without_empty_query_is_fine(entry: Call) -> None:
    preds, target = dense_inputs()
    entry(preds, target, empty_target_action="error")


# ----------------------------------------------------------------- devices (GPU)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("argument", ["target", "mask"])
def test_inputs_on_different_devices(entry: Call, argument: str) -> None:
    preds, target = dense_inputs()
    kwargs: dict[str, Any] = {"target": target.cuda(), "mask": torch.ones(2, 4, dtype=torch.bool)}
    kwargs[argument] = kwargs[argument].cpu()
    if argument == "target":
        kwargs["mask"] = kwargs["mask"].cuda()
    with raises_naming(argument):
        entry(preds.cuda(), **kwargs)


# ----------------------------------------------- inputs that are valid, at the edges


def as_floats(result: Any) -> list[float]:
    if isinstance(result, dict):
        return [v for t in result.values() for v in torch.as_tensor(t).flatten().tolist()]
    return torch.as_tensor(result).flatten().tolist()


@pytest.mark.parametrize(
    "layout",
    ["dense bool", "dense float", "indices (0, T)", "indices (0,)"],
)
def test_empty_batch_gives_nan(entry: Call, layout: str) -> None:
    preds = torch.rand(0, 5)
    target = {
        "dense bool": torch.zeros(0, 5, dtype=torch.bool),
        "dense float": torch.zeros(0, 5),
        "indices (0, T)": torch.zeros(0, 3, dtype=torch.long),
        "indices (0,)": torch.zeros(0, dtype=torch.long),
    }[layout]
    values = as_floats(entry(preds, target))
    assert values
    assert all(math.isnan(v) for v in values)


def test_empty_batch_sequence_top_k_gives_nan(entry: Call) -> None:
    values = as_floats(entry(torch.rand(0, 5), torch.zeros(0, 5), top_k=[1, 3]))
    assert len(values) >= 2
    assert all(math.isnan(v) for v in values)


def test_empty_grouped_batch_gives_nan(entry: Call) -> None:
    empty = torch.zeros(0)
    values = as_floats(entry(empty, empty, indexes=torch.zeros(0, dtype=torch.long)))
    assert values
    assert all(math.isnan(v) for v in values)


@pytest.mark.parametrize("action", ["neg", "pos", "skip", "error"])
def test_empty_batch_every_empty_target_action(entry: Call, action: str) -> None:
    values = as_floats(entry(torch.rand(0, 5), torch.zeros(0, 5), empty_target_action=action))
    assert all(math.isnan(v) for v in values)


def test_empty_batch_reduction_none(entry: Call) -> None:
    result = entry(torch.rand(0, 5), torch.zeros(0, 5), reduction="none")
    tensors = result.values() if isinstance(result, dict) else [result]
    for t in tensors:
        assert t.numel() == 0


def test_rows_without_items_do_not_crash(entry: Call) -> None:
    """Q > 0 queries over N = 0 items: every query is empty, or the input is refused."""
    try:
        result = entry(torch.rand(3, 0), torch.zeros(3, 0))
    except (ValueError, TypeError) as error:
        assert "preds" in str(error)
    else:
        assert as_floats(result)


@pytest.mark.parametrize(
    "top_k",
    [1, 4, 100, [1, 2, 100], (3, 1, 3), None],
    ids=["1", "N", "k > N", "list with k > N", "unsorted with duplicates", "None"],
)
def test_valid_top_k_is_accepted(entry: Call, top_k: object) -> None:
    preds, target = dense_inputs()
    values = as_floats(entry(preds, target, top_k=top_k))
    assert values
    assert all(v >= 0.0 for v in values if not math.isnan(v))


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.uint8]
)
def test_any_real_preds_dtype_is_accepted(entry: Call, dtype: torch.dtype) -> None:
    preds = torch.tensor([[9, 1, 5, 3], [2, 8, 4, 6]]).to(dtype)
    _, target = dense_inputs()
    result = entry(preds, target)
    for t in result.values() if isinstance(result, dict) else [result]:
        assert t.dtype == torch.float64


def test_valid_edge_values_are_accepted(entry: Call) -> None:
    """-inf scores, negative grades, -1 padding, repeated ids: all valid (SPEC section 2, 4)."""
    preds = torch.tensor([[-math.inf, 0.5, 0.2, -math.inf], [0.1, 0.4, 0.3, 0.2]])
    entry(preds, torch.tensor([[-1.0, 2.0, 0.0, 1.0], [0.0, -3.0, 1.0, 0.0]]))
    entry(preds, torch.tensor([[1, 1, -1], [3, -1, -1]]))
    entry(preds, torch.tensor([[True, False, False, True], [False] * 4]))


def test_no_validation_errors_for_valid_grouped_input(entry: Call) -> None:
    preds, target, indexes = grouped_inputs()
    for validate_args in (True, False):
        entry(preds, target, indexes=indexes, validate_args=validate_args)
