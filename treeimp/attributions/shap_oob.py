"""SHAP-oob: the supervised importance of out-of-sample TreeSHAP values (measures.md).

Per tree t, the mean over its evaluation rows E_t (out-of-bag rows of a bagged forest,
or the held-out rows) of ``w_i z_i . phi_{t,k}(x_i)``, with z the per-tree target of
mdi_oob (forests: y or one-hot y; boosting: -g at the margin before t's stage) and phi
the tree's path-dependent TreeSHAP values (as the tree enters the margin: times its
scale). A forest's value is the mean over trees, a boosted model's the sum. With Saabas
contributions in place of phi ("saabas_oob") this is exactly mdi_oob (Li et al. eq. 14
is the mean of z_i . f_{t,k}(x_i)).

Standard errors come from the same random row blocks as every other measure: the
kernels keep per-block sums of ``w_i z_i . phi_{t,k}(x_i)`` and of ``w_i`` per tree, and
the leave-one-block-out replicates are formed from them here.
"""

from __future__ import annotations

import numpy as np

from ..inputs.rows import RowSource
from ..inputs.targets import forest_targets, n_target_columns
from ..inputs.threads import numba_threads
from ..kernels.gradients import target_columns
from ..kernels.treeshap import forest_block_sums, staged_block_sums
from ..measures import registry
from ..model.ensemble import FOREST
from ..model.kernel_inputs import Loss, RowInputs
from ..model.losses import check_target, check_weights, loss_spec
from ..model.routing import routing_flags
from ..stats.drivers import CHUNK_ROWS as STAGED_CHUNK_ROWS
from ..stats.drivers import empty_inbag, rows_by_block, stage_starts, staged_trees
from ..stats.linear_leaves import linear_chunk_rows, linear_leaf_targets
from .contributions import (
    ROUTED_CHUNK_VALUES,
    ContributionModel,
    in_sample,
    kernel_inputs,
    split_routed,
)

CHUNK_ROWS = 1 << 18
NO_CENTRE = np.zeros(0)  # staged_block_sums' pair-mode inputs, unused here
NO_PAIRS = np.zeros((0, 0, 0, 1))


def per_tree_values(acc, n_eval):
    """(n_blocks + 1, n_trees, n_features): the leave-one-block-out values per tree from
    the per-block sums of ``block_sums`` (``acc`` (n_blocks, n_trees, n_features),
    ``n_eval`` (n_blocks, n_trees)), then the value on all evaluation rows (NaN for a
    tree without evaluation rows), in the layout of ``measures.compute``."""
    n_blocks = acc.shape[0]
    total, n_total = acc.sum(axis=0), n_eval.sum(axis=0)
    out = np.empty((n_blocks + 1,) + total.shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        for b in range(n_blocks):
            n_b = n_total - n_eval[b]
            out[b] = np.where(n_b[:, None] > 0, (total - acc[b]) / n_b[:, None], np.nan)
        out[-1] = np.where(n_total[:, None] > 0, total / n_total[:, None], np.nan)
    return out


def block_sums(method, ens, rows, y, w, block, n_blocks, *, inbag_bits=None, positions=None,
               n_jobs=None, base_margin=None):
    """(acc (n_blocks, n_trees, n_features): sum over block b's evaluation rows of tree t
    of w_i z_i . phi_{t,k}(x_i); n_eval (n_blocks, n_trees): their weight). These add up
    over chunks of rows. ``inbag_bits`` (forests out of bag): each tree's packed in-bag
    rows, indexed by the rows' global ``positions`` (default 0 .. n-1).
    ``base_margin``: per-row offsets of a boosting model ((n, n_outputs), see
    ``offsets.check_base_margin``): held-out margins start at ``ens.start_margin``."""
    if ens.linear_leaves is not None:
        if registry.get(method).contributions != "shap":
            ens.refuse_linear_leaves("saabas_oob (Saabas contributions)")
        if inbag_bits is not None:
            raise ValueError("oob=True is for bagged forests; boosting models have no "
                             "out-of-bag rows and need a held-out set: "
                             "explain(model, X_val, y_val)")
        return linear_block_sums(ens, rows, y, w, block, n_blocks, n_jobs=n_jobs,
                                 base_margin=base_margin)

    contributions = registry.get(method).contributions
    routed = split_routed(ens, contributions)
    if routed is not ens:  # TreeSHAP reads every split's outcome, also off the path
        ens, rows = routed, rows.rerouted(routed)
    tables = kernel_inputs(ens, contributions)
    acc = np.zeros((n_blocks, ens.n_trees, ens.n_features, 1))
    n_eval = np.zeros((n_blocks, ens.n_trees))
    oob = inbag_bits is not None
    if ens.kind == FOREST:
        Z, _ = forest_targets(ens, y)
        bits = inbag_bits if oob else empty_inbag()
        pos = (np.zeros(0, np.int64) if not oob  # read only for in-bag bits
               else np.arange(rows.n_rows, dtype=np.int64) if positions is None
               else np.ascontiguousarray(positions, dtype=np.int64))
        rows_in = RowInputs(Z, w, np.zeros(0, np.int32), pos, np.zeros((0, 1)))
    else:
        if oob:
            raise ValueError("oob=True is for bagged forests; boosting models have no "
                             "out-of-bag rows and need a held-out set: "
                             "explain(model, X_val, y_val)")
        if ens.value_dim != 1:
            raise ValueError(f"this model's trees have {ens.value_dim} values per leaf "
                             "(vector-leaf trees); held-out gradient importances need one "
                             "value per leaf")

        check_weights(ens.objective, w)
        code, params = loss_spec(ens.objective, n_outputs=ens.n_outputs)
        y_t = np.ascontiguousarray(check_target(ens.objective, y, ens.classes),
                                   dtype=np.float64)
        row_start = (np.zeros((0, ens.n_outputs)) if base_margin is None
                     else ens.start_margin(base_margin))
        rows_in = RowInputs(y_t, w, np.zeros(0, np.int32), np.zeros(0, np.int64), row_start)
        loss = Loss(code, params, ens.base_score)
        trees = staged_trees(ens, code, params)
    block = np.asarray(block)
    # routed models: a chunk holds the router's numbers, one column per routing column
    chunk_rows = (CHUNK_ROWS if ens.leaf_router is None
                  else max(1, min(CHUNK_ROWS, ROUTED_CHUNK_VALUES // ens.leaf_router.n_columns)))
    with numba_threads(n_jobs, dynamic=True):
        for start, chunk in rows.chunks(chunk_rows, split=True):
            stop = start + chunk.shape[0]
            strict, round32 = routing_flags(ens, chunk)
            order, bounds = rows_by_block(block[start:stop], n_blocks)
            if ens.kind == FOREST:
                forest_block_sums(chunk, start, order, bounds, rows_in, bits, oob, tables,
                                  acc, n_eval, ens.tree_offsets, ens.tree_output,
                                  ens.routing, strict, round32)
            else:
                staged_block_sums(chunk, start, order, bounds, rows_in, loss, trees, tables,
                                  acc, n_eval, NO_CENTRE, NO_PAIRS, ens.routing, strict,
                                  round32)
    return acc[..., 0], n_eval


def linear_block_sums(ens, rows, y, w, block, n_blocks, *, n_jobs=None, base_margin=None):
    """:func:`block_sums` of shap_oob for a model with linear leaf models (LightGBM
    ``linear_tree=True``): z the negative gradients at the true staged margins
    (``stats/linear_leaves.linear_leaf_targets``, linear terms included), phi each
    tree's exact TreeSHAP values with its linear leaves (``contributions.in_sample`` on
    the ensemble of that one round: constant fallbacks plus the leaf models' Shapley
    values). One contributions pass per round and chunk of rows; per chunk the arrays
    of ``linear_chunk_rows`` plus the round's values (8 bytes per row, feature and
    output)."""
    if ens.value_dim != 1:
        raise ValueError(f"this model's trees have {ens.value_dim} values per leaf; "
                         "held-out gradient importances need one value per leaf")
    check_weights(ens.objective, w)
    K, T, F = ens.n_outputs, ens.n_trees, ens.n_features
    code, params = loss_spec(ens.objective, n_outputs=K)
    Ky = target_columns(code, K)
    y_t = np.ascontiguousarray(check_target(ens.objective, y, ens.classes,
                                            n_target_columns(ens)),
                               dtype=np.float64).ravel()
    row_start = (np.zeros((0, K)) if base_margin is None else ens.start_margin(base_margin))
    stage_start = stage_starts(ens)
    n_stages = len(stage_start) - 1
    models = [ContributionModel(ens.rounds(k, k + 1) if n_stages > 1 else ens, "shap")
              for k in range(n_stages)]
    w = np.asarray(w, dtype=np.float64)
    block = np.asarray(block)
    acc = np.zeros((n_blocks, T, F))
    n_eval = np.zeros((n_blocks, T))
    with numba_threads(n_jobs):
        for start, chunk in rows.chunks(linear_chunk_rows(ens, n_stages, STAGED_CHUNK_ROWS),
                                        split=True):
            stop = start + chunk.shape[0]
            n = chunk.shape[0]
            _, _, targets, _, _ = linear_leaf_targets(
                ens, chunk, y_t[start * Ky:stop * Ky],
                row_start[start:stop] if row_start.shape[0] > 0 else row_start,
                stage_start, code, params)
            g = targets.reshape(n, n_stages, K, 2)[:, :, :, 0]
            wc = w if w.shape[0] == 1 else w[start:stop]
            b = block[start:stop]
            # (block, row) matrix of the rows' weights: block sums as products
            member = np.zeros((n_blocks, n))
            member[b, np.arange(n)] = 1.0
            weight = member * np.broadcast_to(wc, (n,))
            for k, cm in enumerate(models):
                phi = in_sample(cm, RowSource(chunk, cm.ens), None, None,
                                [f"x{j}" for j in range(F)], None, n_jobs=n_jobs).values
                phi = phi.reshape(n, F, K)
                for t in range(stage_start[k], stage_start[k + 1]):
                    c = ens.tree_output[t]
                    acc[:, t, :] += (weight * -g[None, :, k, c]) @ phi[:, :, c]
                    n_eval[:, t] += weight.sum(axis=1)
            del chunk  # a converted chunk is freed before the next one is made
    return acc, n_eval
