"""In-bag rows of scikit-learn bagged forests, for out-of-bag evaluation.

The public ``estimators_samples_`` rebuilds every tree's bootstrap with one
``RandomState(seed).randint`` call and an int32 copy per tree, which costs a noticeable
share of ``explain(..., oob=True)``. For the common unweighted bootstrap the same draws are
regenerated in numba (``kernels/inbag_bits.py``), in parallel over trees, straight into
the bit matrix; every call checks that shortcut against scikit-learn's own generator on the first
tree and otherwise falls back to ``estimators_samples_``.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np

from ..kernels.inbag_bits import bootstrap_bits, set_bits
from . import sklearn_private as private


def sklearn_inbag_bits(model, n_rows):
    """Packed in-bag indicator (n_trees, ceil(n_rows / 8)), little bit order.

    Uses the public ``estimators_samples_`` (scikit-learn >= 1.4), which follows
    ``max_samples`` and sample-weight-proportional bootstrap, unless the unweighted
    bootstrap can be regenerated directly (``_regenerated_bits``). ``n_rows`` must be the
    number of training rows; it is checked against the forest's own record.
    """
    from sklearn.ensemble import BaggingClassifier, BaggingRegressor

    name = type(model).__name__
    if isinstance(model, (BaggingClassifier, BaggingRegressor)):
        return _bagging_inbag_bits(model, n_rows)
    if not private.is_forest(model):
        raise ValueError(f"oob=True needs a bagged forest (RandomForest or ExtraTrees with "
                         f"bootstrap=True); {name} has no out-of-bag rows. Pass held-out "
                         "rows instead (oob=False)")
    if not getattr(model, "bootstrap", False):
        raise ValueError(f"oob=True needs bootstrap=True, but this {name} was fit with "
                         "bootstrap=False: every tree saw every row. Pass held-out rows "
                         "instead (oob=False)")
    n_train = private.n_training_rows(model)
    if n_train is not None and int(n_train) != n_rows:
        raise ValueError(f"oob=True needs the training rows: the forest was fit on {n_train} "
                         f"rows but X has {n_rows}")
    bits = _regenerated_bits(model, n_rows)
    if bits is not None:
        return bits
    return _bits_from_samples(model, n_rows)


def _bagging_inbag_bits(model, n_rows):
    """In-bag rows of a Bagging model: its rows drawn per estimator (with or without
    replacement; ``max_samples`` < 1 leaves out-of-bag rows even without bootstrap)."""
    name = type(model).__name__
    n_train = private.n_training_rows(model)
    if n_train is not None and int(n_train) != n_rows:
        raise ValueError(f"oob=True needs the training rows: the {name} was fit on "
                         f"{n_train} rows but X has {n_rows}")
    return _bits_from_samples(model, n_rows)


def _bits_from_samples(model, n_rows):
    """Packed in-bag bits from the public ``estimators_samples_`` (row indices, or
    boolean masks in older scikit-learn)."""
    name = type(model).__name__
    try:
        samples = model.estimators_samples_
    except Exception as exc:  # private state missing or changed in this sklearn version
        import sklearn

        raise ValueError(f"cannot recover the in-bag rows of this {name} (scikit-learn "
                         f"{sklearn.__version__}): {exc}") from None
    samples = [np.flatnonzero(s) if np.asarray(s).dtype == np.bool_ else s for s in samples]
    if len(samples) != len(model.estimators_):
        raise ValueError(f"{name} reports in-bag rows for {len(samples)} trees but has "
                         f"{len(model.estimators_)} trees")
    bits = np.zeros((len(samples), (n_rows + 7) // 8), np.uint8)
    for t, idx in enumerate(samples):
        idx = np.asarray(idx)
        if not np.issubdtype(idx.dtype, np.integer) or idx.ndim != 1:
            raise ValueError(f"tree {t} of the {name} reports in-bag rows of dtype {idx.dtype} "
                             f"and shape {idx.shape}; expected a 1-D integer array")
        bad = set_bits(idx, n_rows, bits[t])
        if bad >= 0:
            raise ValueError(f"tree {t} of the {name} drew row {int(idx[bad])} but X has "
                             f"{n_rows} rows: pass the training rows with oob=True")
    return bits


def _is_int(v, lo, hi):
    """Whether ``v`` is an integer (not a bool) in [lo, hi]."""
    return isinstance(v, Integral) and not isinstance(v, bool) and lo <= v <= hi


def _regenerated_bits(model, n_rows):
    """The in-bag bits from ``bootstrap_bits``, or None when that shortcut does not apply.

    It applies to the unweighted bootstrap (``randint(0, n_rows, n_samples_bootstrap)``
    seeded by each tree's integer ``random_state``) of a class that keeps scikit-learn's
    own ``estimators_samples_`` (an override is the truth, so it is asked instead), and
    is taken only if scikit-learn's private ``_generate_sample_indices`` draws the same
    rows for the first tree, so a change of that generator in a later scikit-learn falls
    back to the public path.
    """
    if private.bootstrap_weighted(model) is not False:  # weighted: ``choice`` with p
        return None
    if private.overrides_samples(model):
        return None
    n_train = private.n_training_rows(model)
    n_draws = private.bootstrap_draws(model)
    trees = getattr(model, "estimators_", None)
    if (not _is_int(n_rows, 1, 2**31 - 1) or not _is_int(n_train, n_rows, n_rows)
            or not _is_int(n_draws, 1, np.iinfo(np.int64).max) or not trees):
        return None
    seeds = [getattr(tree, "random_state", None) for tree in trees]
    if not all(_is_int(s, 0, 2**32 - 1) for s in seeds):
        return None
    first = private.generated_sample_indices(model, seeds[0])
    if first is None:
        return None
    first_bits = np.zeros((n_rows + 7) // 8, np.uint8)
    if set_bits(first, n_rows, first_bits) >= 0:
        private.regenerated_rows_differ()
        return None
    bits = np.zeros((len(seeds), (n_rows + 7) // 8), np.uint8)
    bootstrap_bits(np.array([int(s) for s in seeds], np.uint32), n_rows, int(n_draws), bits)
    if not np.array_equal(bits[0], first_bits):
        private.regenerated_rows_differ()
        return None
    return bits


def node_sample_counts(model, tree_offsets):
    """Every node's ``tree_.n_node_samples`` (the distinct rows of nonzero weight that
    reached it at fit time), the trees' arrays end to end in the order of ``estimators_``
    (int64, like the ensemble's nodes); None when the model does not keep them or their
    sizes differ from ``tree_offsets`` (nothing to compare with)."""
    trees = getattr(model, "estimators_", None)
    if trees is None or len(trees) != len(tree_offsets) - 1:
        return None
    parts = []
    for t, est in enumerate(trees):
        counts = getattr(getattr(est, "tree_", None), "n_node_samples", None)
        if counts is None:
            return None
        counts = np.asarray(counts)
        if counts.ndim != 1 or counts.size != tree_offsets[t + 1] - tree_offsets[t]:
            return None
        parts.append(counts)
    return np.concatenate(parts).astype(np.int64, copy=False)
