"""``dynaunique`` commands in processes of their own, without paying Python's start-up each time.

A process that runs the CLI spends about a CPU-second importing botocore, PynamoDB and dynaunique
before it does anything; the tests that run dozens of commands (an empty environment, migration
workers, the Kubernetes job) paid that dozens of times. :class:`Forker` starts ONE Python with the
environment the commands get, imports ``dynaunique.cli`` and every command's module there once,
reads botocore's data files once (through the tests' shared loader, ``support/botocore_loader.py``,
as the tests' own processes do: a forked command's botocore sessions share what it read), freezes
what it made out of the garbage collector's reach (``gc.freeze()``: a child's collections would
otherwise copy every page of it), and then forks a child per command: each command still runs
in a process of its own (its own pid, exit status, environment, working directory, stdout and
stderr; killable with SIGKILL), exactly as ``python -c CODE ARGS`` or ``python -m MODULE ARGS``
(or ``python SCRIPT ARGS``) would run it, except that the imports and botocore's reads were done
before the fork. A forked ``dynaunique check`` costs about 0.14 CPU-seconds, against 0.6 with
only ``dynaunique.cli`` imported and about 1.2 as a real process (tests/README.md, "Time").
A command's stdout and stderr are files of the forker's folder, or paths the
caller names (a terminal's ``/dev/pts/N``, so the command sees the same terminal a real subprocess
would get); ``preload`` imports more modules before the forks (``pytest`` for a forked pytest run).

What that cannot reproduce, and is therefore refused: a command whose environment differs from the
forker's in a variable read while Python starts or while those modules are imported (``PYTHON*``,
``PYNAMODB_CONFIG``) — such a command needs a real ``subprocess``. Keep at least one real
subprocess per command where the process itself is the point (``test_cli_environment.py`` does).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

#: The tests' shared botocore loader, which the forker installs before it forks.
_LOADER = str(Path(__file__).with_name("botocore_loader.py"))

#: Variables read before or while the CLI's modules are imported: a command must share them with
#: its forker, since its modules were imported before the fork.
STARTUP_PREFIXES = ("PYTHON", "PYNAMODB_CONFIG")

# The forker's own program: import the CLI, then serve "fork this command" requests (JSON lines
# on stdin), answering on a private copy of stdout (the children's fd 1 is their own file).
# Single-threaded: it forks from a process with no other thread. It sleeps in select() until a
# request arrives or a child exits (SIGCHLD, through the wake-up pipe): no polling.
_SERVE = r'''
import atexit, gc, importlib, importlib.util, io, json, os, runpy, select, signal, sys, traceback
import dynaunique.cli  # the point: imported once, before every fork, with every command's module
for module, _ in dynaunique.cli.LAZY.values():
    importlib.import_module(f"dynaunique.cli.{module.split('.')[0]}")
for name in sys.argv[2:]:  # the caller's preloads
    importlib.import_module(name)
# botocore's data (endpoints, DynamoDB's service model and rule set) read once: the tests' shared
# loader (support/botocore_loader.py, loaded by path: no tests/ folder on the children's sys.path)
# and one DynamoDB client made with it, offline.
spec = importlib.util.spec_from_file_location("_dynaunique_tests_botocore_loader", sys.argv[1])
loader = importlib.util.module_from_spec(spec)
spec.loader.exec_module(loader)
loader.install()
import botocore.session
client = botocore.session.get_session().create_client(
    "dynamodb", region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
    aws_access_key_id="forker", aws_secret_access_key="forker")
for operation in client.meta.service_model.operation_names:
    client.meta.service_model.operation_model(operation).output_shape
del client, spec, loader
# What the forker made stays out of the children's garbage collections: a collection would touch
# (and so copy) every page of it in each child.
gc.freeze()
channel = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
running = {}
wake_r, wake_w = os.pipe()
os.set_blocking(wake_r, False)
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)

def child(request):
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.close(wake_r)
    os.close(wake_w)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    # A file is truncated, a terminal (a character device) is opened as it is; the same path for
    # both: stderr shares stdout's file description (as ``stderr=subprocess.STDOUT``).
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        if fd == 2 and path == request["stdout"]:
            os.dup2(1, 2)
            continue
        flags = os.O_WRONLY | (0 if path.startswith("/dev/") else os.O_CREAT | os.O_TRUNC)
        opened = os.open(path, flags | os.O_NOCTTY, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    # As Python sets them up: stderr line-buffered, both write-through under PYTHONUNBUFFERED
    # (the forker started with the same PYTHON* variables), a terminal line-buffered.
    sys.stdin = open(0, closefd=False)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
        raw = open(fd, "wb", buffering=0 if unbuffered else -1, closefd=False)
        setattr(sys, name, io.TextIOWrapper(raw, line_buffering=fd == 2 or os.isatty(fd),
                                            write_through=unbuffered))
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    mode, target, args = request["mode"], request["target"], request["args"]
    code = 0
    try:
        if mode == "-c":
            sys.argv = ["-c", *args]
            sys.path[0] = ""
            exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})
        elif mode == "script":
            sys.argv = [target, *args]
            sys.path[0] = os.path.dirname(os.path.abspath(target))
            runpy.run_path(target, run_name="__main__")
        else:
            sys.argv = [target, *args]
            sys.path[0] = os.getcwd()
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)

pending = b""
while True:
    ready, _, _ = select.select([0, wake_r], [], [], 1.0)
    if wake_r in ready:
        try:
            while os.read(wake_r, 4096):
                pass
        except BlockingIOError:
            pass
    if 0 in ready:  # raw reads: a buffered reader would hide a second request from select
        chunk = os.read(0, 65536)
        if not chunk:
            break
        pending += chunk
    while b"\n" in pending:
        line, pending = pending.split(b"\n", 1)
        request = json.loads(line)
        channel.flush()
        pid = os.fork()
        if pid == 0:
            channel.close()
            child(request)
        running[pid] = request["id"]
        channel.write(json.dumps({"id": request["id"], "pid": pid}) + "\n")
    while running:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            break
        channel.write(json.dumps({"id": running.pop(pid),
                                  "code": os.waitstatus_to_exitcode(status)}) + "\n")
for pid in running:  # closed with commands still running (a test failed): stop them
    os.kill(pid, 15)
    os.waitpid(pid, 0)
'''


class Forked:
    """A command the forker started: its pid; :meth:`wait` for its exit status and output."""

    def __init__(self, forker: Forker, ident: int, argv: list[str], folder: Path) -> None:
        self._forker = forker
        self._ident = ident
        self._folder = folder
        self.args = argv
        self.returncode: int | None = None
        self.pid: int = forker._reply(ident, "pid", 60.0)

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to the command, unless it has already exited (``Popen.send_signal``)."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def poll(self) -> int | None:
        """The exit status if the command has exited, else ``None`` (``Popen.poll``)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.wait(0)
        return None

    def wait(self, timeout: float | None = None) -> int:
        """The exit status (negative: killed by that signal), as ``Popen.wait``."""
        if self.returncode is None:
            self.returncode = self._forker._reply(self._ident, "code", timeout)
        return self.returncode

    def result(self, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """Wait, then the command's exit status, stdout and stderr, as ``subprocess.run``."""
        code = self.wait(timeout)
        out, err = ((path.read_text(encoding="utf-8", errors="replace") if path.is_file() else "")
                    for path in (self._folder / "stdout", self._folder / "stderr"))
        return subprocess.CompletedProcess(self.args, code, out, err)


class Forker:
    """One Python process, started with ``env``, that forks a child per command (see above)."""

    def __init__(self, env: Mapping[str, str], *, preload: Sequence[str] = ()) -> None:
        self.env = dict(env)
        self._folder = Path(tempfile.mkdtemp(prefix="dynaunique-forker-"))
        self._process = subprocess.Popen([sys.executable, "-c", _SERVE, _LOADER, *preload],
                                         env=self.env,
                                         cwd=self._folder, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True, bufsize=1)
        self._lock = threading.Lock()
        self._answers: dict[tuple[int, str], Any] = {}
        self._arrived = threading.Condition(self._lock)
        self._next = 0
        self._reader = threading.Thread(target=self._read, args=(self._process.stdout,),
                                        daemon=True)
        self._reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            answer = json.loads(line)
            key = "pid" if "pid" in answer else "code"
            with self._arrived:
                self._answers[(answer["id"], key)] = answer[key]
                self._arrived.notify_all()
        with self._arrived:
            self._answers[(-1, "eof")] = True
            self._arrived.notify_all()

    def _reply(self, ident: int, key: str, timeout: float | None) -> Any:
        with self._arrived:
            if not self._arrived.wait_for(lambda: (ident, key) in self._answers
                                          or (-1, "eof") in self._answers, timeout):
                raise subprocess.TimeoutExpired(f"forked command {ident}", timeout or 0)
            if (ident, key) not in self._answers:
                raise RuntimeError("the forker exited")
            # An exit status stays: several threads may wait for one command.
            return self._answers[(ident, key)] if key == "code" else self._answers.pop((ident, key))

    def start(self, argv: Sequence[str], *, cwd: str | Path,
              env: Mapping[str, str] | None = None, stdout: str | Path | None = None,
              stderr: str | Path | None = None) -> Forked:
        """Start ``argv`` (``[sys.executable, "-c", CODE, *args]``, ``[sys.executable, "-m",
        MODULE, *args]`` or ``[sys.executable, SCRIPT, *args]``: a file, such as a console
        script) in ``cwd`` with ``env`` (default: the forker's). ``stdout`` / ``stderr``: where
        its output goes (a file, a FIFO, or a terminal such as ``os.ttyname(fd)``; the same path
        for both interleaves them, as a terminal shows them); by default files that
        :meth:`Forked.result` reads."""
        if self._process.poll() is not None:
            raise RuntimeError("this Forker is closed")
        env = dict(self.env if env is None else env)
        startup, own = startup_variables(env), startup_variables(self.env)
        if startup != own:
            raise ValueError(f"a command whose start-up variables differ from the forker's "
                             f"needs a real subprocess: {startup} != {own}")
        script = len(argv) >= 2 and argv[0] == sys.executable and not argv[1].startswith("-")
        if not script and (len(argv) < 3 or argv[0] != sys.executable
                           or argv[1] not in ("-c", "-m")):
            raise ValueError(f"not a `python -c`/`python -m`/`python SCRIPT` command: {argv!r}")
        mode, target, args = ("script", argv[1], argv[2:]) if script else (argv[1], argv[2],
                                                                           argv[3:])
        with self._lock:
            ident = self._next
            self._next += 1
        folder = self._folder / str(ident)
        folder.mkdir()
        request = {"id": ident, "mode": mode, "target": target, "args": list(args),
                   "cwd": str(cwd), "env": env, "stdout": str(stdout or folder / "stdout"),
                   "stderr": str(stderr or folder / "stderr")}
        with self._lock:
            assert self._process.stdin is not None
            self._process.stdin.write(json.dumps(request) + "\n")
            self._process.stdin.flush()
        return Forked(self, ident, list(argv), folder)

    def run(self, argv: Sequence[str], *, cwd: str | Path, env: Mapping[str, str] | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """``subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)``."""
        return self.start(argv, cwd=cwd, env=env).result(timeout)

    def close(self) -> None:
        """Stop the forker, and with SIGTERM any command still running."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._reader.join(timeout=5)
        import shutil

        shutil.rmtree(self._folder, ignore_errors=True)


#: The forkers :func:`shared` started, by their start-up variables.
_SHARED: dict[tuple[tuple[str, str], ...], Forker] = {}


def startup_variables(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables of ``env`` a forked command must share with its forker."""
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(STARTUP_PREFIXES)))


def shared(env: Mapping[str, str]) -> Forker:
    """A forker for commands with ``env``'s start-up variables, shared by every test of this
    process (a pytest worker) that asks for the same ones: started on first use, stopped when
    the process exits. One forker costs what one command's imports cost, so files that run
    only a few commands each (the docs pages, the examples, the ui servers) share one."""
    key = startup_variables(env)
    forker = _SHARED.get(key)
    if forker is None or forker._process.poll() is not None:
        forker = _SHARED[key] = Forker(env)
        atexit.register(forker.close)
    return forker
