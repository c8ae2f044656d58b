"""Plain callables that map a value to the form uniqueness is judged on.

A normalizer takes one value and returns one value. Non-string values pass through untouched, so
the same normalizer can sit on a composite constraint mixing strings and numbers. Any callable works
(``normalize=str.casefold``); migrations reference normalizers by import path, so prefer named
module-level functions over lambdas.

**A normalizer must be a fixed point**: ``n(n(x)) == n(x)`` for every ``x``. Otherwise a record
holding exactly the normalized form of another's value gets a lock of its own, and the two are
both "unique". Every normalizer here is one, over all of Unicode (the tests prove it, code point
by code point), and :func:`compose` makes any chain one by applying it until the value settles.
:func:`not_fixed` finds the values a normalizer of your own does not settle on.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from dynaunique.errors import ConfigurationError

#: The type of a normalizer: one value in, one value out.
Normalizer = Callable[[Any], Any]


def casefold(value: Any) -> Any:
    """Case-insensitive comparison: ``"Ada@X.io"`` → ``"ada@x.io"`` (``str.casefold``)."""
    return value.casefold() if isinstance(value, str) else value


def nfkc_casefold(value: Any) -> Any:
    """Case- and width-insensitive comparison: NFKC, then casefold, then NFKC again.

    Full-width ``"\\uff21da"`` and ``"ada"`` become equal: a compatibility caseless match in
    the sense of the Unicode Standard (section 3.13), NFKC being the final form. Unlike
    Unicode's ``toNFKC_Casefold`` it keeps default-ignorable code points (a soft hyphen counts).
    It is a fixed point on every string: its result is NFKC and consists of characters whose
    case folding is canonically equivalent to themselves, so a second pass returns it unchanged
    (the proof, over every code point, is in ``tests/unit/test_normalizers.py``).
    """
    if not isinstance(value, str):
        return value
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", value).casefold())


def strip(value: Any) -> Any:
    """Ignore leading and trailing whitespace."""
    return value.strip() if isinstance(value, str) else value


#: How many times :class:`Composed` applies its chain before it gives up on the value settling.
MAX_ROUNDS = 8
_UNSETTLED = object()


@attrs.frozen
class Composed:
    """Several normalizers applied left to right, again until the value no longer changes;
    comparable and printable for migrations."""

    functions: tuple[Normalizer, ...]

    def __call__(self, value: Any) -> Any:
        # Each normalizer may be a fixed point while the chain is not: NFKC turns "\u00b4" into
        # " \u0301", which strip() would have removed had it come later. Applying the chain until
        # it settles returns a value the chain maps to itself, so the composition is a fixed
        # point whenever its functions settle at all. (``is`` first: a NaN passed through is
        # settled, though it is not equal to itself.)
        functions = self.functions
        previous: Any = _UNSETTLED
        for _ in range(MAX_ROUNDS):
            for function in functions:
                value = function(value)
            if value is previous or value == previous:
                return value
            previous = value
        raise ConfigurationError(
            f"{self!r} does not settle: after {MAX_ROUNDS} applications the value still "
            "changes, so its normalizers undo one another; each must be a fixed point "
            "(n(n(x)) == n(x)) and none may reverse another's change"
        )


def compose(*functions: Normalizer) -> Composed:
    """Apply ``functions`` left to right, and again until the value settles:
    ``compose(strip, casefold)``.

    The result is a fixed point (``c(c(x)) == c(x)``) even where each function is one but the
    chain is not (``compose(strip, nfkc_casefold)`` on ``"\\u00b4"``); a chain whose functions
    undo one another raises ``ConfigurationError`` on the value it cannot settle.
    """
    if not functions:
        raise TypeError("compose() needs at least one normalizer")
    for function in functions:
        if not callable(function):
            raise TypeError(f"compose() takes callables, got {function!r}")
    return Composed(tuple(functions))


def not_fixed(normalizer: Normalizer, values: Iterable[Any]) -> list[Any]:
    """The values of ``values`` on which ``normalizer`` is not a fixed point
    (``normalizer(normalizer(x)) != normalizer(x)``): empty when it settles on all of them.

    Run it over the values your own normalizer will see (every code point, say) before you
    declare it: a normalizer that is not a fixed point lets one value take two locks.
    """
    found = []
    for value in values:
        once = normalizer(value)
        if normalizer(once) != once:
            found.append(value)
    return found
