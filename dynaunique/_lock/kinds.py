"""The base of every kind dynaunique names (write kinds, lock changes, findings, outcomes).

A kind is a ``str`` enum whose value is the word dynaunique has always printed and stored:
``ChangeKind.MOVED == "moved"``, ``f"{ChangeKind.MOVED}"`` and ``str(...)`` give ``"moved"``,
and ``json.dumps`` writes ``"moved"`` — so reports, ledgers and JSON output read the same as
when the kinds were bare strings, and code can still compare with the string.
"""

from __future__ import annotations

import enum


class Kind(str, enum.Enum):
    """A ``str`` enum that formats as its value (Python 3.10's ``str`` enums print the member)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)
