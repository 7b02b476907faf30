"""Is system A better than system B? Paired tests over per-query values.

Every function here is pure: it takes the per-query values of two or more
systems on the same queries (``rank_metrics(..., reduction="none")``, the
adapters' ``compute_per_query()``, or ``ranking-plugins evaluate --per-query``)
and returns numbers. :func:`compare` runs one test for every comparison and
returns a :class:`ComparisonReport` (a table, JSON, CSV or LaTeX).

The tests themselves are pure functions of a matrix of differences, in
:mod:`ranking_plugins.compare.significance` (imported here too): paired t,
Wilcoxon, randomization, bootstrap, intervals, effect sizes, corrections.

>>> import torch
>>> from ranking_plugins.compare import compare
>>> a = torch.tensor([0.50, 0.20, 0.90, 0.40, 0.70, 0.30], dtype=torch.float64)
>>> b = torch.tensor([0.60, 0.35, 0.90, 0.55, 0.80, 0.50], dtype=torch.float64)
>>> report = compare({"bm25": a, "dense": b}, test="randomization")
>>> row = report.rows[0]
>>> (row.system, row.baseline, round(row.difference, 4), row.p_value)
('dense', 'bm25', 0.1167, 0.0625)
"""

from __future__ import annotations

import csv
import io
import json
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins._display import html_table, import_pandas
from ranking_plugins.choices import CORRECTIONS, TESTS
from ranking_plugins.compare.significance import (
    _check_count,
    _check_level,
    _identical_is_one,
    adjust_p_values,
    bootstrap_interval,
    bootstrap_test,
    effect_size,
    paired_t_test,
    randomization_test,
    t_interval,
    wilcoxon_test,
)
from ranking_plugins.metrics import key_metric

__all__ = [
    "CORRECTIONS",
    "TESTS",
    "Comparison",
    "ComparisonReport",
    "adjust_p_values",
    "bootstrap_interval",
    "bootstrap_test",
    "compare",
    "effect_size",
    "paired_t_test",
    "paired_values",
    "randomization_test",
    "t_interval",
    "wilcoxon_test",
]


# --------------------------------------------------------------------------- inputs


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
    if by_id:
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
        query_ids = {name: ids for name, (_, ids) in read.items() if ids is not None}
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
            validation.check_tensor(f"systems[{name!r}]" + (f"[{key!r}]" if key else ""), given)
            if given.ndim != 1:
                raise validation.ArgumentError(
                    f"systems[{name!r}]" + (f"[{key!r}]" if key else ""),
                    f"must hold per-query values of shape (Q,), got shape "
                    f"{tuple(given.shape)} (pass reduction='none' to rank_metrics)",
                )
    ids = _query_ids(names, tables, metric_keys, query_ids)
    reference = ids[first]
    position = {name: {qid: row for row, qid in enumerate(ids[name])} for name in names}
    for name in names[1:]:
        missing = [q for q in reference if q not in position[name]]
        extra = [q for q in ids[name] if q not in position[first]]
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
    aligned: dict[str, Tensor] = {}
    for key in metric_keys:
        columns = []
        for name in names:
            column = tables[name][key].detach().to("cpu", torch.float64)
            if name != first:
                rows = [position[name][q] for q in reference]
                column = column[torch.tensor(rows, dtype=torch.int64)]
            columns.append(column)
        aligned[key] = torch.stack(columns, dim=1)
    return names, list(reference), aligned


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


# --------------------------------------------------------------------------- compare


@dataclass(frozen=True)
class Comparison:
    """One comparison: ``system`` against ``baseline`` on one metric."""

    metric: str
    system: str
    baseline: str
    system_mean: float
    baseline_mean: float
    difference: float  # system mean - baseline mean
    ci_low: float
    ci_high: float
    effect_size: float
    p_value: float
    adjusted_p_value: float
    significant: bool  # adjusted_p_value < alpha
    queries: int


@dataclass(frozen=True)
class ComparisonReport:
    """What :func:`compare` found: the means and one :class:`Comparison` per pair and metric."""

    test: str
    alpha: float
    correction: str
    confidence: float
    systems: list[str]
    metrics: list[str]
    means: dict[str, dict[str, float]]  # metric -> system -> mean over the compared queries
    rows: list[Comparison]
    queries: int
    dropped_queries: list[str]
    #: metric -> whether a higher mean is better (the metric table's; True for a key
    #: that names no metric, such as the ``""`` of bare tensors)
    higher_is_better: dict[str, bool] = field(default_factory=dict)

    def _higher_is_better(self, metric: str) -> bool:
        return self.higher_is_better.get(metric, True)

    def to_dict(self) -> dict[str, Any]:
        document = asdict(self)
        document["rows"] = [asdict(row) for row in self.rows]
        return _nan_to_none(document)

    def to_json(self) -> str:
        """JSON (NaN as null)."""
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def to_csv(self) -> str:
        """One line per comparison, every field of :class:`Comparison`, full precision."""
        buffer = io.StringIO()
        fields = list(Comparison.__dataclass_fields__)
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(fields)
        for row in self.rows:
            writer.writerow([_cell(getattr(row, f)) for f in fields])
        return buffer.getvalue()

    def to_table(self) -> str:
        """Plain text: a line per comparison, ``*`` where the adjusted p is below alpha."""
        head, body = self._cells()
        lines = [head, *body]
        widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
        text = [
            "  ".join(
                cell.ljust(w) if i < 3 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(line, widths, strict=True))
            ).rstrip()
            for line in lines
        ]
        text.append(self._legend())
        return "\n".join(text) + "\n"

    def _cells(self) -> tuple[list[str], list[list[str]]]:
        """The table's header and its rows as text, for :meth:`to_table` and the HTML."""
        head = ["metric", "system", "baseline", "mean", "base", "diff", "ci_low", "ci_high"]
        head += ["d", "p", "p_adj", ""]
        lines = []
        for row in self.rows:
            lines.append(
                [
                    row.metric,
                    row.system,
                    row.baseline,
                    *(
                        _fixed(v)
                        for v in (
                            row.system_mean,
                            row.baseline_mean,
                            row.difference,
                            row.ci_low,
                            row.ci_high,
                            row.effect_size,
                        )
                    ),
                    _p(row.p_value),
                    _p(row.adjusted_p_value),
                    "*" if row.significant else "",
                ]
            )
        return head, lines

    def _legend(self) -> str:
        """The line under the table: the test, the queries, what ``*`` and the columns mean."""
        interval = "bootstrap percentile" if self.test != "t" else "t"
        lower = [m for m in self.metrics if not self._higher_is_better(m)]
        return (
            f"test: {self.test}; {self.queries} queries; correction: {self.correction}; "
            f"* adjusted p < {self.alpha:g}; {self.confidence:.0%} {interval} interval; "
            "d: Cohen's d of the differences"
            + (f"; lower is better: {', '.join(lower)}" if lower else "")
        )

    def _repr_html_(self) -> str:
        """Jupyter's view: the rows of :meth:`to_table` as an HTML table."""
        head, body = self._cells()
        notes = [self._legend()]
        if self.dropped_queries:
            notes.append(f"left out (no value: skipped as empty): {_listing(self.dropped_queries)}")
        caption = f"ComparisonReport: {', '.join(self.systems)}"
        return html_table(head, body, caption=caption, notes=notes, names=3)

    def to_pandas(self) -> Any:
        """A pandas DataFrame, one row per comparison, a column per field of
        :class:`Comparison` (the rows of :meth:`to_csv`). Needs pandas (imported here)."""
        pd = import_pandas("ComparisonReport.to_pandas")
        fields = list(Comparison.__dataclass_fields__)
        return pd.DataFrame(
            [[getattr(row, f) for f in fields] for row in self.rows], columns=fields
        )

    def to_latex(self) -> str:
        """A booktabs table, systems by metrics, as ranx's ``Report.to_latex``.

        Each cell is the mean; a superscript letter marks each system (by its
        letter in the first column) that this one beats significantly
        (adjusted p below alpha, better mean); the best mean is bold. Better is
        higher, or lower for a metric whose ``higher_is_better`` is False (fall_out,
        mean_rank, ...).

        The rules are booktabs' (``\\toprule``, ``\\midrule``, ``\\bottomrule``): the
        document needs ``\\usepackage{booktabs}`` in its preamble, and the table's
        second line, a LaTeX comment, says so.
        """
        letters = {name: chr(ord("a") + i) for i, name in enumerate(self.systems)}
        beats: dict[tuple[str, str], list[str]] = {}
        for row in self.rows:
            if not row.significant:
                continue
            ahead = row.difference > 0 if self._higher_is_better(row.metric) else row.difference < 0
            winner, loser = (row.system, row.baseline) if ahead else (row.baseline, row.system)
            beats.setdefault((row.metric, winner), []).append(letters[loser])
        columns = "c" * len(self.metrics)
        lines = [
            "\\begin{table}[ht]",
            "% needs \\usepackage{booktabs} in the preamble (\\toprule, \\midrule, \\bottomrule)",
            "\\centering",
            f"\\begin{{tabular}}{{cl{columns}}}",
            "\\toprule",
            "\\# & Model & "
            + " & ".join(_latex_text(m or "value") for m in self.metrics)
            + " \\\\",
            "\\midrule",
        ]
        best = {
            m: (max if self._higher_is_better(m) else min)(
                (v for v in self.means[m].values() if not math.isnan(v)), default=math.nan
            )
            for m in self.metrics
        }
        for name in self.systems:
            cells = []
            for metric in self.metrics:
                mean = self.means[metric][name]
                cell = _fixed(mean)
                if mean == best[metric]:
                    cell = f"\\textbf{{{cell}}}"
                marks = "".join(sorted(beats.get((metric, name), [])))
                cells.append(cell + (f"$^{{{marks}}}$" if marks else ""))
            lines.append(f"{letters[name]} & {_latex_text(name)} & " + " & ".join(cells) + " \\\\")
        interval = "bootstrap percentile" if self.test != "t" else "t"
        lower = [m for m in self.metrics if not self._higher_is_better(m)]
        level = f"{self.confidence:.0%}".replace("%", "\\%")
        lines += [
            "\\bottomrule",
            "\\end{tabular}",
            f"\\caption{{Means over {self.queries} queries. A superscript marks the systems "
            f"this one beats with adjusted $p < {self.alpha:g}$ ({_latex_text(self.test)} "
            f"test, {_latex_text(self.correction)} correction; {level} "
            f"{interval} intervals in the CSV/JSON output). Best in bold"
            + (f" (the lowest for {_latex_text(', '.join(lower))})" if lower else "")
            + ".}",
            "\\end{table}",
        ]
        return "\n".join(lines) + "\n"

    def plot(self, ax: Any = None) -> tuple[Any, Any]:
        """A forest plot: each comparison's difference (system − baseline) with its interval.

        One line per row of :meth:`to_table`, top to bottom: a dot at the
        difference, a bar from ``ci_low`` to ``ci_high``, a filled dot where the
        adjusted p is below alpha (hollow otherwise) and a dashed line at 0. A
        metric where lower is better says so in its label. Needs matplotlib
        (imported here, not with the package).

        Args:
            ax: the matplotlib axes to draw on; a new figure when omitted.

        Returns:
            ``(figure, axes)``, as the adapters' ``plot``.
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as error:
            raise ImportError(
                "ComparisonReport.plot needs matplotlib: pip install matplotlib"
            ) from error
        if ax is None:
            fig, ax = plt.subplots(figsize=(6.4, 0.9 + 0.45 * max(len(self.rows), 1)))
        else:
            fig = ax.figure
        positions = list(range(len(self.rows)))[::-1]  # first row at the top
        labels = []
        for y, row in zip(positions, self.rows, strict=True):
            lower = "" if self._higher_is_better(row.metric) else " (lower is better)"
            labels.append(f"{row.metric or 'value'}{lower}: {row.system} − {row.baseline}")
            ax.plot([row.ci_low, row.ci_high], [y, y], color="C0", linewidth=2)
            ax.plot(
                [row.difference],
                [y],
                "o",
                color="C0",
                markerfacecolor="C0" if row.significant else "white",
                markersize=7,
            )
        ax.axvline(0.0, color="0.4", linestyle="--", linewidth=1)
        ax.set_yticks(positions, labels)
        ax.set_ylim(-0.7, len(self.rows) - 0.3)
        interval = "bootstrap percentile" if self.test != "t" else "t"
        ax.set_xlabel(
            f"difference of means, {self.confidence:.0%} {interval} interval\n"
            f"filled: adjusted p < {self.alpha:g} ({self.test}, {self.correction}; "
            f"{self.queries} queries)"
        )
        return fig, ax

    def __str__(self) -> str:
        return self.to_table()

    def __repr__(self) -> str:
        # the table, not the dataclass's dump of every field: what a notebook cell or a
        # REPL shows for a report (the fields are in rows, to_dict() and to_json())
        head = (
            f"ComparisonReport({len(self.systems)} systems, {len(self.metrics)} metrics, "
            f"{self.queries} queries)"
        )
        return head + "\n" + self.to_table().rstrip("\n")


def _fixed(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.4f}"


def _p(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}"


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    return str(value)


def _latex_text(text: str) -> str:
    for char, escaped in (("\\", "\\textbackslash{}"), ("_", "\\_"), ("&", "\\&"), ("%", "\\%")):
        text = text.replace(char, escaped)
    return text.replace("#", "\\#").replace("$", "\\$")


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return value


def compare(
    systems: Mapping[str, SystemValues],
    *,
    query_ids: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    test: str = "t",
    baseline: str | None = None,
    alpha: float = 0.05,
    correction: str = "holm",
    confidence: float = 0.95,
    permutations: int = 10_000,
    resamples: int = 10_000,
    seed: int = 0,
    empty_target_action: str = "skip",
) -> ComparisonReport:
    """Compare systems on the same queries, metric by metric.

    Args:
        systems: ``{name: values}``, values a ``(Q,)`` tensor of per-query
            values or a dict of them by metric (``rank_metrics(...,
            reduction="none")``), or values by query id: ``{query_id: value}``
            (pytrec_eval's or ranx's one measure), pytrec_eval's
            ``{query_id: {measure: value}}``, a ranx ``Run`` after
            ``ranx.evaluate``, or results with ``.qids`` and ``.per_query``
            (:func:`paired_values` says how each is read); every system the
            same metrics, and all by position or all by id.
        query_ids: for tensors, the queries' ids, one sequence for all or one
            per system (values are then matched by id); by default by
            position. A query one system lacks is an error naming it.
        test: ``"t"`` (paired t-test), ``"wilcoxon"`` (signed-rank),
            ``"randomization"`` (Fisher's, sign flips) or ``"bootstrap"``.
        baseline: compare every other system with this one; None compares
            every pair (each later system against each earlier one).
        alpha: significance level of the adjusted p-values, in (0, 1).
        correction: ``"holm"``, ``"bonferroni"`` or ``"none"``; the family is
            the comparisons of one metric.
        confidence: level of the interval of each mean difference: Student's t
            interval for ``test="t"``, else the paired bootstrap percentile
            interval.
        permutations: random sign flips of the randomization test (all
            ``2^n`` when that is not more).
        resamples: bootstrap resamples (test and intervals).
        seed: seed of the flips and resamples.
        empty_target_action: what a NaN value means (a query the kernel
            skipped as empty, ``empty_target_action="skip"``): ``"skip"``
            leaves the query out of every system (the test stays paired;
            the report lists it), ``"neg"`` and ``"pos"`` count it as the
            kernel does for the metric of the key (``"neg"``: its ``empty_neg``
            in the metric table, 1 for fall_out, else 0; ``"pos"``: 1; 0 and 1
            for a key that names no metric), ``"error"`` raises naming it.
            Fewer than 2 queries left is an error.

    Returns:
        A :class:`ComparisonReport`; its rows are in metric order, then system order.
    """
    validation.check_choice("test", test, TESTS)
    validation.check_choice("correction", correction, CORRECTIONS)
    validation.check_choice(
        "empty_target_action", empty_target_action, validation.EMPTY_TARGET_ACTIONS
    )
    alpha = _check_level("alpha", alpha)
    confidence = _check_level("confidence", confidence)
    _check_count("permutations", permutations)
    _check_count("resamples", resamples)
    names, qids, values = paired_values(systems, query_ids)
    if len(qids) < 2:  # a paired test (and a sample standard deviation) needs two
        raise validation.ArgumentError(
            "systems",
            f"must hold at least 2 queries, got {len(qids)}"
            + ("; there are no queries to compare" if not qids else ""),
        )
    if baseline is not None and baseline not in names:
        raise validation.ArgumentError(
            "baseline", f"must be one of the systems {names}, got {baseline!r}"
        )
    if baseline is not None:
        pairs = [(baseline, name) for name in names if name != baseline]
    else:
        pairs = [(names[i], names[j]) for i in range(len(names)) for j in range(i + 1, len(names))]
    values, kept, dropped = _empty_queries(values, qids, empty_target_action)
    column = {name: i for i, name in enumerate(names)}
    base_index = torch.tensor([column[b] for b, _ in pairs])
    system_index = torch.tensor([column[s] for _, s in pairs])
    rows: list[Comparison] = []
    means: dict[str, dict[str, float]] = {}
    for metric, matrix in values.items():
        means[metric] = dict(zip(names, matrix.mean(0).tolist(), strict=True))
        d = matrix[:, system_index] - matrix[:, base_index]
        p = _p_values(d, test, permutations, resamples, seed)
        if test == "t":
            low, high = t_interval(d, confidence)
        else:
            low, high = bootstrap_interval(d, confidence, resamples, seed)
        adjusted = adjust_p_values(p, correction)
        sizes = effect_size(d)
        for i, (base, name) in enumerate(pairs):
            rows.append(
                Comparison(
                    metric=metric,
                    system=name,
                    baseline=base,
                    system_mean=means[metric][name],
                    baseline_mean=means[metric][base],
                    difference=float(d[:, i].mean()),
                    ci_low=float(low[i]),
                    ci_high=float(high[i]),
                    effect_size=float(sizes[i]),
                    p_value=float(p[i]),
                    adjusted_p_value=float(adjusted[i]),
                    significant=bool(adjusted[i] < alpha),
                    queries=kept,
                )
            )
    return ComparisonReport(
        test=test,
        alpha=alpha,
        correction=correction,
        confidence=confidence,
        systems=names,
        metrics=list(values),
        means=means,
        rows=rows,
        queries=kept,
        dropped_queries=dropped,
        higher_is_better={m: _direction(m) for m in values},
    )


def _direction(key: str) -> bool:
    """Whether a higher value of result key ``key`` is better (True for a key of no metric)."""
    metric = key_metric(key)
    return True if metric is None else metric.higher_is_better


def _empty_value(key: str, action: str) -> float:
    """What an empty query counts under "neg"/"pos": the kernel's value for the metric."""
    metric = key_metric(key)
    if metric is None:  # no metric to ask: the kernel's default
        return 0.0 if action == "neg" else 1.0
    return metric.empty_value(action)


def _p_values(d: Tensor, test: str, permutations: int, resamples: int, seed: int) -> Tensor:
    if test == "t":
        return paired_t_test(d)
    if test == "wilcoxon":
        return wilcoxon_test(d)
    if test == "randomization":
        return _identical_is_one(randomization_test(d, permutations, seed), d)
    return bootstrap_test(d, resamples, seed)


def _empty_queries(
    values: dict[str, Tensor], qids: list[str], action: str
) -> tuple[dict[str, Tensor], int, list[str]]:
    """NaN values (queries skipped as empty) as ``empty_target_action`` says."""
    empty = torch.zeros(len(qids), dtype=torch.bool)
    for matrix in values.values():
        empty |= matrix.isnan().any(1)
    if not bool(empty.any()):
        return values, len(qids), []
    named = [qids[i] for i in empty.nonzero().flatten().tolist()]
    if action == "error":
        raise ValueError(
            f"queries {_listing(named)} have no value (NaN: skipped as empty) in some "
            "system; pass empty_target_action='skip' to leave them out, or 'neg'/'pos'"
        )
    if action in ("neg", "pos"):
        filled = {k: torch.nan_to_num(m, nan=_empty_value(k, action)) for k, m in values.items()}
        return filled, len(qids), []
    kept = ~empty
    if int(kept.sum()) < 2:
        raise ValueError(
            f"fewer than 2 queries have a value in every system ({_listing(named)} are "
            "NaN: skipped as empty); nothing to compare"
        )
    return {k: m[kept] for k, m in values.items()}, int(kept.sum()), named
