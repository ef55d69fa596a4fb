"""The normal form: one set of flat node arrays for every supported tree ensemble.

Parsers (``treeimp/parsers/``) build a list of :class:`Tree` objects (local node
indices, one tree each) and hand them to :meth:`TreeEnsemble.from_trees`, which
validates them, puts every node value on one consistent scale and concatenates the
trees into flat arrays with offsets (no padding). Kernels only ever see those arrays;
nothing downstream knows which library a model came from.

Routing rules a node can express (each parser maps its library onto them):

* numeric split: ``x < threshold`` (``comparison == "<"``) or ``x <= threshold``
  goes left, after rounding ``x`` to float32 when ``round_float32`` is set;
* ``nan_mode`` per node: ``NAN_MISSING`` (NaN follows ``missing_left``),
  ``NAN_AS_ZERO`` (NaN is replaced by 0.0 and compared), ``NAN_ZERO_MISSING``
  (NaN and ``|x| <= float32(1e-35)``, LightGBM's kZeroThreshold, follow ``missing_left``);
* categorical split: the category code is ``int(x)`` (truncation); NaN and x < 0
  follow ``missing_left`` (with ``nan_mode == NAN_AS_ZERO``: NaN and x <= -1, so that
  x in (-1, 0) is code 0, as LightGBM casts); listed codes go the way
  ``category_left`` says; codes that are not listed, and with
  ``nan_mode == NAN_CAT_EXACT`` non-integer values and with
  ``nan_mode == NAN_CAT_NEGATIVE_UNLISTED`` negative values (XGBoost), go the way
  ``category_default_left`` says.

Linear leaves (LightGBM ``linear_tree=True``; :attr:`TreeEnsemble.linear_leaves`,
:class:`~treeimp.model.kernel_inputs.LinearLeaves`, None for every other model): leaf
``l`` may hold a linear model, its terms ``offset[l] : offset[l] + count[l]`` of the flat
arrays ``feature`` and ``coef`` (count 0 at internal nodes and constant leaves) and a
constant ``const[l]``. A row reaching such a leaf gets ``const[l] + sum_j coef_j x_j``
(an input with ``|x| <= float32(1e-35)`` read as 0.0, as LightGBM's predictor does) when
none of the leaf's features is NaN for it, else the leaf's ``value[l]`` (LightGBM's
``leaf_value``, which ``Tree::Predict`` falls back to). A leaf of a linear tree without
terms holds its constant in ``value``. Everything else about the tree (routing, weights,
internal values as weight-means of the children) is as for a constant tree, whose
leaves are the ``value`` fallbacks.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..kernels import route, structure
from ..kernels.nan_modes import (  # noqa: F401 (re-exported: parsers and tests import them here)
    NAN_AS_ZERO,
    NAN_CAT_EXACT,
    NAN_CAT_NEGATIVE_UNLISTED,
    NAN_MISSING,
    NAN_ZERO_MISSING,
)
from ..kernels.treeshap import path_features
from .fingerprint import ensemble_fingerprint
from .kernel_inputs import LeafSlots, LinearLeaves, Routing
from .kinds import BOOSTING, FOREST
from .routing import apply_ensemble, predict_ensemble

if TYPE_CHECKING:
    from .leaf_router import LeafRouter


MAX_FEATURES = 2**31 - 1  # feature indices are int32

IMPURITY_KINDS = ("variance", "other", "median")
# how the model's library matches a table's column names with its feature names:
# "exact" (same names, same order), "space_as_underscore" (stored with every " " of a
# name as "_", compared after that replacement), "by_name" (each feature reads the
# column of its name, wherever it stands)
COLUMN_NAME_RULES = ("exact", "space_as_underscore", "by_name")

# below this many nodes the structural passes of from_trees run on one thread: they
# are a few operations per node, less than starting the thread pool costs
SERIAL_NODES = 1 << 20
# below this many nodes, trees numbered with children after parents are checked and
# ordered in numpy (structure.ordered_trees, order_values_depths): a first call then
# compiles neither kernel; numpy's level-by-level passes are slower than the kernels,
# which on larger models is worth their compilation
NUMPY_STRUCTURE_NODES = 1 << 17


@dataclass
class Tree:
    """One tree as a parser produces it: node arrays with LOCAL child indices.

    Leaves have negative ``left`` and ``right`` (exactly one negative child is an
    error); ``feature`` is not read there (the normal form has -1 in all three at
    leaves). ``value`` has shape (n_nodes, value_dim); only leaf rows are used
    (internal values are recomputed). ``weight`` is the training weight / cover,
    ``impurity`` and ``gain`` are NaN where the library does not store them.
    ``categories`` maps a node index to ``(codes, goes_left, default_left)``: the listed
    integer codes, where each goes, and where unlisted codes go.
    """

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    value: np.ndarray
    weight: np.ndarray
    missing_left: np.ndarray | None = None
    nan_mode: np.ndarray | None = None
    impurity: np.ndarray | None = None
    gain: np.ndarray | None = None
    categories: dict = field(default_factory=dict)
    output: int = 0
    scale: float = 1.0
    learning_rate: float = 1.0
    stage: int | None = None  # boosting round; trees of one round share their gradients
    # the node cover TreeSHAP weighs paths by, where the library's own TreeSHAP uses
    # another quantity than ``weight`` (LightGBM: row counts, not hessian sums)
    cover: np.ndarray | None = None


@dataclass
class Objective:
    """The model's objective: a canonical loss name plus the constants that define it.

    Names and parameters are described in ``treeimp/model/losses.py``; ``link`` maps the raw
    margin to the prediction scale ("identity", "sigmoid", "softmax", "exp",
    "proba" for forest classifiers whose raw output already is a probability).
    """

    name: str
    params: dict = field(default_factory=dict)
    link: str = "identity"
    source: str = ""  # the library's own spelling, for messages

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"Objective({self.name!r}{', ' if params else ''}{params}, link={self.link!r})"


# The per-node Tree fields from_trees reads: (name, dtype they are gathered in, value
# used where a tree's field is None; None: the field is required).
_NODE_FIELDS = (
    ("left", np.int64, None),
    ("right", np.int64, None),
    ("feature", np.int64, None),
    ("threshold", np.float64, None),
    ("missing_left", np.bool_, False),
    ("nan_mode", np.uint8, 0),
    ("weight", np.float64, None),
    ("impurity", np.float64, np.nan),
    ("gain", np.float64, np.nan),
    ("value", np.float64, None),  # (n_nodes, value_dim)
    ("cover", np.float64, np.nan),
)
# the order in which from_trees reports the problems of one tree
_REPORT_ORDER = ("left", "right", "feature", "structure", "threshold", "missing_left",
                 "nan_mode", "weight", "impurity", "gain", "categories", "cover")


def _gather(trees, offsets, value_dim):
    """Every field of :data:`_NODE_FIELDS` of the trees concatenated as its dtype (each
    tree's array cast as ``astype`` casts it; a None field is its fill value), and the
    first tree whose field does not have shape (n_nodes,) per field, as
    ``{name: (tree, message)}``: that field is filled only before that tree.

    The arrays are filled tree by tree, all fields of a tree together: scikit-learn's
    node fields are strided views of one record array per tree, so this reads each
    tree's records once while they are in cache.
    """
    bounds = offsets.tolist()
    out, columns = {}, []
    for name, dtype, fill in _NODE_FIELDS:
        parts = [getattr(tree, name) for tree in trees]
        if fill is not None and all(a is None for a in parts):
            out[name] = np.full(bounds[-1], fill, dtype)
            continue
        if name == "value":  # checked by from_trees: (n_nodes, value_dim) once reshaped
            parts = [np.asarray(a).reshape(-1, value_dim) for a in parts]
        out[name] = np.empty((bounds[-1], value_dim) if name == "value" else bounds[-1], dtype)
        columns.append((name, fill, parts, out[name]))
    problems = {}
    for t_idx in range(len(trees)):
        lo, hi = bounds[t_idx], bounds[t_idx + 1]
        for name, fill, parts, dest in columns:
            a = parts[t_idx]
            if a is None and fill is not None:
                dest[lo:hi] = fill
            elif name not in problems:
                a = np.asarray(a)
                if name != "value" and a.shape != (hi - lo,):
                    problems[name] = (t_idx, f"tree field {name!r} has shape {a.shape}, "
                                             f"expected ({hi - lo},)")
                else:
                    dest[lo:hi] = a
    return out, problems


def _categorical_splits(tables, offsets, leaf):
    """The category arrays of the normal form (``is_categorical``, ``category_offset``,
    ``category_count``, ``category_default_left``, ``category_codes``,
    ``category_left``) from the trees' ``categories`` dicts, one per tree in ``tables``
    (codes sorted within a node), and
    the first problem as ``(tree, message)`` (None if none). ``leaf``: per node of the
    concatenated trees, whether it is a leaf."""
    total = leaf.shape[0]
    is_cat = np.zeros(total, np.bool_)
    cat_offset = np.zeros(total, np.int64)
    cat_count = np.zeros(total, np.int32)
    cat_default_left = np.zeros(total, np.bool_)
    codes_parts, goes_left_parts = [], []
    n_codes = 0
    for t_idx, table in enumerate(tables):
        if not table:
            continue
        o, n = int(offsets[t_idx]), int(offsets[t_idx + 1] - offsets[t_idx])
        for node, (codes, goes_left, default_left) in sorted(table.items()):
            node = int(node)
            if not 0 <= node < n or leaf[o + node]:
                return None, (t_idx, f"tree {t_idx}: categorical split on a non-split node "
                                     f"{node}")
            codes = np.asarray(codes, dtype=np.int64).ravel()
            goes_left = np.broadcast_to(np.asarray(goes_left, dtype=np.bool_), codes.shape)
            order = np.argsort(codes, kind="stable")
            codes, goes_left = codes[order], goes_left[order]
            if codes.size and (codes[0] < 0 or np.any(np.diff(codes) == 0)):
                return None, (t_idx, f"tree {t_idx} node {node}: category codes must be "
                                     "distinct and >= 0")
            is_cat[o + node] = True
            cat_offset[o + node] = n_codes
            cat_count[o + node] = codes.size
            cat_default_left[o + node] = bool(default_left)
            codes_parts.append(codes)
            goes_left_parts.append(goes_left)
            n_codes += codes.size
    category_codes = (np.concatenate(codes_parts) if codes_parts
                      else np.zeros(0, np.int64)).astype(np.int64)
    category_left = (np.concatenate(goes_left_parts) if goes_left_parts
                     else np.zeros(0, np.bool_)).astype(np.bool_)
    return (is_cat, cat_offset, cat_count, cat_default_left, category_codes,
            category_left), None


def _check_settings(kind, comparison, gain_kind, impurity_kind, n_features, n_outputs):
    """Validate :meth:`TreeEnsemble.from_trees`' settings; (n_features, n_outputs) as
    ints."""
    if kind not in (FOREST, BOOSTING):
        raise ValueError(f"kind must be 'forest' or 'boosting', got {kind!r}")
    if comparison not in ("<", "<="):
        raise ValueError(f"comparison must be '<' or '<=', got {comparison!r}")
    if gain_kind not in ("impurity", "gain"):
        raise ValueError(f"gain_kind must be 'impurity' or 'gain', got {gain_kind!r}")
    if impurity_kind not in IMPURITY_KINDS:
        raise ValueError(f"impurity_kind must be one of {IMPURITY_KINDS}, got "
                         f"{impurity_kind!r}")
    n_features = int(n_features)
    n_outputs = int(n_outputs)
    if n_features < 1 or n_outputs < 1:
        raise ValueError(
            f"n_features and n_outputs must be >= 1, got {n_features} and {n_outputs}"
        )
    if n_features > MAX_FEATURES:
        raise ValueError(f"n_features is {n_features}; feature indices are int32, so at "
                         f"most {MAX_FEATURES} features are supported")
    return n_features, n_outputs


def _structure_message(t_idx, problem, bad, n, n_features):
    """The message for a problem code of ``kernels.structure.check_trees``."""
    if problem == 1:
        return f"tree {t_idx} node {bad} has exactly one child"
    if problem == 2:
        return f"tree {t_idx} has a child index >= its {n} nodes"
    if problem == 3:
        return f"tree {t_idx} splits on feature {bad} but the model has {n_features} features"
    if problem == 4:
        return (f"tree {t_idx} is not a tree: node {bad} is reached twice (cycle or shared "
                "child)")
    return f"tree {t_idx} has {bad} nodes that the root never reaches"


@dataclass(frozen=True, eq=False, kw_only=True)
class TreeEnsemble:
    """A validated tree ensemble in flat-array normal form; immutable.

    Build it with :meth:`from_trees` (parsers do this) or get it from
    :func:`treeimp.parse` / :func:`treeimp.load`; derive variants with :meth:`rounds`
    and :meth:`with_missing_value` (``dataclasses.replace`` underneath). Every array
    field is read-only. Equality is identity (``eq=False``: two ensembles are never
    compared array by array); :attr:`fingerprint` tells whether two ensembles describe
    the same model.

    Derived structures are cached properties, built on first read and kept on the
    ensemble: :attr:`node_tree`, :attr:`postorder`, :attr:`tree_depths`,
    :attr:`leaf_slots`, :attr:`routing`, :attr:`splits`, :attr:`path_features`,
    :attr:`tree_learning_rate`, :attr:`fingerprint`. They are
    ``functools.cached_property``, which stores into the instance ``__dict__`` directly
    (not through the frozen ``__setattr__``); :meth:`_cache` is the one other place that
    writes there. Pickles leave them out (rebuilt on first read after loading).
    """

    # -- settings
    kind: str  # "forest" (trees averaged) or "boosting" (trees added)
    library: str  # "sklearn", "xgboost", "lightgbm", "catboost" or "" (built by hand)
    n_features: int
    n_outputs: int
    value_dim: int  # values per node: 1, or n_outputs for vector-leaf trees
    comparison: str  # "<" or "<=": how a numeric split sends x left of its threshold
    round_float32: bool  # x is rounded to float32 before it is compared
    gain_kind: str  # what ``gain`` holds: "impurity" (decrease) or "gain" (the library's)
    impurity_kind: str  # one of IMPURITY_KINDS: what ``impurity`` measures
    base_score: np.ndarray  # (n_outputs,) margin before the first tree
    objective: Objective
    feature_names: list | None
    feature_categories: list | None  # per feature None or its category labels (code k)
    category_as_code: np.bool_ | np.ndarray  # per feature (or one for all): whether a
    # pandas 'category' column is read by its codes (True) or its label values (False)
    category_values: list | None  # per feature None or the value -> code table
    classes: np.ndarray | None  # class labels of a classifier
    sparse_absent: float  # what an absent sparse entry is: 0.0 or NaN
    missing_value: float  # an input value routed as missing (NaN: only NaN)
    column_names: str  # one of COLUMN_NAME_RULES: how a table's columns are matched
    offset_replaces_base: bool  # a per-row offset replaces base_score (XGBoost)
    base_in_first_round: bool  # the base score is folded into round 0's trees (LightGBM)
    # -- per tree (length n_trees; tree_offsets n_trees + 1)
    tree_offsets: np.ndarray  # int64: tree t is nodes tree_offsets[t]:tree_offsets[t + 1]
    tree_output: np.ndarray  # int32: the first output the tree writes
    tree_scale: np.ndarray  # float64: factor on the tree's values (XGBoost DART weights)
    tree_stage: np.ndarray  # int64: boosting round (one round's trees share a margin)
    # float64 learning rates, or a picklable zero-argument callable returning them,
    # resolved on the first read of :attr:`tree_learning_rate` (XGBoost model files
    # whose configuration does not state eta: ``parsers/xgb_eta.py``)
    tree_learning_rate_source: np.ndarray | Callable[[], np.ndarray]
    # -- per node (length n_nodes, all trees concatenated, child indices GLOBAL)
    left: np.ndarray  # int32 child index, -1 at leaves
    right: np.ndarray  # int32 child index, -1 at leaves
    feature: np.ndarray  # int32 split feature, -1 at leaves
    threshold: np.ndarray  # float64 numeric split threshold
    missing_left: np.ndarray  # bool: where a missing value goes
    nan_mode: np.ndarray  # uint8: NAN_* (module docstring)
    is_categorical: np.ndarray  # bool: a categorical split
    category_offset: np.ndarray  # int64: the node's first entry in category_codes
    category_count: np.ndarray  # int32: the node's number of listed codes
    category_default_left: np.ndarray  # bool: where unlisted codes go
    value: np.ndarray  # float64 (n_nodes, value_dim); internal nodes: weight-mean of
    # their children
    weight: np.ndarray  # float64 training weight / cover
    cover: np.ndarray  # float64 TreeSHAP cover where a library's own TreeSHAP uses
    # another quantity than ``weight`` (LightGBM: row counts); NaN elsewhere
    impurity: np.ndarray  # float64, NaN where the library does not store it
    gain: np.ndarray  # float64, NaN where the library does not store it
    # -- flat category arrays (codes sorted within a node)
    category_codes: np.ndarray  # int64
    category_left: np.ndarray  # bool: where each listed code goes
    # -- how input values are read
    hashed_features: tuple = ()  # features whose values go through value_hasher
    value_hasher: Callable | None = None
    leaf_router: LeafRouter | None = None  # rows routed by the library's leaf indices
    target_classes: list | None = None  # multi-output classifiers: classes per target
    # linear leaf models (module docstring), node arrays GLOBAL like the others; None: all
    # leaves are constants
    linear_leaves: LinearLeaves | None = None

    def __post_init__(self):
        self._freeze_arrays()
        rates = self.tree_learning_rate_source
        if not callable(rates) and np.shape(rates) != (self.n_trees,):
            raise ValueError(f"tree_learning_rate has shape {np.shape(rates)}; expected one "
                             f"rate for each of {self.n_trees} trees")

    def _cache(self, name, value):
        """Store ``value`` as the cached property ``name`` (a structure the builder
        already has, so it is not computed again)."""
        self.__dict__[name] = value

    def _freeze_arrays(self):
        """Make every array field (and the arrays of its list fields) read-only."""
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                v.setflags(write=False)
            elif f.name in ("category_values", "target_classes") and v is not None:
                for a in v:
                    if isinstance(a, np.ndarray):
                        a.setflags(write=False)
            elif f.name == "linear_leaves" and v is not None:
                for a in v:
                    a.setflags(write=False)

    def __getstate__(self):
        """Pickled without the cached derived structures."""
        return {k: v for k, v in self.__dict__.items() if k not in _CACHED}

    def __setstate__(self, state):
        """Unpickled with read-only arrays again (pickle does not keep the flag), so
        kernels see the same array types as for a parsed ensemble."""
        state.setdefault("column_names", "exact")  # pickled before the field existed
        state.setdefault("linear_leaves", None)
        self.__dict__.update(state)
        self._freeze_arrays()

    # ------------------------------------------------------------------ building
    @classmethod
    def from_trees(
        cls,
        trees: list[Tree],
        *,
        kind: str,
        n_features: int,
        n_outputs: int,
        comparison: str,
        round_float32: bool,
        base_score=None,
        objective: Objective | None = None,
        feature_names=None,
        feature_categories=None,
        category_as_code=True,
        category_values=None,
        classes=None,
        library: str = "",
        gain_kind: str = "gain",
        impurity_kind: str = "variance",
        sparse_absent: float = 0.0,
        missing_value: float = np.nan,
        column_names: str = "exact",
        offset_replaces_base: bool = False,
        base_in_first_round: bool = False,
        value_hasher=None,
        hashed_features=None,
        leaf_router=None,
        target_classes=None,
        tree_learning_rate=None,
    ) -> TreeEnsemble:
        """Validate per-tree arrays and concatenate them into the normal form.

        ``gain_kind`` says what ``mdi`` reads: "impurity" (sklearn style weighted
        impurity decrease from ``impurity`` and ``weight``) or "gain" (the library's
        split gain).

        ``impurity_kind`` says what the stored in-sample ``impurity`` of a regression
        tree is: "variance" (the variance about the node mean, which ``value`` holds),
        "other" (another criterion's impurity, e.g. a Poisson deviance; values are still
        node means) or "median" (values are node medians, impurities absolute
        deviations: the variance-based ufi / penalized Gini are undefined).

        How input is read (see ``treeimp/inputs/rows.py``), per feature:

        * ``category_as_code`` (bool for every feature, or one per feature): True where a pandas
          'category' column is routed as category codes (its labels mapped to their
          positions in ``feature_categories[j]`` when the model stores those, else the
          column's own codes: XGBoost, LightGBM, HistGradientBoosting categorical
          features); False where it is read as its label VALUES, as ``np.asarray`` of
          the column would give them (scikit-learn's numeric features).
        * ``category_values`` (None, or per feature None or a 1-D array of distinct
          finite numbers): where given, a NUMERIC input value on feature j is replaced by
          its position in ``category_values[j]`` before routing, and a value not listed
          becomes NaN (missing). For categorical features whose codes are positions
          in a table of arbitrary numbers (HistGradientBoosting categories that are
          negative, fractional or >= 65536). A 'category' column on such a feature is
          mapped by label through ``feature_categories`` instead.
        * ``sparse_absent``: the value an entry ABSENT from a scipy.sparse input stands
          for: NaN (missing) for XGBoost, 0.0 for LightGBM and scikit-learn, as each
          library reads its own sparse input. Stored entries are read as they are.
        * ``missing_value``: a number read as missing (XGBoost's ``missing``): an input
          value x with float32(x) == float32(missing_value), XGBoost's comparison, is
          routed as NaN. NaN (the default): only NaN is missing.
        * ``hashed_features`` (feature indices) with ``value_hasher`` (a picklable
          callable: 1-D array of raw values -> float64 array, NaN for missing): the raw
          values of these features (strings, integers, 'category' labels) are first
          replaced by ``value_hasher(values)``, then looked up in ``category_values``
          (CatBoost's one-hot features, whose splits store the hash of a value).

        ``column_names`` (one of :data:`COLUMN_NAME_RULES`): how the library matches a
        table's column names with ``feature_names``, which treeimp then does too.

        ``offset_replaces_base``: a per-row offset (``base_margin=``) REPLACES the base
        score (XGBoost: ``predict(base_margin=b)`` is b + trees) instead of being added
        to it (LightGBM's ``init_score``: raw score + offset; its base is in the trees).
        ``base_in_first_round``: the library keeps the base score inside the first
        round's trees (LightGBM's ``boost_from_average``), so a round range that does
        not start at 0 leaves it out, as that library's predict does (``rounds``).

        ``leaf_router`` (a :class:`treeimp.model.leaf_router.LeafRouter`): rows are routed by
        the library's own leaf indices (splits treeimp cannot evaluate, e.g. CatBoost's
        target statistics); see ``treeimp/model/leaf_router.py``.

        ``target_classes``: multi-output classifiers, each target's classes (a list of
        arrays; the outputs are their class probabilities side by side); None otherwise.

        ``tree_learning_rate``: per-tree learning rates, or a picklable zero-argument
        callable that returns them when they are first read (see
        :attr:`tree_learning_rate_source`), instead of each Tree's ``learning_rate``.
        """
        _check_settings(kind, comparison, gain_kind, impurity_kind, n_features, n_outputs)
        if len(trees) == 0:
            raise ValueError("the model has no trees")
        value_dim = None
        sizes = []
        for t_idx, tree in enumerate(trees):
            n = len(tree.left)
            if n == 0:
                raise ValueError(f"tree {t_idx} has no nodes")
            sizes.append(n)
            vd = np.asarray(tree.value).reshape(n, -1).shape[1]
            if value_dim is None:
                value_dim = vd
            elif vd != value_dim:
                raise ValueError(
                    f"tree {t_idx} has {vd} values per node but tree 0 has {value_dim}"
                )
            if not 0 <= tree.output or tree.output + vd > int(n_outputs):
                raise ValueError(
                    f"tree {t_idx} writes outputs {tree.output}..{tree.output + vd - 1} "
                    f"but the model has {n_outputs} outputs"
                )
        offsets = np.zeros(len(trees) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum(sizes)
        # Every field is gathered over all trees and converted once. Problems are found
        # field by field, but reported as a tree-by-tree pass would meet them: the
        # lowest tree first, within a tree in the order of _REPORT_ORDER.
        fields, bad_shapes = _gather(trees, offsets, value_dim)
        return cls.from_arrays(
            offsets, fields, [tree.categories for tree in trees],
            tree_output=np.array([t.output for t in trees], np.int32),
            tree_scale=np.array([t.scale for t in trees], np.float64),
            tree_learning_rate=(np.array([t.learning_rate for t in trees], np.float64)
                                if tree_learning_rate is None else tree_learning_rate),
            tree_stage=_stages(trees), bad_shapes=bad_shapes,
            kind=kind, n_features=n_features, n_outputs=n_outputs, comparison=comparison,
            round_float32=round_float32, base_score=base_score, objective=objective,
            feature_names=feature_names, feature_categories=feature_categories,
            category_as_code=category_as_code, category_values=category_values,
            classes=classes, library=library, gain_kind=gain_kind,
            impurity_kind=impurity_kind, sparse_absent=sparse_absent,
            missing_value=missing_value, column_names=column_names,
            offset_replaces_base=offset_replaces_base,
            base_in_first_round=base_in_first_round, value_hasher=value_hasher,
            hashed_features=hashed_features, leaf_router=leaf_router,
            target_classes=target_classes)

    @classmethod
    def from_arrays(cls, offsets, fields, categories, *, tree_output, tree_scale,
                    tree_learning_rate, tree_stage, bad_shapes=None, ordered=None,
                    ordered_values=None, **meta) -> TreeEnsemble:
        """The normal form from per-tree node arrays already concatenated, as
        :meth:`from_trees` gathers them (and validated the same way).

        ``offsets``: tree t is ``offsets[t]:offsets[t + 1]``; ``fields``: every name of
        :data:`_NODE_FIELDS` as one array of its dtype (``value``: (n_nodes,
        value_dim)), child indices LOCAL to their tree, a negative child marking a
        leaf; ``categories``: per tree, a dict as :attr:`Tree.categories`; the per-tree
        arrays as the ensemble's ``tree_*`` fields. ``meta``: the keyword arguments of
        :meth:`from_trees`, and ``linear_leaves``: None or a dict of per-node ``count``
        and ``const`` and per-term ``feature`` and ``coef`` (terms in node order), the
        linear leaf models of the module docstring, checked here. ``bad_shapes``:
        ``{field: (tree, message)}`` of fields with a wrong shape from the tree they
        start (from_trees' gathering). ``ordered``: the caller's
        ``structure.ordered_trees(offsets, left, right, feature, MAX_FEATURES)`` of these
        trees (not None), which is not computed again; its splits' features are checked
        against ``n_features`` here (a feature out of range: checked and reported as
        without it). ``ordered_values``: with ``ordered``, the caller's
        ``structure.order_values_depths(offsets, *ordered[:2], weight, value)`` of these
        trees, ``fields["value"]`` already filled by it (the caller's one pass,
        ``structure.ordered_values_depths``), which is not computed again.
        """

        bad_shapes = bad_shapes or {}
        kind, comparison = meta["kind"], meta["comparison"]
        gain_kind = meta.get("gain_kind", "gain")
        impurity_kind = meta.get("impurity_kind", "variance")
        n_features, n_outputs = _check_settings(kind, comparison, gain_kind, impurity_kind,
                                                meta["n_features"], meta["n_outputs"])
        n_trees = offsets.shape[0] - 1
        if n_trees == 0:
            raise ValueError("the model has no trees")
        sizes = np.diff(offsets)
        if np.any(sizes == 0):
            raise ValueError(f"tree {int(np.argmax(sizes == 0))} has no nodes")
        value_dim = fields["value"].shape[1]
        bad_out = (tree_output < 0) | (tree_output + value_dim > n_outputs)
        if np.any(bad_out):
            t_idx = int(np.argmax(bad_out))
            o = int(tree_output[t_idx])
            raise ValueError(f"tree {t_idx} writes outputs {o}..{o + value_dim - 1} "
                             f"but the model has {n_outputs} outputs")
        problems = [(t_idx, _REPORT_ORDER.index(name), message)  # (tree, rank, message)
                    for name, (t_idx, message) in bad_shapes.items()]
        # the structure is checked on the trees before the first whose left, right or
        # feature has the wrong shape
        n_ok = min([t for t, rank, _ in problems if rank < _REPORT_ORDER.index("structure")],
                   default=n_trees)
        end = offsets[n_ok]
        # trees numbered with children after parents (XGBoost, scikit-learn, ...) are
        # checked and converted in numpy (up to NUMPY_STRUCTURE_NODES, or by the caller);
        # the kernel finds the problem of the others or converts them
        if ordered is not None and (problems or n_ok < n_trees
                                    or not np.all(ordered[2] < n_features)):
            ordered = None  # the check below finds and reports the problem
        if ordered is None:
            ordered_values = None
        if ordered is None and end < NUMPY_STRUCTURE_NODES:
            ordered = structure.ordered_trees(offsets[:n_ok + 1], fields["left"][:end],
                                              fields["right"][:end], fields["feature"][:end],
                                              n_features)
        if ordered is not None:
            left, right, feature = ordered
            problem = np.zeros(0, np.int64)
            if end >= NUMPY_STRUCTURE_NODES and ordered_values is None:
                ordered = None  # the values below in the kernels, as for other large trees
        else:
            serial = offsets[-1] < SERIAL_NODES
            check_trees = structure.check_trees_serial if serial else structure.check_trees
            problem, bad, left, right, feature = check_trees(
                offsets[:n_ok + 1], fields["left"][:end], fields["right"][:end],
                fields["feature"][:end], n_features)
        if np.any(problem):
            t_idx = int(np.argmax(problem != 0))
            problems.append((t_idx, _REPORT_ORDER.index("structure"),
                             _structure_message(t_idx, int(problem[t_idx]), int(bad[t_idx]),
                                                int(sizes[t_idx]), n_features)))
        cats, bad = _categorical_splits(categories[:n_ok], offsets, left < 0)
        if bad is not None:
            problems.append((bad[0], _REPORT_ORDER.index("categories"), bad[1]))
        if problems:
            raise ValueError(min(problems)[2])
        is_cat, cat_offset, cat_count, cat_default_left, category_codes, category_left = cats
        threshold, missing_left, nan_mode, weight, impurity, gain, value = (
            fields[name] for name in ("threshold", "missing_left", "nan_mode", "weight",
                                      "impurity", "gain", "value"))

        problem = structure.check_values_thresholds(left, value, threshold, is_cat)
        if problem == 1:
            raise ValueError("the model has a leaf whose value is not finite")
        if problem == 2:
            raise ValueError("the model has a numeric split with a NaN threshold")
        if np.any(weight < 0) or not np.all(np.isfinite(weight)):
            raise ValueError("node training weights must be finite and >= 0")

        # internal node values are filled (in place, before the arrays become
        # read-only) bottom up in the post-order the ensemble then keeps
        # (with the trees' depths, which routing reads: in numpy for ordered trees, in
        # one kernel for other small ensembles)
        depths = None
        if ordered_values is not None:
            postorder, *depths = ordered_values
        elif ordered is not None:
            postorder, *depths = structure.order_values_depths(offsets, left, right, weight,
                                                               value)
        elif offsets[-1] < SERIAL_NODES:
            postorder, *depths = structure.order_values_depths_serial(
                offsets, left, right, weight, value)
        else:
            postorder = structure.postorder(offsets, left, right)
            structure.fill_internal_values(postorder, offsets, left, right, weight, value)
        value_hasher = meta.get("value_hasher")
        hashed = _hashed_features(meta.get("hashed_features"), value_hasher, n_features)
        leaf_router = meta.get("leaf_router")
        if leaf_router is not None:
            leaf_router.check(int(offsets[-1]))
        tc = meta.get("target_classes")
        linear = _linear_leaves(meta.get("linear_leaves"), offsets, left < 0, n_features)
        rates = tree_learning_rate
        if not callable(rates):
            rates = np.asarray(rates, np.float64)
        ens = cls(
            kind=kind,
            library=meta.get("library", ""),
            n_features=n_features,
            n_outputs=n_outputs,
            value_dim=int(value_dim),
            comparison=comparison,
            round_float32=bool(meta["round_float32"]),
            gain_kind=gain_kind,
            impurity_kind=impurity_kind,
            base_score=_base_score(meta.get("base_score"), n_outputs),
            objective=(meta["objective"] if meta.get("objective") is not None
                       else Objective("squared_error")),
            feature_names=_names(meta.get("feature_names"), n_features),
            feature_categories=_feature_categories(meta.get("feature_categories"),
                                                   n_features),
            category_as_code=_per_feature_flags(meta.get("category_as_code", True),
                                                n_features),
            category_values=_category_values(meta.get("category_values"), n_features),
            # copied: the ensemble's arrays become read-only, the model's must not
            classes=None if meta.get("classes") is None else np.array(meta["classes"]),
            sparse_absent=_absent_value(meta.get("sparse_absent", 0.0)),
            missing_value=_missing_value(meta.get("missing_value", np.nan)),
            column_names=_column_names(meta.get("column_names", "exact")),
            offset_replaces_base=bool(meta.get("offset_replaces_base", False)),
            base_in_first_round=bool(meta.get("base_in_first_round", False)),
            tree_offsets=offsets,
            tree_output=np.asarray(tree_output, np.int32),
            tree_scale=np.asarray(tree_scale, np.float64),
            tree_learning_rate_source=rates,
            tree_stage=np.asarray(tree_stage, np.int64),
            left=left,
            right=right,
            feature=feature,
            threshold=threshold,
            missing_left=missing_left,
            nan_mode=nan_mode,
            is_categorical=is_cat,
            category_offset=cat_offset,
            category_count=cat_count,
            category_default_left=cat_default_left,
            category_codes=category_codes,
            category_left=category_left,
            value=value,
            weight=weight,
            cover=fields["cover"],
            impurity=impurity,
            gain=gain,
            hashed_features=hashed,
            value_hasher=value_hasher if hashed else None,
            leaf_router=leaf_router,
            target_classes=None if tc is None else [np.array(c) for c in tc],
            linear_leaves=linear,
        )
        ens._cache("postorder", _read_only(postorder))
        if depths is not None:
            ens._cache("tree_depths", _read_only(np.array(depths)))
        return ens

    # ------------------------------------------------------------------ rounds
    @property
    def n_rounds(self) -> int:
        """Boosting rounds (trees of one round share a stage; a forest: one per tree)."""
        return int(np.count_nonzero(np.diff(self.tree_stage))) + 1

    def rounds(self, start, stop) -> TreeEnsemble:
        """The ensemble of boosting rounds ``start .. stop - 1`` (XGBoost's
        ``iteration_range=(start, stop)``; ``stop == 0``: to the last round).

        The margin is then what the library's own predict computes for that range, so
        held-out gradients of a range that does not start at 0 are taken at that
        margin: base score + the selected trees for XGBoost
        (``predict(iteration_range=(start, stop))``) and scikit-learn; for LightGBM,
        whose base score is part of the first round's trees, the selected trees alone
        when ``start > 0`` (``predict(start_iteration=start, num_iteration=stop -
        start)``; ``base_in_first_round``). Only for boosting models (a forest's trees
        are averaged, not added).
        """
        if self.kind != BOOSTING:
            raise ValueError("iteration_range selects boosting rounds; a forest's trees "
                             "are averaged, not added in rounds")
        start, stop = check_iteration_range((start, stop), self.n_rounds)
        if (start, stop) == (0, self.n_rounds):
            return self
        router = self.leaf_router
        if router is not None:  # the router numbers the leaves of every tree
            raise ValueError(f"iteration_range=({start}, {stop}) cannot select rounds of a "
                             f"model routed by {router.description}; it is explained with "
                             f"all its {self.n_rounds} rounds")
        first = np.concatenate([[0], np.flatnonzero(np.diff(self.tree_stage)) + 1,
                                [self.n_trees]])
        zero_base = start > 0 and self.base_in_first_round
        return self._tree_slice(int(first[start]), int(first[stop]),
                                **({"base_score": np.zeros_like(self.base_score)}
                                   if zero_base else {}))

    def start_margin(self, offset):
        """Every row's margin before the first tree given per-row offsets (n, n_outputs):
        the offset itself where it replaces the base score (XGBoost), else base score
        + offset."""
        if self.offset_replaces_base:
            return np.ascontiguousarray(offset, dtype=np.float64)
        return np.ascontiguousarray(offset + self.base_score)

    def with_missing_value(self, missing) -> TreeEnsemble:
        """A copy sharing the trees (and their derived structures) whose input value
        ``missing`` is routed as NaN."""
        out = dataclasses.replace(self, missing_value=_missing_value(missing))
        for name in _STRUCTURE_CACHES:  # none of them reads missing_value
            if name in self.__dict__:
                out._cache(name, self.__dict__[name])
        return out

    def _tree_slice(self, t0, t1, **changes):
        """Trees t0 .. t1 - 1 as an ensemble of their own (node indices renumbered);
        ``changes``: other fields to replace."""
        o0, o1 = int(self.tree_offsets[t0]), int(self.tree_offsets[t1])
        c0 = int(self.category_count[:o0].sum())
        c1 = int(self.category_count[:o1].sum())
        new = {name: getattr(self, name)[o0:o1].copy() for name in _NODE_ARRAYS}
        for name in ("left", "right"):
            a = new[name]
            new[name] = np.where(a >= 0, a - o0, a)
        new["category_offset"] = np.where(new["is_categorical"], new["category_offset"] - c0,
                                          0)
        new["category_codes"] = self.category_codes[c0:c1].copy()
        new["category_left"] = self.category_left[c0:c1].copy()
        lin = self.linear_leaves
        if lin is not None:
            f0, f1 = int(lin.count[:o0].sum()), int(lin.count[:o1].sum())
            new["linear_leaves"] = LinearLeaves(
                lin.offset[o0:o1] - f0, lin.count[o0:o1].copy(), lin.const[o0:o1].copy(),
                lin.feature[f0:f1].copy(), lin.coef[f0:f1].copy())
        for name in _TREE_ARRAYS:
            new[name] = getattr(self, name)[t0:t1].copy()
        new["tree_stage"] = new["tree_stage"] - new["tree_stage"][0]
        new["tree_offsets"] = self.tree_offsets[t0:t1 + 1] - o0
        rates = self.tree_learning_rate_source
        if callable(rates) and "tree_learning_rate" not in self.__dict__:
            new["tree_learning_rate_source"] = RateSlice(rates, t0, t1)  # still lazy
        else:
            new["tree_learning_rate_source"] = self.tree_learning_rate[t0:t1].copy()
        return dataclasses.replace(self, **new, **changes)

    # ------------------------------------------------------------------ properties
    @property
    def n_trees(self) -> int:
        return len(self.tree_offsets) - 1

    @property
    def n_nodes(self) -> int:
        return int(self.tree_offsets[-1])

    @property
    def is_leaf(self) -> np.ndarray:
        return self.left < 0

    @functools.cached_property
    def node_tree(self) -> np.ndarray:
        """Tree index of every node (int64, read-only)."""
        return _read_only(np.repeat(np.arange(self.n_trees), np.diff(self.tree_offsets)))

    @functools.cached_property
    def postorder(self) -> np.ndarray:
        """Every node, children before parents, tree by tree (int64, read-only)."""

        order = (structure.postorder_serial if self.n_nodes < SERIAL_NODES
                 else structure.postorder)
        return _read_only(order(self.tree_offsets, self.left, self.right))

    @functools.cached_property
    def leaf_slots(self) -> LeafSlots:
        """Where accumulated node statistics keep each leaf (:class:`LeafSlots`: internal
        nodes have none, their statistics are sums of their leaves'), read-only."""
        node = np.flatnonzero(self.left < 0).astype(np.int64)
        slot = np.full(self.n_nodes, -1, np.int64)
        slot[node] = np.arange(node.shape[0])
        start = np.searchsorted(node, self.tree_offsets).astype(np.int64)
        return LeafSlots(_read_only(slot), _read_only(node), _read_only(start))

    @functools.cached_property
    def tree_depths(self) -> np.ndarray:
        """Per tree, in edges: the depth of its deepest leaf (row 0) and of its
        shallowest leaf (row 1) (int64 (2, n_trees), read-only)."""
        depths = (structure.tree_depths_serial if self.n_nodes < SERIAL_NODES
                  else structure.tree_depths)
        return _read_only(np.array(depths(self.tree_offsets, self.left, self.right)))

    @functools.cached_property
    def routing(self) -> Routing:
        """The routing kernels' inputs (:class:`Routing`), read-only."""

        depth, min_depth = self.tree_depths
        nodes = tuple(_read_only(a) for a in _node_arrays(self))
        return Routing(*nodes, _read_only(_plain_trees(self, nodes[-1])), _read_only(depth),
                       _read_only(min_depth), self.category_offset, self.category_count,
                       self.category_codes, self.category_left)

    @functools.cached_property
    def splits(self):
        """The split index the measures read (``treeimp.measures.formulas._Splits``),
        built once by the builder the measures layer registers (:func:`register_derived`):
        the stage that owns the structure owns its code, the ensemble keeps it."""
        return _derived_builder("splits")(self)

    @functools.cached_property
    def path_features(self) -> np.ndarray:
        """Per tree, the most distinct features on a root-to-leaf path (TreeSHAP's
        quadrature size), read-only."""

        return _read_only(path_features(self.tree_offsets, self.left, self.right,
                                        self.feature, self.n_features))

    @functools.cached_property
    def tree_learning_rate(self) -> np.ndarray:
        """Per tree, the learning rate its values were shrunk by (float64, read-only):
        :attr:`tree_learning_rate_source`, called on first read when it is a callable."""
        rates = self.tree_learning_rate_source
        if not callable(rates):
            return rates
        out = np.array(rates(), dtype=np.float64)
        if out.shape != (self.n_trees,):
            raise ValueError(f"the learning-rate source returned shape {out.shape}; "
                             f"expected one rate for each of {self.n_trees} trees")
        bad = ~np.isfinite(out) | (out <= 0)
        if np.any(bad):
            raise ValueError(f"learning rate of tree {int(np.argmax(bad))} must be > 0, got "
                             f"{out[np.argmax(bad)]}")
        return _read_only(out)

    @functools.cached_property
    def fingerprint(self) -> str:
        """A short stable hash (hex, 32 characters) of what routes rows and what the
        trees add: the settings, the objective, base score, missing and sparse
        handling, how input values become category codes, the classes, and every node
        and per-tree array but the learning rates (which are recovered from the node
        values where a model does not state them). Equal for
        two parses of one model, in any process; statistics accumulated for one
        ensemble are combined only with statistics of an ensemble of the same
        fingerprint."""

        return ensemble_fingerprint(self)

    @property
    def model_name(self) -> str:
        """Library and kind, and which path routes rows when it is not treeimp's own
        (e.g. "catboost boosting, routed by leaf indices from CatBoost's
        calc_leaf_indexes")."""
        name = f"{self.library} {self.kind}".strip()
        router = self.leaf_router
        return name if router is None else f"{name}, routed by {router.description}"

    def __repr__(self) -> str:
        router = self.leaf_router
        return (
            f"TreeEnsemble({self.library or 'custom'} {self.kind}, {self.n_trees} trees, "
            f"{self.n_nodes} nodes, {self.n_features} features, {self.n_outputs} outputs, "
            f"objective={self.objective.name!r}"
            + ("" if router is None else f", routed by {router.description}") + ")"
        )

    def summary(self) -> dict:
        """What the notebook display lists: {label: text} of the model's kind, size,
        objective, outputs, classes and feature names."""
        names = self.feature_names
        shown = "" if names is None else ", ".join(map(str, names[:20])) + (
            f", ... ({len(names) - 20} more)" if len(names) > 20 else "")
        out = {"model": f"{self.library or 'custom'} {self.kind}", "trees": str(self.n_trees),
               "nodes": str(self.n_nodes), "features": str(self.n_features),
               "outputs": str(self.n_outputs), "objective": self.objective.name,
               "base score": ", ".join(f"{v:.6g}" for v in np.ravel(self.base_score)[:10])}
        if self.classes is not None:
            out["classes"] = ", ".join(map(str, list(self.classes)[:20]))
        if names is not None:
            out["feature names"] = shown
        if self.leaf_router is not None:
            out["routed by"] = self.leaf_router.description
        return out

    def _repr_html_(self) -> str:
        """The notebook display: :meth:`summary` as a two-column table (escaped)."""
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
                       for k, v in self.summary().items())
        return f"<div><p><b>TreeEnsemble</b></p><table>{rows}</table></div>"

    # ------------------------------------------------------------------ routing
    def apply(self, X, *, n_jobs=None) -> np.ndarray:
        """Leaf reached by every row in every tree, as the node index WITHIN its tree.

        Returns an int32 array (n_rows, n_trees). How the numbers relate to each
        library's own leaf ids:

        * scikit-learn (``apply``): the same node ids (HistGradientBoosting has no
          ``apply``; its ids are the node rows of ``_predictors[i][k].nodes``);
        * XGBoost (``predict(pred_leaf=True)``): the same node ids, except in trees
          that keep nodes deleted by pruning (``tree_param.num_deleted > 0``, e.g.
          ``tree_method="exact"`` with ``gamma``): those unreachable nodes are dropped
          and the remaining nodes renumbered in their original order, so XGBoost's id
          ``i`` is treeimp's ``i`` minus the number of deleted nodes below ``i``;
        * LightGBM (``predict(pred_leaf=True)`` gives the leaf number ``k``): a tree
          with ``L`` leaves has ``L - 1`` internal nodes first, so leaf ``k`` is node
          ``L - 1 + k`` (a one-leaf tree is node 0): ``k = node - (L - 1)``.
        """

        return apply_ensemble(self, X, n_jobs=n_jobs)

    def predict_raw(self, X, *, n_jobs=None, base_margin=None) -> np.ndarray:
        """Raw margin (n_rows, n_outputs): base score (or ``base_margin``, see below)
        + scaled leaf values.

        For forest classifiers this is the averaged class probability (predict_proba);
        for boosting the untransformed margin (XGBoost ``output_margin``, LightGBM
        ``raw_score``, scikit-learn ``decision_function``). ``base_margin`` (boosting):
        per-row offsets, 1-D or (n_rows, n_outputs), added to the base score as
        XGBoost's ``base_margin`` (LightGBM's ``init_score``: LightGBM's raw score plus
        the offset; XGBoost's base_margin replaces its base score, as XGBoost's
        predict does). X may be a numpy array, a scipy.sparse matrix or a DataFrame.
        """

        return predict_ensemble(self, X, n_jobs=n_jobs, base_margin=base_margin)

    def refuse_linear_leaves(self, what):
        """Raise a ValueError naming ``what`` when the model has linear leaf models
        (those computations read constant leaves only)."""
        if self.linear_leaves is not None:
            raise ValueError(
                f"{what} is not available for models with linear leaf models (LightGBM "
                "linear_tree=True). Available for them: predict_raw, apply, "
                "contributions(method='shap'), explain / Explainer (mdi_oob, "
                "mdi_oob_centered, ufi, naive_oob, leaf_models, shap_oob), "
                "permutation_importance in memory and treeimp.linear_leaf_importance")

    def routing_arrays(self) -> Routing:
        """:attr:`routing` (a tuple in kernel argument order)."""
        return self.routing


class RateSlice:
    """Trees t0 .. t1 - 1 of a lazily resolved learning-rate source (picklable)."""

    def __init__(self, source, t0, t1):
        self.source, self.t0, self.t1 = source, t0, t1

    def __call__(self):
        return np.asarray(self.source(), np.float64)[self.t0:self.t1]


# the cached properties of TreeEnsemble (left out of pickles); those that depend only
# on the trees are shared by ``with_missing_value``
_STRUCTURE_CACHES = ("node_tree", "postorder", "tree_depths", "routing", "splits",
                     "path_features", "tree_learning_rate")
_CACHED = (*_STRUCTURE_CACHES, "fingerprint")


# builders of the structures a later stage derives from the trees and the ensemble
# keeps as cached properties (``splits``: the measures' split index)
_DERIVED_BUILDERS = {}


# the module that registers each builder: ``import treeimp`` loads the stages lazily, so
# an ensemble can be parsed and read before anything has imported the measures
_DERIVED_OWNERS = {"splits": "treeimp.measures.formulas"}


def _derived_builder(name):
    """The registered builder of ``name``, importing the module that registers it (by
    name, since the measures sit above this layer) when nothing has loaded it yet."""
    if name not in _DERIVED_BUILDERS:
        importlib.import_module(_DERIVED_OWNERS[name])
    return _DERIVED_BUILDERS[name]


def register_derived(name, build):
    """Register ``build(ensemble)`` as the builder of the cached property ``name``."""
    if name != "splits":
        raise ValueError(f"TreeEnsemble derives no structure {name!r}")
    _DERIVED_BUILDERS[name] = build


def _read_only(a):
    a.setflags(write=False)
    return a


# the per-node and per-tree arrays of the normal form (sliced by ``_tree_slice``)
_NODE_ARRAYS = ("left", "right", "feature", "threshold", "missing_left", "nan_mode",
                "is_categorical", "category_offset", "category_count",
                "category_default_left", "value", "weight", "cover", "impurity", "gain")
_TREE_ARRAYS = ("tree_output", "tree_scale", "tree_stage")


def _linear_leaves(spec, offsets, leaf, n_features):
    """The :class:`LinearLeaves` of ``spec`` (None, or a dict with per node ``count``
    and ``const`` and per term ``feature`` and ``coef``, terms in node order), checked;
    None when no leaf has a term."""
    if spec is None:
        return None
    total = int(offsets[-1])
    count = np.asarray(spec["count"], dtype=np.int64)
    const = np.asarray(spec["const"], dtype=np.float64)
    feature = np.asarray(spec["feature"], dtype=np.int64)
    coef = np.asarray(spec["coef"], dtype=np.float64)
    if count.shape != (total,) or const.shape != (total,):
        raise ValueError(f"linear leaves: count and const must have one entry per node "
                         f"({total}), got {count.shape} and {const.shape}")
    if np.any(count < 0) or np.any((count > 0) & ~leaf):
        node = int(np.argmax((count < 0) | ((count > 0) & ~leaf)))
        raise ValueError(f"linear leaves: node {node} has {int(count[node])} terms; only "
                         "leaves hold linear models, with >= 0 terms")
    n_terms = int(count.sum())
    if feature.shape != (n_terms,) or coef.shape != (n_terms,):
        raise ValueError(f"linear leaves: the nodes' counts add up to {n_terms} terms but "
                         f"feature and coef have shapes {feature.shape} and {coef.shape}")
    if n_terms == 0:
        return None
    bad = (feature < 0) | (feature >= n_features)
    if np.any(bad):
        raise ValueError(f"linear leaves: a term reads feature {int(feature[np.argmax(bad)])}"
                         f" but the model has {n_features} features")
    if not np.all(np.isfinite(coef)) or not np.all(np.isfinite(const[count > 0])):
        raise ValueError("linear leaves: a coefficient or constant is not finite")
    offset = np.zeros(total, np.int64)
    np.cumsum(count[:-1], out=offset[1:])
    return LinearLeaves(offset, count.astype(np.int32), np.where(count > 0, const, np.nan),
                        feature, coef)


def check_iteration_range(iteration_range, n_rounds):
    """(start, stop) of a user's ``iteration_range`` against a model of ``n_rounds``
    rounds; stop 0 means the last round (XGBoost's convention)."""
    try:
        start, stop = iteration_range
        if any(isinstance(v, bool) or int(v) != v for v in (start, stop)):
            raise TypeError
        start, stop = int(start), int(stop)
    except (TypeError, ValueError):
        raise TypeError(f"iteration_range must be a pair of integers (start, stop), got "
                        f"{iteration_range!r}") from None
    if stop == 0:
        stop = n_rounds
    if not 0 <= start < stop <= n_rounds:
        raise ValueError(f"iteration_range=({start}, {stop}) is not a non-empty range of the "
                         f"model's {n_rounds} boosting rounds (0 <= start < stop <= "
                         f"{n_rounds}; stop 0 means {n_rounds})")
    return start, stop


def _column_names(rule):
    if rule not in COLUMN_NAME_RULES:
        raise ValueError(f"column_names must be one of {COLUMN_NAME_RULES}, got {rule!r}")
    return rule


def _absent_value(v):
    v = float(v)
    if not (np.isnan(v) or v == 0.0):
        raise ValueError(f"sparse_absent must be 0.0 or NaN, got {v}")
    return v


def _missing_value(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        raise TypeError(f"missing must be a number (the value routed as missing), got "
                        f"{v!r}") from None
    return v


def _node_arrays(ens):
    """The routing's node arrays (left, right, feature, threshold, flags; see
    kernel_inputs.Routing). With a leaf router, nodes compare the router's numbers (plain
    numeric splits)."""

    fill = structure.fill_node_arrays
    n = ens.n_nodes
    out = (np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64),
           np.empty(n, np.float64), np.empty(n, route.FLAGS_DTYPE))
    strict = ens.comparison == "<"
    router = ens.leaf_router
    if router is None:
        fill(ens.left, ens.right, ens.feature, ens.threshold, ens.missing_left,
             ens.nan_mode, ens.is_categorical, ens.category_default_left, strict, *out)
    else:
        off = np.zeros(n, np.bool_)
        fill(ens.left, ens.right,
             np.where(ens.left < 0, -1, router.column).astype(ens.feature.dtype),
             np.asarray(router.threshold, np.float64), off, np.zeros(n, np.uint8), off,
             off, strict, *out)
    return out


def _plain_trees(ens, flags):
    """Per tree, whether none of its nodes is in route.NOT_PLAIN (bool)."""

    if ens.n_trees == 0:
        return np.zeros(0, np.bool_)
    any_flag = np.bitwise_or.reduceat(flags, ens.tree_offsets[:-1])
    return (any_flag & route.NOT_PLAIN) == 0


def _hashed_features(features, hasher, n_features):
    if features is None:
        return ()
    out = tuple(sorted({int(j) for j in features}))
    if out and not callable(hasher):
        raise ValueError("hashed_features need a callable value_hasher")
    if out and not 0 <= out[0] <= out[-1] < n_features:
        raise ValueError(f"hashed_features must be in 0..{n_features - 1}, got {out}")
    return out


def _stages(trees):
    """Boosting round of every tree; a tree without one is its own round."""
    stages = np.empty(len(trees), np.int64)
    previous = -1
    for i, tree in enumerate(trees):
        stage = previous + 1 if tree.stage is None else int(tree.stage)
        if stage < previous:
            raise ValueError(f"tree {i} has stage {stage} after a tree of stage {previous}; "
                             "trees must be in the order the model adds them")
        stages[i] = previous = stage
    return stages


def _base_score(base_score, n_outputs):
    if base_score is None:
        return np.zeros(n_outputs)
    b = np.array(base_score, dtype=np.float64).ravel()  # a copy: read-only from here
    if b.size == 1:
        b = np.repeat(b, n_outputs)
    if b.size != n_outputs:
        raise ValueError(f"base_score has {b.size} values but the model has {n_outputs} outputs")
    if not np.all(np.isfinite(b)):
        raise ValueError(f"base_score must be finite, got {b}")
    return b


def _names(names, n_features):
    if names is None:
        return None
    names = [str(n) for n in names]
    if len(names) != n_features:
        raise ValueError(f"{len(names)} feature names for {n_features} features")
    return names


def _per_feature_flags(flags, n_features):
    """One bool for all features (kept as a scalar: n_features may be huge) or one each."""
    a = np.asarray(flags, dtype=np.bool_)
    if a.ndim == 0:
        return np.bool_(a)
    if a.shape != (n_features,):
        raise ValueError(f"category_as_code has shape {a.shape}; expected one flag for "
                         f"each of {n_features} features")
    return a.copy()


def _category_values(tables, n_features):
    if tables is None:
        return None
    tables = list(tables)
    if len(tables) != n_features:
        raise ValueError(f"{len(tables)} category value tables for {n_features} features")
    out = []
    for j, t in enumerate(tables):
        if t is None:
            out.append(None)
            continue
        v = np.array(t, dtype=np.float64)  # a copy: read-only from here
        if v.ndim != 1 or not np.all(np.isfinite(v)) or np.unique(v).size != v.size:
            raise ValueError(f"category value table of feature {j} must be a 1-D array of "
                             f"distinct finite numbers, got {t!r}")
        out.append(v)
    return None if all(t is None for t in out) else out


def _feature_categories(cats, n_features):
    if cats is None:
        return None
    cats = list(cats)
    if len(cats) != n_features:
        raise ValueError(f"{len(cats)} category lists for {n_features} features")
    return [None if c is None else list(c) for c in cats]
