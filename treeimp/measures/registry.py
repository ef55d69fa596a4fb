"""The measures treeimp computes: one table that explain, Importances,
ImportanceSelector, the plots and the command line read.

Each :class:`Measure` entry says what the measure is defined for (model kinds, multi-output
targets, node values that are means), where its values come from (the model alone,
held-out node statistics, or per-row contributions), its parameters, its per-tree formula
from node statistics (the readable numpy formulas of :mod:`treeimp.measures.formulas`, some of
which call a fused numba kernel of :mod:`treeimp.kernels.fused_measures`), its per-class form on
classification forests, a one-line description and the paper it comes from.

Adding a measure is one entry (:func:`register`) plus its formula. The formulas are in
../shared/design/measures.md.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ..inputs.targets import INTERVAL_LABELS, LEVELS, MULTICLASS, RISK_SETS, n_target_columns
from ..model.ensemble import BOOSTING, FOREST
from . import formulas as measures

KINDS = (FOREST, BOOSTING)
# where a measure's values come from
MODEL = "model"                  # the model alone (no evaluation rows): mdi
NODE_STATS = "node_stats"        # held-out node statistics (NodeSums) and the model
CONTRIBUTIONS = "contributions"  # per-row contributions, block sums of attributions/shap_oob
# held-out sums over the rows of every linear leaf model, made by the staged pass
# (stats/linear_leaves.py, measures/linear_leaves.leaf_model_values)
LINEAR_LEAVES = "linear_leaves"
SOURCES = (MODEL, NODE_STATS, CONTRIBUTIONS, LINEAR_LEAVES)
# the sources whose per-block sums are accumulated beside the node statistics, for the
# measures named (NodeStats.extra)
ROW_SUMS = (CONTRIBUTIONS, LINEAR_LEAVES)

# how error messages name the models of each kind
_KIND_PLURAL = {FOREST: "forests", BOOSTING: "boosting models"}


@dataclass(frozen=True)
class PerClass:
    """A measure's per-class form on classification forests (``Importances.table_by_class``).

    parts(ens, stats) -> (B, n_trees, n_features, n_classes): the per-class split sums
    before the per-tree scaling; the measure's ``formula`` takes them as ``parts`` so they
    are computed once. values(ens, stats, parts) -> (n_trees, n_features, n_classes) on
    the full statistics (B = 1, ``parts`` of that block): the per-class values, summing
    over classes to the measure's per-tree values.
    """

    parts: Callable
    values: Callable


@dataclass(frozen=True)
class Measure:
    """One measure.

    name : the method name users pass (``explain(methods=...)``, ``--methods``).
    description : one line, for ``treeimp explain --help`` and error messages.
    paper : where the measure comes from (../shared/papers/).
    source : MODEL (reads the model alone, needs no evaluation rows), NODE_STATS
        (``formula`` of held-out node statistics), CONTRIBUTIONS (the mean over
        evaluation rows of the target times per-row contributions, ``contributions``
        naming which: "shap" or "saabas"; computed by :mod:`treeimp.attributions.shap_oob`)
        or LINEAR_LEAVES (the leaf-model importance of models with linear leaf models,
        :func:`treeimp.measures.linear_leaves.leaf_model_values`; no formula).
    formula : (ens, stats, classification, params, parts) -> (B, n_trees, n_features):
        the per-tree values on each block of ``stats`` (a NodeSums; None for MODEL,
        which returns (1, n_trees, n_features)); ``classification`` whether the forest's
        targets are classes; ``params`` the measure's parameters (:meth:`params_for`);
        ``parts`` its ``per_class.parts`` when already computed, else None. None for
        CONTRIBUTIONS.
    label : the measure's name in plot titles and messages (default: ``name``).
    kinds : the model kinds it is defined for ("forest", "boosting").
    vector_targets : defined on multi-output regression forests (as the sum over outputs).
    class_targets : defined on multi-output classification forests (as the sum over
        targets of the form on each target's one-hot vector).
    needs_node_means : its regression form reads the in-sample variance about node means,
        so a regression forest whose node values are medians is refused.
    params : names of the parameters the caller passes (pg_oob: "alpha", "lam").
    check_params : {name: value} of ``params`` -> the same, checked (raises TypeError /
        ValueError naming the problem); required when ``params`` is not empty.
    fixed : ((name, value), ...) parameters fixed by the entry (presets such as pg1).
    per_class : :class:`PerClass` or None.
    fused : its per-split sums come from the fused kernels (``measures.fused_parts``):
        the ``parts`` its formula takes, which every such measure of one call gets from
        a single pass over the accumulated statistics.
    """

    name: str
    description: str
    paper: str
    source: str = NODE_STATS
    formula: Callable | None = None
    contributions: str | None = None
    label: str = ""
    kinds: tuple = KINDS
    vector_targets: bool = True
    class_targets: bool = True
    needs_node_means: bool = False
    params: tuple = ()
    check_params: Callable | None = None
    fixed: tuple = ()
    per_class: PerClass | None = None
    fused: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"a measure's name must be an identifier-like string, got "
                             f"{self.name!r}")
        if self.source not in SOURCES:
            raise ValueError(f"measure {self.name!r}: source must be one of {list(SOURCES)}, "
                             f"got {self.source!r}")
        if not self.kinds or any(k not in KINDS for k in self.kinds):
            raise ValueError(f"measure {self.name!r}: kinds must be a non-empty subset of "
                             f"{list(KINDS)}, got {self.kinds!r}")
        if self.source == CONTRIBUTIONS:
            if self.contributions not in ("shap", "saabas") or self.formula is not None:
                raise ValueError(f"measure {self.name!r}: a contributions measure names "
                                 "contributions='shap' or 'saabas' and has no formula")
        elif self.source == LINEAR_LEAVES:
            if self.formula is not None:
                raise ValueError(f"measure {self.name!r}: a linear_leaves measure has no "
                                 "formula")
        elif not callable(self.formula):
            raise ValueError(f"measure {self.name!r}: source {self.source!r} needs a "
                             "formula (ens, stats, classification, params, parts)")
        if self.params and not callable(self.check_params):
            raise ValueError(f"measure {self.name!r} takes {list(self.params)} and needs "
                             "check_params")
        if self.params and self.fixed:
            raise ValueError(f"measure {self.name!r}: parameters are either passed (params) "
                             "or fixed, not both")
        if self.per_class is not None and not isinstance(self.per_class, PerClass):
            raise TypeError(f"measure {self.name!r}: per_class must be a PerClass or None")

    @property
    def needs_rows(self) -> bool:
        """False for measures read from the model alone (mdi): no rows are routed and
        their standard errors and p-values are NaN."""
        return self.source != MODEL

    @property
    def title(self) -> str:
        return self.label or self.name

    def params_for(self, given: Mapping) -> dict:
        """The parameters the formula reads: ``fixed``, or the ``params`` taken from
        ``given`` ({name: value}, e.g. explain's alpha and lam)."""
        if self.fixed:
            return dict(self.fixed)
        return {p: given.get(p) for p in self.params}


# ------------------------------------------------------------------ the formulas
# (ens, stats, classification, params, parts) -> (B, n_trees, n_features)
def _mdi(ens, st, classification, params, parts):
    return measures.mdi(ens)[None]


def _mdi_oob(ens, st, classification, params, parts):
    return measures.mdi_oob(ens, st, parts)


def _mdi_oob_centered(ens, st, classification, params, parts):
    return measures.mdi_oob_centered(ens, st, parts)


def _ufi(ens, st, classification, params, parts):
    return measures.ufi(ens, st, classification=classification, parts=parts)


def _naive_oob(ens, st, classification, params, parts):
    return measures.naive_oob(ens, st)


def _pg(ens, st, classification, params, parts):
    return measures.pg_oob(ens, st, alpha=params["alpha"], lam=params["lam"],
                           classification=classification)


def _check_pg_params(given):
    """Loecher's alpha in [0, 1] and a finite lam >= 0."""
    alpha, lam = given.get("alpha"), given.get("lam")
    if alpha is None or lam is None:
        raise ValueError("'pg_oob' needs alpha and lam (e.g. alpha=0.5, lam=1.0)")
    for name, v in (("alpha", alpha), ("lam", lam)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"pg_oob's {name} must be a number, got {v!r}")
    if not 0.0 <= float(alpha) <= 1.0 or not 0.0 <= float(lam) < np.inf:
        raise ValueError(f"pg_oob needs 0 <= alpha <= 1 and a finite lam >= 0, got "
                         f"alpha={alpha}, lam={lam}")
    return {"alpha": alpha, "lam": lam}


_MDI_OOB_CLASSES = PerClass(measures.mdi_oob_class_parts, measures.class_values_per_row)
_CENTERED_CLASSES = PerClass(measures.mdi_oob_centered_class_parts,
                             measures.class_values_per_row)
_UFI_CLASSES = PerClass(measures.ufi_class_parts, measures.class_values_per_tree)

# as the table of measures in docs/methods.rst cites them (papers in ../shared/papers/)
_LI = "Li, Wang, Basu, Kumbier, Yu, NeurIPS 2019"
_ZH = "Zhou & Hooker, TKDD 2020"
_LO = "Loecher 2022"
_PG = dict(paper=_LO, kinds=(FOREST,), needs_node_means=True, class_targets=False,
           formula=_pg)

_BUILTIN = (
    Measure("mdi", "in-sample split improvement, what the library reports (impurity "
            "decrease or gain); needs no rows", "Breiman 2001",
            source=MODEL, formula=_mdi, label="MDI (in-sample)"),
    Measure("mdi_oob", "MDI-oob: each split's improvement measured on rows the tree did "
            "not see", _LI + ", eq. 14", formula=_mdi_oob, label="MDI-oob",
            per_class=_MDI_OOB_CLASSES, fused=True),
    Measure("mdi_oob_centered", "MDI-oob with the target centred per tree at its in-bag "
            "root value (invariant to adding a constant to y)",
            "this library (centring of Li et al.'s eq. 14)", formula=_mdi_oob_centered,
            per_class=_CENTERED_CLASSES, fused=True),
    Measure("ufi", "UFI: impurity decrease mixing in-sample and out-of-sample node "
            "statistics", _ZH, formula=_ufi, label="UFI", needs_node_means=True,
            per_class=_UFI_CLASSES, fused=True),
    Measure("naive_oob", "impurity decrease measured on out-of-sample rows alone (the "
            "strawman of Li et al.)", _LI + ", Table 1", formula=_naive_oob, label="naive OOB"),
    Measure("pg1", "penalized Gini preset alpha=1, lam=1",
            label="penalized Gini pg1", fixed=(("alpha", 1.0), ("lam", 1.0)), **_PG),
    Measure("pg2", "penalized Gini preset alpha=0.5, lam=1",
            label="penalized Gini pg2", fixed=(("alpha", 0.5), ("lam", 1.0)), **_PG),
    Measure("pg3", "penalized Gini preset alpha=0.5, lam=0.5",
            label="penalized Gini pg3", fixed=(("alpha", 0.5), ("lam", 0.5)), **_PG),
    Measure("pg_oob", "penalized Gini with the caller's alpha and lam",
            label="penalized Gini", params=("alpha", "lam"), check_params=_check_pg_params,
            **_PG),
    Measure("shap_oob", "per tree, the mean over evaluation rows of the target times the "
            "row's TreeSHAP values", "Loecher 2022, a unifying view (SHAP out of bag)",
            source=CONTRIBUTIONS, contributions="shap", vector_targets=False,
            class_targets=False),
    Measure("saabas_oob", "shap_oob with Saabas contributions: equal to mdi_oob, computed "
            "row by row", _LI + ", eq. 14 as a mean over rows", source=CONTRIBUTIONS,
            contributions="saabas", vector_targets=False, class_targets=False),
    Measure("leaf_models", "linear leaves (LightGBM linear_tree): held-out loss decrease "
            "through each feature's leaf-model coefficients", "this library (docs/methods.rst, "
            "linear leaves)",
            source=LINEAR_LEAVES, kinds=(BOOSTING,), label="leaf models"),
)

_REGISTRY: dict[str, Measure] = {m.name: m for m in _BUILTIN}


# ------------------------------------------------------------------ the table
def register(measure: Measure) -> Measure:
    """Add ``measure`` to the table (after the others). ValueError if its name is taken."""
    if not isinstance(measure, Measure):
        raise TypeError(f"register takes a Measure, got {type(measure).__name__}")
    if measure.name in _REGISTRY:
        raise ValueError(f"a measure named {measure.name!r} is already registered")
    _REGISTRY[measure.name] = measure
    return measure


def unregister(name: str) -> Measure:
    """Remove the measure ``name`` from the table; returns it."""
    if name not in _REGISTRY:
        raise ValueError(f"no measure named {name!r} is registered")
    return _REGISTRY.pop(name)


@contextlib.contextmanager
def registered(*new: Measure):
    """Register ``new`` measures for the duration of a with block (tests, experiments)."""
    done = []
    try:
        for m in new:
            done.append(register(m).name)
        yield new[0] if len(new) == 1 else new
    finally:
        for name in reversed(done):
            _REGISTRY.pop(name, None)


def get(name) -> Measure:
    """The entry of ``name``; ValueError naming the registered measures otherwise."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown method {name!r}; valid methods: {list(_REGISTRY)}") \
            from None


def all_measures(kind=None) -> tuple:
    """The entries, in table order; ``kind``: only those defined for that model kind."""
    return tuple(m for m in _REGISTRY.values() if kind is None or kind in m.kinds)


def names(kind=None, *, needs_rows=None, passed_params=None) -> tuple:
    """Names of the entries, in table order, filtered: ``kind`` (defined for it),
    ``needs_rows`` (True: out-of-sample measures; False: read from the model alone),
    ``passed_params`` (True: taking parameters from the caller, e.g. pg_oob; False: none)."""
    return tuple(m.name for m in all_measures(kind)
                 if (needs_rows is None or m.needs_rows == needs_rows)
                 and (passed_params is None or bool(m.params) == passed_params))


def needs_rows(name) -> bool:
    """Whether ``name`` is measured on evaluation rows (has standard errors and p-values);
    True for names not in the table (e.g. columns of results built elsewhere)."""
    m = _REGISTRY.get(name) if isinstance(name, str) else None
    return True if m is None else m.needs_rows


def row_sum_methods(methods) -> tuple:
    """The names in ``methods`` whose per-block sums are accumulated beside the node
    statistics (sources ``ROW_SUMS``: per-row contributions, leaf models), in order."""
    return tuple(m for m in methods if get(m).source in ROW_SUMS)


def by_source(methods) -> dict:
    """{source: [the names in ``methods`` with that source, in their order]} for every
    source (MODEL, NODE_STATS, CONTRIBUTIONS): which work a call needs (rows routed for
    node statistics, per-row contributions, or neither)."""
    out = {s: [] for s in SOURCES}
    for name in methods:
        out[get(name).source].append(name)
    return out


def title(name) -> str:
    """How plots and messages name ``name``: its entry's label, else the name itself."""
    m = _REGISTRY.get(name) if isinstance(name, str) else None
    return str(name) if m is None else m.title


# ------------------------------------------------------------------ checks
def valid_names(ens) -> tuple:
    """The methods defined for this model's kind, in table order."""
    return names(ens.kind)


def check_methods(methods, ens, given=None) -> list:
    """Check a list of method names (strings, no duplicates) against the model: each is
    registered and defined for its kind, its node values and its targets; parameters the
    named measures take are checked in ``given`` ({name: value}). Returns ``methods``."""
    given = {} if given is None else given
    valid = valid_names(ens)
    if not methods:
        raise ValueError(f"methods is empty; choose from {list(valid)}")
    for name in methods:
        if name not in valid:
            m = _REGISTRY.get(name)
            why = "" if m is None else (
                f" ({m.label or repr(m.name)} is defined for "
                f"{' and '.join(_KIND_PLURAL[k] for k in m.kinds)} only)")
            raise ValueError(f"unknown method {name!r} for a {ens.kind} model{why}; valid "
                             f"methods: {list(valid)}")
        check_node_means(_REGISTRY[name], ens)
        if _REGISTRY[name].source == LINEAR_LEAVES and ens.linear_leaves is None:
            raise ValueError(f"{name!r} is defined only for models with linear leaf "
                             "models (LightGBM linear_tree=True); this model's leaves are "
                             "constants")
    for name in methods:
        m = _REGISTRY[name]
        if m.params:
            m.check_params({p: given.get(p) for p in m.params})
    check_targets(methods, ens)
    return methods


def check_node_means(measure: Measure, ens):
    """ValueError when ``measure`` reads the in-sample variance about node means and this
    is a regression forest whose node values are medians (``impurity_kind`` "median",
    e.g. scikit-learn's criterion="absolute_error"). mdi_oob and naive_oob do not use
    in-sample impurities and stay valid."""
    if measure.needs_node_means:
        measures.check_node_means(measure.name, ens)


def check_targets(methods, ens):
    """A multi-output forest, or a boosting model on several regression targets, is
    explained with the measures defined on its targets: sums over the regression outputs
    (``vector_targets``) or over the classification targets (``class_targets``); the
    per-row contribution measures are defined for one output."""
    if ens.target_classes is not None:
        n = len(ens.target_classes)
        ok = [m.name for m in all_measures(ens.kind) if m.class_targets]
        bad = [m for m in methods if m not in ok]
        if bad:
            raise ValueError(f"{bad} not defined for a classification forest with {n} "
                             f"targets; use methods from {ok} (or one forest per target)")
        return

    if ens.objective.name in INTERVAL_LABELS + RISK_SETS:
        ok = [m.name for m in all_measures(ens.kind) if m.vector_targets]
        bad = [m for m in methods if m not in ok]
        if bad:
            why = ("two label columns per row" if ens.objective.name in INTERVAL_LABELS
                   else "gradients over the risk sets of all rows")
            raise ValueError(f"{bad} not defined for objective {ens.objective.name!r} "
                             f"({why}); use methods from {ok}")
        return
    if ens.objective.name == "class_probability" or n_target_columns(ens) == 1:
        return
    what = "forest" if ens.kind == FOREST else "boosting model"
    ok = [m.name for m in all_measures(ens.kind) if m.vector_targets]
    bad = [m for m in methods if m not in ok]
    if bad:
        raise ValueError(f"{bad} not defined for a regression {what} with {ens.n_outputs} "
                         f"targets; use methods from {ok} (or one model per target)")


# ------------------------------------------------------------------ formulas by name
def compute(name, ens, st, *, classification, params=None, parts=None):
    """(B, n_trees, n_features): the per-tree values of the node-statistics measure
    ``name`` on the blocks of ``st``. ``params``: {name: value} the measure's passed
    parameters are taken from; ``parts``: its per-class parts when already computed."""
    m = get(name)
    if m.source != NODE_STATS:
        raise ValueError(f"{name!r} is not computed from node statistics (source "
                         f"{m.source!r})")
    kind = BOOSTING if st.boosting else FOREST
    if kind not in m.kinds:
        raise ValueError(f"{name!r} ({m.title}) is defined for "
                         f"{' and '.join(_KIND_PLURAL[k] for k in m.kinds)} only; "
                         f"{_KIND_PLURAL[kind]} support {', '.join(names(kind))}")
    return m.formula(ens, st, classification, m.params_for(params or {}), parts)


def class_parts(wanted, ens, st) -> dict:
    """{name: per-class parts (B, n_trees, n_features, n_classes)} of the measures in
    ``wanted`` that have a per-class form, in table order; those with fused sums are
    computed together (:func:`shared_parts`)."""
    want = [m.name for m in all_measures() if m.per_class is not None and m.name in wanted]
    out = shared_parts(want, ens, st, classification=True)
    for n in want:
        if n not in out:
            out[n] = _REGISTRY[n].per_class.parts(ens, st)
    return out


def split_parts(methods, ens, st, *, forest, classification) -> tuple:
    """(per-class parts, parts): the per-class split sums by which a classification forest
    reports its measures class by class ({} otherwise), and the split sums each formula
    of ``methods`` takes (:func:`shared_parts`: the fused measures' from one pass over
    the statistics ``st``; None: no statistics, nothing)."""
    if st is None:
        return {}, {}
    if forest and classification:
        by_class = class_parts(methods, ens, st)
        return by_class, dict(by_class)
    return {}, shared_parts(methods, ens, st, classification=classification)


def shared_parts(wanted, ens, st, *, classification) -> dict:
    """{name: split sums (B, n_trees, n_features, C)} of the ``fused`` measures in
    ``wanted`` (in table order), from one pass of the fused kernels
    (``measures.fused_parts``): the ``parts`` their formulas take. Empty when fewer than
    two are wanted (a measure alone computes its own) or inside ``use_fused(False)``."""
    fused = [m.name for m in all_measures() if m.fused and m.name in wanted]
    if len(fused) < 2 or not measures.using_fused():
        return {}
    return measures.fused_parts(fused, ens, st, classification)


# two-class objectives: one output per label column when a model has several
_TWO_CLASS = ("logistic", "cross_entropy", "exponential")


def check_explainable(ens):
    """Refuse models whose importances treeimp does not define: boosting with several
    outputs of a two-class objective (multi-label classification, e.g. XGBoost
    binary:logistic on several label columns). Several regression targets (one output
    each, or vector leaves), multiclass margins and the levels of one target (quantiles,
    expectiles) are explained, and models with linear leaf models (the staged pass
    computes their gradients at the true margins, ``stats/linear_leaves.py``)."""
    if (ens.kind == FOREST or ens.n_outputs == 1
            or ens.objective.name in MULTICLASS + LEVELS):
        return
    if ens.objective.name in _TWO_CLASS:
        raise ValueError(f"this {ens.library or 'boosting'} model has {ens.n_outputs} "
                         f"{ens.objective.name} outputs (multi-label classification), which "
                         "treeimp does not explain: explain one model per label")
