"""The user's models module, as every tool opens it: import it and find its models
(:func:`load_models`), read ``[tool.dynaunique]`` for it (:func:`settings_for`), point the models
at an endpoint (:func:`open_models`).

It sits below the tools that use it — the CLI, the migrations' units, the stream guard's Lambda
handler — so none of them imports another's module for it (tests/unit/test_package.py).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dynaunique.errors import ConfigurationError

if TYPE_CHECKING:  # imported where used: ``--help`` needs no model, no botocore client
    from dynaunique.migrations.project import Settings
    from dynaunique.model import Model


def load_models(module_path: str) -> list[type[Model]]:
    """Import ``module_path`` (a dotted path) and return its dynaunique models with a table.

    The current directory is put on ``sys.path`` first, as ``python -m`` would.
    """
    from dynaunique.model import Model

    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_path)
    except Exception as exc:  # the user's module may raise anything while it is imported
        # One line, exit status 2 (a usage error), never a traceback: for `check`, status 1
        # means "findings".
        raise ConfigurationError(
            f"cannot import {module_path!r}: {type(exc).__name__}: {exc}"
        ) from exc
    models = [
        value
        for _, value in inspect.getmembers(module, inspect.isclass)
        if issubclass(value, Model) and value is not Model and value._du_info is not None
    ]
    if not models:
        raise ConfigurationError(f"{module_path!r} defines no dynaunique model with a table")
    return sorted(models, key=lambda m: m.__name__)


def settings_for(module: str) -> Settings:
    """``[tool.dynaunique]`` of the ``pyproject.toml`` in the current directory, for ``module``
    (``""``: the top-level settings only), as every command reads them."""
    from dynaunique.migrations.project import load_settings

    return load_settings(module)


def open_models(module: str, endpoint: str | None) -> tuple[list[type[Model]], Settings]:
    """``module``'s models pointed at ``endpoint`` (else ``[tool.dynaunique] endpoint``, else
    where their ``Meta`` says), and the settings: what every command that talks to DynamoDB
    starts with. Settings are read first, so a mistake there is reported before the import.

    :raises ConfigurationError: bad settings, a module that cannot be imported, a malformed URL,
        no region or credentials for an endpoint that is not on this machine.
    """
    from dynaunique._transport.endpoint import point_models

    settings = settings_for(module)
    models = load_models(module)
    # The one decision of region and credentials (fake ones only for a server on this machine).
    point_models(models, endpoint or settings.endpoint)
    return models, settings
