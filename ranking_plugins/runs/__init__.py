"""Qrels and runs as a library: files read (:mod:`~ranking_plugins.runs.reading`), joined
into dense parts of whole queries (:mod:`~ranking_plugins.runs.joining`) and evaluated
(:mod:`~ranking_plugins.runs.evaluation`), metric names read
(:mod:`~ranking_plugins.runs.names`).

The ``ranking-plugins`` command is a thin layer over these; ``import ranking_plugins``
and ``rank_metrics`` never import them. Reading files needs the ``cli`` extra.
"""
