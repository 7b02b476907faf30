"""The systems' per-query values, read in every form taken and paired query by query.

:func:`paired_values` reads each system's values (tensors by position, or by
query id: pytrec_eval's and ir_measures' dicts, a ranx ``Run``, the Python
API's results), checks that every system gives the same metrics on the same
queries, and aligns them, one ``(Q, S)`` matrix per metric.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.metrics import key_metric

#: what one system's values may be (see :func:`paired_values`)
SystemValues = Any


def _as_metric_dict(name: str, values: object) -> tuple[dict[str, Tensor], list[str] | None]:
    """One system's values as ``{metric: (Q,) tensor}`` and their query ids (None: by
    position), from any input form :func:`paired_values` takes."""
    if isinstance(values, Tensor):
        return {"": values}, None
    per_query, qids = getattr(values, "per_query", None), getattr(values, "qids", None)
    if isinstance(per_query, Mapping) and isinstance(qids, Sequence):
        # a results object: runs.evaluation.Results ({key: (Q,) tensor}, .keys) or the
        # Python API's RunResults ({measure: {query_id: value}}, .measures). A summary
        # with no per-query value (trec_eval's gm_map, named by no metric) is not compared
        keys = getattr(values, "keys", None) or getattr(values, "measures", None) or per_query
        kept = {
            str(k): per_query[k]
            for k in keys
            if key_metric(k) is not None or not _all_nan(per_query[k])
        }
        if all(isinstance(v, Mapping) for v in kept.values()):
            return _by_measure(name, kept, qids)
        _check_unique(name, [str(q) for q in qids])
        return kept, [str(q) for q in qids]
    scores = getattr(values, "scores", None)
    if isinstance(scores, Mapping) and not isinstance(values, Mapping):
        # a ranx Run after ranx.evaluate: {metric: {qid: value}}
        return _by_measure(name, scores, _ids(scores))
    if isinstance(values, Mapping):
        if values and all(isinstance(v, Tensor) for v in values.values()):
            return dict(values), None
        if values and all(isinstance(v, Mapping) for v in values.values()):
            return _by_query_id(name, values)  # pytrec_eval's {qid: {measure: value}}
        if values and not any(isinstance(v, (Mapping, Tensor)) for v in values.values()):
            # {qid: value}: _by_query_id names a value that is not a number
            return _by_query_id(name, {q: {"": v} for q, v in values.items()})
        if not values:  # paired_values names it
            return {}, None
    raise TypeError(
        f"system {name!r}: expected per-query values: a (Q,) tensor or a dict of them by "
        "metric (rank_metrics(..., reduction='none')), a dict {query_id: value}, "
        "pytrec_eval's {query_id: {measure: value}}, a ranx Run after ranx.evaluate, or "
        f"results with .qids and .per_query; got {_kind(values)}"
    )


def _kind(values: object) -> str:
    """What a system's values are, for an error: a dict's value types too."""
    if not isinstance(values, Mapping):
        return type(values).__name__
    kinds = sorted({type(v).__name__ for v in values.values()})
    return f"a dict of {' and '.join(kinds)} values"


def _all_nan(values: object) -> bool:
    if isinstance(values, Mapping):
        values = list(values.values())
    return bool(torch.as_tensor(values, dtype=torch.float64).isnan().all())


def _ids(scores: Mapping[str, Mapping[str, object]]) -> list[str]:
    return list(dict.fromkeys(q for by_query in scores.values() for q in by_query))


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _by_measure(
    name: str, scores: Mapping[str, Mapping[Any, object]], qids: Sequence[Any]
) -> tuple[dict[str, Tensor], list[str]]:
    """``{metric: {qid: value}}`` (ranx's ``Run.scores``, ``RunResults.per_query``) read
    as :func:`_by_query_id` reads ``{qid: {metric: value}}``, the queries in ``qids``'
    order."""
    return _by_query_id(name, {q: {m: v[q] for m, v in scores.items() if q in v} for q in qids})


def _by_query_id(
    name: str, by_query: Mapping[Any, Mapping[str, object]]
) -> tuple[dict[str, Tensor], list[str]]:
    """``{qid: {metric: value}}`` as ``{metric: (Q,) tensor}`` and the query ids (as
    strings: an int id equals its string form, as in pytrec_eval)."""
    qids = [str(q) for q in by_query]
    _check_unique(name, qids, list(by_query))
    rows = list(by_query.values())
    metrics = list(rows[0])
    for qid, row in zip(qids, rows, strict=True):
        if list(row) != metrics and set(row) != set(metrics):
            raise ValueError(
                f"system {name!r}: query {qid!r} has the measures {sorted(row)} but "
                f"{qids[0]!r} has {sorted(metrics)}; every query needs the same ones"
            )
        for metric, value in row.items():
            if not _is_number(value):
                raise TypeError(
                    f"system {name!r}: the value of query {qid!r}"
                    + (f" for {metric!r}" if metric else "")
                    + f" is a {type(value).__name__} ({value!r}), expected a number"
                )
    table = {
        str(m): torch.tensor([float(row[m]) for row in rows], dtype=torch.float64)  # type: ignore[arg-type]
        for m in metrics
    }
    return table, qids


def _check_unique(
    name: str, qids: list[str], given: Sequence[object] | None = None, argument: str = "systems"
) -> None:
    """Each query once in a system: ``qids`` as strings, ``given`` as the system gave them
    (an int id and its string form are one query)."""
    seen: dict[str, int] = {}
    for i, qid in enumerate(qids):
        if qid in seen:
            first, again = (given[seen[qid]], given[i]) if given is not None else (qid, qid)
            twice = (
                f"as {first!r} and as {again!r} (an int id equals its string form)"
                if first != again
                else "twice"
            )
            raise validation.ArgumentError(
                argument, f"must hold each query once: system {name!r} has {qid!r} {twice}"
            )
        seen[qid] = i


def paired_values(
    systems: Mapping[str, SystemValues],
    query_ids: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
) -> tuple[list[str], list[str], dict[str, Tensor]]:
    """The systems' values aligned query by query: ``(systems, query ids, {metric: (Q, S)})``.

    Each system gives (every system the same metrics, under the same keys)

    * by position: a ``(Q,)`` tensor or a dict ``{metric: (Q,) tensor}``;
      ``query_ids`` then gives the ids, one sequence shared by every system or
      one per system (the values are aligned by id); with none, queries are
      matched by position and named by it;
    * by query id: a dict ``{query_id: value}`` (one measure of pytrec_eval or
      ir_measures), pytrec_eval's ``{query_id: {measure: value}}``, a ranx
      ``Run`` after ``ranx.evaluate`` (its ``scores``), or results with
      ``.qids`` and ``.per_query`` (:class:`ranking_plugins.runs.evaluation.Results`,
      the Python API's; a geometric mean such as gm_map, a summary, is left
      out). Values are matched by id, never by position; ``query_ids`` must be
      None, and every system must be given by id.

    A query one system has and another lacks is an error naming it (a run that
    retrieved nothing for a query is evaluated on it first, as trec_eval's
    ``-c`` or the command's ``--unretrieved-queries`` do, or the query is
    left out of every system); a NaN value is a query skipped as empty
    (``empty_target_action``). The metric key of a bare tensor and of
    ``{query_id: value}`` is ``""``.
    """
    names, tables, query_ids = _read_systems(systems, query_ids)
    metric_keys = _same_metrics(names, tables)
    ids = _query_ids(names, tables, metric_keys, query_ids)
    _same_queries(names, ids)
    return names, list(ids[names[0]]), _aligned(names, tables, metric_keys, ids)


def _read_systems(
    systems: Mapping[str, SystemValues],
    query_ids: Sequence[str] | Mapping[str, Sequence[str]] | None,
) -> tuple[list[str], dict[str, dict[str, Tensor]], Any]:
    """Each system's values as ``{metric key: (Q,) tensor}``, and the query ids: those
    given, or each system's own where the systems give their values by id."""
    if not isinstance(systems, Mapping):
        raise TypeError(f"`systems` must be a dict {{name: values}}, got {type(systems).__name__}")
    names = [str(name) for name in systems]
    if len(names) < 2:
        raise validation.ArgumentError("systems", f"must hold at least 2 systems, got {len(names)}")
    read = {str(name): _as_metric_dict(str(name), systems[name]) for name in systems}
    tables = {name: table for name, (table, _) in read.items()}
    for name, table in tables.items():
        if not table:
            raise validation.ArgumentError(
                "systems",
                f"must give each system values: {name!r} has no metric values; there is "
                "nothing to compare",
            )
    by_id = [name for name, (_, ids) in read.items() if ids is not None]
    if not by_id:
        return names, tables, query_ids
    by_position = [name for name in names if name not in by_id]
    if by_position:
        raise validation.ArgumentError(
            "systems",
            f"must give every system alike: {by_id[0]!r} gives its values by query id "
            f"but {by_position[0]!r} by position; give every system by id (a dict "
            "{query_id: value}, or results with .qids)",
        )
    if query_ids is not None:
        raise validation.ArgumentError(
            "query_ids",
            "must be None: the systems give their values by query id; pass query_ids "
            "only with tensors (values by position)",
        )
    return names, tables, {name: ids for name, (_, ids) in read.items() if ids is not None}


def _same_metrics(names: list[str], tables: dict[str, dict[str, Tensor]]) -> list[str]:
    """The metric keys every system gives, each a (Q,) tensor."""
    first = names[0]
    metric_keys = list(tables[first])
    for name in names[1:]:
        if set(tables[name]) != set(metric_keys):
            raise validation.ArgumentError(
                "systems",
                f"must give every system the same metrics: {first!r} has "
                f"{sorted(metric_keys)} but {name!r} has {sorted(tables[name])}; every "
                "system needs the same ones",
            )
    for name in names:
        for key, given in tables[name].items():
            where = f"systems[{name!r}]" + (f"[{key!r}]" if key else "")
            validation.check_tensor(where, given)
            if given.ndim != 1:
                raise validation.ArgumentError(
                    where,
                    f"must hold per-query values of shape (Q,), got shape "
                    f"{tuple(given.shape)} (pass reduction='none' to rank_metrics)",
                )
    return metric_keys


def _same_queries(names: list[str], ids: dict[str, list[str]]) -> None:
    """Every system on the first system's queries, no more and no fewer."""
    first = names[0]
    for name in names[1:]:
        own, theirs = set(ids[name]), set(ids[first])
        missing = [q for q in ids[first] if q not in own]
        extra = [q for q in ids[name] if q not in theirs]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"{_listing(missing)} of {first!r} missing from {name!r}")
            if extra:
                parts.append(f"{_listing(extra)} of {name!r} missing from {first!r}")
            raise validation.ArgumentError(
                "systems",
                "must be evaluated on the same queries: query "
                + "; query ".join(parts)
                + " (evaluate every run on every query, as trec_eval -c does, or leave "
                "the query out of every system)",
            )


def _aligned(
    names: list[str],
    tables: dict[str, dict[str, Tensor]],
    metric_keys: list[str],
    ids: dict[str, list[str]],
) -> dict[str, Tensor]:
    """``{metric: (Q, S)}``: each system's values in the first system's query order."""
    reference = ids[names[0]]
    aligned: dict[str, Tensor] = {}
    for key in metric_keys:
        columns = []
        for name in names:
            column = tables[name][key].detach().to("cpu", torch.float64)
            if name != names[0]:
                position = {qid: row for row, qid in enumerate(ids[name])}
                rows = [position[q] for q in reference]
                column = column[torch.tensor(rows, dtype=torch.int64)]
            columns.append(column)
        aligned[key] = torch.stack(columns, dim=1)
    return aligned


def _query_ids(
    names: list[str],
    tables: dict[str, dict[str, Tensor]],
    metric_keys: list[str],
    query_ids: Sequence[str] | Mapping[str, Sequence[str]] | None,
) -> dict[str, list[str]]:
    sizes = {name: tables[name][metric_keys[0]].shape[0] for name in names}
    if query_ids is None:
        for name in names[1:]:
            if sizes[name] != sizes[names[0]]:
                raise validation.ArgumentError(
                    "systems",
                    f"must be evaluated on the same queries: {names[0]!r} has "
                    f"{sizes[names[0]]} queries and {name!r} has {sizes[name]}; without "
                    "`query_ids` queries are matched by position",
                )
    ids: dict[str, list[str]] = {}
    for name in names:
        if query_ids is None:
            given: Sequence[str] = [str(row) for row in range(sizes[name])]
        elif isinstance(query_ids, Mapping):
            if name not in query_ids:
                raise validation.ArgumentError("query_ids", f"has no entry for system {name!r}")
            given = query_ids[name]
        else:
            given = query_ids
        _check_unique(name, [str(q) for q in given], list(given), argument="query_ids")
        given = [str(q) for q in given]
        for key in metric_keys:
            if tables[name][key].shape[0] != len(given):
                raise validation.ArgumentError(
                    f"systems[{name!r}]" + (f"[{key!r}]" if key else ""),
                    f"has {tables[name][key].shape[0]} queries but {len(given)} query ids",
                )
        ids[name] = given
    return ids


def _listing(qids: Sequence[str]) -> str:
    shown = ", ".join(map(repr, qids[:10]))
    return shown + (f", ... ({len(qids) - 10} more)" if len(qids) > 10 else "")
