"""The docs layer: sybil's parsers and evaluators for README.md and docs/*.md (see tests/README.md).

The root ``conftest.py`` hands these to sybil, which collects every page as a pytest file and
each code block as one test, run in page order in one namespace per page.

- A page runs as a reader copies it: its VISIBLE blocks, in order, in a fresh namespace, against
  the session's local server (the ``dynaunique_endpoint`` fixture, reset when a page starts, so
  pages share no table), with only the local recipe of docs/getting-started.md in the environment
  (:func:`recipe`: ``AWS_ENDPOINT_URL_DYNAMODB``, fake keys, a region; every other ``AWS_*`` and
  ``DYNAUNIQUE_*`` variable removed while the page runs). Nothing is set up behind the reader's
  back: a page defines its models, creates their tables and defines any helper it uses, on the
  page. An ``invisible-code-block`` fails the page. A block whose first line is ``# fragment: why``
  is deliberately incomplete and not run (at most :data:`MAX_FRAGMENTS` in all the pages).
- A block whose first line is ``# myapp/models.py`` (any path ending in ``.py``) is a file the
  reader saves: it is written to the page's scratch folder (the working directory of the page's
  commands, and on ``sys.path`` as the folder a reader runs Python in), not run.
- Output is checked: a ``print(...)`` with a trailing comment must print exactly the comment; a
  block whose other prints print anything must be followed directly by a ``text`` or ``json``
  block showing that output. In shown output ``...`` stands for any text, and timestamps (the
  ``created`` of a lock, ``2026-11-30 11:46:00Z`` in a table) are compared as placeholders.
- ``console`` / ``bash`` / ``sh`` / ``shell`` blocks: a command is a line after ``$ `` (or every
  line of a block without prompts); the lines after it, up to the next prompt, are its output.
  ``dynaunique ...`` commands run as a subprocess with the same recipe and no other ``AWS_*``
  variable, in a terminal of :data:`COLUMNS` columns (so what is compared is what a person sees),
  with the page's scratch folder as working directory; a URL ``http://127.0.0.1:PORT`` or
  ``http://localhost:PORT`` in a command (or an ``export``) is the local server, and
  ``dynaunique serve`` runs on a free port. ``export NAME=VALUE`` must set the recipe, nothing
  else. ``python -m pytest`` of the page's own test files (``# test_x.py`` blocks) runs them for
  real, as a reader does.
  Exit status 0 is expected, or the one named by a trailing ``# exit status N`` comment. A
  pipeline into a text filter (``| grep x``, :data:`FILTERS`) runs under ``bash``, its stderr on
  the terminal too.
  Commands that install or build (:data:`NOT_RERUN`) are CI's own steps and are not re-run;
  any other command fails the test, so a new kind of command is a decision, not an accident.
- ``<!-- skip: next "reason" -->`` skips the next block (sybil's own skip parser).
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import io
import logging
import os
import pty
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import textwrap
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from sybil import Document, Example, Region
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer
from sybil.parsers.myst import CodeBlockParser, PythonCodeBlockParser, SkipParser

from dynaunique.testing import reset_local_dynamodb
from support import cli_process

#: The terminal width the shell commands run in: the pages show tables as wide as this.
COLUMNS = 150
#: The commands a page shows that the docs test does not re-run, and why.
NOT_RERUN = {
    "pip": "installing is CI's first step (.ci/run: pip install -e '.[dev]')",
    "python3 -m venv": "CI makes its venv the same way",
    "python -m venv": "CI makes its venv the same way",
    "python -m pytest": "the test suite itself (CI runs it)",
    "python -m conformance.run": "CI's conformance step",
    "python -m build": "building a wheel: the install CI does covers the same metadata",
    "aws": "needs a real AWS account",
    "sphinx-build": "CI's docs step",
}
#: Long-running commands: read until the shown output has arrived, then stopped with SIGTERM.
SERVERS = ("dynaunique ui", "dynaunique serve", "python -m dynaunique.testing")
#: The first line of a block a page shows deliberately incomplete: not run (at most
#: :data:`MAX_FRAGMENTS` in all the pages, ``tests/unit/test_docs_pages.py``).
FRAGMENT = "# fragment:"
MAX_FRAGMENTS = 5
#: The environment variables a page's run removes: a reader has none of ours.
_OURS = ("AWS_", "DYNAUNIQUE_", "PYNAMODB_CONFIG")


def recipe(endpoint: str) -> dict[str, str]:
    """The local recipe docs/getting-started.md shows, with ``endpoint`` for the server's URL:
    all a page's blocks and commands have in their environment."""
    return {"AWS_ENDPOINT_URL_DYNAMODB": endpoint, "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}
_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?\+00:00")
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_LOCAL_URL = re.compile(r"http://(?:127\.0\.0\.1|localhost):\d+")
_FILE_BLOCK = re.compile(r"# ([\w./-]+\.py)\n")
_OUTPUT_BLOCK = re.compile(
    r"(?:\s*-->)?\s*?\n(?P<indent>[ \t]*)```(?:text|json)\n(.*?)^(?P=indent)```",
    re.DOTALL | re.MULTILINE)


class PageRun:
    """What one page's blocks share: the server, its scratch folder, the environment."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.namespace = namespace
        self.folder = Path(tempfile.mkdtemp(prefix="dynaunique-docs-"))
        self.endpoint: str | None = None
        self._saved_environ: dict[str, str] | None = None
        self._modules = set(sys.modules)
        self._logging = _logging_state()
        sys.path.insert(0, str(self.folder))

    def ready(self) -> str:
        """Reset the server the first time a block of the page runs; return its endpoint.

        The page then runs with the reader's recipe (docs/getting-started.md) and nothing else
        of ours: :func:`recipe` in ``os.environ`` (every other ``AWS_*`` and ``DYNAUNIQUE_*``
        variable removed until the page ends)."""
        if self.endpoint is None:
            self.endpoint = self.namespace["dynaunique_endpoint"]
            reset_local_dynamodb(self.endpoint)
            self._saved_environ = dict(os.environ)
            for name in [n for n in os.environ if n.startswith(_OURS)]:
                del os.environ[name]
            os.environ.update(recipe(self.endpoint))
        return self.endpoint

    def close(self) -> None:
        if self._saved_environ is not None:
            os.environ.clear()
            os.environ.update(self._saved_environ)
        _restore_logging(self._logging)
        with contextlib.suppress(ValueError):
            sys.path.remove(str(self.folder))
        for name in set(sys.modules) - self._modules:
            module_file = getattr(sys.modules[name], "__file__", None) or ""
            if module_file.startswith(str(self.folder)):
                del sys.modules[name]
        shutil.rmtree(self.folder, ignore_errors=True)


def _logging_state() -> dict[str, Any]:
    """What a page may change in ``logging`` (a page shows how to configure it)."""
    loggers = {name: logging.getLogger(name) for name in logging.root.manager.loggerDict
               if name.startswith("dynaunique")}
    return {"root": (logging.root.level, list(logging.root.handlers)),
            "loggers": {name: (lg.level, list(lg.handlers)) for name, lg in loggers.items()}}


def _restore_logging(state: dict[str, Any]) -> None:
    logging.root.setLevel(state["root"][0])
    logging.root.handlers[:] = state["root"][1]
    for name in logging.root.manager.loggerDict:
        if name.startswith("dynaunique"):
            level, handlers = state["loggers"].get(name, (logging.NOTSET, []))
            logger = logging.getLogger(name)
            logger.setLevel(level)
            logger.handlers[:] = handlers


def setup(namespace: dict[str, Any]) -> None:
    namespace["__docs__"] = PageRun(namespace)


def teardown(namespace: dict[str, Any]) -> None:
    namespace["__docs__"].close()


def _run_of(example: Example) -> PageRun:
    run: PageRun = example.namespace["__docs__"]
    return run


# --- shown output ---------------------------------------------------------------------------------


_ELIDED_ROW = re.compile(r"^[\s│┃|]*\.\.\.[\s│┃|]*$")


def matches(shown: str, actual: str) -> bool:
    """``actual`` is ``shown``, where ``...`` in ``shown`` stands for any text (lines too); a
    table row holding nothing but ``...`` stands for any number of rows."""
    shown, actual = _ISO_TIME.sub("<time>", shown), _ISO_TIME.sub("<time>", actual)
    parts = []
    for line in shown.rstrip("\n").split("\n"):
        if _ELIDED_ROW.match(line) and "..." in line:
            parts.append("(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(part) for part in line.split("...")) + "\n")
    return re.fullmatch("".join(parts), actual.rstrip("\n") + "\n", re.DOTALL) is not None


class Mismatch(Exception):
    """What a block did differs from what its page says; sybil reports the message."""


def _failures_reported(evaluate: Any) -> Any:
    """Turn a :class:`Mismatch` into the message an evaluator returns (sybil's failure)."""

    def evaluator(example: Example) -> str | None:
        try:
            evaluate(example)
        except Mismatch as failure:
            return str(failure)
        except Exception as error:  # the block raised: its own frames, not the evaluator's
            tb = error.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
                tb = tb.tb_next
            return "".join(traceback.format_exception(type(error), error, tb))
        return None

    return evaluator


def _mismatch(what: str, shown: str, actual: str) -> Mismatch:
    return Mismatch(f"{what}\n--- the page shows ---\n{shown}\n--- it printed ---\n{actual}")


# --- python blocks --------------------------------------------------------------------------------


class _CheckedPrints(ast.NodeTransformer):
    """``print(x)  # shown`` becomes ``__docs_print__('shown', line, x)``."""

    def __init__(self, comments: dict[int, str]) -> None:
        self.comments = comments

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        call = node.value
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "print" and node.end_lineno in self.comments):
            call.func = ast.Name("__docs_print__", ast.Load())
            call.args[:0] = [ast.Constant(self.comments[node.end_lineno]),
                             ast.Constant(node.end_lineno)]
        return node


def _comments(source: str) -> dict[int, str]:
    import tokenize

    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string[1:].strip()
    return found


def _checked_print(shown: str, line: int, *args: Any, **kwargs: Any) -> None:
    buffer = io.StringIO()
    print(*args, **kwargs, file=buffer)
    if not matches(shown, buffer.getvalue()):
        raise _mismatch(f"the print on line {line}", shown, buffer.getvalue())


def evaluate_python(example: Example) -> None:
    run = _run_of(example)
    source: str = example.parsed
    if example.document.text.startswith("<!--", example.region.start):
        raise Mismatch("an invisible-code-block: a reader never sees it, so a page runs without "
                       "one (make the block visible, or say what it shows in the text)")
    if source.startswith(FRAGMENT):
        return
    written = _FILE_BLOCK.match(source)
    if written:
        target = run.folder / written.group(1)
        target.parent.mkdir(parents=True, exist_ok=True)
        for parent in target.relative_to(run.folder).parents:
            if parent != Path(".") and not (run.folder / parent / "__init__.py").exists():
                (run.folder / parent / "__init__.py").write_text("", encoding="utf-8")
        target.write_text(source, encoding="utf-8")
        return
    run.ready()
    example.namespace.pop("dynaunique_endpoint", None)  # sybil's fixture: a reader has no such name
    padded = "\n" * (example.line + example.parsed.line_offset) + source
    tree = ast.fix_missing_locations(_CheckedPrints(_comments(padded)).visit(ast.parse(padded)))
    example.namespace["__docs_print__"] = _checked_print
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        exec(compile(tree, example.path, "exec", dont_inherit=True), example.namespace)
    example.namespace.pop("__builtins__", None)
    unchecked = captured.getvalue()  # the checked prints print nothing
    if unchecked:
        following = _OUTPUT_BLOCK.match(example.document.text, example.region.end)
        if following is None:
            raise Mismatch(f"the block printed, and the page shows no output:\n{unchecked}")
        shown = textwrap.dedent(following.group(2))
        if not matches(shown, unchecked):
            raise _mismatch("the block's output", shown, unchecked)


# --- shell blocks ---------------------------------------------------------------------------------


def _commands(source: str) -> list[tuple[str, str]]:
    """The block's commands, each with the output shown under it."""
    lines = re.sub(r"\\\n\s*", "", source).rstrip("\n").split("\n")  # join continued lines
    if not any(line.startswith("$ ") for line in lines):
        return [(line, "") for line in lines if line.strip() and not line.startswith("#")]
    found: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("$ "):
            found.append((line[2:], []))
        elif found:
            found[-1][1].append(line)
    return [(command, "\n".join(output)) for command, output in found]


def _split(command: str) -> tuple[list[list[str]], int]:
    """``a && b  # exit status 1``: the words of each step, and the exit status the last expects."""
    named = re.search(r"#\s*exit status (\d+)\b[^'\"]*$", command)
    status = int(named.group(1)) if named else 0
    words = shlex.split(command, comments=True)
    steps: list[list[str]] = [[]]
    for word in words:
        if word == "&&":
            steps.append([])
        else:
            steps[-1].append(word)
    return [step for step in steps if step], status


def _program(step: list[str]) -> list[str]:
    """``.venv/bin/dynaunique`` is the ``dynaunique`` of the running interpreter's environment."""
    step = [*step]
    step[0] = re.sub(r"^(\.venv/bin/|python3$)", "", step[0]) or "python"
    if step[0] == "python3":
        step[0] = "python"
    return step


def evaluate_shell(example: Example) -> None:
    run = _run_of(example)
    for command, shown in _commands(example.parsed):
        steps, status = _split(command)
        for index, raw in enumerate(steps):
            step = _program(raw)
            text = " ".join(step)
            if any(text.startswith(prefix) for prefix in NOT_RERUN) and not _page_tests(run,
                                                                                        step):
                continue
            if step[0] == "export":
                _check_export(run, step[1:])
                continue
            if not (step[0] == "dynaunique" or text.startswith(SERVERS)
                    or _page_tests(run, step)):
                raise Mismatch(f"the docs test does not know how to run {text!r}: "
                                     "run it (tests/support/docs.py) or list it in NOT_RERUN")
            last = index == len(steps) - 1
            _run_command(run, step, shown if last else "", status if last else 0)


def _page_tests(run: PageRun, step: list[str]) -> bool:
    """``python -m pytest`` of test files the page wrote (``# test_x.py`` blocks): run for real,
    as a reader runs them (any other ``python -m pytest`` is the suite, CI's step)."""
    return (step[:3] == ["python", "-m", "pytest"]
            and any(word.endswith(".py") and (run.folder / word).is_file() for word in step))


def _check_export(run: PageRun, assignments: list[str]) -> None:
    """An ``export`` a page shows sets the recipe the page runs with (:func:`recipe`), nothing
    else: the URL of a local server stands for the one the test runs."""
    expected = recipe(run.ready())
    for assignment in assignments:
        name, _, value = assignment.partition("=")
        if name not in expected:
            raise Mismatch(f"export {name}: not part of the local recipe {sorted(expected)}")
        if _LOCAL_URL.sub(expected[name], value) != expected[name]:
            raise Mismatch(f"export {assignment}: the docs run with {name}={expected[name]}")


_REDIRECT = re.compile(r"^\d?>(&\d|/dev/null|[\w./-]+)$")
#: What may follow a ``dynaunique`` command after ``|`` on a page: text filters.
FILTERS = ("cat", "grep", "cut", "head", "tail", "sort", "wc")


def _argv(step: list[str], endpoint: str) -> list[str]:
    words = [_LOCAL_URL.sub(endpoint, word) for word in step]
    script = Path(sys.executable).parent / "dynaunique"
    program = str(script) if script.exists() else "dynaunique"
    if "|" in words:  # a pipeline: run by bash, as a person's shell runs it (no pipefail)
        stages = " ".join(words).split(" | ")
        for stage in stages[1:]:
            if shlex.split(stage)[0] not in FILTERS:
                raise Mismatch(f"the docs test runs only text filters {FILTERS} after a pipe")
        first = [program, *shlex.split(stages[0])[1:]]
        return ["bash", "-c", " | ".join([" ".join(
            word if _REDIRECT.match(word) else shlex.quote(word) for word in first),
            *stages[1:]])]
    if words[0] == "dynaunique":
        return [program, *words[1:]]
    return [sys.executable, *words[1:]]


def _environment(run: PageRun) -> dict[str, str]:
    """What a command gets: the recipe and no other ``AWS_*`` or ``DYNAUNIQUE_*`` variable, the
    terminal, a bare ``HOME``. The page's folder is the working directory, which the CLI (and
    ``python -m``) put on ``sys.path``, so it is not on ``PYTHONPATH``: every page's commands
    share their start-up variables, and one forker."""
    endpoint = run.ready()
    env = {name: value for name, value in (run._saved_environ or os.environ).items()
           if not name.startswith(_OURS)}
    env.update(COLUMNS=str(COLUMNS),
               LINES="50", HOME=str(run.folder), NO_COLOR="1", TERM="xterm")
    env.update(recipe(endpoint))
    return env


def _forked_argv(argv: list[str]) -> list[str] | None:
    """The command as the forker runs it: the ``dynaunique`` console script (run as the file it
    is) or ``python -m ...``; ``None`` for a pipeline (``bash -c``), which runs for real."""
    if argv[1:3] == ["-m", "pytest"]:
        return None  # pytest rewrites assertions as it imports: a fresh Python, not a fork
    if argv[0] == sys.executable:
        return argv
    if Path(argv[0]).name == "dynaunique" and Path(argv[0]).is_file():
        return [sys.executable, *argv]
    return None


def _run_command(run: PageRun, step: list[str], shown: str, status: int) -> None:
    endpoint = run.ready()
    documented = next((m.group(0) for w in step for m in [_LOCAL_URL.search(w)] if m), None)
    server = " ".join(step).startswith(SERVERS)
    shown_url = _LOCAL_URL.search(shown)
    if step[:2] == ["dynaunique", "serve"]:  # never the page's port: workers run side by side
        port = step.index("--port") if "--port" in step else None
        step = [*step, "--port", "0"] if port is None else [*step[:port + 1], "0",
                                                                *step[port + 2:]]
    printed, code, errors = _in_terminal(_argv(step, endpoint), _environment(run), run.folder,
                                         until_lines=max(1, len(shown.splitlines()))
                                         if server else None,
                                         stderr_shown="|" in step)
    if documented:
        printed = printed.replace(endpoint, documented)
    if step[:2] == ["dynaunique", "serve"] and shown_url:
        printed = _LOCAL_URL.sub(shown_url.group(0), printed)
    printed = _TIMESTAMP.sub("YYYY-MM-DD HH:MM:SSZ", printed)
    shown = _TIMESTAMP.sub("YYYY-MM-DD HH:MM:SSZ", shown)
    what = f"$ {' '.join(step)}"
    if not server and code != status:
        raise Mismatch(f"{what}: exit status {code}, not {status}\n{printed}\n{errors}")
    if shown and not matches(shown, printed):
        raise _mismatch(what, shown, printed + (f"\n(stderr)\n{errors}" if errors else ""))


def _in_terminal(argv: list[str], env: dict[str, str], cwd: Path, until_lines: int | None,
                 timeout: float = 120.0, stderr_shown: bool = False,
                 stop_within: float = 30.0) -> tuple[str, int, str]:
    """Run ``argv`` with its stdout on a terminal; stderr is kept apart (no progress bars),
    except for a pipeline, whose stderr the terminal shows, as a person's terminal does.

    A server (``until_lines``: its lines read) is then stopped with SIGTERM; one still running
    ``stop_within`` seconds later is killed and raises :class:`Mismatch`.

    A ``dynaunique`` or ``python -m`` command is forked (``support.cli_process.shared``): its own
    process, on the same terminal (the child opens the terminal's device), without Python's
    start-up; a pipeline is a real ``bash`` with real processes."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, COLUMNS, 0, 0))
    forked_argv = _forked_argv(argv)
    process: Any
    errors: list[str] = []
    if forked_argv is not None:
        terminal = os.ttyname(follower)
        process = cli_process.shared(env).start(forked_argv, cwd=cwd, env=env, stdout=terminal,
                                     stderr=terminal if stderr_shown else None)

        def finished() -> None:  # the terminal ends (EOF on the leader) when the command does
            try:
                errors.append(process.result().stderr)
            finally:
                os.close(follower)

        reader = threading.Thread(target=finished, daemon=True)
    else:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=follower,
                                   stderr=follower if stderr_shown else subprocess.PIPE,
                                   env=env, cwd=cwd, close_fds=True)
        os.close(follower)
        reader = threading.Thread(target=lambda: errors.append(
            process.stderr.read().decode("utf-8", "replace") if process.stderr else ""),
            daemon=True)
    reader.start()
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if until_lines is not None and out.count(b"\n") >= until_lines:
                break
    finally:
        os.close(leader)
        stop = signal.SIGTERM if until_lines is not None else signal.SIGKILL
        if process.poll() is None:
            process.send_signal(stop)
        try:
            code = process.wait(timeout=stop_within)
        except subprocess.TimeoutExpired:
            # A server that SIGTERM has not stopped in `stop_within` is a defect of the server
            # (docker and systemd give 10 s): it is killed, so that nothing outlives the test,
            # and the test fails. (`dynaunique serve` did it twice in loaded full runs: its handler
            # deadlocked on the lock of the Event its main thread was waiting on.)
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
            reader.join(timeout=30)
            raise Mismatch(f"$ {' '.join(argv)}: still running {stop_within:g} s after "
                           f"{stop.name} (killed then); its terminal showed:\n"
                           f"{out.decode('utf-8', 'replace')}") from None
        reader.join(timeout=30)
    text = _ANSI.sub("", out.decode("utf-8", "replace")).replace("\r\n", "\n")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return text, code, "".join(errors)


# --- the parsers sybil uses --------------------------------------------------------------------


class ShellBlockParser:
    """``console`` / ``bash`` / ``sh`` / ``shell`` fenced blocks, run by :func:`evaluate_shell`."""

    def __init__(self) -> None:
        self.lexer = FencedCodeBlockLexer(language=r"(console|bash|sh|shell)",
                                          mapping={"source": "source"})

    def __call__(self, document: Document) -> Any:
        for region in self.lexer(document):
            yield Region(region.start, region.end, region.lexemes["source"],
                         _failures_reported(evaluate_shell))


def _python_parser() -> PythonCodeBlockParser:
    """sybil's python parser (``>>>`` blocks are doctests), other blocks run by ours."""
    parser = PythonCodeBlockParser()
    parser.codeblock_parser = CodeBlockParser(language="python",
                                              evaluator=_failures_reported(evaluate_python))
    return parser


PARSERS = [SkipParser(), _python_parser(), ShellBlockParser()]
