"""Held-out interaction importance: SHAP-oob for pairs of features.

For a pair of features j < k and a tree t, the value is the weighted mean over the
tree's evaluation rows E_t (out-of-bag rows of a bagged forest with ``oob=True``, else
the rows given) of

    (z_i - c_t) . 2 Phi_{t,jk}(x_i),

Phi_{t,jk} the tree's path-dependent SHAP interaction value of j and k (Lundberg et al.
2020; the value of :func:`treeimp.interactions`, of which a row's matrix holds Phi_jk
at (j, k) and at (k, j), hence the 2) as the tree enters the margin, and z the per-tree
target of shap_oob: forests y (regression) or the one-hot y (classification, z . Phi
the sum over classes); boosting the negative gradient -g of the model's loss at the
margin before t's stage. Centred (the default): c_t the tree's in-bag root value
(forests: the in-bag mean of y or the class proportions; boosting: c_t h_i with the
tree's unshrunk root estimate mu_t = v_root / learning rate and h the hessian), as
``mdi_oob_centered``; uncentred: c_t = 0. A forest's value is the mean over trees (that
have evaluation rows), a boosted model's the sum. Summing over k the pair values and
adding the target times the main effects Phi_jj gives shap_oob's value of feature j
(a row's matrix sums to its TreeSHAP values; shap_oob is uncentred).

Why a noise pair has value ~0 out of sample: on rows a tree did not see, the target is
independent of the tree (forest) and, for a pair (j, k) that does not predict it, of
Phi_jk(x_i), so E[(z - c_t) Phi_jk(x)] = (E[z] - c_t) E[Phi_jk(x)] is 0 up to how far
the in-bag centre is from the held-out mean (the uncentred value keeps E[z] E[Phi_jk],
which a constant added to y changes). On the rows that grew the tree, the leaf values
are fitted to those rows' targets, so z and Phi_jk co-vary on them also for noise
(noise splits separate rows by their own targets): in-bag values are biased upwards,
most for features with many distinct values, which offer the most such splits.

Standard errors come from the same random row blocks as every other measure (a
delete-a-block jackknife on the replicates without each block, times the out-of-bag
factor with ``oob=True``); the kernels (``kernels/pair_sums.py``) fold each tree's
per-block sums into the replicates, so memory does not grow with the number of trees.
"""

from __future__ import annotations

import numba
import numpy as np
import pandas as pd

from ..inputs.targets import forest_targets, n_target_columns, target_classes
from ..inputs.threads import numba_threads
from ..kernels.pair_sums import forest_pair_sums, oob_block_weight
from ..kernels.treeshap import staged_block_sums
from ..measures.defaults import OOB_VARIANCE_FACTOR
from ..measures.screening import model_task, objective_name
from ..model.ensemble import FOREST
from ..model.kernel_inputs import Loss, RowInputs
from ..model.losses import check_target, loss_spec
from ..model.ranking import is_ranking
from ..model.routing import routing_flags
from ..results.finalize import jackknife_stderr
from ..results.importances import Importances
from ..stats.drivers import empty_inbag, rows_by_block, staged_trees
from .contributions import ROUTED_CHUNK_VALUES, kernel_inputs, shap_players, split_routed

# between the two features of a pair's label: "x0 x x1"
PAIR_SEPARATOR = " x "
CENTERED = "interaction_oob_centered"
UNCENTERED = "interaction_oob"
CHUNK_ROWS = 1 << 18
# the forest kernel's per-thread buffers, together, at most this many bytes (or one thread)
PAIR_BUFFER_BYTES = 1 << 30


def pair_labels(names):
    """The labels of the pairs j < k of ``names`` in the order of ``np.triu_indices``:
    ``names[j] + PAIR_SEPARATOR + names[k]``."""
    j, k = np.triu_indices(len(names), 1)
    return [f"{names[a]}{PAIR_SEPARATOR}{names[b]}" for a, b in zip(j, k)]


def check_pair_model(ens, parsed):
    """Refuse the models whose interaction importance is not defined: several targets,
    vector-leaf trees, players that are groups of features (CatBoost's combinations of
    categorical features)."""
    if ens.kind != FOREST and parsed.value_dim != 1:
        raise ValueError(f"this model's trees have {parsed.value_dim} values per leaf "
                         "(vector-leaf trees); interaction_importance needs one value per "
                         "leaf")
    if target_classes(ens) is not None or (ens.objective.name != "class_probability"
                                            and n_target_columns(ens) != 1):
        raise ValueError(f"interaction_importance is defined for models of one target; "
                         f"this {ens.kind} model has {n_target_columns(ens)} target columns: "
                         "explain one model per target")
    if is_ranking(ens.objective):
        raise ValueError(f"interaction_importance is not defined for a learning-to-rank "
                         f"model (objective {ens.objective.source or ens.objective.name!r}): "
                         "its per-row terms need a row's own gradient, and a ranking "
                         "gradient depends on the whole query; use treeimp.interactions")
    if shap_players(ens)[1]:
        raise ValueError(f"this {ens.model_name} model splits on combinations of "
                         "categorical features, whose SHAP interaction values treeimp does "
                         "not compute (see treeimp.interactions)")


def centres(ens, centered):
    """c_t per tree: forests (n_trees, value_dim) the in-bag root value; boosting
    (n_trees,) the unshrunk root estimate v_root / learning rate; zeros uncentred."""
    roots = ens.tree_offsets[:-1]
    v = np.asarray(ens.value, dtype=np.float64)[roots]
    if ens.kind != FOREST:
        v = v[:, 0] / np.asarray(ens.tree_learning_rate, dtype=np.float64)
    return np.ascontiguousarray(v if centered else np.zeros_like(v))


def pair_replicates(ens, rows, y, w, block, n_blocks, *, centered=True, inbag_bits=None,
                    positions=None, n_jobs=None, base_margin=None):
    """(n_blocks + 1, F, F), upper triangle filled: the value of every pair j < k without
    each row block (the jackknife replicates), then on all evaluation rows (NaN where no
    tree has evaluation rows); and the per-block evaluation weights (n_blocks, n_trees).
    ``rows``: a ``RowSource`` read against ``ens``; ``y`` checked by the caller; ``w``
    one weight for all rows or one per row; ``block`` each row's block;
    ``inbag_bits`` (forests out of bag) indexed by the rows' ``positions``."""
    ens.refuse_linear_leaves("interaction importance")
    routed = split_routed(ens, "shap")
    if routed is not ens:  # TreeSHAP reads every split's outcome, also off the path
        ens, rows = routed, rows.rerouted(routed)
    tables = kernel_inputs(ens, "shap")
    T, n = ens.n_trees, rows.n_rows
    oob = inbag_bits is not None
    block = np.ascontiguousarray(block, dtype=np.int64)
    w = np.ascontiguousarray(w, dtype=np.float64)
    centre = centres(ens, centered)
    chunk_rows = (CHUNK_ROWS if ens.leaf_router is None
                  else max(1, min(CHUNK_ROWS, ROUTED_CHUNK_VALUES // ens.leaf_router.n_columns)))
    pos = (np.zeros(0, np.int64) if not oob
           else np.arange(n, dtype=np.int64) if positions is None
           else np.ascontiguousarray(positions, dtype=np.int64))
    n_eval = np.zeros((n_blocks, T))
    with numba_threads(n_jobs):
        oob_block_weight(inbag_bits if oob else empty_inbag(), oob, pos, block, w, n_blocks,
                         n_eval)
        if ens.kind == FOREST:
            out = _forest(ens, rows, y, w, block, n_blocks, oob, inbag_bits, pos, centre,
                          tables, n_eval, chunk_rows)
        else:
            out = _boosting(ens, rows, y, w, block, n_blocks, centre, tables, n_eval,
                            chunk_rows, base_margin)
    return out, n_eval


def _coefficients(n_eval):
    """coef (n_trees, n_blocks + 1): 1 / (n'_t - n'_tb), then 1 / n'_t (0 where the
    weight is 0); and the number of trees with evaluation rows per replicate."""
    total = n_eval.sum(axis=0)
    denom = np.vstack([total[None, :] - n_eval, total[None, :]]).T  # (T, B + 1)
    # a block's own weight is subtracted from the sum: tiny remainders are no rows
    seen = denom > 1e-12 * np.maximum(total, 1.0)[:, None]
    with np.errstate(divide="ignore"):
        coef = np.where(seen, 1.0 / np.where(seen, denom, 1.0), 0.0)
    return np.ascontiguousarray(coef), seen.sum(axis=0)


def _forest(ens, rows, y, w, block, n_blocks, oob, bits, pos, centre, tables, n_eval,
            chunk_rows):
    F = ens.n_features
    Z, _ = forest_targets(ens, y)
    rows_in = RowInputs(np.ascontiguousarray(Z, dtype=np.float64), w,
                        np.zeros(0, np.int32), pos, np.zeros((0, 1)))
    coef, n_seen = _coefficients(n_eval)
    # each worker keeps its trees' per-block sums and its replicates: 2 (n_blocks + 1)
    # matrices of F x F; wide data gets fewer workers rather than more memory
    per_worker = 8 * (2 * n_blocks + 2) * F * F
    workers = max(1, min(numba.get_num_threads(), ens.n_trees,
                         PAIR_BUFFER_BYTES // per_worker))
    acc = np.zeros((workers, n_blocks + 1, F, F))
    for start, chunk in rows.chunks(chunk_rows, split=True):
        stop = start + chunk.shape[0]
        strict, round32 = routing_flags(ens, chunk)
        forest_pair_sums(chunk, start, rows_in, block[start:stop],
                         bits if oob else empty_inbag(), oob, centre, coef, tables,
                         ens.tree_offsets, ens.tree_output, ens.routing, strict, round32, acc)
    total = acc.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n_seen > 0)[:, None, None], total / np.maximum(n_seen, 1)[:, None, None],
                        np.nan)


def _boosting(ens, rows, y, w, block, n_blocks, centre, tables, n_eval, chunk_rows,
              base_margin):
    F = ens.n_features
    code, params = loss_spec(ens.objective, n_outputs=ens.n_outputs)
    y_t = np.ascontiguousarray(check_target(ens.objective, y, ens.classes), dtype=np.float64)
    row_start = (np.zeros((0, ens.n_outputs)) if base_margin is None
                 else ens.start_margin(base_margin))
    rows_in = RowInputs(y_t, w, np.zeros(0, np.int32), np.zeros(0, np.int64), row_start)
    loss = Loss(code, params, ens.base_score)
    trees = staged_trees(ens, code, params)
    acc = np.zeros((n_blocks, F, F, 1))
    main = np.zeros((n_blocks, 1, F, 1))  # the main effects the kernel also adds: not read
    seen = np.zeros((n_blocks, ens.n_trees))  # the weights, known already (n_eval)
    for start, chunk in rows.chunks(chunk_rows, split=True):
        stop = start + chunk.shape[0]
        strict, round32 = routing_flags(ens, chunk)
        order, bounds = rows_by_block(block[start:stop], n_blocks)
        staged_block_sums(chunk, start, order, bounds, rows_in, loss, trees, tables, main,
                          seen, centre, acc, ens.routing, strict, round32)
    D = acc[..., 0]
    D = np.triu(D + D.transpose(0, 2, 1), 1)  # 2 Phi_jk, j < k
    weight = n_eval[:, 0]  # every tree evaluates every row
    W = weight.sum()
    out = np.empty((n_blocks + 1, F, F))
    total = D.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        for b in range(n_blocks):
            out[b] = (total - D[b]) / (W - weight[b]) if W - weight[b] > 0 else np.nan
        out[-1] = total / W if W > 0 else np.nan
    return out


def pair_importances(ens, replicates, names, *, centered, oob, n_rows, n_blocks,
                     block_weight):
    """The :class:`~treeimp.Importances` of the pairs from ``pair_replicates``'s values:
    one row per pair j < k labelled ``"name_j x name_k"``, most important first, the
    standard error the delete-a-block jackknife over the replicates (times the
    out-of-bag factor with ``oob``). Per-tree values are not kept (they would take
    n_trees x F^2 numbers): ``per_tree`` and the across-trees error are left out."""
    method = CENTERED if centered else UNCENTERED
    j, k = np.triu_indices(len(names), 1)
    values = replicates[:, j, k]  # (n_blocks + 1, n_pairs)
    labels = pair_labels(names)
    inflation = OOB_VARIANCE_FACTOR if oob else 1.0
    se = inflation * jackknife_stderr(values[:-1])
    order = np.argsort(-np.nan_to_num(values[-1], nan=-np.inf), kind="stable")
    index = pd.Index([labels[i] for i in order], name="pair")

    def frame(v):
        return pd.DataFrame({method: v[order]}, index=index)

    return Importances(table=frame(values[-1]), stderr=frame(se),
                       stderr_trees=frame(np.full(len(labels), np.nan)), per_tree={},
                       block_values={method: values[:-1][:, order]}, n_blocks=n_blocks,
                       kind=ens.kind, n_rows=n_rows, model_name=ens.model_name,
                       block_weight=block_weight, task=model_task(ens),
                       objective=objective_name(ens), screening=method)
