"""The types a skops file of a scikit-learn tree model needs beyond skops' own trusted
set, vetted one by one, so that such a file loads without trusting anything else.

skops (0.16) trusts scikit-learn's estimator classes and numpy's arrays but not the
objects that hold the trees themselves, so every saved forest lists
``sklearn.tree._tree.Tree`` as untrusted. Trusting everything a file lists would also
trust a function reference such as ``posix.system``; the command line instead trusts
exactly :data:`TREE_MODEL_TYPES` and refuses any other type the user does not name.

The list was found with ``skops.io.get_untrusted_types`` on saved models of every kind
treeimp explains (``tests/test_skops_trust.py`` checks it against the installed skops):
DecisionTree, RandomForest, ExtraTrees, Bagging of trees, GradientBoosting and
HistGradientBoosting, classifiers and regressors, and Pipelines of the scikit-learn
preprocessors (ColumnTransformer, OneHotEncoder, OrdinalEncoder, scalers, SimpleImputer,
KBinsDiscretizer, PolynomialFeatures) ending in one of them.
"""

from __future__ import annotations

# name -> why loading it runs no code chosen by the file
TREE_MODEL_TYPES = {
    "sklearn.tree._tree.Tree": (
        "the nodes of every scikit-learn tree (DecisionTree, forests, Bagging, "
        "GradientBoosting): rebuilt from the stored counts and node / value arrays"),
    "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor": (
        "the trees of HistGradientBoosting: a record array of nodes and the bitsets of "
        "categorical splits"),
    "numpy.dtype": (
        "a dtype parameter (SimpleImputer, KBinsDiscretizer, OneHotEncoder): skops "
        "rebuilds it from an empty array read with allow_pickle=False"),
    "functools.partial": (
        "HistGradientBoosting's categorical preprocessing holds partial(check_array, "
        "...); skops checks the wrapped function and each argument as types of their "
        "own, so a partial of any other function is still refused"),
    "sklearn.utils.validation.check_array": (
        "the function in that partial: input validation, called with the stored keyword "
        "arguments (dtypes, flags) on the rows being transformed"),
}


def untrusted_outside(untrusted, named=()):
    """Those of ``untrusted`` (``skops.io.get_untrusted_types``) that are neither in
    :data:`TREE_MODEL_TYPES` nor in ``named`` (the types the user trusts)."""
    named = set(named)
    return [t for t in untrusted if t not in TREE_MODEL_TYPES and t not in named]
