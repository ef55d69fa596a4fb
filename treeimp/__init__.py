"""treeimp: out-of-sample feature importance for tree ensembles.

The public names load lazily (PEP 562): ``import treeimp`` imports none of the stages, and
a name's module, with the third-party packages it needs (pandas, scikit-learn, scipy,
numba), is imported on the name's first use. ``from treeimp import X``, ``dir(treeimp)``
and ``treeimp.<stage>`` (a sub-package, e.g. ``treeimp.measures``) work as if eager.
"""

import importlib

# public name -> the module that defines it
_PUBLIC = {
    "Contributions": "treeimp.attributions.contributions",
    "Explainer": "treeimp.explainer",
    "ImportanceSelector": "treeimp.selector",
    "Interactions": "treeimp.attributions.interactions",
    "Importances": "treeimp.results.importances",
    "NodeStats": "treeimp.stats.node_stats",
    "Objective": "treeimp.model.ensemble",
    "Tree": "treeimp.model.ensemble",
    "TreeEnsemble": "treeimp.model.ensemble",
    "contributions": "treeimp.api",
    "cross_explain": "treeimp.crossfit",
    "explain": "treeimp.api",
    "interaction_importance": "treeimp.api",
    "interactions": "treeimp.api",
    "linear_leaf_importance": "treeimp.api",
    "load": "treeimp.parsers.files",
    "parse": "treeimp.parsers",
    "permutation_importance": "treeimp.api",
}

__all__ = sorted(_PUBLIC)
__version__ = "0.1.0"


def __getattr__(name):
    """Import a public name's module on first use (and keep the name here); a name that is
    a sub-package or module of treeimp is imported as that module."""
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    if not name.startswith("__"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
