"""Backends: the one interface through which routing and accumulation reach their kernels.

Every pass of rows through the trees that the glue runs (``model/routing.py``:
``predict_raw``, ``apply``; ``stats/drivers.py``: the forest and staged statistics and
the smoothed objectives' per-round scales; ``stats/inbag_check.py``: in-bag counts;
``permutation/leaf_index.py``: the leaves of the indexed rows) calls
``get_backend().<operation>(...)`` once per chunk of rows. The operations (:class:`Backend`,
names in ``OPERATIONS``) take numpy arrays, named tuples of numpy arrays
(``model/kernel_inputs.py``: ``Routing``, ``RowInputs``, ``Loss``, ``StagedTrees``) and
scalars, and write or add their results into the output arrays they are given, exactly
as the numba kernels do; a backend must give bitwise the same numbers.

``numba`` (``backends/numba.py``, the CPU kernels of ``treeimp/kernels/``) is registered
and active by default. Adding a backend (a GPU one, say) is one module that implements
the operations and one call::

    from treeimp.backends import register_backend, use_backend
    register_backend("mine", MyBackend())
    with use_backend("mine"):
        treeimp.explain(model, X, y)

A backend may inherit operations it does not reimplement from
:class:`treeimp.backends.numba.NumbaBackend`. What stays on the numba kernels whatever the
backend: per-node passes over the trees alone (summing leaves up the trees, the in-bag
count comparison), TreeSHAP contributions and the permutation kernels that re-route
changed rows.

The active backend is one setting for the whole process (:func:`set_backend`,
:func:`use_backend`), so that threads a pass starts (Dask's threaded scheduler) use it
too; the worker processes of a Dask cluster each have their own (register and set it
there as well). Layer: above ``kernels`` and below everything else; imports nothing else of treeimp.
"""

from __future__ import annotations

import contextlib
from typing import Protocol

from .numba import NumbaBackend

# the operations a backend implements, in the order of Backend's methods
OPERATIONS = ("add_trees", "apply", "forest_leaf_stats", "staged_leaf_stats",
              "staged_scale_sums", "inbag_counts")

DEFAULT = "numba"


class Backend(Protocol):
    """What a backend implements: passes of a chunk of rows through the trees.

    Common arguments: ``X`` (n, n_features) the chunk's rows (float32 or float64,
    C order); ``routing`` (``kernel_inputs.Routing``) the node arrays rows are routed
    by; ``strict`` whether a split sends ``x < threshold`` left (else ``x <=``);
    ``round32`` whether x is rounded to float32 before comparing (``routing.routing_flags``);
    ``tree_offsets`` (n_trees + 1) every tree's first node; ``row0`` the chunk's first
    row within the call (where ``rows_in`` and in-bag bits are indexed). The semantics
    of each operation are those of the kernel the numba backend calls
    (``backends/numba.py``).
    """

    def add_trees(self, X, out, trees, sign, tree_offsets, tree_output, tree_scale, value,
                  routing, strict, round32, row_block):
        """out[i, tree_output[t] + j] += sign * tree_scale[t] * value[leaf, j] for the
        trees ``trees`` in their order (margins; ``row_block``: rows per parallel task,
        a hint a backend may ignore)."""

    def apply(self, X, out, tree_offsets, routing, strict, round32, row_block):
        """out[i, t] = the leaf row i reaches in tree t, as a node index local to the
        tree (int32)."""

    def forest_leaf_stats(self, X, row0, rows_in, inbag_bits, use_inbag, one_hot, stats,
                          tree_offsets, tree_output, routing, strict, round32, slot):
        """Add n', Q', S' (or class sums) of the rows into ``stats`` (n_leaves, n_blocks,
        D) at their leaves' slots, skipping rows in-bag for a tree with ``use_inbag``
        (``kernels/forest_stats.py``)."""

    def staged_leaf_stats(self, X, row0, order, block_start, rows_in, loss, trees, routing,
                          strict, round32, slot, stats, margin_out, fresh=False):
        """Add the staged terms n', S', H', R' of the rows into ``stats`` (n_leaves,
        n_blocks, 4), the margins moving stage by stage; final margins into
        ``margin_out`` unless it has no rows (``kernels/staged.py``). ``fresh``: the
        cells of ``stats`` are all zero (the first chunk), the rows of several blocks
        may then walk the trees together."""

    def staged_scale_sums(self, X, row0, rows_in, loss, trees, routing, strict, round32,
                          out):
        """Add w sqrt|m - y| per row part, stage and output into ``out`` (n_parts,
        n_stages, K): the smoothed objectives' per-round scales
        (``kernels/staged_scale.py``)."""

    def inbag_counts(self, X, row0, inbag_bits, tree_offsets, routing, strict, round32,
                     counts):
        """counts[leaf] += 1 for every row in-bag for the leaf's tree
        (``kernels/inbag_counts.py``)."""


_BACKENDS: dict[str, object] = {DEFAULT: NumbaBackend()}
_active = DEFAULT  # the active backend's name: one setting for the process


def missing_operations(backend) -> tuple:
    """The operations of ``OPERATIONS`` that ``backend`` lacks (not callable attributes)."""
    return tuple(op for op in OPERATIONS if not callable(getattr(backend, op, None)))


def register_backend(name, backend):
    """Add ``backend`` under ``name``; returns it.

    TypeError if ``name`` is not a non-empty string or ``backend`` lacks operations
    (they are named); ValueError if ``name`` is taken.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"a backend name must be a non-empty string, got {name!r}")
    missing = missing_operations(backend)
    if missing:
        raise TypeError(f"backend {name!r} ({type(backend).__name__}) does not implement "
                        f"{', '.join(missing)}; a backend implements all of "
                        f"{', '.join(OPERATIONS)}")
    if name in _BACKENDS:
        raise ValueError(f"a backend named {name!r} is already registered")
    _BACKENDS[name] = backend
    return backend


def unregister_backend(name):
    """Remove the backend ``name``; returns it. The default and the active backend
    cannot be removed (ValueError)."""
    _check_name(name)
    if name == DEFAULT:
        raise ValueError(f"the default backend {DEFAULT!r} cannot be unregistered")
    if name == _active:
        raise ValueError(f"backend {name!r} is active; switch to another before "
                         "unregistering it")
    return _BACKENDS.pop(name)


def backend_names() -> tuple:
    """The registered backends' names, in registration order."""
    return tuple(_BACKENDS)


def get_backend(name=None):
    """The backend ``name``, or the active one (``None``). ValueError naming the
    registered backends if there is none of that name."""
    return _BACKENDS[_active if name is None else _check_name(name)]


def set_backend(name):
    """Make ``name`` the active backend for the whole process; returns the name of the
    one active before."""
    global _active
    _check_name(name)
    previous, _active = _active, name
    return previous


@contextlib.contextmanager
def use_backend(name):
    """Make ``name`` the active backend for a with block, then restore the previous one;
    yields the backend."""
    previous = set_backend(name)
    try:
        yield _BACKENDS[name]
    finally:
        set_backend(previous)


def _check_name(name):
    if not isinstance(name, str) or name not in _BACKENDS:
        raise ValueError(f"unknown backend {name!r}; registered backends: "
                         f"{list(_BACKENDS)}")
    return name
