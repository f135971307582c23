"""The Python package imports one way (DESIGN.md §3.4b): every import statement of every
module under aicraft/ (at any depth: inside functions and `if TYPE_CHECKING:` too) is read
with ast and checked against the layer table of aicraft/_layers.py. It fails on a cycle
among the modules, on an import from a layer into one above it (the package's own
__init__.py included), and on a module the table does not place. The checker is shown
to fail on small made-up graphs and sources too."""
import ast
import os

from aicraft import _layers
from graph_cycles import strongly_connected

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "aicraft"


# ---- reading the package --------------------------------------------------------

def find_modules(root=ROOT):
    """{dotted name: path relative to root} of every module of the package (the compiled
    _libac too: _ffi.py imports it)."""
    found = {}
    for folder, subfolders, files in os.walk(os.path.join(root, PACKAGE)):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith((".", "__pycache__")))
        for f in sorted(files):
            path = os.path.relpath(os.path.join(folder, f), root)
            if f.endswith(".py"):
                name = path[:-3].replace(os.sep, ".")
                found[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
            elif f.endswith((".so", ".pyd")):    # _libac.abi3.so, _libac.cpython-311-....so
                found[os.path.dirname(path).replace(os.sep, ".") + "." + f.split(".")[0]] = path
    return found


def _known(name, modules):
    """name, or its longest prefix that is a module (aicraft.cuda.amp is made at run time)."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in modules else None


def imports_of(name, source, modules, is_package=False):
    """[(module imported, line)] of every aicraft import in source, module name's text.
    `from X import y` counts X.y when that is a module, else X: a name taken from the
    package (`from aicraft import zeros`) is an import of aicraft/__init__.py."""
    here = name if is_package else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = here.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [base + "." + a.name if base + "." + a.name in modules else base for a in node.names]
        else:
            continue
        for target in targets:
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                module = _known(target, modules)
                if module is None:
                    raise AssertionError("%s line %d imports %s, which is no module of the package"
                                         % (name, node.lineno, target))
                if module != name:
                    found.append((module, node.lineno))
    return sorted(set(found), key=lambda x: (x[1], x[0]))


def package_graph(root=ROOT):
    """{module: [(module imported, line)]}, {module: path} of the package."""
    modules = find_modules(root)
    graph = {}
    for name, path in modules.items():
        if not path.endswith(".py"):
            graph[name] = []
            continue
        with open(os.path.join(root, path), encoding="utf-8") as f:
            graph[name] = imports_of(name, f.read(), modules, path.endswith("__init__.py"))
    return graph, modules


def layer_table(layers=_layers.LAYERS):
    """[(layer index, layer name, entry)] with each entry a full module name, or a
    package name ending ".*" for the package and everything in it."""
    table = []
    for index, (layer, _, names) in enumerate(layers):
        for entry in names.split():
            full = PACKAGE if entry == PACKAGE else PACKAGE + "." + entry
            table.append((index, layer, full))
    return table


def place(modules, table):
    """{module: (layer index, layer name)}, and the problems: modules the table misses,
    entries that name no module, modules named twice."""
    placed, problems = {}, []
    for index, layer, entry in table:
        if entry.endswith(".*"):
            prefix = entry[:-2]
            hits = [m for m in modules if m == prefix or m.startswith(prefix + ".")]
        elif entry in modules:
            hits = [entry]
        else:
            problems.append("aicraft/_layers.py names %s (layer %r), which is no module: remove it"
                            % (entry, layer))
            hits = []
        for m in hits:
            if m in placed:
                problems.append("aicraft/_layers.py places %s twice (layers %r and %r)" % (m, placed[m][1], layer))
            placed[m] = (index, layer)
    for m in sorted(modules):
        if m not in placed:
            problems.append("%s (%s) is in no layer: add it to the table in aicraft/_layers.py"
                            % (m, modules[m]))
    return placed, problems


# ---- the checks ---------------------------------------------------------------------

def cycles(graph):
    """The strongly connected components of more than one module, each as a cycle
    [(module, module it imports, line), ...] through all of its members' edges found."""
    found = strongly_connected({v: [w for w, _ in imports] for v, imports in graph.items()})
    return [_one_cycle(graph, set(c)) for c in found]


def _one_cycle(graph, members):
    """A cycle through the component's first member: [(module, imports, line), ...]."""
    start = min(members)
    paths = {start: []}
    frontier = [start]
    while frontier:         # breadth first: the shortest way back to start
        following = []
        for v in frontier:
            for w, line in graph.get(v, ()):
                if w == start:
                    return paths[v] + [(v, w, line)]
                if w in members and w not in paths:
                    paths[w] = paths[v] + [(v, w, line)]
                    following.append(w)
        frontier = following
    raise AssertionError("no cycle through %s" % start)


def check(graph, placed, paths=None):
    """The problems of a graph {module: [(module imported, line)]} with modules placed
    in layers {module: (index, name)}: cycles and upward imports (into the package's
    __init__.py too, from any layer beneath it)."""
    paths = paths or {}
    where = lambda m, line: "%s:%d" % (paths.get(m, m), line)   # noqa: E731
    problems = []
    for cycle in cycles(graph):
        problems.append("import cycle: " + ", ".join("%s imports %s (%s)" % (a, b, where(a, line))
                                                   for a, b, line in cycle))
    for m in sorted(graph):
        for target, line in graph[m]:
            if m in placed and target in placed and placed[target][0] > placed[m][0]:
                what = "the package aicraft itself" if target == PACKAGE else target
                advice = ": import the submodule that defines the name" if target == PACKAGE else ""
                problems.append("%s (layer %r) imports %s (layer %r, above it) at %s%s"
                                % (m, placed[m][1], what, placed[target][1], where(m, line), advice))
    return problems


# ---- the package ----------------------------------------------------------------------

def test_every_module_has_a_layer():
    graph, modules = package_graph()
    _, problems = place(modules, layer_table())
    assert not problems, "\n".join(problems)


def test_the_package_imports_one_way():
    graph, modules = package_graph()
    placed, _ = place(modules, layer_table())
    problems = check(graph, placed, modules)
    assert not problems, "\n".join(problems)


def test_the_package_init_binds_what_the_layers_below_define():
    # the ops modules' methods are bound from above: the class itself imports none of them
    graph, _ = package_graph()
    assert {m for m, _ in graph["aicraft.tensor"]} <= {
        "aicraft._args", "aicraft._ffi", "aicraft._grad", "aicraft._scope", "aicraft._wrapping",
        "aicraft.dtypes", "aicraft.errors"}


# ---- the checker can fail ----------------------------------------------------------

MODULES = {"aicraft": "aicraft/__init__.py", "aicraft.low": "aicraft/low.py",
           "aicraft.high": "aicraft/high.py", "aicraft.sub": "aicraft/sub/__init__.py",
           "aicraft.sub.leaf": "aicraft/sub/leaf.py"}
PLACED = {"aicraft.low": (0, "low"), "aicraft.sub": (0, "low"), "aicraft.sub.leaf": (0, "low"),
          "aicraft.high": (1, "high"), "aicraft": (2, "package"), "aicraft.app": (3, "services")}


def test_checker_finds_a_cycle_and_names_its_lines():
    graph = {"aicraft.low": [("aicraft.sub.leaf", 3)], "aicraft.sub.leaf": [("aicraft.low", 12)],
             "aicraft.high": [("aicraft.low", 1)]}
    problems = check(graph, PLACED, MODULES)
    assert problems == ["import cycle: aicraft.low imports aicraft.sub.leaf (aicraft/low.py:3), "
                        "aicraft.sub.leaf imports aicraft.low (aicraft/sub/leaf.py:12)"]


def test_checker_finds_an_upward_import():
    graph = {"aicraft.low": [("aicraft.high", 7)], "aicraft.high": []}
    assert check(graph, PLACED, MODULES) == [
        "aicraft.low (layer 'low') imports aicraft.high (layer 'high', above it) at aicraft/low.py:7"]


def test_checker_refuses_importing_the_package_from_beneath_it():
    graph = {"aicraft.high": [("aicraft", 4)], "aicraft": [("aicraft.high", 1)],
             "aicraft.app": [("aicraft", 2)]}      # the services' layer, above the package: allowed
    problems = check(graph, PLACED, MODULES)
    assert problems == [
        "import cycle: aicraft imports aicraft.high (aicraft/__init__.py:1), aicraft.high imports aicraft "
        "(aicraft/high.py:4)",
        "aicraft.high (layer 'high') imports the package aicraft itself (layer 'package', above it) at "
        "aicraft/high.py:4: import the submodule that defines the name"]


def test_every_import_statement_counts():
    source = (
        "import os\n"
        "from typing import TYPE_CHECKING\n"
        "from aicraft import low\n"                # a submodule
        "if TYPE_CHECKING:\n"
        "    from aicraft.high import Thing\n"     # for type checkers only: still counted
        "def f():\n"
        "    from . import leaf\n"                 # relative, inside a function
        "    import aicraft.sub.leaf as L\n"
        "    from .. import zeros\n"               # a name of the package: its __init__
        "    from ..high import *\n")
    found = imports_of("aicraft.sub", source, MODULES, is_package=True)
    assert found == [("aicraft.low", 3), ("aicraft.high", 5), ("aicraft.sub.leaf", 7),
                     ("aicraft.sub.leaf", 8), ("aicraft", 9), ("aicraft.high", 10)]
    assert imports_of("aicraft.sub.leaf", "from . import zeros\nfrom .leaf import x\n", MODULES) == \
        [("aicraft.sub", 1)]


def test_the_table_places_every_module_once():
    table = [(0, "low", "aicraft.low"), (0, "low", "aicraft.sub.*"), (1, "high", "aicraft.low"),
             (1, "high", "aicraft.gone")]
    _, problems = place(MODULES, table)
    assert problems == [
        "aicraft/_layers.py places aicraft.low twice (layers 'low' and 'high')",
        "aicraft/_layers.py names aicraft.gone (layer 'high'), which is no module: remove it",
        "aicraft (aicraft/__init__.py) is in no layer: add it to the table in aicraft/_layers.py",
        "aicraft.high (aicraft/high.py) is in no layer: add it to the table in aicraft/_layers.py"]
