"""Feature groups: importances of sets of columns.

Every measure treeimp computes is, per tree, a sum over splits of a term that belongs to
the split's feature, so the importance of a set of columns is the sum of its members'
per-tree values. Groups are summed per tree and per jackknife replicate before any
averaging, so a group's standard error and p-value come from the same row blocks as
its members' (the jackknife of the group sums, not a root-sum-of-squares of the
members' errors, which would ignore that members share rows).
"""

from __future__ import annotations

import numbers

import numpy as np


class FeatureGroups:
    """Named, disjoint sets of feature columns covering every feature.

    ``names`` (G,) group names in order of their first column; ``members`` the column
    indices of each group; ``matrix`` (n_features, G) 0/1 membership.
    """

    def __init__(self, names, members, n_features):
        self.names = list(names)
        self.members = [np.asarray(m, dtype=np.int64) for m in members]
        self.matrix = np.zeros((n_features, len(self.names)))
        for g, cols in enumerate(self.members):
            self.matrix[cols, g] = 1.0

    def member_names(self, feature_names):
        """{group name: [feature names of its members]}."""
        return {g: [feature_names[j] for j in cols] for g, cols in zip(self.names, self.members)}

    def sum_members(self, values):
        """(..., n_features) -> (..., G): each group's sum of its members' values, NaN
        where every member is NaN (a tree that saw no evaluation rows)."""
        values = np.asarray(values, dtype=np.float64)
        finite = ~np.isnan(values)
        total = np.where(finite, values, 0.0) @ self.matrix
        seen = finite.astype(np.float64) @ self.matrix
        return np.where(seen > 0, total, np.nan)


def resolve_groups(groups, feature_names, input_groups=None):
    """:class:`FeatureGroups` from the user's ``groups``, or None.

    ``groups``: None; a dict {group name: columns} whose columns are feature names or
    integer positions (columns listed in no group form a group of their own, named by
    the feature); or "input" for a Pipeline (``input_groups``: {input column: positions
    of the model's columns it became}).
    """
    if groups is None:
        return None
    F = len(feature_names)
    if isinstance(groups, str):
        if groups != "input":
            raise ValueError(f"groups must be a dict {{name: columns}} or 'input', got "
                             f"{groups!r}")
        if input_groups is None:
            raise ValueError("groups='input' groups a Pipeline's transformed columns by the "
                             "input column they came from; this model is not a Pipeline. "
                             "Pass a dict {name: columns} instead")
        groups = input_groups
    if not isinstance(groups, dict):
        raise TypeError(f"groups must be a dict {{name: columns}} or 'input', got "
                        f"{type(groups).__name__}")
    if not groups:
        raise ValueError("groups is an empty dict; give at least one group")
    position = {name: j for j, name in enumerate(feature_names)}
    owner = {}
    listed = []
    for name, cols in groups.items():
        if not isinstance(name, str):
            raise TypeError(f"group names must be strings, got {name!r}")
        if isinstance(cols, (str, numbers.Integral)):
            cols = [cols]
        cols = list(cols)
        if not cols:
            raise ValueError(f"group {name!r} has no columns")
        idx = []
        for c in cols:
            j = _column_index(c, position, F, name)
            if j in owner:
                where = ("twice in group" if owner[j] == name
                         else f"in groups {owner[j]!r} and")
                raise ValueError(f"column {feature_names[j]!r} is {where} {name!r}; groups "
                                 "must not overlap")
            owner[j] = name
            idx.append(j)
        listed.append((name, idx))
    named = {name for name, _ in listed}
    for j in range(F):
        if j not in owner:
            if feature_names[j] in named:
                raise ValueError(f"feature {feature_names[j]!r} is in no group but a group "
                                 "has its name; list it in that group or rename the group")
            listed.append((feature_names[j], [j]))
    listed.sort(key=lambda item: min(item[1]))
    return FeatureGroups([n for n, _ in listed], [sorted(i) for _, i in listed], F)


def _column_index(c, position, F, group):
    if isinstance(c, (bool, np.bool_)):
        raise TypeError(f"group {group!r} lists the boolean {c!r}; give feature names or "
                        "integer positions")
    if isinstance(c, numbers.Integral):
        if not -F <= c < F:
            raise ValueError(f"group {group!r} lists column {c}, but there are {F} features")
        return int(c) % F
    if isinstance(c, str):
        if c not in position:
            raise ValueError(f"group {group!r} lists {c!r}, which is not a feature name; "
                             f"features: {list(position)[:10]}"
                             f"{' ...' if len(position) > 10 else ''}")
        return position[c]
    raise TypeError(f"group {group!r} lists {c!r} ({type(c).__name__}); give feature names "
                    "or integer positions")
