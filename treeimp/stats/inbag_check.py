"""``oob=True`` needs X to be the forest's training rows in the training order; in-bag
rows are told from out-of-bag rows by position alone. This checks it: routing the
in-bag rows of the given X must reach every node as often as scikit-learn counted
distinct rows there at fit time (``tree_.n_node_samples``)."""

from __future__ import annotations

import numpy as np

from ..backends import get_backend
from ..inputs.threads import numba_threads
from ..kernels.inbag_counts import first_count_mismatch
from ..model.routing import routing_flags
from ..parsers.sklearn_inbag import node_sample_counts


def check_training_rows(ens, model, rows, bits, *, n_jobs=None):
    """Raise a ValueError if the in-bag rows of ``rows`` (all training rows, in one call)
    do not reach the nodes of ``ens`` as the training rows did.

    ``model``: the fitted forest, whose trees' ``n_node_samples`` are compared (nothing
    is checked when it keeps none); ``bits``: its packed in-bag rows (one row per tree).
    A tree whose root count already differs is not checked: its nodes counted other rows
    than the in-bag bits show (rows of zero sample weight, which scikit-learn before 1.9
    drew but left out of the tree, or a Bagging model that passed drawn rows as copies),
    which no row order explains.
    """

    expected = node_sample_counts(model, ens.tree_offsets)
    if expected is None:
        return
    counts = np.zeros(ens.n_nodes, np.int64)
    routing = ens.routing_arrays()
    first = np.empty(ens.n_trees, np.int64)
    backend = get_backend()
    with numba_threads(n_jobs):
        for start, chunk in rows.chunks():
            strict, round32 = routing_flags(ens, chunk)
            backend.inbag_counts(chunk, start, bits, ens.tree_offsets, routing, strict,
                                 round32, counts)
            del chunk  # a converted chunk is freed before the next one is made
        first_count_mismatch(ens.postorder, ens.tree_offsets, ens.left, ens.right, counts,
                             expected, first)
    bad = np.flatnonzero(first >= 0)
    if bad.size == 0:
        return
    t = int(bad[0])
    node = int(first[t])
    at = int(ens.tree_offsets[t]) + node
    raise ValueError(
        f"oob=True: X is not the forest's training rows in the training order. Tree {t}'s "
        f"node {node} held {int(expected[at])} distinct in-bag rows at fit time, but "
        f"{int(counts[at])} of the rows of X that are in-bag for that tree by position "
        f"reach it ({bad.size} of {ens.n_trees} trees disagree). X, y must be the training "
        "rows in the training order (as passed to fit: not shuffled, re-sorted or taken "
        "from another data set); for other rows use oob=False")
