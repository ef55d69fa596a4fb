"""``oob=True`` needs X to be the forest's training rows in the training order; in-bag
rows are told from out-of-bag rows by position alone. This checks it: routing the
in-bag rows of the given X must reach every node as often as scikit-learn counted
distinct rows there at fit time (``tree_.n_node_samples``). It also warns when the
forest's bootstrap left some class nearly without out-of-bag rows
(:func:`warn_if_classes_rarely_out_of_bag`)."""

from __future__ import annotations

import warnings

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


# rows x trees read for the class shares below (the first trees, at least MIN_TREES)
SHARE_CELLS = 20_000_000
MIN_TREES = 8
# a class whose out-of-bag share per tree is below this fraction of the largest class's
# is reported; a uniform bootstrap gives every class about 1 - 1/e = 0.368
SHARE_RATIO = 0.5


def oob_class_shares(bits, positions, classes, n_classes):
    """Each class's share of its rows that are out of bag, per tree, averaged over the
    first trees (all of them up to ``SHARE_CELLS`` rows x trees, else at least
    ``MIN_TREES``). ``bits``: packed in-bag rows (n_trees, ceil(n / 8)), little bit order;
    ``positions`` (n,) the rows' training positions; ``classes`` (n,) their class
    indices. A class without rows gets NaN."""
    n = len(positions)
    n_trees = bits.shape[0]
    k = min(n_trees, max(MIN_TREES, SHARE_CELLS // max(n, 1)))
    byte, shift = positions >> 3, (positions & 7).astype(np.uint8)
    out_of_bag = np.zeros(n_classes)
    for t in range(k):
        inbag = (bits[t, byte] >> shift) & 1
        out_of_bag += np.bincount(classes, weights=1.0 - inbag, minlength=n_classes)
    rows = np.bincount(classes, minlength=n_classes).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return out_of_bag / (k * rows)


def warn_if_classes_rarely_out_of_bag(ens, bits, positions, Z):
    """Warn when some class's rows are much rarer out of bag than another's.

    scikit-learn >= 1.9 draws a forest's bootstrap samples with probabilities
    proportional to the sample weights, ``class_weight="balanced"`` included: the rows of
    a heavily weighted (rare) class are then almost always in bag, the out-of-bag rows
    nearly lack that class, and out-of-bag importances describe the other classes only
    (ufi and naive_oob of such a forest come out as zero for every feature). ``Z``: the
    one-hot class matrix of the rows (single-target classifiers; nothing is checked for
    other targets)."""
    if ens.objective.name != "class_probability" or Z.shape[1] != ens.n_outputs:
        return
    classes = np.argmax(Z, axis=1)
    share = oob_class_shares(bits, positions, classes, Z.shape[1])
    seen = np.isfinite(share)
    if seen.sum() < 2:
        return
    top = int(np.nanargmax(share))
    low = int(np.nanargmin(share))
    if share[low] >= SHARE_RATIO * share[top]:
        return
    labels = ens.classes
    name = (lambda c: repr(labels[c].item() if hasattr(labels[c], "item") else labels[c])
            ) if labels is not None else str
    warnings.warn(
        f"out of bag, {share[low]:.1%} of the rows of class {name(low)} are out of bag per "
        f"tree, against {share[top]:.1%} of class {name(top)}'s: the forest drew its "
        "bootstrap samples in proportion to the sample weights (scikit-learn >= 1.9 with "
        "class_weight='balanced' or a dict, or sample_weight), so its out-of-bag rows "
        f"nearly lack class {name(low)} and out-of-bag importances describe the other "
        "classes. Fit with class_weight='balanced_subsample' (weights applied after the "
        "draw) or explain held-out rows (oob=False)", UserWarning, stacklevel=4)
