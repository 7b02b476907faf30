"""The keys of ``engine.state.metrics`` that the metrics on one engine write.

Ignite lets the metric that completes last overwrite another's value in
``engine.state.metrics``; two ``RankingMetrics`` (masked and unmasked, say)
both write ``"mrr@10"``, and nothing shows which one is left. The metrics of
:mod:`ranking_plugins.ignite` say which keys they write (:class:`KeyWriter`),
and :func:`refuse_shared_keys` refuses a key written twice, at ``attach`` and
when the run starts.
"""

from __future__ import annotations

from typing import Any

from ignite.metrics.metric import Metric


class KeyWriter:
    """The keys a metric of this package writes; a base of ``BaseRankingMetric``.

    A metric of another library writes its attach name only, as far as can be
    known: the keys of its dict result are not known before it is computed.
    """

    def _written_keys(self, name: str) -> tuple[str, ...]:
        """The keys of ``engine.state.metrics`` this metric writes when attached as ``name``."""
        return (name,)

    def _prefixable_keys(self, name: str) -> tuple[str, ...]:
        """The written keys that ``prefix_keys=True`` would start with ``name/``."""
        return ()


def attached(engine: Any) -> list[tuple[Metric, str]]:
    """``(metric, attach name)`` of every metric attached to ``engine``, in any usage.

    Read from the ``completed`` handlers that ``Metric.attach`` registers (with
    the name as their last argument); Ignite keeps no other list of them.
    """
    found: dict[tuple[int, str], tuple[Metric, str]] = {}
    for handlers in getattr(engine, "_event_handlers", {}).values():
        for handler, args, _ in handlers:
            parent = getattr(handler, "_parent", None)  # a filtered event wraps the handler
            method = parent() if parent is not None else handler
            owner = getattr(method, "__self__", None)
            name = args[-1] if args else None
            if (
                isinstance(owner, Metric)
                and getattr(method, "__name__", None) == "completed"
                and isinstance(name, str)
            ):
                found.setdefault((id(owner), name), (owner, name))
    return list(found.values())


def written_keys(metric: Metric, name: str) -> tuple[str, ...]:
    """The ``engine.state.metrics`` keys ``metric`` attached as ``name`` writes."""
    return metric._written_keys(name) if isinstance(metric, KeyWriter) else (name,)


def _prefixable_keys(metric: Metric, name: str) -> tuple[str, ...]:
    return metric._prefixable_keys(name) if isinstance(metric, KeyWriter) else ()


def _describe_writer(metric: Metric, name: str) -> str:
    return f"{type(metric).__name__} attached as {name!r}"


def refuse_shared_keys(engine: Any, metric: Metric, name: str | None) -> None:
    """A ValueError when ``metric`` and another metric on ``engine`` write the same key.

    ``name`` is the name ``metric`` is being attached under (None: already
    attached). The message names both metrics and the key, ``metric`` first.
    """
    writers = attached(engine)
    if name is not None and all(m is not metric or n != name for m, n in writers):
        writers.append((metric, name))
    owners: dict[str, tuple[Metric, str]] = {}
    # this metric's own keys first, so that the message names it first
    for writer, attached_as in sorted(writers, key=lambda w: w[0] is not metric):
        for key in written_keys(writer, attached_as):
            first = owners.setdefault(key, (writer, attached_as))
            same = first[0] is writer and first[1] == attached_as
            if same or (writer is not metric and first[0] is not metric):
                continue
            # a RankingMetrics writing its flat keys can put its attach name in them
            prefixable = [w for w in (first, (writer, attached_as)) if key in _prefixable_keys(*w)]
            advice = (
                f"pass prefix_keys=True to the {_describe_writer(*prefixable[0])} (it then "
                f"writes {prefixable[0][1] + '/' + key!r}), or metrics_result_mode='named' "
                "(its dict under the attach name only)"
                if prefixable
                else "attach them under different names"
            )
            raise ValueError(
                f"{_describe_writer(*first)} and {_describe_writer(writer, attached_as)} both "
                f"write {key!r} into engine.state.metrics, so one value would silently replace "
                f"the other; {advice}"
            )
