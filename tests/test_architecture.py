"""The layering of the package, at module grain: every import points down or within a layer,
and the module import graph has no cycle; and its sizes: no function over 80 lines, no module
over 600 (the project's limits).

The layers are read from the table in ``docs/architecture.rst`` (the ``list-table`` named
``layers``, top to bottom; a name is a module or a package). Imports are read from the source
with ``ast``, at module level and inside functions alike, so a lazy import is an arrow like any
other. An import of ``pyro_ar.a.b`` is an arrow to ``pyro_ar.a.b`` and to the package
``pyro_ar.a`` (whose ``__init__`` runs first) -- except for the root package ``pyro_ar``, which
every import passes through.
"""

import ast
import pathlib
import re
from typing import Dict, Iterator, List, Optional, Set, Tuple

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pyro_ar"
DOC = ROOT / "docs" / "architecture.rst"

Graph = Dict[str, Dict[str, bool]]  # module -> {imported module: late (inside a function) only}


# ------------------------------------------------------------------ reading the layers
def read_layers(text: str) -> List[Tuple[str, List[str]]]:
    """``[(layer name, [module or package names])]``, top to bottom, from the ``list-table``
    named ``layers`` of an rst page: each row is ``* - layer`` / ``- ``names```` / ``- text``."""
    tables = re.finditer(r"^\.\. list-table::.*\n((?:[ \t]+:.*\n)*)", text, re.M)  # directive + options
    match = next((t for t in tables if re.search(r":name:\s+layers\s*$", t.group(1), re.M)), None)
    if match is None:
        raise ValueError("docs/architecture.rst has no list-table with ':name: layers'")
    body = re.split(r"\n(?=\S)", text[match.end():], maxsplit=1)[0]  # up to the next unindented line
    rows = []
    for row in re.split(r"^\s*\* - ", body, flags=re.M)[1:]:
        cells = re.split(r"^\s*- ", row, flags=re.M)
        rows.append((cells[0].strip(), re.findall(r"``(pyro_ar(?:\.\w+)*)``", cells[1]) if len(cells) > 1 else []))
    header, layers = rows[0], rows[1:]
    if header[0] != "layer" or not layers:
        raise ValueError(f"the layers table must start with a 'layer' header row and have rows, got {rows!r}")
    return layers


def layer_ranks(layers: List[Tuple[str, List[str]]]) -> Dict[str, int]:
    """Name -> rank (0 for the bottom row); a name listed twice is an error."""
    ranks = {}
    for rank, (layer, names) in enumerate(reversed(layers)):
        for name in names:
            if name in ranks:
                raise ValueError(f"{name} is listed in two layers of docs/architecture.rst")
            ranks[name] = rank
    return ranks


def rank_of(module: str, ranks: Dict[str, int]) -> Optional[int]:
    """The rank of the longest listed name that is ``module`` or a package above it."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in ranks:
            return ranks[name]
    return None


# ------------------------------------------------------------------ reading the imports
def module_files(package: pathlib.Path = PACKAGE) -> Dict[str, pathlib.Path]:
    """Dotted module name -> file, for every ``.py`` file of the package."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(source: str, module: str, is_package: bool, known: Set[str]) -> Iterator[Tuple[str, bool]]:
    """``(imported module, late)`` for every import of ``pyro_ar`` in ``source``, the source
    of ``module``; ``late`` is True for an import inside a function. ``from X import name``
    imports the module ``X.name`` if there is one, otherwise ``X``."""
    tree = ast.parse(source)
    late_nodes = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for n in ast.walk(f)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: len(module.split(".")) - node.level + is_package]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            targets = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in known else prefix for a in node.names]
        else:
            continue
        for target in targets:
            if target == "pyro_ar" or target.startswith("pyro_ar."):
                yield target, id(node) in late_nodes


def import_graph(files: Dict[str, pathlib.Path]) -> Graph:
    """The module import graph (module-level and late imports), with the arrows to the
    packages a module import runs, except the root package and the importer's own packages."""
    known = set(files)
    graph: Graph = {m: {} for m in files}
    for module, path in files.items():
        own = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 2)}
        for target, late in imports(path.read_text(), module, path.name == "__init__.py", known):
            while target not in known:  # pyro_ar.x.attr -> pyro_ar.x
                target = target.rsplit(".", 1)[0]
            parts = target.split(".")
            runs = {".".join(parts[:i]) for i in range(2, len(parts) + 1)} - own  # packages run first
            for t in runs | ({target} if target != module else set()):
                if t in known:
                    graph[module][t] = graph[module].get(t, True) and late
    return graph


def find_cycle(graph: Graph) -> Optional[List[str]]:
    """A cycle of the graph as ``[a, b, ..., a]``, or None (iterative depth-first search)."""
    state = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def describe(cycle: List[str], graph: Graph) -> str:
    """``a -> b -[late]-> c -> a``: ``-[late]->`` is an import inside a function."""
    return cycle[0] + "".join(f" {'-[late]->' if graph[a][b] else '->'} {b}" for a, b in zip(cycle, cycle[1:]))


def upward(graph: Graph, ranks: Dict[str, int]) -> List[str]:
    """Every import that points to a higher layer, described."""
    bad = []
    for module, targets in sorted(graph.items()):
        for target, late in sorted(targets.items()):
            low, high = rank_of(module, ranks), rank_of(target, ranks)
            if low is not None and high is not None and high > low:  # (no layer: its own test)
                bad.append(f"{module} imports {target}{' (inside a function)' if late else ''}, a higher layer")
    return bad


# ------------------------------------------------------------------ sizes
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600


def long_functions(source: str, module: str, limit: int = MAX_FUNCTION_LINES) -> List[str]:
    """``"module.qualified.name: N lines"`` for every function or method of ``source`` longer
    than ``limit`` lines, N counted from its ``def`` line to its last line: signature,
    docstring, comments and blank lines inside it included (decorators not). A nested
    function is counted on its own and within its parent."""
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lines = child.end_lineno - child.lineno + 1
                    if lines > limit:
                        out.append(f"{name}: {lines} lines")
            visit(child, name)

    visit(ast.parse(source), module)
    return out


# ------------------------------------------------------------------ the package
LAYERS = read_layers(DOC.read_text())
RANKS = layer_ranks(LAYERS)
FILES = module_files()
GRAPH = import_graph(FILES)


def test_every_module_has_a_layer_and_every_name_exists():
    missing = [m for m in FILES if rank_of(m, RANKS) is None]
    assert not missing, f"modules without a layer in docs/architecture.rst: {missing}"
    stale = [name for name in RANKS if name not in FILES]
    assert not stale, f"docs/architecture.rst names modules that do not exist: {stale}"


def test_imports_point_down_or_within_a_layer():
    bad = upward(GRAPH, RANKS)
    assert not bad, "\n".join(bad)


def test_no_import_cycle():
    cycle = find_cycle(GRAPH)
    assert cycle is None, f"import cycle: {describe(cycle, GRAPH)}"


def test_no_function_over_80_lines_docstring_included():
    long = [f for m, path in FILES.items() for f in long_functions(path.read_text(), m)]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them into helpers): {long}"


def test_no_module_over_600_lines():
    long = {m: n for m, path in FILES.items() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


# ------------------------------------------------------------------ the checker itself
SOURCE_OF_SIZES = """import x

@decorator
def f(a,
      b):
    \"\"\"A docstring

    of five lines
    (in the count).
    \"\"\"
    def g():
        pass
    return a


class C:
    def m(self):
        \"\"\"One line.\"\"\"

        return 1
"""


def test_function_length_counts_the_signature_docstring_and_nested_functions():
    # f: its def on line 4 to 'return a' on line 13 = 10 lines (5 of them docstring); g: 2;
    # C.m: its def on line 17 to line 20 = 4
    assert long_functions(SOURCE_OF_SIZES, "mod", limit=3) == ["mod.f: 10 lines", "mod.C.m: 4 lines"]
    assert long_functions(SOURCE_OF_SIZES, "mod", limit=4) == ["mod.f: 10 lines"]
    assert long_functions(SOURCE_OF_SIZES, "mod", limit=9) == ["mod.f: 10 lines"]
    assert long_functions(SOURCE_OF_SIZES, "mod", limit=10) == []
    assert long_functions(SOURCE_OF_SIZES, "mod", limit=1) == ["mod.f: 10 lines", "mod.f.g: 2 lines",
                                                                "mod.C.m: 4 lines"]


def test_the_layers_table_is_read_top_to_bottom():
    text = ("intro\n\n.. list-table:: other\n   :header-rows: 1\n\n   * - x\n     - ``pyro_ar.nope``\n\n"
            ".. list-table:: L\n   :name: layers\n   :header-rows: 1\n\n   * - layer\n     - modules\n"
            "     - owns\n   * - top\n     - ``pyro_ar.b``,\n       ``pyro_ar.c``\n     - text ``pyro_ar.z``\n"
            "   * - bottom\n     - ``pyro_ar.a``\n     - text\n\nAfter\n-----\n``pyro_ar.q``\n")
    layers = read_layers(text)
    assert layers == [("top", ["pyro_ar.b", "pyro_ar.c"]), ("bottom", ["pyro_ar.a"])]
    ranks = layer_ranks(layers)
    assert rank_of("pyro_ar.b.sub", ranks) == 1 and rank_of("pyro_ar.a", ranks) == 0
    assert rank_of("pyro_ar.z", ranks) is None
    assert [name for name, _ in LAYERS][0] == "facade" and rank_of("pyro_ar", RANKS) == len(LAYERS) - 1


def test_late_and_relative_imports_are_read():
    known = {"pyro_ar", "pyro_ar.noise", "pyro_ar.models", "pyro_ar.models.base", "pyro_ar.infer",
             "pyro_ar.infer.guides"}
    source = ("from . import noise\nfrom .models.base import take_rows\n"
              "def f():\n    from .infer import default_guide\n    import pyro_ar.infer.guides\n")
    got = set(imports(source, "pyro_ar.quadrature", False, known))
    assert got == {("pyro_ar.noise", False), ("pyro_ar.models.base", False), ("pyro_ar.infer", True),
                   ("pyro_ar.infer.guides", True)}
    # inside a package: level 1 is the package itself, level 2 its parent
    got = set(imports("from .base import x\nfrom ..noise import y\n", "pyro_ar.models", True, known))
    assert got == {("pyro_ar.models.base", False), ("pyro_ar.noise", False)}
    got = set(imports("from . import base\nfrom .. import noise\n", "pyro_ar.models.linear", False, known))
    assert got == {("pyro_ar.models.base", False), ("pyro_ar.noise", False)}


def test_an_upward_import_inside_a_function_is_caught(tmp_path):
    pkg = tmp_path / "pyro_ar"
    (pkg / "high").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from .high.mod import g\n")
    (pkg / "high" / "__init__.py").write_text("")
    (pkg / "high" / "mod.py").write_text("from ..low import f\n")
    graph = import_graph(module_files(pkg))
    assert graph["pyro_ar.low"] == {"pyro_ar.high.mod": True, "pyro_ar.high": True}
    ranks = {"pyro_ar": 2, "pyro_ar.high": 1, "pyro_ar.low": 0}
    assert upward(graph, ranks) == [
        "pyro_ar.low imports pyro_ar.high (inside a function), a higher layer",
        "pyro_ar.low imports pyro_ar.high.mod (inside a function), a higher layer"]
    assert find_cycle(graph) == ["pyro_ar.high.mod", "pyro_ar.low", "pyro_ar.high.mod"]


def test_a_cycle_is_found_and_reported():
    graph = {"a": {"b": False}, "b": {"c": True}, "c": {"a": False, "d": False}, "d": {}}
    cycle = find_cycle(graph)
    assert cycle == ["a", "b", "c", "a"]
    assert describe(cycle, graph) == "a -> b -[late]-> c -> a"
    assert find_cycle({"a": {"b": False}, "b": {"c": False}, "c": {}, "d": {"a": False}}) is None
    assert find_cycle({"a": {"a": False}}) == ["a", "a"]


def test_a_cycle_through_a_package_init_is_found(tmp_path):
    """noise -> dist.wrapper (late) is no cycle by itself, but importing dist.wrapper runs
    dist/__init__, which imports dist.other, which imports noise: the cycle issue 28 found."""
    pkg = tmp_path / "pyro_ar"
    (pkg / "dist").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import noise, dist\n")
    (pkg / "noise.py").write_text("def f():\n    from .dist.wrapper import W\n")
    (pkg / "dist" / "__init__.py").write_text("from .other import *\nfrom .wrapper import *\n")
    (pkg / "dist" / "other.py").write_text("from ..noise import f\n")
    (pkg / "dist" / "wrapper.py").write_text("W = 1\n")
    graph = import_graph(module_files(pkg))
    assert "pyro_ar" not in graph["pyro_ar.noise"]  # the root package is no arrow
    cycle = find_cycle(graph)
    assert cycle is not None and set(cycle) == {"pyro_ar.noise", "pyro_ar.dist", "pyro_ar.dist.other"}
