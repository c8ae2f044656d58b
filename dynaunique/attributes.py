"""PynamoDB's attribute classes; the scalar ones also accept ``unique=``, ``normalize=``,
``lock_name=`` and ``hashed=``.

``UnicodeAttribute(unique=True)`` is shorthand for a one-field
:class:`~dynaunique.UniqueConstraint` named after the field (upper-cased) or ``lock_name``.
Every other PynamoDB attribute class is re-exported unchanged, so a model imports all of its
attributes from here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar

from pynamodb import attributes as _pa
from pynamodb.attributes import (
    Attribute,
    DiscriminatorAttribute,
    DynamicMapAttribute,
    MapAttribute,
    NullAttribute,
    TTLAttribute,
    VersionAttribute,
)

from dynaunique.errors import ConfigurationError
from dynaunique.normalizers import Normalizer

__all__ = [
    "Attribute",
    "BinaryAttribute",
    "BinarySetAttribute",
    "BooleanAttribute",
    "DiscriminatorAttribute",
    "DynamicMapAttribute",
    "JSONAttribute",
    "ListAttribute",
    "MapAttribute",
    "NullAttribute",
    "NumberAttribute",
    "NumberSetAttribute",
    "TTLAttribute",
    "UTCDateTimeAttribute",
    "UnicodeAttribute",
    "UnicodeSetAttribute",
    "UniqueOptions",
    "VersionAttribute",
]


_T = TypeVar("_T")


class UniqueOptions(_pa.Attribute[_T]):
    """Mixin that lets a scalar attribute declare a one-field unique constraint.

    Its constructor spells out PynamoDB's parameters (``hash_key`` … ``attr_name``, same order,
    same types) before the unique options, rather than passing ``**kwargs`` through, so that a
    type checker still catches ``UnicodeAttribute(nul=True)`` or ``default=5`` on a string.
    """

    #: Whether this attribute's value must be unique.
    unique: bool
    #: Callable applied before comparing values (``normalizers.casefold``), or None.
    normalize: Normalizer | None
    #: The lock name (``UNIQ#<lock_name>#...``); None means the field name upper-cased.
    lock_name: str | None
    #: Keep an HMAC of the value in the lock key instead of the value.
    hashed: bool

    def __init__(
        self,
        hash_key: bool = False,
        range_key: bool = False,
        null: bool | None = None,
        default: _T | Callable[..., _T] | None = None,
        default_for_new: Any | Callable[..., _T] | None = None,
        attr_name: str | None = None,
        *,
        unique: bool = False,
        normalize: Normalizer | None = None,
        lock_name: str | None = None,
        hashed: bool = False,
    ) -> None:
        super().__init__(hash_key=hash_key, range_key=range_key, null=null, default=default,
                         default_for_new=default_for_new, attr_name=attr_name)
        if not unique and (normalize is not None or lock_name is not None or hashed):
            raise ConfigurationError(
                "normalize=, lock_name= and hashed= only apply together with unique=True"
            )
        if normalize is not None and not callable(normalize):
            raise ConfigurationError(f"normalize= must be callable, got {normalize!r}")
        if unique and (hash_key or range_key):
            raise ConfigurationError(
                "a key attribute is already unique: DynamoDB enforces it; drop unique=True"
            )
        self.unique = bool(unique)
        self.normalize = normalize
        self.lock_name = lock_name
        self.hashed = bool(hashed)

    def __set_name__(self, owner: type[Any], name: str) -> None:
        """PynamoDB's naming, plus: a unique attribute on a PynamoDB class that is not a
        dynaunique Model (a plain ``pynamodb.models.Model``, a ``MapAttribute``) is refused,
        since nothing there would ever write its lock (docs/decisions.md, "Unique only where a
        lock is written")."""
        super().__set_name__(owner, name)
        if self.unique and isinstance(owner, _pa.AttributeContainerMeta) and not getattr(
                owner, "_du_declares_constraints", False):
            _refuse_when_scanned(owner, _misplaced(owner, name))


def _misplaced(owner: type[Any], name: str) -> ConfigurationError:
    """The error for ``owner.name``, a unique attribute of a class that writes no lock."""
    where = f"{owner.__name__}.{name}"
    if issubclass(owner, _pa.MapAttribute):
        return ConfigurationError(
            f"{where} declares unique=True inside a MapAttribute, where no lock can protect it; "
            "declare a UniqueConstraint over the model's scalar fields instead"
        )
    return ConfigurationError(
        f"{where} declares unique=True on a pynamodb.models.Model, whose save() writes no lock, "
        f"so nothing would be enforced; derive {owner.__name__} from dynaunique.Model "
        "(`from dynaunique import Model`) instead"
    )


class _Refusal:
    """A class attribute whose every read raises its error (see :func:`_refuse_when_scanned`)."""

    def __init__(self, error: ConfigurationError) -> None:
        self.error = error

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        raise self.error


def _refuse_when_scanned(owner: type[Any], error: ConfigurationError) -> None:
    # Raised from __set_name__ itself, Python 3.10 and 3.11 would wrap the error in a
    # RuntimeError ("Error calling __set_name__"). So the class is given an attribute whose
    # read raises it: PynamoDB's metaclass reads every attribute of the class right after
    # (AttributeContainerMeta._initialize_attributes, inspect.getmembers), which lets the
    # ConfigurationError itself end the class definition on every Python.
    owner._du_misplaced_unique_attribute = _Refusal(error)


class UnicodeAttribute(UniqueOptions[str], _pa.UnicodeAttribute):
    """A string attribute (PynamoDB's ``UnicodeAttribute``) that may be unique."""


class NumberAttribute(UniqueOptions[float], _pa.NumberAttribute):
    """A number attribute that may be unique; ``1``, ``1.0`` and ``Decimal("1.00")`` are the
    same value. Besides PynamoDB's ``int`` and ``float`` it stores a finite ``Decimal`` exactly
    (PynamoDB's JSON encoding refuses it); it still loads numbers as PynamoDB does."""

    def serialize(self, value: Any) -> Any:
        """PynamoDB's encoding, plus finite ``Decimal`` values written as their digits."""
        if isinstance(value, Decimal):
            if not value.is_finite():
                raise ValueError(f"{value!r} is not a finite number; DynamoDB cannot store it")
            return str(value)
        return super().serialize(value)  # type: ignore[no-untyped-call]


# PynamoDB's BinaryAttribute comes first in this one: its constructor takes the required
# keyword ``legacy_encoding`` and hands everything else on, so UniqueOptions receives only what
# it declares. The signature is spelled out again for the type checker, because PynamoDB's own
# is ``(*args: Any, legacy_encoding: bool, **kwargs: Any)`` and would accept any typo.
class BinaryAttribute(_pa.BinaryAttribute, UniqueOptions[bytes]):
    """A binary attribute that may be unique (``legacy_encoding=`` is required, as in PynamoDB)."""

    def __init__(
        self,
        hash_key: bool = False,
        range_key: bool = False,
        null: bool | None = None,
        default: bytes | Callable[..., bytes] | None = None,
        default_for_new: Any | Callable[..., bytes] | None = None,
        attr_name: str | None = None,
        *,
        legacy_encoding: bool,
        unique: bool = False,
        normalize: Normalizer | None = None,
        lock_name: str | None = None,
        hashed: bool = False,
    ) -> None:
        super().__init__(hash_key, range_key, null, default, default_for_new, attr_name,
                         legacy_encoding=legacy_encoding, unique=unique, normalize=normalize,
                         lock_name=lock_name, hashed=hashed)


class BooleanAttribute(UniqueOptions[bool], _pa.BooleanAttribute):
    """A boolean attribute (unique only makes sense in composite constraints)."""


class UTCDateTimeAttribute(UniqueOptions[datetime], _pa.UTCDateTimeAttribute):
    """A UTC datetime attribute that may be unique (compared in its stored string form)."""


class _NeverUnique:
    """Mixin for attributes a lock cannot protect: ``unique=`` is a clear ConfigurationError."""

    # Hidden from type checkers, which see PynamoDB's own typed constructor instead: there a
    # typo is an error, and so is ``unique=`` (which this constructor refuses at run time).
    if not TYPE_CHECKING:

        def __init__(self, *args: Any, unique: bool = False, normalize: Normalizer | None = None,
                     lock_name: str | None = None, hashed: bool = False, **kwargs: Any) -> None:
            if unique or normalize is not None or lock_name is not None or hashed:
                raise ConfigurationError(
                    f"{type(self).__name__} cannot be unique: a lock protects one scalar value "
                    "(string, number, binary, boolean, datetime); declare a UniqueConstraint "
                    "over scalar fields instead"
                )
            super().__init__(*args, **kwargs)


class UnicodeSetAttribute(_NeverUnique, _pa.UnicodeSetAttribute):
    """PynamoDB's ``UnicodeSetAttribute`` (cannot be unique)."""


class NumberSetAttribute(_NeverUnique, _pa.NumberSetAttribute):
    """PynamoDB's ``NumberSetAttribute`` (cannot be unique)."""


class BinarySetAttribute(_NeverUnique, _pa.BinarySetAttribute):
    """PynamoDB's ``BinarySetAttribute`` (cannot be unique)."""


class JSONAttribute(_NeverUnique, _pa.JSONAttribute):
    """PynamoDB's ``JSONAttribute`` (cannot be unique)."""


class ListAttribute(_NeverUnique, _pa.ListAttribute[Any]):
    """PynamoDB's ``ListAttribute`` (cannot be unique)."""
