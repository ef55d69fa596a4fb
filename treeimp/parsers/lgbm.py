"""LightGBM -> TreeEnsemble, from a Booster / LGBMModel or from a saved model text.

Both entry points read LightGBM's model text (``model_to_string`` / ``save_model``), so
a model object and the file it was saved to give the same TreeEnsemble; the text path
never imports lightgbm. Companion modules: ``lgbm_text`` (splits the text into
sections), ``lgbm_numbers`` (one key's numbers of all trees, read at once),
``lgbm_objective`` (objective line -> Objective), ``lgbm_categories``
(``pandas_categorical`` -> per-feature labels).

Node layout: LightGBM tree with ``L`` leaves -> ``2L - 1`` nodes; internal node ``i``
(LightGBM's split index, root 0) is node ``i`` and leaf ``k`` (``~k`` in
``left_child``/``right_child``, the number ``predict(pred_leaf=True)`` returns) is node
``L - 1 + k``. A stump (``num_leaves=1``) is the single node 0.

Routing (LightGBM ``Tree::NumericalDecision`` / ``CategoricalDecision``, checked against
lightgbm 4.7): numeric ``x <= threshold`` in float64 goes left; missing type None: NaN
is compared as 0 (``NAN_AS_ZERO``); Zero: NaN and ``|x| <= 1e-35`` follow default_left
(``NAN_ZERO_MISSING``); NaN: NaN follows default_left (``NAN_MISSING``). Before any
tree, LightGBM's predictor replaces inputs with ``|x| <= 1e-35`` by 0.0; thresholds in
``[-1e-35, 1e-35)`` are moved so that the plain comparison does the same (see
:func:`_zeroing_threshold`). Categorical: the codes whose bit is set in the node's
``cat_threshold`` bitset go LEFT; every other code, NaN and negative codes go right,
whatever the node's missing type and default_left bits say. LightGBM takes the code as
``static_cast<int>(x)`` (truncation), so values in (-1, 0) are code 0, not negative: the
categorical nodes carry ``NAN_AS_ZERO``, with which the routing kernel truncates the
same way and treats only ``x <= -1`` as negative.

Init score: with ``boost_from_average`` LightGBM adds its starting score into the first
iteration's trees (one per class) and forces their shrinkage to 1. It is moved into
``base_score`` (rules in :func:`_carries_init_score` and :func:`_init_score`) so that
every tree holds ``learning_rate * unshrunk estimate``; predictions are unchanged.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from typing import NamedTuple

import numba
import numpy as np

from ..backends.threads import run_tasks
from ..model.ensemble import (
    BOOSTING,
    NAN_AS_ZERO,
    NAN_MISSING,
    NAN_ZERO_MISSING,
    TreeEnsemble,
)
from .lgbm_categories import feature_categories
from .lgbm_numbers import span_numbers
from .lgbm_objective import objective_from_text
from .lgbm_text import (
    KEY_INDEX,
    check_tree_sizes,
    read_param,
    scan_model_bytes,
    scan_model_text,
)

HEADER_KEYS = ("version", "num_class", "num_tree_per_iteration", "max_feature_idx",
               "feature_names", "feature_infos")
# keys every tree with >= 2 leaves must have (a stump needs only num_leaves, leaf_value)
TREE_KEYS = ("num_leaves", "num_cat", "split_feature", "split_gain", "threshold",
             "decision_type", "left_child", "right_child", "leaf_value", "leaf_weight",
             "leaf_count", "internal_value", "internal_weight", "internal_count",
             "shrinkage")
CATEGORICAL_TREE_KEYS = ("cat_boundaries", "cat_threshold")
LINEAR_TREE_KEYS = ("leaf_const", "num_features", "leaf_features", "leaf_coeff")

# the first buffer for a live model's text: bytes in all, and per tree (63 leaves take
# about 6 kB; a larger text is serialised again into a buffer of its length)
_TEXT_BUFFER = 1 << 24
_TEXT_PER_TREE = 1 << 16
# the values' bytes above which a second thread reads half of the numbers
_THREAD_BYTES = 1 << 19
# the nan mode of a numerical split of missing type 0 (None), 1 (Zero), 2 (NaN)
_NAN_MODE_OF_MISSING_TYPE = np.array([NAN_AS_ZERO, NAN_ZERO_MISSING, NAN_MISSING])
_PRINT_RTOL = 5e-6  # LightGBM prints internal_value / shrinkage with 6 significant digits


def parse_lightgbm(model) -> TreeEnsemble:
    """Normal form of a fitted ``lightgbm.Booster`` or ``LGBMModel`` (LGBMClassifier,
    LGBMRegressor).

    Parameters
    ----------
    model : lightgbm.Booster or lightgbm.LGBMModel
        A fitted model. A classifier's ``classes_`` become the ensemble's ``classes``.

    Returns
    -------
    TreeEnsemble
        Every iteration's trees: ``predict_raw`` equals ``booster.predict(X,
        raw_score=True, num_iteration=-1)``. :func:`treeimp.parse` keeps the first
        ``best_iteration`` iterations when it is set, as LightGBM's default predict.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        For an LGBMModel that was not fitted.
    ValueError
        For objectives or model variants the normal form cannot hold.

    Examples
    --------
    >>> import numpy as np, lightgbm as lgb
    >>> from treeimp.parsers.lgbm import parse_lightgbm
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> m = lgb.LGBMRegressor(n_estimators=5, num_leaves=4, verbose=-1).fit(X, X[:, 0])
    >>> ens = parse_lightgbm(m)
    >>> bool(np.allclose(ens.predict_raw(X)[:, 0], m.predict(X, raw_score=True)))
    True
    """
    import lightgbm

    classes = None
    if isinstance(model, lightgbm.LGBMModel):
        if not model.__sklearn_is_fitted__():
            from sklearn.exceptions import NotFittedError

            raise NotFittedError(f"this {type(model).__name__} is not fitted yet: call "
                                 "fit(X, y) before parsing or explaining it")
        booster = model.booster_
        classes = getattr(model, "classes_", None)
    elif isinstance(model, lightgbm.Booster):
        booster = model
    else:
        raise TypeError(f"parse_lightgbm needs a lightgbm.Booster or LGBMModel, got "
                        f"{type(model).__module__}.{type(model).__name__}")
    try:
        # every iteration (num_iteration=-1): treeimp.parse applies best_iteration, as
        # LightGBM's predict does, or the user's iteration_range
        data = _model_bytes(booster)
        if not data.isascii():  # checked as a file's text is
            return parse_lightgbm_text(data.decode("utf-8"), classes=classes)
        return parse_lightgbm_bytes(data, classes=classes)
    except ValueError as exc:
        raise ValueError(f"{exc} (lightgbm {lightgbm.__version__})") from None


def _model_bytes(booster) -> bytes:
    """``booster.model_to_string(num_iteration=-1)``, the text of every iteration, as
    UTF-8 bytes, serialised once.

    ``model_to_string`` calls LightGBM's ``LGBM_BoosterSaveModelToString`` with a 1 MB
    buffer and, for a longer text, serialises the model a second time into a buffer of
    the length the first call reported; then it appends the Python package's
    ``pandas_categorical`` line. Here the same call, with the same arguments, gets a
    buffer large enough for nearly every model (allocated, not written: the pages the
    text does not reach are never touched), and the same line is appended. Where the
    package's internals are not as expected, LightGBM is not a 3.x or 4.x release, or
    no such buffer can be had:
    ``save_model`` into a temporary file (also one serialisation, of the same text)."""
    import lightgbm

    if not lightgbm.__version__.startswith(("3.", "4.")):
        # the C function's signature is the one of LightGBM 3.x and 4.x; a later major
        # release may change it, and a wrong ctypes call would not fail cleanly
        return _saved_text(booster)
    try:
        from lightgbm.basic import _LIB, _dump_pandas_categorical, _safe_call

        handle = booster._handle
        size = max(_TEXT_BUFFER, booster.num_trees() * _TEXT_PER_TREE)
        buf = np.empty(size, dtype=np.uint8)
    except (ImportError, AttributeError, MemoryError):
        return _saved_text(booster)
    length = ctypes.c_int64(0)
    for _ in range(2):
        # start_iteration 0, num_iteration -1 (all), importance_type 0 ("split")
        _safe_call(_LIB.LGBM_BoosterSaveModelToString(
            handle, ctypes.c_int(0), ctypes.c_int(-1), ctypes.c_int(0),
            ctypes.c_int64(buf.shape[0]), ctypes.byref(length),
            buf.ctypes.data_as(ctypes.c_char_p)))
        if length.value <= buf.shape[0]:
            break
        buf = np.empty(length.value, dtype=np.uint8)
    # length counts the terminating NUL
    return (buf[:length.value - 1].tobytes()
            + _dump_pandas_categorical(booster.pandas_categorical).encode("utf-8"))


def _saved_text(booster) -> bytes:
    """The text ``booster.save_model`` writes into a temporary file (the same as
    ``model_to_string``: LightGBM's ``SaveModelToFile`` writes ``SaveModelToString``,
    and the Python package adds the same ``pandas_categorical`` line); where no
    temporary file can be written, ``model_to_string``."""
    try:
        with tempfile.TemporaryDirectory(prefix="treeimp-lightgbm-") as folder:
            path = os.path.join(folder, "model.txt")
            booster.save_model(path, num_iteration=-1)
            with open(path, "rb") as f:
                return f.read()
    except OSError:
        return booster.model_to_string(num_iteration=-1).encode("utf-8")


def parse_lightgbm_text(text: str, *, classes=None) -> TreeEnsemble:
    """Normal form of a LightGBM model text (``model_to_string`` / a ``save_model`` file).

    Does not import lightgbm.

    Parameters
    ----------
    text : str
        The whole model text.
    classes : array-like, optional
        Class labels to attach (``LGBMClassifier.classes_``); the text does not store them.

    Returns
    -------
    TreeEnsemble

    Raises
    ------
    ValueError
        Damaged or truncated text (naming the key and tree), unsupported objectives
        (ranking, mape, fair, cross_entropy_lambda, custom), reg_sqrt models or
        linear trees of ``boosting="rf"``. Linear trees (``linear_tree=True``) are read
        into ``TreeEnsemble.linear_leaves``; ``boosting="rf"`` models
        (``average_output``) as in :func:`_averaged_trees`.

    Examples
    --------
    >>> from treeimp.parsers.lgbm import parse_lightgbm_text
    >>> ens = parse_lightgbm_text(open("model.txt").read())  # doctest: +SKIP
    """
    if not isinstance(text, str):
        raise TypeError(f"a LightGBM model text must be a str, got {type(text).__name__}")
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: read line by line
        return _parse_model(scan_model_text(text), lambda: text, classes)
    return _parse_model(scan_model_bytes(data, text), lambda: text, classes)


def parse_lightgbm_bytes(data: bytes, *, classes=None) -> TreeEnsemble:
    """:func:`parse_lightgbm_text` of the model text's UTF-8 bytes (valid UTF-8 without
    a byte order mark: the caller has checked), without decoding the tree blocks."""
    return _parse_model(scan_model_bytes(data), lambda: data.decode("utf-8"), classes)


def _parse_model(model, get_text, classes):
    """The TreeEnsemble of a scanned model text (``get_text()``: the text as a str, read
    only when its tree blocks were not located in the bytes)."""
    header, params = model.header, model.parameters
    for key in HEADER_KEYS:
        if key not in header:
            raise ValueError(f"LightGBM model text has no header key {key!r} "
                             f"(model format {header.get('version', 'unknown')})")
    version = header["version"]
    averaged = "average_output" in header  # boosting="rf"
    n_features = _header_int(header, "max_feature_idx", version) + 1
    n_per_iter = _header_int(header, "num_tree_per_iteration", version)
    num_class = _header_int(header, "num_class", version)
    if n_features < 1 or n_per_iter < 1 or num_class < 1:
        raise ValueError(f"LightGBM header: max_feature_idx={n_features - 1}, "
                         f"num_tree_per_iteration={n_per_iter}, num_class={num_class}")
    if num_class != n_per_iter:
        # LightGBM writes them equal; it predicts num_class columns from the trees laid out
        # num_tree_per_iteration per round, so they must agree
        raise ValueError(f"LightGBM header num_class={num_class} disagrees with "
                         f"num_tree_per_iteration={n_per_iter} (LightGBM writes them equal)")
    # LightGBM splits its names at " " alone (they hold none: it stores a space as "_"),
    # so a tab or a non-breaking space stays inside a name
    names = [nm for nm in header["feature_names"].split(" ") if nm]
    infos = header["feature_infos"].split()
    for key, vals in (("feature_names", names), ("feature_infos", infos)):
        if len(vals) != n_features:
            raise ValueError(f"LightGBM header {key} has {len(vals)} entries but "
                             f"max_feature_idx={n_features - 1} means {n_features} features")
    objective = objective_from_text(header, params, num_class)

    flat = _read_trees(model.trees, version, n_features)
    n_trees = flat.n_leaves.shape[0]
    if not n_trees:
        raise ValueError("LightGBM model text has no trees")
    if n_trees % n_per_iter:
        raise ValueError(f"LightGBM model text has {n_trees} trees, not a multiple of "
                         f"num_tree_per_iteration={n_per_iter} (truncated?)")
    if "tree_sizes" in header and len(header["tree_sizes"].split()) != n_trees:
        raise ValueError(f"LightGBM header tree_sizes lists "
                         f"{len(header['tree_sizes'].split())} trees but the text has "
                         f"{n_trees}")
    if "tree_sizes" in header:
        starts = model.trees.block_starts
        check_tree_sizes(get_text() if starts is None else None, header["tree_sizes"],
                         starts)

    if objective.params.get("n_classes", 1) != n_per_iter:
        raise ValueError(f"LightGBM objective {objective.source!r} needs "
                         f"{objective.params.get('n_classes', 1)} trees per iteration, the "
                         f"header says num_tree_per_iteration={n_per_iter}")
    if averaged and flat.linear is not None:
        raise ValueError("LightGBM model text: a boosting='rf' model (average_output) with "
                         "linear trees (is_linear=1) is not supported")
    per_tree, base = (_averaged_trees(flat, n_per_iter) if averaged
                      else _boosted_trees(flat, n_per_iter, params))
    linear = None
    if flat.linear is not None:
        lin = flat.linear
        # a leaf without terms predicts its constant (Tree::Predict), not leaf_value
        constant = lin["linear_leaf"] & (lin["count"] == 0)
        flat.fields["value"][constant, 0] = lin["const"][constant]
        linear = {key: lin[key] for key in ("count", "const", "feature", "coef")}

    default_names = all(nm == f"Column_{j}" for j, nm in enumerate(names))
    return TreeEnsemble.from_arrays(
        flat.offsets, flat.fields, flat.categories,
        **per_tree,
        kind=BOOSTING,
        n_features=n_features,
        n_outputs=n_per_iter,
        comparison="<=",
        round_float32=False,
        base_score=base,
        objective=objective,
        feature_names=None if default_names else names,
        feature_categories=feature_categories(model.pandas_categorical, infos, params),
        classes=classes,
        library="lightgbm",
        # LightGBM stores every " " of a feature name as "_" (and refuses JSON's special
        # characters), so the frame it was fit on matches after that replacement
        column_names="space_as_underscore",
        base_in_first_round=True,  # predict(start_iteration > 0) leaves the init score out
        gain_kind="gain",
        linear_leaves=linear,
    )


# ---------------------------------------------------------------------- header
def _header_int(header, key, version):
    try:
        return int(header[key])
    except ValueError:
        raise ValueError(f"LightGBM header {key}={header[key][:30]!r} is not an integer "
                         f"(model format {version})") from None


# ---------------------------------------------------------------------- trees
class _FlatTrees(NamedTuple):
    """Every tree's nodes in the layout of the module docstring, concatenated: tree t
    is ``offsets[t]:offsets[t + 1]``; ``fields`` the node arrays ``from_arrays`` takes
    (child indices local to their tree, ``value`` (n_nodes, 1)); per tree its
    categorical splits, shrinkage and number of leaves; ``linear``: None, or the linear
    leaf models (:func:`_read_linear`)."""

    offsets: np.ndarray
    fields: dict
    categories: list
    shrinkage: np.ndarray
    n_leaves: np.ndarray
    linear: dict | None = None


def _tree(flat, t):
    """Tree t's numbers that the init-score rules read, as views."""
    a, b = flat.offsets[t], flat.offsets[t + 1]
    value = flat.fields["value"][a:b]
    m = int(flat.n_leaves[t]) - 1
    return dict(n_leaves=m + 1, shrinkage=float(flat.shrinkage[t]), value=value,
                weight=flat.fields["weight"][a:b], internal_value=value[:m, 0] if m else None)


def _boosted_trees(flat, n_per_iter, params):
    """The per-tree arrays of ``from_arrays`` (output = class, stage = iteration) and the
    base score: the init score moved out of the first iteration's trees (their node
    values in ``flat`` are shifted in place)."""
    n_trees = flat.n_leaves.shape[0]
    learning_rate = _learning_rate(params, flat, n_per_iter)
    base = np.zeros(n_per_iter)
    rates = flat.shrinkage.copy()
    for t in range(min(n_per_iter, n_trees)):
        r = _tree(flat, t)
        if _carries_init_score(r, learning_rate, params):
            base[t] = _init_score(r)
            r["value"] -= base[t]
            if flat.linear is not None:  # AddBias adds the init score to leaf_const too
                flat.linear["const"][flat.offsets[t]:flat.offsets[t + 1]] -= base[t]
            if learning_rate is None and r["n_leaves"] > 1:
                raise ValueError(f"LightGBM model text: tree {t} carries the init score but "
                                 "the learning rate is unknown (no parameters section and no "
                                 "second iteration)")
            # AddBias set the shrinkage to 1; DART may have rescaled the tree since
            rates[t] = r["shrinkage"] * (1.0 if learning_rate is None else learning_rate)
    t = np.arange(n_trees)
    return dict(tree_output=(t % n_per_iter).astype(np.int32),
                tree_scale=np.ones(n_trees), tree_learning_rate=rates,
                tree_stage=(t // n_per_iter).astype(np.int64)), base


def _averaged_trees(flat, n_per_iter):
    """The per-tree arrays of ``from_arrays`` of a ``boosting="rf"`` model
    (``average_output``) and its initial margin (the node values in ``flat`` are
    shifted in place).

    LightGBM's random forest (``src/boosting/rf.hpp``) computes the gradients once, at
    the initial margin (``BoostFromAverage``, 0 without ``boost_from_average``), fits
    every tree to them on its bagged rows with shrinkage 1, adds the initial margin to
    the tree (``AddBias``) and predicts the MEAN of its trees. So every tree is one
    stage 0 here (the staged gradients are those at the initial margin for all trees),
    scaled by 1 / n_iterations, with the initial margin moved into the base score;
    predictions are the library's mean of the trees.

    The initial margin is not written to the model text. It is taken as the
    hessian-weighted mean, over all trees, of each tree's root value (= the margin plus
    the tree's Newton step on its bagged rows, whose gradient sums average out over the
    trees because the margin zeroes the gradient sum over all training rows).
    """
    n_trees = flat.n_leaves.shape[0]
    n_iter = n_trees // n_per_iter
    base = np.zeros(n_per_iter)
    for k in range(n_per_iter):
        num = den = 0.0
        stumps = []
        for t in range(k, n_trees, n_per_iter):
            r = _tree(flat, t)
            m = r["n_leaves"] - 1
            if m == 0:
                stumps.append(float(r["value"][0, 0]))
                continue
            w = r["weight"][m:]
            num += float(np.dot(w, r["value"][m:, 0]))
            den += float(w.sum())
        base[k] = num / den if den > 0 else (float(np.mean(stumps)) if stumps else 0.0)
    t = np.arange(n_trees)
    output = t % n_per_iter
    flat.fields["value"][:, 0] -= np.repeat(base[output], np.diff(flat.offsets))
    flat.fields["cover"][:] = np.nan  # as these trees have always been read: no cover
    return dict(tree_output=output.astype(np.int32),
                tree_scale=np.full(n_trees, 1.0 / n_iter), tree_learning_rate=flat.shrinkage,
                tree_stage=np.zeros(n_trees, np.int64)), base


def _numbers(block, key, n, t, dtype):
    text = block.get(key)
    if text is None:
        raise ValueError(f"LightGBM tree {t} has no key {key!r}")
    tokens = text.split()
    if len(tokens) != n:
        raise ValueError(f"LightGBM tree {t}: {key} has {len(tokens)} values, expected {n}")
    try:
        return np.array(tokens, dtype=np.float64 if dtype is float else np.int64)
    except (ValueError, OverflowError):
        raise ValueError(f"LightGBM tree {t}: {key} has a value that is not "
                         f"{'a number' if dtype is float else 'an integer'}") from None


def _scalar(block, key, t, dtype):
    """One number: what ``_numbers(block, key, 1, t, dtype)[0]`` gives, without an
    array (a few of these per tree)."""
    text = block.get(key)
    if text is None:
        raise ValueError(f"LightGBM tree {t} has no key {key!r}")
    tokens = text.split()
    if len(tokens) != 1:
        raise ValueError(f"LightGBM tree {t}: {key} has {len(tokens)} values, expected 1")
    try:
        value = dtype(tokens[0])
        if dtype is int:
            value = int(np.int64(value))  # OverflowError outside int64, as np.array
        return value
    except (ValueError, OverflowError):
        raise ValueError(f"LightGBM tree {t}: {key} has a value that is not "
                         f"{'a number' if dtype is float else 'an integer'}") from None


# the per-split (m values) and per-leaf (n_leaves values) keys of a tree with splits
_SPLIT_KEYS = (("split_feature", int), ("split_gain", float), ("threshold", float),
               ("decision_type", int), ("left_child", int), ("right_child", int),
               ("internal_value", float), ("internal_weight", float),
               ("internal_count", float))
_LEAF_KEYS = (("leaf_value", float), ("leaf_weight", float), ("leaf_count", float))
_TREE_KEY_COLUMNS = [KEY_INDEX[key] for key in TREE_KEYS]


def _read_keys(numbers, trees, which, jobs):
    """{key: ``numbers(key, which, counts, dtype)``} for the jobs (key, counts, dtype);
    the first job's error in their order is raised. With more than one numba thread
    allowed and enough text, a second thread reads about half of the values' bytes
    (``read_numbers`` runs without the GIL)."""
    got, errors = {}, {}

    def run(part):
        for key, counts, dtype in part:
            try:
                got[key] = numbers(key, which, counts, dtype)
            except Exception as exc:  # noqa: BLE001 - raised in the caller's order below
                errors[key] = exc

    spans = trees.spans[which]
    size = {key: int((spans[:, KEY_INDEX[key], 1] - spans[:, KEY_INDEX[key], 0]).sum())
            for key, _, _ in jobs}
    if numba.get_num_threads() > 1 and sum(size.values()) >= _THREAD_BYTES:
        other, own, balance = [], [], 0  # the largest first, each to the lighter side
        for job in sorted(jobs, key=lambda job: -size[job[0]]):
            (other if balance <= 0 else own).append(job)
            balance += size[job[0]] if balance <= 0 else -size[job[0]]
        parts = (own, other)
        run_tasks(lambda i: run(parts[i]), 2, 2)
    else:
        run(jobs)
    for key, _, _ in jobs:
        if key in errors:
            raise errors[key]
    return got


def _block(trees, t):
    """Tree t's values as a dict of str (the few trees read one by one)."""
    return {key: trees.text(t, key) for key, k in KEY_INDEX.items() if trees.has(t, key)}


def _read_trees(trees, version, n_features) -> _FlatTrees:
    """Every ``Tree=t`` block (``lgbm_text.TreeValues``) -> node arrays in the layout of
    the module docstring, for all trees together: each key's numbers of the trees with
    splits read at once (``lgbm_numbers.span_numbers``) and written into the
    concatenated node arrays; a stump's by :func:`_read_tree`."""
    n_trees = len(trees)
    has = trees.spans[:, :, 0] >= 0

    def numbers(key, which, counts, dtype):
        k = KEY_INDEX[key]
        return span_numbers(trees.buf, trees.spans[which, k, 0], trees.spans[which, k, 1],
                            which, key, counts, dtype)

    every = np.arange(n_trees)
    ones = np.ones(n_trees, dtype=np.int64)
    absent = ~has[:, KEY_INDEX["num_leaves"]]
    if np.any(absent):
        raise ValueError(f"LightGBM tree {int(np.argmax(absent))} has no key 'num_leaves' "
                         f"(model format {version})")
    n_leaves = numbers("num_leaves", every, ones, int)
    if np.any(n_leaves < 1):
        t = int(np.argmax(n_leaves < 1))
        raise ValueError(f"LightGBM tree {t}: num_leaves={n_leaves[t]}")
    marked = np.flatnonzero(has[:, KEY_INDEX["is_linear"]])
    linear = marked[:0]
    if marked.size:
        flags = numbers("is_linear", marked, ones[:marked.size], int)
        bad = (flags != 0) & (flags != 1)
        if np.any(bad):
            raise ValueError(f"LightGBM tree {marked[int(np.argmax(bad))]}: is_linear="
                             f"{flags[np.argmax(bad)]}, must be 0 or 1")
        linear = marked[flags == 1]
    lacking = np.where(n_leaves > 1, ~has[:, _TREE_KEY_COLUMNS].all(axis=1),
                       ~has[:, KEY_INDEX["shrinkage"]])
    if np.any(lacking):
        t = int(np.argmax(lacking))
        for key in TREE_KEYS if n_leaves[t] > 1 else ("shrinkage",):
            if not has[t, KEY_INDEX[key]]:
                raise ValueError(f"LightGBM tree {t} has no key {key!r} "
                                 f"(model format {version})")
    shrinkage = numbers("shrinkage", every, ones, float)
    split = np.flatnonzero(n_leaves > 1)
    num_cat = np.zeros(n_trees, dtype=np.int64)
    num_cat[split] = numbers("num_cat", split, ones[:split.size], int)
    # every tree's nodes: a tree with L leaves has 2 L - 1 (a stump one), its splits
    # first; the arrays start as leaves and the trees' numbers are written in
    offsets = np.zeros(n_trees + 1, dtype=np.int64)
    np.cumsum(2 * n_leaves - 1, out=offsets[1:])
    total = int(offsets[-1])
    fields = dict(left=np.full(total, -1, np.int64), right=np.full(total, -1, np.int64),
                  feature=np.full(total, -1, np.int64), threshold=np.full(total, np.nan),
                  missing_left=np.zeros(total, bool),
                  nan_mode=np.full(total, NAN_MISSING, np.uint8), weight=np.empty(total),
                  impurity=np.full(total, np.nan), gain=np.full(total, np.nan),
                  value=np.empty((total, 1)), cover=np.empty(total))
    categories = [{} for _ in range(n_trees)]
    flat = _FlatTrees(offsets, fields, categories, shrinkage, n_leaves,
                      _read_linear(numbers, has, linear, n_leaves, offsets, n_features)
                      if linear.size else None)
    for t in np.flatnonzero(n_leaves == 1).tolist():
        stump = _read_tree(_block(trees, t), t, version)
        i = offsets[t]
        fields["value"][i] = stump["value"][0]
        fields["weight"][i] = fields["cover"][i] = stump["weight"][0]
        fields["nan_mode"][i] = 0
    if split.size == 0:
        return flat
    L = n_leaves[split]
    m = L - 1
    got = _read_keys(numbers, trees, split,
                     [(key, m, dtype) for key, dtype in _SPLIT_KEYS]
                     + [(key, L, dtype) for key, dtype in _LEAF_KEYS])
    # every split's tree (its position in ``trees``), m and n_leaves
    owner = np.repeat(np.arange(split.size), m)
    m_of, L_of = m[owner], L[owner]

    def node_of(child):
        # a split index at or past m (child >= 0), a leaf index at or past L (~child for
        # child < 0); m_of >= 1 and L_of >= 2 keep each test false on the other side
        bad = (child >= m_of) | (~child >= L_of)
        return bad, np.where(child >= 0, child, m_of + ~child)

    bad_left, lc = node_of(got["left_child"])
    bad_right, rc = node_of(got["right_child"])
    if np.any(bad_left | bad_right):  # the first tree with one, its left side first
        j = int(owner[np.argmax(bad_left | bad_right)])
        in_tree = owner == j
        side, child = (("left_child", got["left_child"]) if np.any(bad_left & in_tree)
                       else ("right_child", got["right_child"]))
        first = child[np.argmax((bad_left if side == "left_child" else bad_right)
                                & in_tree)]
        raise ValueError(f"LightGBM tree {split[j]}: {side} {first} points outside its "
                         f"{int(m[j])} splits and {int(L[j])} leaves")
    decision = got["decision_type"]
    bad = (decision < 0) | (decision > 15)
    if np.any(bad):
        raise ValueError(f"LightGBM tree {split[int(owner[np.argmax(bad)])]}: "
                         "decision_type values must be in 0..15")
    is_cat = (decision & 1).astype(bool)
    missing_type = (decision >> 2) & 3
    if np.any(missing_type == 3):
        raise ValueError(f"LightGBM tree {split[int(owner[np.argmax(missing_type == 3)])]}"
                         ": decision_type has missing type 3 (unknown)")
    n_cat = np.bincount(owner, weights=is_cat, minlength=split.size).astype(np.int64)
    wrong = num_cat[split] != n_cat
    if np.any(wrong):
        j = int(np.argmax(wrong))
        raise ValueError(f"LightGBM tree {split[j]}: num_cat={int(num_cat[split[j]])} but "
                         f"{int(n_cat[j])} splits are categorical")
    threshold = got["threshold"]
    split_start = np.concatenate([[0], np.cumsum(m)])
    for j in np.flatnonzero(n_cat).tolist():
        a, b = split_start[j], split_start[j + 1]
        t = int(split[j])
        categories[t] = _categorical_sets(_block(trees, t), t, threshold[a:b], is_cat[a:b],
                                          int(n_cat[j]))

    # where these trees' splits and leaves go among all trees' nodes
    roots = offsets[split]
    at_split = np.arange(owner.size) + np.repeat(roots - split_start[:-1], m)
    leaf_start = np.concatenate([[0], np.cumsum(L)])
    at_leaf = np.arange(int(leaf_start[-1])) + np.repeat(roots + m - leaf_start[:-1], L)
    left, right, value, weight = (fields["left"], fields["right"], fields["value"],
                                  fields["weight"])
    left[at_split] = lc
    right[at_split] = rc
    fields["threshold"][at_split] = np.where(is_cat, np.nan, _zeroing_threshold(threshold))
    fields["feature"][at_split] = got["split_feature"]
    fields["missing_left"][at_split] = ((decision >> 1) & 1).astype(bool) & ~is_cat
    # categorical nodes: NAN_AS_ZERO marks LightGBM's C cast of the value to int (codes
    # in (-1, 0) are code 0), which the routing kernel applies
    fields["nan_mode"][at_split] = np.where(
        is_cat, NAN_AS_ZERO,
        _NAN_MODE_OF_MISSING_TYPE[np.minimum(missing_type, 2)])
    value[at_split, 0] = got["internal_value"]
    value[at_leaf, 0] = got["leaf_value"]
    weight[at_split] = got["internal_weight"]
    weight[at_leaf] = got["leaf_weight"]
    # LightGBM < 4.6 saves the root's internal_weight as 0 (fixed by LightGBM PR 6569)
    zero = roots[weight[roots] == 0]
    weight[zero] = weight[zero + left[zero]] + weight[zero + right[zero]]
    # LightGBM's own TreeSHAP (pred_contrib) weighs paths by row counts
    fields["cover"][at_split] = got["internal_count"]
    fields["cover"][at_leaf] = got["leaf_count"]
    fields["gain"][at_split] = got["split_gain"]
    return flat


def _read_linear(numbers, has, which, n_leaves, offsets, n_features):
    """The linear leaf models of the trees ``which`` (``is_linear=1``), as node arrays:
    per node ``count`` (terms; 0 elsewhere), ``const`` (``leaf_const``; NaN elsewhere)
    and ``linear_leaf`` (a leaf of a linear tree), and the terms' ``feature`` and
    ``coef`` in node order.

    LightGBM writes per tree ``leaf_const`` and ``num_features`` (one value per leaf)
    and ``leaf_features`` / ``leaf_coeff`` (the leaves' terms one after another, as many
    as ``num_features`` adds up to); every count and feature index is checked."""
    for key in LINEAR_TREE_KEYS:
        lacking = ~has[which, KEY_INDEX[key]]
        if np.any(lacking):
            raise ValueError(f"LightGBM tree {which[int(np.argmax(lacking))]} is linear "
                             f"(is_linear=1) but has no key {key!r}")
    L = n_leaves[which]
    const = numbers("leaf_const", which, L, float)
    n_terms = numbers("num_features", which, L, int)
    leaf_start = np.concatenate([[0], np.cumsum(L)])
    owner = np.repeat(np.arange(which.size), L)
    bad = (n_terms < 0) | (n_terms > n_features)
    if np.any(bad):
        k = int(np.argmax(bad))
        raise ValueError(f"LightGBM tree {which[owner[k]]}: num_features gives leaf "
                         f"{k - leaf_start[owner[k]]} {n_terms[k]} features; the model has "
                         f"{n_features}")
    per_tree = np.bincount(owner, weights=n_terms, minlength=which.size).astype(np.int64)
    feature = numbers("leaf_features", which, per_tree, int)
    coef = numbers("leaf_coeff", which, per_tree, float)
    bad = (feature < 0) | (feature >= n_features)
    if np.any(bad):
        term_owner = np.repeat(np.arange(which.size), per_tree)
        k = int(np.argmax(bad))
        raise ValueError(f"LightGBM tree {which[term_owner[k]]}: leaf_features has feature "
                         f"{feature[k]}, outside the model's {n_features} features")
    total = int(offsets[-1])
    # leaf k of a tree with L leaves is node L - 1 + k (a stump's leaf node 0)
    nodes = np.arange(int(leaf_start[-1])) + np.repeat(offsets[which] + L - 1
                                                       - leaf_start[:-1], L)
    count = np.zeros(total, np.int64)
    count[nodes] = n_terms
    node_const = np.full(total, np.nan)
    node_const[nodes] = const
    linear_leaf = np.zeros(total, bool)
    linear_leaf[nodes] = True
    return dict(count=count, const=node_const, linear_leaf=linear_leaf, feature=feature,
                coef=coef)


def _read_tree(block, t, version):
    """One ``Tree=t`` block -> node arrays in the layout of the module docstring (a tree
    without splits; :func:`_read_trees` reads the others, all at once)."""
    if "num_leaves" not in block:
        raise ValueError(f"LightGBM tree {t} has no key 'num_leaves' (model format {version})")
    n_leaves = int(_scalar(block, "num_leaves", t, int))
    if n_leaves != 1:
        raise ValueError(f"LightGBM tree {t}: num_leaves={n_leaves}")
    shrinkage = float(_scalar(block, "shrinkage", t, float))
    leaf_value = _numbers(block, "leaf_value", n_leaves, t, float)
    # a constant tree: LightGBM writes no split arrays and an empty leaf_weight
    count = block.get("leaf_count", "").split()
    weight = float(count[0]) if len(count) == 1 else 0.0
    return dict(left=[-1], right=[-1], feature=[-1], threshold=[np.nan],
                value=leaf_value.reshape(1, 1), weight=np.array([weight]),
                cover=np.array([weight]),
                missing_left=np.zeros(1, bool), nan_mode=np.zeros(1, np.uint8),
                gain=np.array([np.nan]), categories={}, shrinkage=shrinkage,
                n_leaves=1, internal_value=None)


def _zeroing_threshold(threshold):
    """Thresholds that give LightGBM's routing on the raw input value.

    LightGBM's predictor turns every input value with ``|x| <= kZeroThreshold`` (float32
    1e-35) into 0.0 before any tree sees it (``RowFunctionFromDenseMatric``). A split
    ``x <= t`` with ``t`` in ``[-kZeroThreshold, kZeroThreshold)`` (LightGBM puts bin
    bounds at exactly -kZeroThreshold) therefore sends that whole interval to the side
    0.0 goes; moving ``t`` to ``kZeroThreshold`` (``t >= 0``) or just below
    ``-kZeroThreshold`` (``t < 0``) does the same without touching any other value.
    """
    kz = float(np.float32(1e-35))
    near = (threshold >= -kz) & (threshold < kz)
    return np.where(near, np.where(threshold >= 0, kz, np.nextafter(-kz, -np.inf)), threshold)


def _categorical_sets(block, t, threshold, is_cat, num_cat):
    """{node: (codes, True, False)}: the bitset's codes go left, unlisted codes right."""
    for key in CATEGORICAL_TREE_KEYS:
        if key not in block:
            raise ValueError(f"LightGBM tree {t} has {num_cat} categorical splits but no "
                             f"key {key!r}")
    bounds = _numbers(block, "cat_boundaries", num_cat + 1, t, int)
    n_words = len(block["cat_threshold"].split())
    words = _numbers(block, "cat_threshold", n_words, t, int)
    if bounds[0] != 0 or bounds[-1] != n_words or np.any(np.diff(bounds) < 0):
        raise ValueError(f"LightGBM tree {t}: cat_boundaries {bounds[:8].tolist()} do not "
                         f"partition its {n_words} cat_threshold words")
    if np.any((words < 0) | (words > 0xFFFFFFFF)):
        raise ValueError(f"LightGBM tree {t}: cat_threshold words must be uint32")
    categories = {}
    for node in np.flatnonzero(is_cat):
        idx = threshold[node]
        if not (idx == int(idx) and 0 <= idx < num_cat):
            raise ValueError(f"LightGBM tree {t}: categorical split {node} has threshold "
                             f"{idx}, not an index below num_cat={num_cat}")
        seg = words[bounds[int(idx)]:bounds[int(idx) + 1]].astype("<u4")
        bits = np.unpackbits(seg.view(np.uint8), bitorder="little")
        categories[int(node)] = (np.flatnonzero(bits), True, False)
    return categories


# ---------------------------------------------------------------------- init score
def _learning_rate(params, flat, n_per_iter):
    """The model's learning rate: the parameters section, else a later tree's shrinkage."""
    if params is not None and "learning_rate" in params:
        return read_param(params, "learning_rate", None)
    if flat.n_leaves.shape[0] > n_per_iter:
        return float(flat.shrinkage[n_per_iter])
    return None


def _carries_init_score(r, learning_rate, params):
    """Whether a first-iteration tree holds LightGBM's init score.

    LightGBM adds it (``Tree::AddBias``, with ``boost_from_average`` and a non-zero init
    score) after shrinking the tree, and AddBias forces the tree's shrinkage to 1.0, which
    DART may rescale later. Rule: a first-iteration stump is a constant tree
    (``AsConstantTree(init score)``) and is all init score; a tree with splits carries it
    when ``boost_from_average`` is on and its shrinkage is not the learning rate (or the
    learning rate is 1, where the shrinkage cannot tell; a user-supplied ``init_score``
    is then indistinguishable, and moving the root value is still exact for predictions).
    """
    if r["n_leaves"] == 1:
        return True
    if read_param(params, "boost_from_average", "1", str) in ("0", "false"):
        return False
    if learning_rate is None:
        return r["shrinkage"] == 1.0
    return r["shrinkage"] != learning_rate or learning_rate == 1.0


def _init_score(r):
    """The init score inside a first-iteration tree.

    Rule: a stump is all init score (its leaf value). Otherwise the moved amount is the
    tree's root value, LightGBM's root ``internal_value`` = ``init + shrinkage * root
    output``. The root output ``-G / (H + lambda_l2)`` is ~0 because the init score is
    the constant that zeroes the gradient sum: up to float32 gradients for l2, binary
    (scale_pos_weight 1), cross_entropy, multiclass, multiclassova, poisson, gamma,
    tweedie; up to a few rows for l1 / quantile (a median). It is not ~0 for huber
    (mean init, clipped gradients) and binary with scale_pos_weight != 1 (the init
    ignores label weights): there the moved amount also holds ``shrinkage * root
    output`` and tree 0 is centred on its root. The text prints internal_value with 6
    significant digits; the hessian-weighted mean of the leaf values (full precision,
    the same quantity when no regularisation shrinks the leaves) is used when it agrees
    with the printed value to that precision, else the printed value.
    """
    if r["n_leaves"] == 1:
        return float(r["value"][0, 0])
    m = r["n_leaves"] - 1
    root = float(r["internal_value"][0])
    leaves = r["value"][m:, 0]
    w = r["weight"][m:]
    with np.errstate(all="ignore"):  # damaged weights give NaN, and the root is used
        mean = float(np.dot(w, leaves) / w.sum())
    if abs(mean - root) <= _PRINT_RTOL * abs(root):
        return mean
    return root
