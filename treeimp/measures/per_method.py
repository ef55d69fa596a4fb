"""A measure's per-tree values by name, through the registry: ``compute`` (fused kernels
or numpy forms) and the per-class parts of a classification forest's measures."""

from __future__ import annotations

import contextlib

from . import registry
from .formulas import NodeSums, use_fused


def class_parts(method, ens, st: NodeSums):
    """The per-class split sums (B, n_trees, n_features, C) of a measure with a per-class
    form (mdi_oob, mdi_oob_centered, ufi) on a classification forest, before the
    per-tree scaling: computed once, they serve both the measure (``compute(...,
    parts=)``) and ``by_class``."""
    return _per_class_form(method).parts(ens, st)


def _per_class_form(method):
    form = registry.get(method).per_class
    if form is None:
        have = [m.name for m in registry.all_measures() if m.per_class is not None]
        raise ValueError(f"per-class values exist for {', '.join(map(repr, have))}, "
                         f"not {method!r}")
    return form


def by_class(method, ens, st: NodeSums, parts=None):
    """Per-class parts of "mdi_oob", "mdi_oob_centered" or "ufi" for a classification
    forest, summing to the measure: (n_trees, n_features, n_classes) on the full
    statistics ``st`` (B = 1).

    mdi_oob: the class-c terms (v_lc - v_mc) S'_lc + (v_rc - v_mc) S'_rc over n'_root;
    mdi_oob_centered: the same with S'_c - c_t,c n' (c_t,c the in-bag class-c share);
    ufi: w_l p_lc p'_lc + w_r p_rc p'_rc - w_m p_mc p'_mc (its constant 1 cancels since
    W_m = W_l + W_r). ``parts``: ``class_parts(method, ens, st)`` when already computed.
    """
    form = _per_class_form(method)
    return form.values(ens, st, form.parts(ens, st) if parts is None else parts)


def compute(method, ens, st, *, classification, alpha=None, lam=None, parts=None,
            fused=None):
    """The per-tree values (B, n_trees, n_features) of the node-statistics measure
    ``method``, through its registry entry (:mod:`treeimp.measures.registry`). ``alpha``, ``lam``:
    pg_oob's parameters; ``parts``: ``class_parts(method, ens, st)`` (mdi_oob,
    mdi_oob_centered, ufi on a classification forest); ``fused``: True (fused kernels)
    or False (numpy forms) for the per-split sums, None: as :func:`use_fused` says (by
    default fused)."""

    with contextlib.nullcontext() if fused is None else use_fused(fused):
        return registry.compute(method, ens, st, classification=classification,
                                params={"alpha": alpha, "lam": lam}, parts=parts)
