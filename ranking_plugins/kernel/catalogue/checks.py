"""The rules that both catalogue walks check, written once.

:class:`~ranking_plugins.EmbeddingScores` and
:class:`~ranking_plugins.ShardedEmbeddingScores` check themselves when they
are made (shapes, dtypes, ``score_fn``, ``chunk_size``, ``exclude``: no value
read), each in its own module, through :func:`check_scoring`; their targets
are item ids, under the item-id rules of the tensor layouts
(:mod:`~ranking_plugins.kernel.inputs.checks`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.kernel.inputs.checks import (
    check_item_id_matrix,
)


class ShardError(ValueError):
    """The shards of a catalogue do not fit together, or one process's inputs are wrong.

    Raised on every process of the group alike, from data all of them
    gathered, so that no process is left waiting in a collective.
    """


def check_embedding_inputs(
    *, indexes: Tensor | None, mask: Tensor | None, target_format: str | None
) -> None:
    """The arguments of the tensor layouts that do not apply to ``EmbeddingScores``."""
    if mask is not None:
        raise ValueError(
            "`mask` does not apply to EmbeddingScores: list the items to leave out of "
            "the ranking in EmbeddingScores(..., exclude=item_ids)"
        )
    if indexes is not None:
        raise ValueError("`indexes` (grouped layout) does not apply to EmbeddingScores")
    if target_format == "dense":
        raise ValueError("EmbeddingScores needs item-index targets, not `target_format='dense'`")


def check_embedding_targets(target: object, query_emb: Tensor) -> Tensor:
    """``target`` of scores given as embeddings: item ids for the rows of ``query_emb``.

    Int64 (Q, T), their range unread (:func:`item_ids_in_catalogue`).
    """
    target = validation.check_tensor("target", target).detach()
    validation.check_same_device(query_emb=query_emb, target=target)
    return check_item_id_matrix(
        "target",
        target,
        query_emb.shape[0],
        hint=" (scores given as embeddings take item-index targets, not dense grades)",
    )


def check_dot_product(query_emb: Tensor, item_emb: Tensor, item_name: str = "item_emb") -> None:
    """What the default dot product needs: real embeddings of one width."""
    for name, emb in (("query_emb", query_emb), (item_name, item_emb)):
        if emb.dtype == torch.bool or emb.is_complex():
            raise TypeError(
                f"`{name}` must hold real numbers (a floating point or integer dtype) "
                f"for dot-product scores, got {emb.dtype}; pass a `score_fn` for "
                "other embeddings"
            )
        if not emb.is_floating_point() and emb.device.type != "cpu":
            raise TypeError(
                f"`{name}`: torch multiplies integer matrices on the CPU only, got "
                f"{emb.dtype} on {emb.device}; convert the embeddings to a floating "
                "point dtype (exact while the dot products stay below 2^24 in "
                "float32, 2^53 in float64) or pass a `score_fn`"
            )
    if query_emb.shape[1] != item_emb.shape[1]:
        raise ValueError(
            f"`query_emb` and `{item_name}` must have the same width d for dot-product "
            f"scores, got {query_emb.shape[1]} and {item_emb.shape[1]}"
        )


def check_exclude(exclude: object, num_queries: int) -> None:
    """``exclude``: None, or (Q, X) integer item ids for ``num_queries`` queries (range unread)."""
    if exclude is not None:
        exclude = validation.check_tensor("exclude", exclude)
        check_item_id_matrix("exclude", exclude, num_queries, columns="X", one_per_row=False)


def _check_embeddings(query_emb: object, items: object, items_name: str, rows: str) -> None:
    """(Q, d) query embeddings and (``rows``, d) item embeddings."""
    query_emb = validation.check_tensor("query_emb", query_emb)
    items = validation.check_tensor(items_name, items)
    if query_emb.ndim != 2 or items.ndim != 2:
        raise ValueError(
            f"`query_emb` must be (Q, d) and `{items_name}` ({rows}, d), got shapes "
            f"{tuple(query_emb.shape)} and {tuple(items.shape)}"
        )


def check_scoring(
    query_emb: object,
    items: object,
    items_name: str,
    rows: str,
    score_fn: object,
    chunk_size: object,
) -> None:
    """Embeddings of the right shapes, scored by ``score_fn`` or the dot product, in chunks."""
    _check_embeddings(query_emb, items, items_name, rows)
    assert isinstance(query_emb, Tensor) and isinstance(items, Tensor)  # checked just above
    if score_fn is None:
        check_dot_product(query_emb, items, item_name=items_name)
    elif not callable(score_fn):
        raise TypeError(f"`score_fn` must be callable, got {type(score_fn).__name__}")
    validation.check("chunk_size", validation.positive_int_problem(chunk_size))
