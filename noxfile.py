"""The test run on every Python the package claims (docs/decisions.md, "Every claimed Python").

``python -m nox`` (nox comes with the ``dev`` extra) runs the default test run, ``python -m
pytest -q``, on 3.10, 3.11, 3.12 and 3.13, each in a fresh virtualenv under ``.nox/`` with the
package installed editable with its ``dev`` extra. ``python -m nox -s tests-3.13`` runs one;
anything after ``--`` goes to pytest (``python -m nox -s tests-3.12 -- tests/unit``).

nox finds each interpreter as ``python3.X`` on ``PATH``; ``.ci/run`` links pyenv's
``versions/3.X.Y/bin/python3.X`` into ``.nox/interpreters/`` and puts that first (pyenv's shims
need ``PYENV_VERSION`` to pick a version).
CI runs the main interpreter's full run itself and this session on the others
(``MAIN`` is left out with ``--python``): see ``.ci/run``.
"""

from __future__ import annotations

import nox

#: Every Python the classifiers name (pyproject.toml; tests/unit/test_ci_runs.py keeps them equal).
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
#: The interpreter CI's own steps run on (the full run: both pytest steps, conformance, lint,
#: types and docs).
MAIN = "3.11"

nox.options.sessions = ["tests"]
nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The default test run (the README's ``python -m pytest -q``) on one Python."""
    session.install("-e", ".[dev]")
    session.run("python", "-m", "pytest", "-q", *session.posargs)
