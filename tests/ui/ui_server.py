"""Run ``dynaunique ui`` as a person would — the command, in its own process — and fetch its
pages over HTTP without a browser.

The module fixtures' servers are that command forked from a Python that imported the CLI once
(``support.cli_process``); ``running_ui(real=True)`` runs it as a fresh ``python`` (the test of
the embedded server does, and ``integration/test_cli_environment.py`` runs ``ui`` so too)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
from support import cli_process

#: The folder of support.audit_models, which the command imports from its current directory.
TESTS = Path(__file__).resolve().parent.parent
#: Where the browser tests save their screenshots: docs/_static/ui (committed, shown in
#: docs/operating-locks.md) when DYNAUNIQUE_UPDATE_SCREENSHOTS=1, the folder
#: DYNAUNIQUE_SCREENSHOTS names, else nowhere: an ordinary run takes none (a full-page screenshot
#: costs Chromium about half a CPU-second, and no test compares them) and leaves the working tree
#: as it was.
SHOTS: Path | None = (TESTS.parent / "docs" / "_static" / "ui"
                      if os.environ.get("DYNAUNIQUE_UPDATE_SCREENSHOTS") == "1"
                      else Path(os.environ["DYNAUNIQUE_SCREENSHOTS"])
                      if os.environ.get("DYNAUNIQUE_SCREENSHOTS") else None)


@attrs.frozen
class Fetched:
    """One HTTP exchange: status, response headers (lower-case names) and the body as text."""

    status: int
    headers: Mapping[str, str]
    body: str


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# Never through a proxy from the environment; never follow a redirect (the tests look at it).
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


@attrs.frozen
class UIServer:
    """A running ``dynaunique ui``: its base URL, its access token, the lines it printed."""

    base: str
    token: str
    printed: tuple[str, ...]

    @property
    def url(self) -> str:
        """The URL it printed, token included."""
        return f"{self.base}/?token={self.token}"

    def fetch(self, path: str, *, method: str = "GET", data: Mapping[str, str] | None = None,
              token: bool = True, headers: Mapping[str, str] | None = None) -> Fetched:
        """One request; ``token=False`` sends it without the access token."""
        sent = dict(headers or {})
        if token:
            sent.setdefault("Authorization", f"token {self.token}")
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        if body is not None:
            sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
        request = urllib.request.Request(self.base + path, data=body, method=method,
                                         headers=sent)
        try:
            with _OPENER.open(request, timeout=60) as response:
                return Fetched(response.status, {k.lower(): v for k, v in response.headers.items()},
                               response.read().decode())
        except urllib.error.HTTPError as exc:
            return Fetched(exc.code, {k.lower(): v for k, v in exc.headers.items()},
                           exc.read().decode())

    def csrf(self) -> str:
        """The CSRF token its forms carry (read from the check page)."""
        match = re.search(r'name="csrf" value="([^"]+)"', self.fetch("/check").body)
        assert match is not None
        return match.group(1)


def _pump(stream: Any, lines: queue.Queue[str]) -> None:
    if isinstance(stream, Path):  # a forked command's FIFO: opened once the command opens it
        stream = stream.open(encoding="utf-8")
    with stream:
        for line in stream:
            lines.put(line.rstrip("\n"))


@contextmanager
def running_ui(*args: str, module: str = "support.audit_models",
               real: bool = False) -> Iterator[UIServer]:
    """``dynaunique ui MODULE --port 0 ARGS...`` until the block ends (then it is terminated)."""
    command = [sys.executable, "-c", "from dynaunique.cli import main; main()",
               "ui", module, "--port", "0", *args]
    # cwd=tests: the command imports MODULE from the current directory, as `python -m` would.
    process: Any
    if real:
        process = subprocess.Popen(command, cwd=TESTS, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
        output: Any = process.stdout
    else:
        output = Path(tempfile.mkdtemp(prefix="dynaunique-ui-")) / "output"
        os.mkfifo(output)
        process = cli_process.shared(os.environ).start(command, cwd=TESTS, env=os.environ,
                                                       stdout=output, stderr=output)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_pump, args=(output, lines), daemon=True).start()
    printed: list[str] = []
    try:
        while True:
            try:
                line = lines.get(timeout=90)
            except queue.Empty:
                raise AssertionError(f"dynaunique ui printed no URL: {printed}") from None
            printed.append(line)
            match = re.match(r"dynaunique ui: (http://127\.0\.0\.1:\d+)/\?token=(\S+)$", line)
            if match:
                break
            if process.poll() is not None and lines.empty():
                raise AssertionError(f"dynaunique ui exited: {printed}")
        # The rest of the banner follows at once.
        for _ in range(4):
            try:
                printed.append(lines.get(timeout=5))
            except queue.Empty:
                break
        yield UIServer(match.group(1), match.group(2), tuple(printed))
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait()
        if isinstance(output, Path):
            output.unlink()
            output.parent.rmdir()
