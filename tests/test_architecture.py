"""The package's shape, computed from its source (docs/architecture.md): no import cycles,
kernels that import nothing of treeimp, numba code only in kernels/, treeimp modules
imported at module level, a short top level. The layer order itself is import-linter's
contract in pyproject.toml, run by .ci/run."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "treeimp"


def _modules():
    """{dotted module name: (path, parsed source)} of every module of treeimp."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = (path, ast.parse(path.read_text(), filename=str(path)))
    return out


MODULES = _modules()


def _target(module, is_package, node):
    """The absolute module an ``ImportFrom`` names."""
    if node.level == 0:
        return node.module
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module):
    """[(imported treeimp module, lineno, inside a function)] of one module: an imported
    name that is itself a module counts as that module."""
    path, tree = MODULES[module]
    is_package = path.name == "__init__.py"
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.ImportFrom):
                target = _target(module, is_package, child)
                if target and (target == "treeimp" or target.startswith("treeimp.")):
                    for alias in child.names:
                        sub = f"{target}.{alias.name}"
                        found.append((sub if sub in MODULES else target, child.lineno,
                                      in_function))
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name == "treeimp" or alias.name.startswith("treeimp."):
                        found.append((alias.name, child.lineno, in_function))
            visit(child, inner)

    visit(tree, False)
    return found


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            strong(v)
    return out


def _graph():
    return {m: {t for t, _, _ in _imports(m) if t in MODULES and t != m} for m in MODULES}


def test_cycle_finder_finds_a_cycle():
    # the finder itself can fail: a three-module ring and a self-contained pair
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_kernels_import_nothing_of_treeimp():
    bad = [(m, t, line) for m in MODULES if m.startswith("treeimp.kernels")
           for t, line, _ in _imports(m) if not t.startswith("treeimp.kernels")]
    assert bad == []


def _compiled_functions(tree):
    """Line numbers of functions decorated with numba's njit / jit / vectorize."""
    names = {"njit", "jit", "vectorize", "guvectorize", "cfunc", "stencil"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                d = d.func if isinstance(d, ast.Call) else d
                name = d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", None)
                if name in names:
                    found.append(node.lineno)
    return found


def test_compiled_function_finder_sees_both_spellings():
    tree = ast.parse("import numba\nfrom numba import njit\n@numba.njit(cache=True)\n"
                     "def f(x):\n    return x\n@njit\ndef g(x):\n    return x\n")
    assert _compiled_functions(tree) == [4, 7]


def test_numba_code_lives_in_kernels():
    bad = [(m, line) for m, (_, tree) in MODULES.items()
           if not m.startswith("treeimp.kernels") for line in _compiled_functions(tree)]
    assert bad == []


def test_treeimp_modules_are_imported_at_module_level():
    # function-level imports are kept for optional third-party packages only
    bad = [(m, t, line) for m in MODULES for t, line, inner in _imports(m) if inner]
    assert bad == []


def test_top_level_is_short():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 8, top


@pytest.mark.parametrize("layer", ["kernels", "backends", "inputs", "model", "parsers", "stats",
                                   "measures", "results", "permutation", "attributions",
                                   "dask", "spark", "cli"])
def test_every_stage_is_a_documented_package(layer):
    assert (PACKAGE / layer / "__init__.py").is_file()
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    assert f"`{layer}/`" in doc
