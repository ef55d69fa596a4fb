"""XGBoost's per-tree learning rate, resolved when a measure first reads it.

Only ``ufi`` (the unshrunk node estimate of boosting) and ``mdi_oob_centered`` (its
boosting centre) read ``TreeEnsemble.tree_learning_rate``; parsing a model must not pay
for recovering it. The parser therefore gives the ensemble an :class:`XGBoostEta`: the
few node arrays the recovery reads plus what the booster's configuration states, called
(once) on the first read.

What XGBoost 3.2 keeps: a live booster's ``save_config()`` states ``eta`` (and
``learning_rate``, the same number) with ``lambda`` and ``alpha`` in
``tree_train_param``, and so does a pickled booster; a model file (``save_model``, JSON
or UBJSON) stores no training parameter, and a ``Booster`` loaded from one reports
XGBoost's defaults (eta 0.3, lambda 1) in its configuration. The rules, in order:

* the configured eta (divided by ``num_parallel_tree``, as XGBoost applies it) fits the
  node weights with the configured regularization (``xgb_shrinkage.constant_rate_fits``,
  cheap): it is used;
* otherwise the rate is recovered from the node weights
  (``xgb_shrinkage.derive_learning_rate``): a learning-rate schedule (trees that
  disagree) is used as recovered; a constant rate that fits the nodes where the
  configured one does not means the configuration is not the training one (a Booster
  loaded from a model file): the recovered rate is used, with a warning;
* no configuration (a model file): the recovered rate; when it cannot be recovered,
  XGBoost's default 0.3 with a warning.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np

from .xgb_flat import FlatTrees
from .xgb_shrinkage import ConcatenatedTrees, constant_rate_fits, derive_learning_rate

XGB_DEFAULT_ETA = 0.3


class XGBoostEta:
    """Zero-argument callable giving the per-tree learning rates (n_trees,) of an
    XGBoost model; computed on the first call and kept. Picklable and thread-safe.

    ``trees``: the recovery's input (:func:`shrinkage_input`); ``n_trees``;
    ``num_parallel_tree``; ``learning_rate`` and ``regularization`` (lambda, alpha):
    what the booster's configuration states, None for a model file.
    """

    def __init__(self, trees, *, n_trees, num_parallel_tree, learning_rate=None,
                 regularization=None):
        if learning_rate is not None:
            learning_rate = float(learning_rate)
            if not np.isfinite(learning_rate) or learning_rate <= 0:
                raise ValueError(f"XGBoost learning rate must be > 0, got {learning_rate}")
        self.trees = trees
        self.n_trees = int(n_trees)
        self.npt = max(int(num_parallel_tree), 1)
        self.learning_rate = learning_rate
        self.regularization = regularization
        self.rates = None
        self._lock = threading.Lock()  # threads reading the rate at once resolve it once

    def __call__(self) -> np.ndarray:
        with self._lock:
            if self.rates is None:
                self.rates = self._resolve()
                self.trees = None  # the recovery's input is not needed any more
        return self.rates

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __eq__(self, other):
        """Two sources are equal when they give the same rates (both are resolved)."""
        if not isinstance(other, XGBoostEta):
            return NotImplemented
        return bool(np.array_equal(self(), other()))

    __hash__ = None  # equality by value of a lazily computed array

    def _resolve(self):
        configured = self.learning_rate
        if configured is not None:
            eta = configured / self.npt  # each of a round's npt trees is shrunk by this
            if (self.regularization is not None
                    and constant_rate_fits(self.trees, eta, *self.regularization)):
                return np.full(self.n_trees, eta)
        derived = derive_learning_rate(self.trees)
        if configured is None:
            if derived is None:
                warnings.warn("the learning rate of this XGBoost model file cannot be "
                              "recovered from its node weights (e.g. trees without splits); "
                              f"assuming XGBoost's default eta={XGB_DEFAULT_ETA}. Parse the "
                              "live Booster to use its configured eta", UserWarning,
                              stacklevel=3)
                return np.full(self.n_trees, XGB_DEFAULT_ETA)
            return derived[0]
        if derived is None:
            return np.full(self.n_trees, eta)
        rates, info = derived
        if info.get("schedule"):
            return rates  # a learning-rate schedule: the config only keeps the last eta
        if (abs(rates[0] - eta) > 1e-3 * eta
                and constant_rate_fits(self.trees, float(rates[0]), info["lambda"],
                                       info["alpha"])):
            warnings.warn(f"this XGBoost Booster's configuration states eta={configured:g}, "
                          "which does not fit its trees, whose node weights show eta="
                          f"{rates[0] * self.npt:.6g} (a Booster loaded from a model file "
                          "reports XGBoost's default configuration); using the latter",
                          UserWarning, stacklevel=3)
            return rates
        return np.full(self.n_trees, eta)


def shrinkage_input(raw, adaptive_leaves):
    """Per tree (left, right, node weights, hessians); trees gathered by ``xgb_flat``
    as one :class:`xgb_shrinkage.ConcatenatedTrees`."""
    if isinstance(raw, FlatTrees):
        # the gathered trees hold their leaf values in ``cond`` (read at leaves)
        r = {"left": raw.left, "value": raw.cond[:, None], "base_weights": raw.base_weights}
        return ConcatenatedTrees(np.diff(raw.offsets), raw.left, raw.right,
                                 newton_steps(r, adaptive_leaves)[:, 0], raw.hess)
    return [(r["left"], r["right"], newton_steps(r, adaptive_leaves), r["hess"])
            for r in raw]


def newton_steps(r, adaptive_leaves):
    """Node weights for the learning-rate identity: internal nodes unshrunk, leaves shrunk.

    A leaf's base_weight is its shrunk Newton step, except for leaves made by pruning
    (``exact`` with ``gamma``), which keep the unshrunk weight of the split they were;
    their applied value is the shrunk step. Objectives that refit leaves (absolute
    error) apply a value that is not a Newton step, while base_weight still is one.
    """
    if adaptive_leaves:
        return r["base_weights"]
    return np.where((r["left"] < 0)[:, None], r["value"], r["base_weights"])
