"""What a lock name means, so that models sharing one can be checked to agree on it (pure).

Two models that share a lock name on one table write the same lock items: a value is free for
one exactly when it is free for the other. That only holds when both turn a value into the same
key, so they must agree on every input of the key (:func:`dynaunique._lock.items.lock_of`): the
number of fields, each field's stored type and normalizer (in field order), whether the key is
hashed and, if so, where the secret comes from. Field names may differ (``User.username`` and
``Team.name`` sharing ``HANDLE``) and so may conditions (a condition decides *whether* a record
holds its lock, not what the lock's key is).

A normalizer is compared by a stable identity (:func:`normalizer_identity`): a named module-level
function by its import path (the same path after a module is reloaded), a ``compose(...)`` by
the identities of its chain, anything else — a lambda, a nested function, a callable object —
by itself (``==``), since its name says nothing about what it does.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

import attrs
from pynamodb import attributes as pa

from dynaunique._lock.items import SECRET_ENV, BoundConstraint, ModelInfo
from dynaunique.normalizers import Composed

_TYPE_WORDS = {"S": "a string", "N": "a number", "B": "a binary value", "BOOL": "a boolean"}


def import_path(function: Any) -> str | None:
    """``module.qualname`` of a named module-level callable (``str.casefold`` included), else
    None (a lambda, a function defined inside another, a method bound to an instance, an
    object without a name)."""
    bound_to = getattr(function, "__self__", None)
    if bound_to is not None and not isinstance(bound_to, (type, types.ModuleType)):
        return None  # its instance is part of what it does: compared as an object
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    module = getattr(function, "__module__", None)
    owner = getattr(function, "__objclass__", None)  # methods of builtin types: str.casefold
    if module is None and owner is not None:
        module = getattr(owner, "__module__", None)
    if not isinstance(name, str) or not isinstance(module, str) or "<" in name:
        return None
    return f"{module}.{name}"


def normalizer_identity(function: Any) -> Any:
    """What two normalizers must share to be the same normalizer (see the module docstring)."""
    if function is None:
        return None
    if isinstance(function, Composed):
        return ("compose", tuple(normalizer_identity(f) for f in function.functions))
    return import_path(function) or ("object", function)


def _shown(function: Any) -> str:
    if function is None:
        return "nothing"
    if isinstance(function, Composed):
        return f"compose({', '.join(_shown(f) for f in function.functions)})"
    path = import_path(function)
    if path is not None:
        return path
    name = getattr(function, "__qualname__", None) or type(function).__qualname__
    module = getattr(function, "__module__", None) or type(function).__module__
    kind = "lambda" if "<lambda>" in name else "callable"
    return f"the {kind} {module}.{name.replace('.<locals>', '')}"


def _stored_type(attribute: pa.Attribute[Any]) -> str:
    """The type a lock encodes a field's value as: its DynamoDB type; a datetime is its own."""
    if isinstance(attribute, pa.UTCDateTimeAttribute):
        return "a datetime string (S)"
    attr_type = str(attribute.attr_type)
    return f"{_TYPE_WORDS.get(attr_type, attr_type)} ({attr_type})"


@attrs.frozen
class Meaning:
    """What one model's lock of one name is made of: the inputs of its key."""

    model: str
    fields: tuple[str, ...]
    types: tuple[str, ...]
    normalizers: tuple[Any, ...] = attrs.field(repr=False)
    hashed: bool
    #: None: the secret comes from the environment; else ``Meta.lock_secret``.
    secret: bytes | None = attrs.field(repr=False)


def meaning_of(info: ModelInfo, bound: BoundConstraint,
               attributes: Mapping[str, pa.Attribute[Any]]) -> Meaning:
    """The :class:`Meaning` of ``bound`` on the model ``info`` describes."""
    constraint = bound.constraint
    return Meaning(
        model=info.name,
        fields=constraint.fields,
        types=tuple(_stored_type(attributes[f]) for f in constraint.fields),
        normalizers=tuple(constraint.normalizer_for(f) for f in constraint.fields),
        hashed=constraint.hashed,
        secret=info.meta_secret if constraint.hashed else None,
    )


def differences(new: Meaning, old: Meaning) -> list[str]:
    """How ``new`` and ``old`` disagree, one phrase each (empty: they are the same lock).

    Secrets are compared, never shown.
    """
    a, b = new.model, old.model
    if len(new.fields) != len(old.fields):
        plural = "s" if len(new.fields) > 1 else ""
        return [f"{a} locks {len(new.fields)} field{plural} ({', '.join(new.fields)}), {b} "
                f"{len(old.fields)} ({', '.join(old.fields)})"]
    found: list[str] = []
    for fa, fb, ta, tb in zip(new.fields, old.fields, new.types, old.types, strict=True):
        if ta != tb:
            found.append(f"{a}.{fa} is stored as {ta}, {b}.{fb} as {tb}")
    for fa, fb, na, nb in zip(new.fields, old.fields, new.normalizers, old.normalizers,
                              strict=True):
        if normalizer_identity(na) != normalizer_identity(nb):
            shown_a, shown_b = _shown(na), _shown(nb)
            if shown_a == shown_b:
                shown_b = shown_b.replace("the ", "another ", 1)
            found.append(f"{a}.{fa} is normalized by {shown_a}, {b}.{fb} by {shown_b}")
    if new.hashed != old.hashed:
        hashing, plain = (a, b) if new.hashed else (b, a)
        found.append(f"{hashing} hashes it (hashed=True) and {plain} does not")
    elif new.hashed and new.secret != old.secret:
        if new.secret is not None and old.secret is not None:
            found.append(f"{a} and {b} set different Meta.lock_secret values")
        else:
            meta, env = (a, b) if new.secret is not None else (b, a)
            found.append(f"{meta} takes its secret from Meta.lock_secret and {env} from "
                         f"{SECRET_ENV}")
    return found
