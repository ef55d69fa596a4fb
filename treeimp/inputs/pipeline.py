"""Fitted scikit-learn Pipelines: the last step is the tree model, the steps before it
transform X.

The model is explained on the columns it was trained on (the transformed X), named by
the preprocessing's ``get_feature_names_out``. ``input_groups`` maps those columns back
to the pipeline's input columns (a ColumnTransformer's one-hot columns of a categorical
to that categorical), for ``groups="input"``.
"""

from __future__ import annotations

import numbers
import sys

import numpy as np

CHUNK_ROWS = 65536


def is_pipeline(model):
    """Whether ``model`` is a scikit-learn Pipeline (without importing scikit-learn)."""
    mod = sys.modules.get("sklearn.pipeline")
    return mod is not None and isinstance(model, mod.Pipeline)


class Unwrapped:
    """``model`` (the last step), ``X`` (the transformed rows, or X as given when
    there is no preprocessing), ``feature_names`` (None: from X or the model) and
    ``input_groups`` ({input column: positions of the model's columns}, or None)."""

    def __init__(self, model, X, feature_names, input_groups):
        self.model = model
        self.X = X
        self.feature_names = feature_names
        self.input_groups = input_groups


def unwrap(model, X, *, need_input_groups=False):
    """The last step of a fitted Pipeline and X transformed by the steps before it, in
    chunks of rows; any other model is returned with X as it is."""
    if not is_pipeline(model):
        return Unwrapped(model, X, None, None)
    from sklearn.utils.validation import check_is_fitted

    steps = model.steps
    final = steps[-1][1]
    if final is None or final == "passthrough":
        raise ValueError("the Pipeline's last step is 'passthrough'; treeimp explains a "
                         "Pipeline whose last step is a fitted tree model")
    check_is_fitted(model)
    pre = [est for _, est in steps[:-1] if est is not None and not
           (isinstance(est, str) and est == "passthrough")]
    if not pre:
        names = _input_names(model, X)
        groups = {n: [j] for j, n in enumerate(names)} if need_input_groups else None
        return Unwrapped(final, X, None, groups)
    Xt = _transform_in_chunks(pre, X)
    try:
        names = [str(n) for n in model[:-1].get_feature_names_out()]
    except (AttributeError, ValueError, TypeError):  # a step without feature names
        names = None
    if names is not None and len(names) != Xt.shape[1]:
        names = None
    groups = None
    if need_input_groups:
        if names is None:
            raise ValueError("groups='input' needs every preprocessing step of the Pipeline "
                             "to support get_feature_names_out")
        groups = _input_groups(pre, _input_names(model, X), names)
    return Unwrapped(final, Xt, names, groups)


def _transform_in_chunks(pre, X):
    """X through the transformers ``pre`` CHUNK_ROWS rows at a time; sparse outputs are
    made dense one chunk at a time. A DataFrame output (``set_output``) stays one."""
    from sklearn.utils import _safe_indexing

    n = X.shape[0] if hasattr(X, "shape") else len(X)
    parts = []
    for start in range(0, max(n, 1), CHUNK_ROWS):
        chunk = _safe_indexing(X, np.arange(start, min(n, start + CHUNK_ROWS)))
        for est in pre:
            chunk = est.transform(chunk)
        if hasattr(chunk, "toarray"):
            chunk = chunk.toarray()
        parts.append(chunk)
    if len(parts) == 1:
        return parts[0]
    if hasattr(parts[0], "iloc"):
        import pandas as pd

        return pd.concat(parts, axis=0)
    return np.concatenate([np.asarray(p) for p in parts], axis=0)


def _input_names(pipeline, X):
    names = getattr(pipeline, "feature_names_in_", None)
    if names is not None:
        return [str(n) for n in names]
    width = X.shape[1] if hasattr(X, "shape") else len(X[0])
    return [f"x{j}" for j in range(width)]


def _input_groups(pre, input_names, output_names):
    """{input column label: positions in ``output_names``}, ordered by first position."""
    label = {n: n for n in input_names}  # current column name -> input column label
    current = list(input_names)
    for est in pre:
        out = [str(n) for n in est.get_feature_names_out(current)] if not _is_ct(est) \
            else [str(n) for n in est.get_feature_names_out()]
        origin = (_column_transformer_origin(est, current) if _is_ct(est)
                  else _step_origin(est, current, out))
        label = {o: "+".join(dict.fromkeys(label[i] for i in origin[o])) for o in out}
        current = out
    groups = {}
    for j, name in enumerate(output_names):
        groups.setdefault(label[name], []).append(j)
    return groups


def _is_ct(est):
    mod = sys.modules.get("sklearn.compose")
    return mod is not None and isinstance(est, mod.ColumnTransformer)


def _step_origin(est, inputs, outputs):
    """{output name: [input names]} of a step that is not a ColumnTransformer: kept
    columns map to themselves; everything from one input column maps to it."""
    if all(o in set(inputs) for o in outputs):
        return {o: [o] for o in outputs}
    if len(inputs) == 1:
        return {o: list(inputs) for o in outputs}
    raise ValueError(f"groups='input': cannot tell which input column each output of the "
                     f"Pipeline step {type(est).__name__} comes from (it makes "
                     f"{outputs[:5]} from {inputs[:5]}); pass groups as a dict")


def _column_transformer_origin(ct, inputs):
    """{output name: [input names]} of a fitted ColumnTransformer. A transformer of one
    column: all its outputs come from it. Of several: an output named like an input
    (scalers, imputers) or ``<input>_<suffix>`` (one-hot encoders) comes from that input
    (the longest such name), any other output (e.g. PCA) from all of them."""
    names = [str(n) for n in ct.get_feature_names_out()]
    origin = {}
    for tname, trans, cols in ct.transformers_:
        sl = ct.output_indices_.get(tname)
        if sl is None or sl.stop <= sl.start or (isinstance(trans, str) and trans == "drop"):
            continue
        cols_in = _selected(cols, inputs)
        for o in names[sl]:
            raw = o[len(tname) + 2:] if o.startswith(f"{tname}__") else o
            origin[o] = _origin_of(raw, cols_in)
    return origin


def _selected(cols, inputs):
    """Names of the input columns one ColumnTransformer entry selected (names,
    positions, a boolean mask or a slice of positions, as ``transformers_`` holds them)."""
    if isinstance(cols, slice):
        return list(inputs)[cols]
    if isinstance(cols, (str, numbers.Integral)):
        cols = [cols]
    cols = list(cols)
    if cols and isinstance(cols[0], (bool, np.bool_)):
        return [n for n, keep in zip(inputs, cols) if keep]
    return [c if isinstance(c, str) else inputs[int(c)] for c in cols]


def _origin_of(raw, cols_in):
    if len(cols_in) == 1:
        return list(cols_in)
    if raw in cols_in:
        return [raw]
    prefixed = [c for c in cols_in if raw.startswith(f"{c}_")]
    if prefixed:
        return [max(prefixed, key=len)]
    return list(cols_in)
