"""Drop-ins for PyG's link-prediction metrics (``torch_geometric.metrics.LinkPred*``).

The same constructors, ``update(pred_index_mat, edge_label_index,
edge_label_weight=None)``, ``compute()``, ``reset()`` and collection keys as
torch_geometric 2.8's, with the values of the package's rank kernel: the
same numbers as PyG by default, on any device, summed across processes
(TorchMetrics states), and also from a score matrix, whose ties then follow
the package's ``ties`` policy. See :doc:`/pyg`.

Where it differs from PyG on purpose:

* ``update`` also takes a float score matrix ``(batch_size, num_items)`` in
  place of the ranked ids;
* ``compute`` returns a float64 tensor;
* ``LinkPredPersonalization`` counts every example by default (PyG's
  ``max_src_nodes=2**12`` keeps the first 4096; pass it to get PyG's
  approximation) and never visits pairs (``batch_size`` is unused);
* an edge given twice in ``edge_label_index``, an id out of range, a row that
  names no example of the batch are errors naming the argument;
* ``LinkPredRecall(weighted=True)`` is refused (not in the metric table yet);
* the package's options are keywords of every class: ``ap_denominator="relevant"``
  gives trec_eval's MAP, ``ties=`` the tie policy of score matrices.

>>> import torch
>>> from ranking_plugins.pyg import LinkPredMAP, LinkPredMetricCollection, LinkPredNDCG
>>> pred_index_mat = torch.tensor([[1, 0, 2], [0, 2, 1]])
>>> edge_label_index = torch.tensor([[0, 0, 1], [2, 3, 1]])
>>> metrics = LinkPredMetricCollection([LinkPredMAP(k=2), LinkPredNDCG(k=3)])
>>> metrics.update(pred_index_mat, edge_label_index)
>>> metrics.compute()
{'LinkPredMAP@2': tensor(0., dtype=torch.float64), \
'LinkPredNDCG@3': tensor(0.4033, dtype=torch.float64)}
"""

# the names are metrics.py's, listed there once
from ranking_plugins.pyg.metrics import *  # noqa: F403
from ranking_plugins.pyg.metrics import __all__ as __all__
