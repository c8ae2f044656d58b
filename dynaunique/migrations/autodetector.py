"""Compare two project states and list the operations that turn the first into the second.

Pure. A constraint is identified by its model and lock name: present only in the new state →
``AddUniqueConstraint``; only in the old → ``RemoveUniqueConstraint``; in both but declared
differently (fields, normalizer, condition, hashing) → ``AlterUniqueConstraint``. A model that
moved to another table has its constraints removed from the old table and added to the new one.
"""

from __future__ import annotations

import re
from collections.abc import Container

from dynaunique.migrations.operations import (
    AddUniqueConstraint,
    AlterUniqueConstraint,
    Operation,
    RemoveUniqueConstraint,
)
from dynaunique.migrations.state import ModelState, ProjectState


def detect_changes(old: ProjectState, new: ProjectState) -> list[Operation]:
    """The operations from ``old`` to ``new``: per model (by name), removals, then alterations,
    then additions, each by lock name."""
    operations: list[Operation] = []
    names = sorted({name for name, _ in old.models} | {name for name, _ in new.models})
    for name in names:
        before = old.model(name)
        after = new.model(name)
        if before is not None and after is not None and before.table != after.table:
            operations.extend(_removals(before, ()))
            operations.extend(_additions(after, ()))
            continue
        old_constraints = dict(before.constraints) if before is not None else {}
        new_constraints = dict(after.constraints) if after is not None else {}
        if before is not None:
            operations.extend(_removals(before, new_constraints))
        for lock_name in sorted(set(old_constraints) & set(new_constraints)):
            if old_constraints[lock_name] != new_constraints[lock_name]:
                assert after is not None
                operations.append(AlterUniqueConstraint(
                    model=name, table=after.table,
                    old=old_constraints[lock_name], new=new_constraints[lock_name],
                ))
        if after is not None:
            operations.extend(_additions(after, old_constraints))
    return operations


def _removals(model: ModelState, keep: Container[str]) -> list[Operation]:
    return [RemoveUniqueConstraint(model=model.name, table=model.table, constraint=c)
            for lock_name, c in model.constraints if lock_name not in keep]


def _additions(model: ModelState, existing: Container[str]) -> list[Operation]:
    return [AddUniqueConstraint(model=model.name, table=model.table, constraint=c)
            for lock_name, c in model.constraints if lock_name not in existing]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def suggest_name(operations: list[Operation], *, initial: bool) -> str:
    """A name for a migration holding ``operations``: ``initial``, ``add_account_email``, or
    the first operation's name plus ``_and_more``."""
    if initial:
        return "initial"
    names = []
    for op in operations:
        if isinstance(op, AddUniqueConstraint):
            names.append(f"add_{_slug(op.model)}_{_slug(op.constraint.name)}")
        elif isinstance(op, RemoveUniqueConstraint):
            names.append(f"remove_{_slug(op.model)}_{_slug(op.constraint.name)}")
        elif isinstance(op, AlterUniqueConstraint):
            names.append(f"alter_{_slug(op.model)}_{_slug(op.new.name)}")
        else:
            names.append("custom")
    if not names:
        return "empty"
    return names[0] if len(names) == 1 else f"{names[0]}_and_more"
