"""Plain callables that map a value to the form uniqueness is judged on.

A normalizer takes one value and returns one value. Non-string values pass through untouched, so
the same normalizer can sit on a composite constraint mixing strings and numbers. Any callable works
(``normalize=str.casefold``); migrations reference normalizers by import path, so prefer named
module-level functions over lambdas.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Any

import attrs

#: The type of a normalizer: one value in, one value out.
Normalizer = Callable[[Any], Any]


def casefold(value: Any) -> Any:
    """Case-insensitive comparison: ``"Ada@X.io"`` → ``"ada@x.io"`` (``str.casefold``)."""
    return value.casefold() if isinstance(value, str) else value


def nfkc_casefold(value: Any) -> Any:
    """Case- and width-insensitive comparison: NFKC, then casefold, then NFKC again.

    full-width ``"\\uff21da"`` and ``"ada"`` become equal; this is Unicode's recommended
    identifier caseless match (UAX #31 / NFKC_Casefold).
    """
    if not isinstance(value, str):
        return value
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", value).casefold())


def strip(value: Any) -> Any:
    """Ignore leading and trailing whitespace."""
    return value.strip() if isinstance(value, str) else value


@attrs.frozen
class Composed:
    """Several normalizers applied left to right; comparable and printable for migrations."""

    functions: tuple[Normalizer, ...]

    def __call__(self, value: Any) -> Any:
        for function in self.functions:
            value = function(value)
        return value


def compose(*functions: Normalizer) -> Composed:
    """Apply ``functions`` left to right: ``compose(strip, casefold)``."""
    if not functions:
        raise TypeError("compose() needs at least one normalizer")
    for function in functions:
        if not callable(function):
            raise TypeError(f"compose() takes callables, got {function!r}")
    return Composed(tuple(functions))
