"""The package's shape (issue 14's rules): no import circle, no arrow up from the product to
the tools (issue 39), the core's names imported from their homes, classes of a readable size,
a map.

A module's length is no longer capped (issue 39): its functions are, by ruff's complexity rules
(C901, PLR0912, PLR0915 in pyproject.toml, docs/decisions.md "Function budgets"), which this
file checks are switched on for the package.

Read from the source as text (``ast``): nothing is imported, no server is needed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dynaunique"
#: "No class over ~250 lines".
MAX_CLASS_LINES = 260


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Every module's imports of other dynaunique modules, lazy ones (inside functions) too;
    ``if TYPE_CHECKING:`` blocks do not count (nothing runs them)."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        pending: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
        while pending:
            node = pending.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    continue
                targets: list[str] = []
                if isinstance(child, ast.Import):
                    targets = [alias.name for alias in child.names]
                elif isinstance(child, ast.ImportFrom):
                    base = child.module or ""
                    if child.level:
                        parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                        base = ".".join([*parts, base] if base else parts)
                    targets = [f"{base}.{alias.name}" for alias in child.names] or [base]
                for target in targets:
                    if target.startswith("dynaunique"):
                        resolved = _resolve(target, modules)
                        if resolved is not None and resolved != name:
                            graph[name].add(resolved)
                pending.append(child)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_sees_lazy_and_relative_imports() -> None:
    graph = import_graph()
    assert "dynaunique.errors" in graph["dynaunique"]
    assert len(graph) == len(_modules()) and sum(map(len, graph.values())) > 50


def test_no_import_circle_inside_the_package() -> None:
    assert cycles(import_graph()) == []


#: The tools: the CLI and the testing kit (its local server, its fixtures) use the product,
#: never the other way round (issue 39: arrows run only down).
TOOLS = ("dynaunique.cli", "dynaunique.testing", "dynaunique.testing_async")


def _is_tool(name: str) -> bool:
    return any(name == tool or name.startswith(f"{tool}.") for tool in TOOLS)


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every (product module, tool module) where the product module imports the tool."""
    return sorted((name, target) for name, targets in graph.items() if not _is_tool(name)
                  for target in targets if _is_tool(target))


def test_the_layer_check_finds_an_arrow_up() -> None:
    graph = {"dynaunique.ui._app": {"dynaunique.testing", "dynaunique.audit"},
             "dynaunique.cli._ui": {"dynaunique.ui", "dynaunique.testing"},
             "dynaunique.testing_async": {"dynaunique.testing.aio"},
             "dynaunique.streams.aws_lambda": {"dynaunique.cli._common"},
             "dynaunique.clinic": {"dynaunique.testingx"}}
    assert upward_imports(graph) == [("dynaunique.streams.aws_lambda", "dynaunique.cli._common"),
                                     ("dynaunique.ui._app", "dynaunique.testing")]


def test_no_product_module_imports_the_cli_or_the_testing_kit() -> None:
    # What they share (loading the user's models, pointing them) sits below both:
    # dynaunique/_user_models.py; the ui gets its embedded server from the CLI.
    assert upward_imports(import_graph()) == []


#: The core's three layers (docs/decisions.md "Layout", made by tools/relayout.py) and the
#: layers each may import: the write pipeline uses the lock scheme and the transport; neither of
#: those imports the pipeline or the other.
LAYERS: dict[str, set[str]] = {"dynaunique._write": {"dynaunique._lock", "dynaunique._transport"},
                               "dynaunique._lock": set(), "dynaunique._transport": set()}


def _layer(name: str) -> str | None:
    return next((layer for layer in LAYERS if name == layer or name.startswith(f"{layer}.")), None)


def imports_across_layers(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every (module, import) where a layer imports a layer it may not."""
    found = []
    for name, targets in graph.items():
        mine = _layer(name)
        for target in targets:
            theirs = _layer(target)
            if mine is not None and theirs not in (None, mine) and theirs not in LAYERS[mine]:
                found.append((name, target))
    return sorted(found)


def test_the_layer_rule_finds_an_import_across() -> None:
    graph = {"dynaunique._write.flush": {"dynaunique._transport.connection", "dynaunique._lock"},
             "dynaunique._transport.wire": {"dynaunique._write.plan", "dynaunique.errors"},
             "dynaunique._lock.locks": {"dynaunique._transport", "dynaunique._lock.kinds"},
             "dynaunique.model": {"dynaunique._write.flush"}}
    assert imports_across_layers(graph) == [
        ("dynaunique._lock.locks", "dynaunique._transport"),
        ("dynaunique._transport.wire", "dynaunique._write.plan")]


def test_the_core_layers_import_only_down() -> None:
    graph = import_graph()
    if not any(_layer(name) for name in graph):
        pytest.skip("the core is not in its folders yet (python tools/relayout.py)")
    assert imports_across_layers(graph) == []



#: The layers that re-export nothing: each of their names is imported from the module that
#: defines it (docs/decisions.md "Layout").
NO_REEXPORTS = ("dynaunique._lock", "dynaunique._write", "dynaunique._transport")
#: Where the package's internal names are imported: the package and everything around it.
SOURCES = ("dynaunique", "tests", "benchmarks", "conformance", "examples", "tools")


def _defined(path: Path) -> set[str]:
    """The names a module defines at its top level (a def, a class, an assignment)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _imports_from(text: str, statement: re.Pattern[str]) -> list[ast.ImportFrom]:
    # Each matching statement parsed alone (fast); the whole file when the pattern cut one short.
    try:
        nodes = [ast.parse(match.group().strip()).body[0] for match in statement.finditer(text)]
    except SyntaxError:   # a ")" in a comment inside the parentheses, or a docstring's text
        nodes = list(ast.walk(ast.parse(text)))
    return [node for node in nodes if isinstance(node, ast.ImportFrom)]


def imports_not_from_home(sources: list[Path], modules: dict[str, Path],
                          layers: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """Every (file, module, name) where ``name`` is imported from a module of ``layers`` that
    does not define it (it imports it from elsewhere: the import goes through a re-export)."""
    defined: dict[str, set[str]] = {}
    found = []
    names_of = "|".join(map(re.escape, layers))
    statement = re.compile(rf"^[ \t]*from (?:{names_of})\S* import (?:\([^)]*\)|.*)$",
                           flags=re.MULTILINE)
    for source in sources:
        for node in _imports_from(source.read_text(encoding="utf-8"), statement):
            if node.level or node.module not in modules:
                continue
            assert node.module is not None
            names = defined.setdefault(node.module, _defined(modules[node.module]))
            found += [(str(source), node.module, alias.name) for alias in node.names
                      if alias.name not in names and f"{node.module}.{alias.name}" not in modules]
    return sorted(found)


def test_the_home_rule_finds_an_import_through_a_re_export(tmp_path: Path) -> None:
    modules = {}
    for name, text in {"core.a": "X = 1\n", "core.b": "from core.a import X\nY = X\n",
                       "core": ""}.items():
        path = tmp_path / f"{name}.py"
        path.write_text(text, encoding="utf-8")
        modules[name] = path
    user = tmp_path / "user.py"
    user.write_text("from core.b import X, Y\nfrom core.a import X\nfrom core import a\n",
                    encoding="utf-8")
    assert imports_not_from_home([user], modules, ("core",)) == [(str(user), "core.b", "X")]


def test_the_core_names_are_imported_from_their_homes() -> None:
    sources = [path for folder in SOURCES for path in sorted((ROOT / folder).rglob("*.py"))]
    assert imports_not_from_home(sources, _modules(), NO_REEXPORTS) == []


#: The function budgets: ruff's rule → its setting (docs/decisions.md, "Function budgets").
BUDGETS = {"C901": ("mccabe", "max-complexity", 15),
           "PLR0912": ("pylint", "max-branches", 15),
           "PLR0915": ("pylint", "max-statements", 50)}


def _ruff_lint() -> dict[str, Any]:
    try:
        import tomllib as toml
    except ModuleNotFoundError:  # Python 3.10
        toml = pytest.importorskip("tomli")
    config = toml.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    lint: dict[str, Any] = config["tool"]["ruff"]["lint"]
    return lint


def test_the_function_budgets_hold_for_the_package() -> None:
    lint = _ruff_lint()
    assert set(BUDGETS) <= set(lint["select"])
    for rule, (table, setting, value) in BUDGETS.items():
        assert lint[table][setting] == value, rule
    # Held by the package only: a file outside it may ignore them, none inside may.
    for pattern, rules in lint.get("per-file-ignores", {}).items():
        if set(BUDGETS) & set(rules):
            assert pattern == "!dynaunique/**", pattern


def test_no_class_is_too_big_either() -> None:
    big = {}
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                length = node.end_lineno - node.lineno + 1
                if length > MAX_CLASS_LINES:
                    big[f"{name}.{node.name}"] = length
    assert big == {}


def test_the_map_of_the_package_names_every_module() -> None:
    text = (ROOT / "docs" / "decisions.md").read_text(encoding="utf-8")
    section = text.split("## Map of the package", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([\w./]+)` \|", section, flags=re.MULTILINE))
    files = {str(path.relative_to(PACKAGE)) for path in _modules().values()}
    assert files - listed == set(), "modules missing from the map"
    assert listed - files == set(), "the map names modules that do not exist"
