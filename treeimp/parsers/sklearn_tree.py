"""One fitted scikit-learn ``tree_`` (``sklearn.tree._tree.Tree``) -> a normal-form Tree.

Shared by the forest / single-tree parser and the GradientBoosting parser. Routing,
checked against scikit-learn 1.9 (``Tree._apply_dense``): X is cast to float32, a row
goes left if ``float32(x) <= threshold`` (threshold float64), NaN follows
``missing_go_to_left`` (when training saw no NaN the splitter points it at the child
with more training samples). Nodes are numbered within the tree, root 0, so sklearn's
``apply`` ids are the normal form's local ids.
"""

from __future__ import annotations

import numpy as np

from ..model.ensemble import Tree

# the ``tree_`` fields read; missing_go_to_left exists since scikit-learn 1.3
TREE_FIELDS = ("children_left", "children_right", "feature", "threshold", "value",
               "impurity", "weighted_n_node_samples", "missing_go_to_left")
_MISSING = object()


def check_fitted(model):
    """Raise sklearn's NotFittedError (a ValueError) naming the class if ``model`` is unfit."""
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(model)


def required_attr(obj, attr):
    """A fitted attribute of ``obj``, or ValueError naming it and the scikit-learn version."""
    if not hasattr(obj, attr):
        import sklearn

        raise ValueError(f"{type(obj).__name__} has no attribute {attr!r} (scikit-learn "
                         f"{sklearn.__version__}); treeimp cannot read this model")
    return getattr(obj, attr)


def read_tree_fields(tree_, owner: str) -> dict:
    """The arrays of :data:`TREE_FIELDS` of one ``tree_``, as numpy arrays.

    ``owner`` names the model in error messages. A missing field raises ValueError
    naming it and the installed scikit-learn version.
    """
    import sklearn

    fields = {}
    for key in TREE_FIELDS:
        field = getattr(tree_, key, _MISSING)  # (each is a property building a view)
        if field is _MISSING:
            raise ValueError(f"{owner}: its fitted tree has no field {key!r} (scikit-learn "
                             f"{sklearn.__version__}); treeimp reads {', '.join(TREE_FIELDS)}")
        fields[key] = np.asarray(field)
    return fields


def tree_from_fields(fields: dict, value: np.ndarray, **tree_kwargs) -> Tree:
    """A normal-form :class:`Tree` from :func:`read_tree_fields` and per-node ``value``.

    ``value`` is (n_nodes, value_dim) on the scale the model applies; ``tree_kwargs``
    (output, scale, learning_rate, stage) go to :class:`Tree` as they are. The node
    fields are passed as scikit-learn stores them (strided views of its node records;
    children -1 at leaves, feature -2): :meth:`TreeEnsemble.from_trees` copies and
    converts them once, reading each tree's records while they are in cache.
    """
    left = fields["children_left"]
    return Tree(
        left=left,
        right=fields["children_right"],
        feature=fields["feature"],
        threshold=np.where(left < 0, 0.0, fields["threshold"].astype(np.float64, copy=False)),
        value=value,
        weight=fields["weighted_n_node_samples"],
        missing_left=fields["missing_go_to_left"],
        impurity=fields["impurity"],
        **tree_kwargs,
    )
