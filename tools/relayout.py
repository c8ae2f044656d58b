"""Move the package's flat row of underscore modules into three folders (issue 39, "Layers you
can see"), and rewrite every reference to them.

Run it from a clone's root, on a clean tree, after the branches that edit these modules have
merged::

    python tools/relayout.py            # move, rewrite, print what it did
    python tools/relayout.py --dry-run  # print what it would do, change nothing

What it does, in this order:

1. **Rewrites references** in ``SCOPE`` (the package, tests, benchmarks, conformance, examples,
   docs, README.md, conftest.py, noxfile.py, pyproject.toml, .ci/, deploy/): Python imports of a
   moved module in every form (``from dynaunique._x import``, ``from dynaunique import _x``,
   ``import dynaunique._x``, relative imports inside the package) read with ``ast``, so that a
   ``from dynaunique import _flush, observe`` becomes two statements and every bound name stays
   what it was (``from dynaunique._write import flush as _flush``); then every dotted name
   (``"dynaunique._wire._send"`` in ``mock.patch``, docs text) and path
   (``dynaunique/_wire.py``), matched on whole names only. A moved file's relative imports become
   absolute (their meaning would change with the folder).
2. **Moves** each module of ``MOVES`` with ``git mv``. A module that is not there is skipped
   with a printed line (another change may have merged or renamed it); one already at its new
   place is left alone.
3. **Creates** each folder's ``__init__.py``: a docstring saying what the layer is, no
   re-exports.
4. **docs/decisions.md**: the "Map of the package" rows get the new paths (each layer's rows
   together, its ``__init__.py`` first); the "Layout" section is inserted before "Function
   budgets" if it is not there.
5. **Sorts the imports it touched** with ``ruff check --fix --select I001`` (ruff from the
   project's ``.venv`` or ``PATH``), then prints a summary and any reference to an old name it
   could not rewrite.

Idempotent: a second run finds nothing to move and nothing to rewrite, and says so. It never
deletes a file and never commits: ``git diff --stat`` shows what it did; commit it as one
change. Afterwards run ruff, ``mypy --strict dynaunique`` and tests/unit/test_package.py.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: Old dotted name → new dotted name.
MOVES: dict[str, str] = {
    # The write pipeline, in the order a write goes: collect → plan → render → send → settle.
    "dynaunique._state": "dynaunique._write.state",
    "dynaunique._record": "dynaunique._write.record",
    "dynaunique._plan": "dynaunique._write.plan",
    "dynaunique._model.mixed": "dynaunique._write.mixed",
    "dynaunique._writes": "dynaunique._write.writes",
    "dynaunique._render": "dynaunique._write.render",
    "dynaunique._transaction": "dynaunique._write.transaction",
    "dynaunique._heal": "dynaunique._write.heal",
    "dynaunique._mrsc": "dynaunique._write.mrsc",
    "dynaunique._flush": "dynaunique._write.flush",
    "dynaunique._atomic": "dynaunique._write.atomic",
    # The lock scheme: what is stored and how its keys are spelled (pure).
    "dynaunique._locks": "dynaunique._lock.locks",
    "dynaunique._lockcode": "dynaunique._lock.lockcode",
    "dynaunique._items": "dynaunique._lock.items",
    "dynaunique._kinds": "dynaunique._lock.kinds",
    "dynaunique._sizes": "dynaunique._lock.sizes",
    # The transport: the one boundary to DynamoDB.
    "dynaunique._connection": "dynaunique._transport.connection",
    "dynaunique._clients": "dynaunique._transport.clients",
    "dynaunique._wire": "dynaunique._transport.wire",
    "dynaunique._codec": "dynaunique._transport.codec",  # merged into _wire by #38's work
    "dynaunique._botocore": "dynaunique._transport.botocore",
    "dynaunique._answers": "dynaunique._transport.answers",
    "dynaunique._regions": "dynaunique._transport.regions",
    "dynaunique._endpoint": "dynaunique._transport.endpoint",
}

#: The folders: dotted name → the docstring of its ``__init__.py`` (no re-exports).
LAYERS: dict[str, str] = {
    "dynaunique._write": (
        "The write pipeline: every save, delete, ``update(actions)`` and unit of work goes\n"
        "through it, top to bottom. Collect each object's state (``state``), plan it from its\n"
        "record (``record``, ``plan``; ``mixed`` for tables several models share), render the\n"
        "plan as the exact request (``render``, over the vocabulary of writes in ``writes``),\n"
        "send it through :mod:`dynaunique._transport`, settle a refusal (``transaction``; an\n"
        "orphan lock taken over by ``heal``) and finish; ``flush`` drives these steps and\n"
        "``atomic`` is the unit of work. It builds keys and items with :mod:`dynaunique._lock`;\n"
        "neither of the layers below imports it. No re-exports: import the module you need.\n"
    ),
    "dynaunique._lock": (
        "The lock scheme: what dynaunique stores and how its keys are spelled. A record's key and\n"
        "the locks its stored values require, the injective encoding of a value into a lock key,\n"
        "the one builder of each lock write (``locks``, ``lockcode``); the vocabulary of items\n"
        "(``items``: model info, owners, which model an item is a record of); the base of every\n"
        "kind (``kinds``); DynamoDB's size arithmetic (``sizes``). Pure: no I/O, and nothing of\n"
        "the pipeline or the transport is imported here. The model's planner, the audit's\n"
        "repairs, the migrations' backfill and the stream guard all build their locks from it,\n"
        "so they cannot drift apart. No re-exports: import the module you need.\n"
    ),
    "dynaunique._transport": (
        "The transport: the one boundary to DynamoDB. The one retry loop as sans-IO steps and\n"
        "its sync driver (``connection``; the asyncio driver is the public\n"
        ":mod:`dynaunique.aio`), a model's botocore client (``clients``), the request path\n"
        "below botocore's dispatch (``wire``, behind the fence around botocore's privates,\n"
        "``botocore``), what DynamoDB answered as values (``answers``),\n"
        "where a global table's write goes (``regions``) and where the tools send requests\n"
        "(``endpoint``). It knows nothing of locks or records: nothing of\n"
        ":mod:`dynaunique._write` or :mod:`dynaunique._lock` is imported here. No re-exports:\n"
        "import the module you need.\n"
    ),
}

#: The glossary's renames a script can make safely (docs/decisions.md, "One word, one thing"),
#: applied only with ``--glossary``: private modules and private names, each used in the files
#: named and nowhere else (checked when written, and again when run). The others need a person.
GLOSSARY_MOVES: dict[str, str] = {
    "dynaunique.ui._guard": "dynaunique.ui._access",  # the page's access check, not a guard
}
#: (module whose file holds the name, the other modules using it, old name, new name).
GLOSSARY_NAMES: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("dynaunique.ui._access", ("dynaunique.ui._app",), "_Guard", "_Access"),
    ("dynaunique.migrations._segments", (), "_flush", "_checkpoint"),  # a checkpoint saved
    ("dynaunique.audit._spill", (), "_flush", "_write_out"),  # the buffer written to its file
)

#: Each folder's row in docs/decisions.md's "Map of the package".
LAYER_ROWS: dict[str, str] = {
    "dynaunique._write": "The write pipeline (a folder, see \"Layout\"): collect → plan → render → "
                         "send → settle → finish; its docstring, no re-exports.",
    "dynaunique._lock": "The lock scheme (a folder, see \"Layout\"): keys, lock items and their "
                        "encoding, the vocabulary of items (pure); its docstring, no re-exports.",
    "dynaunique._transport": "The transport (a folder, see \"Layout\"): the one boundary to "
                             "DynamoDB and the one retry loop; its docstring, no re-exports.",
}

#: Where references are rewritten (files and folders, from the root).
SCOPE = ("dynaunique", "tests", "benchmarks", "conformance", "examples", "docs", "README.md",
         "conftest.py", "noxfile.py", "pyproject.toml", ".ci", "deploy")
TEXT_SUFFIXES = {".py", ".md", ".rst", ".txt", ".toml", ".cfg", ".ini", ".yml", ".yaml", ".json",
                 ".sh", ".tf", ".j2", ".html", ""}
#: Files whose old names are on purpose: the script's own tests (their inputs).
SKIP_FILES = {"tests/unit/test_relayout.py"}
SKIP_PARTS = {"__pycache__", "_build", ".venv", ".git", ".mypy_cache", ".ruff_cache",
              ".pytest_cache", "node_modules"}

DOCS = Path("docs/decisions.md")
LAYOUT_HEADING = "## Layout: three layers (issue 39)"
LAYOUT_TEXT = f"""{LAYOUT_HEADING}

**The product core is three folders, each a layer, and imports run only down.** Until issue 39
it was a flat row of underscore modules, and nothing said which were the write pipeline, the
lock scheme or the transport. `tools/relayout.py` made the folders (its `MOVES` table is the
list of what moved where; `git log --follow` finds a module's history):

- **`_write/`, the write pipeline**: `state`, `record`, `plan` and `mixed` (tables several
  models share, beside the planner that imports it), `writes`, `render`, `transaction`,
  `heal`, `flush` (which drives them) and `atomic` (the unit of work). It uses the two below.
- **`_lock/`, the lock scheme** (pure): `locks` and `lockcode` (keys, the encoding of a value
  into a lock key, the one builder of each lock write), `items` (model info, owners, which
  model an item is a record of), `kinds`, `sizes`. It imports neither `_write` nor
  `_transport`; the audit, the migrations and the stream guard build their locks from it.
- **`_transport/`, the one boundary to DynamoDB**: `connection` (the retry loop as sans-IO
  steps, and the sync driver), `clients`, `wire`, `botocore` (the fence around botocore's
  privates), `answers`, `regions`, `endpoint`. It imports neither `_write` nor `_lock`. The
  asyncio driver of the same steps is `dynaunique.aio`, which stays where it is because it is
  public API.

Above them: `model.py` and the mixins in `_model/`, then the public modules (`attributes`,
`constraints`, `normalizers`, `errors`, `observe`); above those the tools (`audit`,
`migrations`, `streams`, `ui`, and at the top `cli` and `testing`, which no product module
imports). `_user_models.py` and `_pyproject.py` stay at the root: they serve the tools.
Inside a private folder a module has no underscore (as in `_model/`); an `__init__.py` holds
the layer's docstring and re-exports nothing. `tests/unit/test_package.py` checks the
directions.

"""
BUDGETS_HEADING = "## Function budgets"
MAP_HEADING = "## Map of the package"


@dataclass
class Report:
    moved: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    rewritten: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    docs: list[str] = field(default_factory=list)


# --- names and paths -------------------------------------------------------------------------

def module_path(dotted: str, root: Path) -> Path:
    """``dynaunique._model.mixed`` → ``root/dynaunique/_model/mixed.py``."""
    return root.joinpath(*dotted.split(".")).with_suffix(".py")


def package_path(dotted: str, root: Path) -> Path:
    return root.joinpath(*dotted.split("."))


def dotted_of(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def files_in_scope(root: Path) -> list[Path]:
    found: list[Path] = []
    for name in SCOPE:
        top = root / name
        candidates = [top] if top.is_file() else sorted(top.rglob("*")) if top.is_dir() else []
        for path in candidates:
            rel = path.relative_to(root)
            if not path.is_file() or SKIP_PARTS & set(rel.parts) or rel.as_posix() in SKIP_FILES:
                continue
            if path.suffix in TEXT_SUFFIXES:
                found.append(path)
    return found


def _dotted_pattern(old: str) -> re.Pattern[str]:
    # A whole dotted name: not part of a longer identifier or dotted name before it, and not
    # followed by more identifier characters (``dynaunique._locks`` is not ``_lockcode``).
    return re.compile(r"(?<![\w.])" + re.escape(old) + r"(?!\w)")


def _path_pattern(old: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.-])" + re.escape(old.replace(".", "/")) + r"(?![\w])")


# --- Python imports --------------------------------------------------------------------------

def _absolute(node: ast.ImportFrom, package: str | None) -> str | None:
    """The module ``node`` imports from, absolute (None: a relative import outside a package)."""
    if not node.level:
        return node.module or ""
    if package is None:
        return None
    parts = package.split(".")
    if node.level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _mapped(dotted: str, moves: dict[str, str]) -> str:
    """``dotted`` with its longest moved prefix replaced."""
    for old in sorted(moves, key=len, reverse=True):
        if dotted == old or dotted.startswith(old + "."):
            return moves[old] + dotted[len(old):]
    return dotted


def _alias(name: str, asname: str | None) -> str:
    return name if asname is None or asname == name else f"{name} as {asname}"


def rewrite_import_from(node: ast.ImportFrom, package: str | None, moves: dict[str, str],
                        make_absolute: bool) -> list[str] | None:
    """The statements ``node`` becomes, or None when it stays as it is. ``package``: the
    importing file's package (for a relative import); ``make_absolute``: the file moves, so a
    relative import of its own becomes absolute."""
    base = _absolute(node, package)
    if base is None:
        return None
    new_base = _mapped(base, moves)
    groups: dict[str, list[str]] = {}
    split = False
    for alias in node.names:
        if alias.name != "*":
            full = f"{base}.{alias.name}"
            new_full = _mapped(full, moves)
            if new_full not in (full, f"{new_base}.{alias.name}"):
                # A module imported by name (``from dynaunique import _flush``) moved
                # elsewhere: import it from its new parent under the name it was bound to.
                parent, _, leaf = new_full.rpartition(".")
                groups.setdefault(parent, []).append(_alias(leaf, alias.asname or alias.name))
                split = True
                continue
        groups.setdefault(new_base, []).append(_alias(alias.name, alias.asname))
    relative = bool(node.level)
    if not split and (not relative or (new_base == base and not make_absolute)):
        return None  # absolute: the dotted names pass rewrites it; relative: unchanged
    if not split:
        return [f"from {new_base} import"]  # the head only: its names (and comments) stay
    statements = []
    for parent, names in groups.items():
        if relative and not make_absolute and parent == base:  # unchanged: keep it relative
            parent = "." * node.level + (node.module or "")
        statements.append(f"from {parent} import {', '.join(names)}")
    return statements


def rewrite_python_imports(text: str, package: str | None, moves: dict[str, str],
                           make_absolute: bool, where: str, report: Report) -> tuple[str, int]:
    """``text`` with every ``from ... import`` of a moved module rewritten (see the module
    docstring); ``package``: the file's package before the move (for relative imports)."""
    try:
        tree = ast.parse(text)
    except SyntaxError as error:
        report.warnings.append(f"{where}: not parsed ({error.msg}); dotted names only")
        return text, 0
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, int, int, list[str]]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.end_lineno is None:
            continue
        new = rewrite_import_from(node, package, moves, make_absolute)
        if new is None:
            continue
        edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset or 0,
                      new))
    for start, col, end, end_col, new in sorted(edits, reverse=True):
        if len(new) == 1 and new[0].endswith(" import"):  # a new head for a relative import
            head = re.compile(r"from\s+\.+[\w.]*\s+import")
            lines[start - 1] = (lines[start - 1][:col]
                                + head.sub(new[0], lines[start - 1][col:], count=1))
            continue
        first, last = lines[start - 1], lines[end - 1]
        prefix, suffix = first[:col], last[end_col:]
        if start != end and re.search(r"#", "".join(lines[start - 1:end])):
            report.warnings.append(f"{where}:{start}: comments inside an import were dropped")
        # At the start of its line: one statement a line; after a `;`: kept on the line.
        body = ("\n" + " " * col if prefix.strip() == "" else "; ").join(new)
        lines[start - 1:end] = [prefix + body + suffix]
    return "".join(lines), len(edits)


_FROM_LINE = re.compile(r"^([ \t]*(?:>>> |\.\.\. )?)(from [\w.]+ import [^\n(]+)$",
                        re.MULTILINE)


def rewrite_text_imports(text: str, moves: dict[str, str]) -> tuple[str, int]:
    """One-line ``from dynaunique import _x`` in docs and other text (code blocks)."""
    count = 0

    def one(match: re.Match[str]) -> str:
        nonlocal count
        statement, hash_, comment = match.group(2).partition("#")
        try:
            node = ast.parse(statement.strip()).body[0]
        except (SyntaxError, IndexError):
            return match.group(0)
        if not isinstance(node, ast.ImportFrom) or node.level:
            return match.group(0)
        new = rewrite_import_from(node, None, moves, make_absolute=False)
        if new is None:
            return match.group(0)
        count += 1
        tail = f"  {hash_}{comment}" if hash_ else ""
        return match.group(1) + ("\n" + match.group(1)).join(new) + tail

    return _FROM_LINE.sub(one, text), count


def rewrite_names(text: str, moves: dict[str, str]) -> tuple[str, int]:
    """Every dotted name and path of a moved module, on whole names."""
    count = 0
    for old in sorted(moves, key=len, reverse=True):
        new = moves[old]
        text, n = _dotted_pattern(old).subn(new, text)
        count += n
        text, n = _path_pattern(old).subn(new.replace(".", "/"), text)
        count += n
    return text, count


# --- lines the new names made too long ------------------------------------------------------

#: A line that starts something of its own (a list item, a field, a quote): never joined to.
_SPECIAL = re.compile(r"(?:[-*|>]|\.\. |:\w|\d+\. |\"\"\"|'''|#)")
_QUOTES = ('"""', "'''", 'r"""', "r'''")


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def line_limit(root: Path) -> int:
    """ruff's ``line-length`` from pyproject.toml (100 without one)."""
    found = re.search(r"^line-length\s*=\s*(\d+)", _read(root / "pyproject.toml"), re.MULTILINE)
    return int(found.group(1)) if found else 100


def _docstring_lines(tree: ast.AST) -> dict[int, int]:
    """Line number → the column its docstring starts at, for every line of a docstring."""
    found: dict[int, int] = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str) and node.end_lineno is not None):
            for number in range(node.lineno, node.end_lineno + 1):
                found[number] = node.col_offset
    return found


def _prefix(line: str, number: int, docstrings: dict[int, int]) -> str | None:
    """What a wrapped line's continuation starts with, or None when it is code."""
    body = line.lstrip()
    indent = len(line) - len(body)
    if body.startswith("#"):
        marker = re.match(r"#:? ?", body)
        return line[:indent] + (marker.group(0) if marker else "# ")
    if number in docstrings:
        return " " * (docstrings[number] if body.startswith(_QUOTES) else indent)
    return None


def reflow(text: str, moves: dict[str, str], limit: int, where: str,
           report: Report) -> tuple[str, int]:
    """Comment and docstring lines that a new name pushed over ``limit``, wrapped: the words
    past it carried into the paragraph's next line (or a new line), as far as they go.
    Dividers (``# --- title ---``) lose dashes. A line of code over it is reported, not
    touched."""
    news = set(moves.values()) | {new.replace(".", "/") for new in moves.values()}
    try:
        docstrings = _docstring_lines(ast.parse(text))
    except SyntaxError:
        return text, 0
    lines = text.split("\n")
    # Each line's number in the parsed text; a line this function made gets its parent's.
    numbers = list(range(1, len(lines) + 1))
    wrapped, carried, index = 0, False, 0
    while index < len(lines):
        line, number = lines[index], numbers[index]
        if len(line) <= limit or not (carried or any(new in line for new in news)):
            index, carried = index + 1, False
            continue
        divider = re.match(r"^(\s*# -{2,} .*?) ?-{3,}$", line)
        if divider and len(divider.group(1)) + 4 <= limit:
            lines[index] = divider.group(1) + " " + "-" * (limit - len(divider.group(1)) - 1)
            index, carried, wrapped = index + 1, False, wrapped + 1
            continue
        if line.lstrip().startswith(("from ", "import ")):  # ruff's import sort wraps these
            index, carried = index + 1, False
            continue
        prefix = _prefix(line, number, docstrings)
        cut = -1 if prefix is None else line.rfind(" ", len(prefix) + 1, limit + 1)
        if prefix is None or cut <= len(prefix) or not line[len(prefix):cut].strip():
            report.warnings.append(f"{where}:{number}: over {limit} characters, left as it is")
            index, carried = index + 1, False
            continue
        head, rest = line[:cut].rstrip(), line[cut + 1:].lstrip()
        lines[index] = head
        following = lines[index + 1] if index + 1 < len(lines) else ""
        comment = line.lstrip().startswith("#")
        if comment:
            block = following.startswith(prefix) and following[len(prefix):][:1] not in ("", " ")
            at = len(prefix)
        else:
            block = (index + 1 < len(lines) and numbers[index + 1] in docstrings
                     and docstrings[numbers[index + 1]] == docstrings.get(number))
            at = len(following) - len(following.lstrip())
        joins = (block and bool(following.strip()) and at >= len(prefix)
                 and not _SPECIAL.match(following[at:]) and not rest.endswith(_QUOTES))
        if joins:  # into the paragraph's next line, at its indent (a list item's hanging one)
            lines[index + 1] = following[:at] + rest + " " + following[at:]
        else:
            item = re.match(r"(?:\d+\. |[-*] )", line[len(prefix):])
            lines.insert(index + 1, prefix + " " * (item.end() if item else 0) + rest)
            numbers.insert(index + 1, number)
        index, carried, wrapped = index + 1, True, wrapped + 1
    return "\n".join(lines), wrapped


# --- docs/decisions.md -----------------------------------------------------------------------

_ROW = re.compile(r"^\| `([\w./]+)` \|.*$", re.MULTILINE)


def _map_path(dotted: str) -> str:
    """``dynaunique._write.flush`` → ``_write/flush.py``, as the map names modules."""
    return dotted.removeprefix("dynaunique.").replace(".", "/") + ".py"


def _row_path(row: str) -> str:
    match = _ROW.match(row)
    return match.group(1) if match else ""


def rewrite_map(text: str, moves: dict[str, str], report: Report) -> str:
    """The "Map of the package" rows: new paths; each layer's rows together, its
    ``__init__.py`` first (inserted where missing), then in ``MOVES``' order, where the first
    of them that was a root module stood. Idempotent: a second pass changes nothing."""
    if MAP_HEADING not in text:
        report.warnings.append(f"{DOCS}: no '{MAP_HEADING}' section")
        return text
    head, _, rest = text.partition(MAP_HEADING)
    section, sep, tail = rest.partition("\n## ")
    relative = {_map_path(old): _map_path(new) for old, new in moves.items()}
    order = {_map_path(new): n for n, new in enumerate(MOVES.values())}
    # Rows that were in a folder before (``_model/mixed.py``) do not decide where a block goes.
    from_folders = {_map_path(MOVES[old]) for old in MOVES if old.count(".") > 1}
    rows: dict[str, list[str]] = {layer: [] for layer in LAYERS}
    at: dict[str, int] = {}
    kept: list[str] = []
    for line in section.split("\n"):
        path = _row_path(line)
        if path in relative:
            line = line.replace(f"`{path}`", f"`{relative[path]}`", 1)
            report.docs.append(f"map row {path} → {relative[path]}")
            path = relative[path]
        layer = next((name for name in LAYERS
                      if path.startswith(name.removeprefix("dynaunique.") + "/")), None)
        if layer is None:
            kept.append(line)
            continue
        if path not in from_folders:
            at.setdefault(layer, len(kept))
        rows[layer].append(line)
    for layer in rows:
        if rows[layer]:
            at.setdefault(layer, len(kept))
    # Blocks inserted from the last position back; at one position, in LAYERS' order.
    for layer in sorted(at, key=lambda name: (at[name], list(LAYERS).index(name)),
                        reverse=True):
        folder = layer.removeprefix("dynaunique.")
        init = f"| `{folder}/__init__.py` |"
        existing = [row for row in rows[layer] if row.startswith(init)]
        if not existing:
            existing = [f"{init} {LAYER_ROWS[layer]} |"]
            report.docs.append(f"map row {folder}/__init__.py added")
        others = [row for row in rows[layer] if not row.startswith(init)]
        others.sort(key=lambda row: order.get(_row_path(row), len(order)))
        kept[at[layer]:at[layer]] = existing + others
    return head + MAP_HEADING + "\n".join(kept) + sep + tail


def insert_layout(text: str, report: Report) -> str:
    if LAYOUT_HEADING in text:
        return text
    anchor = text.find("\n" + BUDGETS_HEADING)
    if anchor < 0:  # before the section after the map
        start = text.find(MAP_HEADING)
        anchor = text.find("\n## ", start + len(MAP_HEADING)) if start >= 0 else -1
    if anchor < 0:
        report.warnings.append(f"{DOCS}: no place found for the Layout section")
        return text
    report.docs.append("Layout section inserted")
    return text[: anchor + 1] + LAYOUT_TEXT + text[anchor + 1:]


# --- the run ---------------------------------------------------------------------------------

def git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)


def effective_moves(root: Path, report: Report, table: dict[str, str]
                    ) -> tuple[dict[str, str], dict[str, str]]:
    """(the moves whose references to rewrite: present or already done, the files to move)."""
    rewrite: dict[str, str] = {}
    to_move: dict[str, str] = {}
    for old, new in table.items():
        old_path, new_path = module_path(old, root), module_path(new, root)
        if old_path.exists() and new_path.exists():
            report.warnings.append(f"{old}: both {old_path.relative_to(root)} and "
                                   f"{new_path.relative_to(root)} exist; left alone")
        elif old_path.exists():
            rewrite[old], to_move[old] = new, new
        elif new_path.exists():
            rewrite[old] = new
            report.already.append(old)
        else:
            report.absent.append(old)
    return rewrite, to_move


def unmapped_root_modules(root: Path) -> list[str]:
    """Underscore modules at the package's root that the table does not place."""
    keep = {"dynaunique._user_models", "dynaunique._pyproject"}
    found = []
    for path in sorted((root / "dynaunique").glob("_*.py")):
        name = dotted_of(path, root)
        if name != "dynaunique" and name not in MOVES and name not in keep:
            found.append(name)
    return found


def rewrite_files(root: Path, moves: dict[str, str], to_move: dict[str, str],
                  dry_run: bool, report: Report) -> list[Path]:
    touched_py: list[Path] = []
    limit = line_limit(root)
    for path in files_in_scope(root):
        rel = path.relative_to(root)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new, count = text, 0
        if path.suffix == ".py":
            package = None
            if rel.parts[0] == "dynaunique":
                dotted = dotted_of(path, root)
                package = dotted if path.name == "__init__.py" else dotted.rpartition(".")[0]
                make_absolute = dotted in to_move
            else:
                make_absolute = False
            new, count = rewrite_python_imports(new, package, moves, make_absolute, str(rel),
                                                report)
        else:
            new, count = rewrite_text_imports(new, moves)
        new, n = rewrite_names(new, moves)
        count += n
        if path.suffix == ".py" and new != text:
            new, n = reflow(new, moves, limit, str(rel), report)
            count += n
        if path == root / DOCS:
            before = new
            new = insert_layout(rewrite_map(new, moves, report), report)
            count += new != before
        if new != text:
            report.rewritten[str(rel)] = count
            if not dry_run:
                path.write_text(new, encoding="utf-8")
            if path.suffix == ".py":
                touched_py.append(path)
    return touched_py


def rename_names(root: Path, dry_run: bool, report: Report) -> None:
    """``GLOSSARY_NAMES``: each name rewritten, on whole words, in its own module and the
    modules named with it; refused (a warning) where a file imports the name from elsewhere or
    another file in scope uses it next to the module's name."""
    for module, users, old, new in GLOSSARY_NAMES:
        before = {new: old for old, new in GLOSSARY_MOVES.items()}
        paths = [module_path(name, root) if module_path(name, root).exists() or dry_run is False
                 else module_path(before.get(name, name), root) for name in (module, *users)]
        if not paths[0].exists():
            report.warnings.append(f"glossary: {module} not found, {old} left")
            continue
        word = re.compile(r"(?<!\w)" + re.escape(old) + r"(?!\w)")
        parent, _, leaf = module.rpartition(".")
        # A file that imports the module (under its old or new name) and uses the word.
        names = "|".join(re.escape(n) for n in {module, before.get(module, module)})
        home, word_of_leaf = re.escape(parent), re.escape(leaf)
        imports = re.compile(rf"import\s+(?:{names})\b|from\s+(?:{names})\s+import"
                             rf"|from\s+{home}\s+import[^\n]*\b{word_of_leaf}\b")
        strangers = [str(path.relative_to(root)) for path in files_in_scope(root)
                     if path.suffix == ".py" and path not in paths
                     and imports.search(text := path.read_text(encoding="utf-8"))
                     and word.search(text)]
        if strangers:
            report.warnings.append(f"glossary: {old} of {module} also in {strangers}; left")
            continue
        for path in paths:
            if not path.exists():
                continue
            text = path.read_text(encoding="utf-8")
            new_text, count = word.subn(new, text)
            if count:
                report.rewritten[str(path.relative_to(root))] = count
                if not dry_run:
                    path.write_text(new_text, encoding="utf-8")


def move_files(root: Path, to_move: dict[str, str], dry_run: bool, report: Report) -> None:
    for old, new in to_move.items():
        old_path, new_path = module_path(old, root), module_path(new, root)
        report.moved.append(f"{old_path.relative_to(root)} → {new_path.relative_to(root)}")
        if dry_run:
            continue
        new_path.parent.mkdir(parents=True, exist_ok=True)
        done = git(root, "mv", str(old_path.relative_to(root)), str(new_path.relative_to(root)))
        if done.returncode != 0:  # not tracked: move it as a file
            shutil.move(str(old_path), str(new_path))


def create_layers(root: Path, moves: dict[str, str], dry_run: bool, report: Report) -> None:
    """Each folder's ``__init__.py``, for the folders a module moves (or moved) into."""
    for layer, doc in LAYERS.items():
        init = package_path(layer, root) / "__init__.py"
        if init.exists() or not any(new.startswith(layer + ".") for new in moves.values()):
            continue
        report.created.append(str(init.relative_to(root)))
        if dry_run:
            continue
        init.parent.mkdir(parents=True, exist_ok=True)
        init.write_text(f'"""{doc}"""\n', encoding="utf-8")
        git(root, "add", str(init.relative_to(root)))


def sort_imports(root: Path, paths: list[Path], report: Report) -> None:
    beside = [root / ".venv" / "bin" / "ruff", Path(sys.executable).parent / "ruff"]
    command = next((str(path) for path in beside if path.exists()), shutil.which("ruff"))
    if command is None:
        report.warnings.append("ruff not found: run `ruff check --fix --select I001` yourself")
        return
    existing = [str(p.relative_to(root)) for p in paths if p.exists()]
    if existing:
        subprocess.run([command, "check", "--fix", "--quiet", "--select", "I001", *existing],
                       cwd=root, check=False, capture_output=True)


def leftovers(root: Path, moves: dict[str, str]) -> list[str]:
    """References to an old name still in scope (printed for a person to look at)."""
    found = []
    patterns = [(old, _dotted_pattern(old)) for old in moves]
    patterns += [(old, _path_pattern(old)) for old in moves]
    bare = {old.rsplit(".", 1)[1]: old for old in moves if old.count(".") == 1}
    # A moved root module's bare file name in a string (``"_wire.py"``): a path built from it.
    files = re.compile(r"""["'](?:{})\.py["']""".format("|".join(re.escape(name) for name in bare))
                       ) if bare else None
    from_line = re.compile(r"from dynaunique import ([^\n(]*)")
    # A module's name or path built at run time: the rewrite cannot see it.
    # (Paths only: ``f"dynaunique.{operation}"`` is a span's name.)
    built = re.compile(r"""f["']dynaunique/\{|["']dynaunique(?:/|\._)["']\s*\+""")
    for path in files_in_scope(root):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        rel = path.relative_to(root)
        for old, pattern in patterns:
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{rel}:{line}: {old}")
        for match in (files.finditer(text) if files and path.suffix == ".py" else ()):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{rel}:{line}: a bare file name {match.group(0)} (check by hand)")
        for match in built.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{rel}:{line}: a module name built at run time (check by hand)")
        for match in from_line.finditer(text):
            names = {n.strip().split(" as ")[0] for n in match.group(1).split(",")}
            for name in sorted(names & set(bare)):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{rel}:{line}: from dynaunique import {name}")
    return sorted(set(found))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="change nothing, print the plan")
    parser.add_argument("--glossary", action="store_true",
                        help="also the glossary's safe renames (GLOSSARY_MOVES, GLOSSARY_NAMES)")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the clone's root")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if not (root / "dynaunique" / "__init__.py").exists():
        print(f"{root}: not the root of a dynaunique clone (no dynaunique/__init__.py)")
        return 2
    status = git(root, "status", "--porcelain").stdout
    if status.strip() and not args.dry_run:
        print("note: the tree has uncommitted changes; `git diff` will mix them with these")
    report = Report()
    table = {**MOVES, **GLOSSARY_MOVES} if args.glossary else MOVES
    moves, to_move = effective_moves(root, report, table)
    touched = rewrite_files(root, moves, to_move, args.dry_run, report)
    move_files(root, to_move, args.dry_run, report)
    if args.glossary:
        rename_names(root, args.dry_run, report)
    create_layers(root, moves, args.dry_run, report)
    if not args.dry_run:
        moved_paths = {module_path(o, root): module_path(n, root) for o, n in to_move.items()}
        sort_imports(root, [moved_paths.get(p, p) for p in touched], report)
    mode = "would" if args.dry_run else "did"
    for line in report.moved:
        print(f"moved   {line}")
    for name in report.already:
        print(f"already {name} is at {module_path(table[name], root).relative_to(root)}")
    for name in report.absent:
        print(f"skipped {name}: neither {module_path(name, root).relative_to(root)} nor "
              f"{module_path(table[name], root).relative_to(root)} exists")
    for name in report.created:
        print(f"created {name}")
    for line in report.docs:
        print(f"docs    {line}")
    for name in unmapped_root_modules(root):
        print(f"left    {name}: not in MOVES (place it by hand, or add it to the table)")
    for line in report.warnings:
        print(f"warning {line}")
    rest = [] if args.dry_run else leftovers(root, moves)
    for line in rest:
        print(f"old name {line}")
    references = sum(report.rewritten.values())
    print(f"summary: {mode} move {len(report.moved)} modules ({len(report.already)} already "
          f"moved, {len(report.absent)} absent), create {len(report.created)} folders' "
          f"__init__.py, rewrite {references} references in {len(report.rewritten)} files; "
          f"{len(rest)} old names left")
    return 1 if rest else 0


if __name__ == "__main__":
    sys.exit(main())
