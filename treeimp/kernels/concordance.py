"""Harrell's concordance index of survival predictions, in O(n log n).

Pairs (i, j) are comparable when row i has an observed event and a shorter time than
j, or the same time while j is censored (a censored row outlives an event at its own
time); two events at one time are not comparable. A comparable pair is concordant
when i's risk is higher, and counts one half when the risks are equal. Rows are taken
from the longest time down; the risks of the rows already passed (longer times) sit in
a Fenwick tree over the risk ranks.
"""

import numpy as np
from numba import njit


@njit(cache=True)
def _add(tree, at):
    at += 1
    while at < tree.shape[0]:
        tree[at] += 1
        at += at & (-at)


@njit(cache=True)
def _below(tree, at):
    """How many inserted ranks are < ``at``."""
    out = 0
    while at > 0:
        out += tree[at]
        at -= at & (-at)
    return out


@njit(cache=True)
def concordance_counts(order, time, event, rank, n_ranks):
    """(concordant, tied risk, comparable) pair counts. ``order``: the rows by time,
    longest first; ``rank``: each row's risk rank 0 .. n_ranks - 1 (equal risks, equal
    ranks)."""
    tree = np.zeros(n_ranks + 1, np.int64)
    n = order.shape[0]
    cens = np.empty(n, np.int64)  # ranks of the censored rows at the current time
    concordant = 0.0
    tied = 0.0
    comparable = 0.0
    inserted = 0
    a = 0
    while a < n:
        b = a
        while b < n and time[order[b]] == time[order[a]]:
            b += 1
        n_cens = 0
        for q in range(a, b):
            i = order[q]
            if not event[i]:
                cens[n_cens] = rank[i]
                n_cens += 1
        group_cens = np.sort(cens[:n_cens])
        for q in range(a, b):
            i = order[q]
            if not event[i]:
                continue
            r = rank[i]
            less = _below(tree, r)
            equal = _below(tree, r + 1) - less
            c_less = np.searchsorted(group_cens, r)
            c_equal = np.searchsorted(group_cens, r, side="right") - c_less
            concordant += less + c_less
            tied += equal + c_equal
            comparable += inserted + n_cens
        for q in range(a, b):
            _add(tree, rank[order[q]])
            inserted += 1
        a = b
    return concordant, tied, comparable
