"""How a model class's declaration becomes the ModelInfo the planner uses, checked as defined.

The metaclass (:class:`ModelMeta`) collects ``unique=True`` fields and ``Meta.constraints`` and
binds them (:func:`model_info`): each field to its stored attribute name and to the converter
that turns its python value into the value a lock encodes (:func:`bind_constraint`, which
migrations use too, to bind a recorded constraint to the live class). Mistakes are refused
here, with ``ConfigurationError``, not at the first write. The registry of lock names per table
(:func:`table_holds_locks`) keeps two models from silently sharing a lock namespace, makes
models that share one agree on what its locks mean (:mod:`dynaunique._model.sharing`), and tells
the reads which tables hold lock items.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs
from pynamodb import attributes as pa
from pynamodb.models import MetaModel

from dynaunique._lock.items import BoundConstraint, ModelInfo
from dynaunique._lock.locks import LOCK_ATTRIBUTES
from dynaunique._model.sharing import Meaning, differences, meaning_of
from dynaunique.attributes import UniqueOptions
from dynaunique.constraints import UniqueConstraint
from dynaunique.errors import ConfigurationError

_SCALAR_TYPES = (pa.UnicodeAttribute, pa.NumberAttribute, pa.BinaryAttribute,
                 pa.BooleanAttribute, pa.UTCDateTimeAttribute)
_NOT_LOCKABLE = (pa.VersionAttribute, pa.TTLAttribute, pa.DiscriminatorAttribute)
_UNIQUE_OPTIONS = {"unique", "normalize", "lock_name", "hashed"}


@attrs.frozen
class _Claim:
    """One model's use of a lock name: who declared it, whether by name, what it means."""

    model: type
    #: The class whose body (or ``Meta``) declares the constraint: ``model`` or a parent it
    #: inherits the declaration from (a polymorphic family shares it).
    origin: type
    explicit: bool
    meaning: Meaning


# table name → lock name → the claims of the models using it. Guards against two models on one
# table silently sharing a lock namespace, or sharing one they declare differently.
_lock_names: dict[str, dict[str, list[_Claim]]] = {}
_lock_names_guard = threading.Lock()
# Tables a model marks with ``Meta.holds_locks = True``: they hold lock or ledger items that no
# model declared in this process accounts for (a constraint dropped but not yet migrated, the
# migrations ledger), so reads must keep filtering them out.
_tables_holding_locks: set[str] = set()


def _identity(value: Any) -> Any:
    return value


# --- one constraint ------------------------------------------------------------------------------


class Recorded(Protocol):
    """A constraint as migrations record it (``ConstraintState``): fields, and a way back to
    the live constraint."""

    @property
    def fields(self) -> tuple[str, ...]: ...

    def to_constraint(self) -> UniqueConstraint: ...


def bind_constraint(
    constraint: UniqueConstraint | Recorded,
    attributes: Mapping[str, pa.Attribute[Any]],
    *,
    unknown: Callable[[str], Exception],
    check: Callable[[str, pa.Attribute[Any]], None] | None = None,
) -> BoundConstraint:
    """``constraint`` bound to a class's ``attributes``: each field's stored name and converter.

    A datetime is locked in its stored string form; every other scalar as it is. A field the
    class lacks raises ``unknown(field)`` (each caller words its own error); ``check`` may refuse
    a field's attribute. A recorded constraint is made live (its callables imported) only once
    every field is found.
    """
    attr_names: list[str] = []
    converters: list[Callable[[Any], Any]] = []
    bound_attributes: list[pa.Attribute[Any]] = []
    for field in constraint.fields:
        attribute = attributes.get(field)
        if attribute is None:
            raise unknown(field)
        if check is not None:
            check(field, attribute)
        attr_names.append(attribute.attr_name)
        bound_attributes.append(attribute)
        converters.append(attribute.serialize if isinstance(attribute, pa.UTCDateTimeAttribute)
                          else _identity)
    live = constraint if isinstance(constraint, UniqueConstraint) else constraint.to_constraint()
    return BoundConstraint(live, tuple(attr_names), tuple(converters),
                           plain=all(c is _identity for c in converters),
                           attributes=tuple(bound_attributes))


# --- a model class -------------------------------------------------------------------------------


def _origin(cls: type, name: str, value: Any) -> type:
    """The class of ``cls``'s MRO whose body holds ``value`` as ``name`` (else ``cls``)."""
    return next((k for k in cls.__mro__ if vars(k).get(name) is value), cls)


def _declared(cls: type, attributes: Mapping[str, pa.Attribute[Any]],
              meta: Any) -> list[tuple[UniqueConstraint, type]]:
    """The constraints ``cls`` declares — its ``unique=True`` fields, then ``Meta.constraints``
    — each with the class that declares it (``cls`` or the parent it inherits it from)."""
    declared: list[tuple[UniqueConstraint, type]] = []
    for field, attribute in attributes.items():
        if isinstance(attribute, UniqueOptions) and attribute.unique:
            declared.append((UniqueConstraint(
                (field,),
                name=attribute.lock_name or "",
                normalize=attribute.normalize,
                hashed=attribute.hashed,
            ), _origin(cls, field, attribute)))
    for constraint in getattr(meta, "constraints", ()) or ():
        if not isinstance(constraint, UniqueConstraint):
            raise ConfigurationError(
                f"{cls.__name__}.Meta.constraints holds {constraint!r}; only UniqueConstraint "
                "values belong there"
            )
        declared.append((constraint, _origin(cls, "Meta", meta)))
    return declared


def _bound(cls: type, attributes: Mapping[str, pa.Attribute[Any]],
           declared: Sequence[UniqueConstraint]) -> list[BoundConstraint]:
    """Every declared constraint bound to ``cls``; a name twice or a field no lock can hold is
    refused."""

    def scalar(field: str, attribute: pa.Attribute[Any]) -> None:
        if not isinstance(attribute, _SCALAR_TYPES) or isinstance(attribute, _NOT_LOCKABLE):
            raise ConfigurationError(
                f"{cls.__name__}.{field} is a {type(attribute).__name__}; unique constraints "
                "take string, number, binary, boolean or datetime attributes"
            )

    names: set[str] = set()
    bound: list[BoundConstraint] = []
    for constraint in declared:
        if constraint.name in names:
            raise ConfigurationError(
                f"{cls.__name__} declares the unique constraint name {constraint.name!r} twice; "
                "give each constraint its own name (lock_name= or name=)"
            )
        names.add(constraint.name)

        def unknown(field: str, constraint: UniqueConstraint = constraint) -> Exception:
            return ConfigurationError(
                f"constraint {constraint.name} of {cls.__name__} names unknown field "
                f"{field!r}; the fields are {sorted(attributes)}"
            )

        bound.append(bind_constraint(constraint, attributes, unknown=unknown, check=scalar))
    return bound


def _check_keys(cls: Any, attributes: Mapping[str, pa.Attribute[Any]]) -> None:
    """Refuse keys and indexes lock items cannot share (a model that declares constraints)."""
    if attributes[cls._hash_keyname].attr_type != "S":
        raise ConfigurationError(
            f"{cls.__name__}'s hash key {cls._hash_keyname!r} is not a string attribute; lock "
            "items share the table's key, so a model with unique constraints needs a string hash "
            "key"
        )
    range_field = cls._range_keyname
    if range_field and attributes[range_field].attr_type != "S":
        raise ConfigurationError(
            f"{cls.__name__}'s range key {range_field!r} is not a string attribute; lock items "
            "use the range key 'LOCK', so it must be a string"
        )
    for index in getattr(cls, "_indexes", {}).values():
        for attribute in index.Meta.attributes.values() if hasattr(index.Meta, "attributes") \
                else []:
            if attribute.attr_name in LOCK_ATTRIBUTES:
                raise ConfigurationError(
                    f"index {index.Meta.index_name} of {cls.__name__} is keyed on "
                    f"{attribute.attr_name!r}, an attribute every lock item carries; lock "
                    "items must stay out of indexes: rename that attribute (attr_name=)"
                )


def _check_own_names(cls: Any, attributes: Mapping[str, pa.Attribute[Any]],
                     ttl_field: str | None) -> None:
    """A lock item carries the table's key attributes and the TTL beside its own attributes:
    the same name twice would make one overwrite the other."""
    for role, named in (("hash key", cls._hash_keyname), ("range key", cls._range_keyname),
                        ("TTL attribute", ttl_field)):
        if named is not None and attributes[named].attr_name in LOCK_ATTRIBUTES:
            raise ConfigurationError(
                f"{cls.__name__}'s {role} is stored as {attributes[named].attr_name!r}, a "
                f"name every lock item uses for itself ({', '.join(LOCK_ATTRIBUTES)}); give "
                "it another attr_name="
            )


def model_info(cls: Any) -> ModelInfo | None:
    """The :class:`ModelInfo` of a model class as it is defined (None: no table, or no keys yet).

    :raises ConfigurationError: a declaration no lock can keep, with what to do instead.
    """
    meta = getattr(cls, "Meta", None)
    table = getattr(meta, "table_name", None) if meta is not None else None
    attributes = cls.get_attributes()
    declared = _declared(cls, attributes, meta)
    if table is None:
        if declared:
            raise ConfigurationError(f"{cls.__name__} declares unique constraints but no "
                                     "Meta.table_name")
        return None
    if getattr(meta, "holds_locks", False):
        with _lock_names_guard:
            _tables_holding_locks.add(table)
    bound = _bound(cls, attributes, [constraint for constraint, _ in declared])

    hash_field = cls._hash_keyname
    if hash_field is None:
        if bound:
            raise ConfigurationError(
                f"{cls.__name__} declares unique constraints but has no hash key; a lock names "
                "its record by key: declare the keys on the class that declares the constraints"
            )
        # A base class with Meta.table_name and keys left to its subclasses (PynamoDB allows
        # it): nothing to protect, and nothing dynaunique can write, until a subclass has keys.
        return None
    if bound:
        _check_keys(cls, attributes)
    hash_attribute = attributes[hash_field]
    range_field = cls._range_keyname
    range_attribute: pa.Attribute[Any] | None = attributes[range_field] if range_field else None
    version_field = cls._version_attribute_name
    ttl_field = next((f for f, a in attributes.items() if isinstance(a, pa.TTLAttribute)), None)
    if bound:
        _check_own_names(cls, attributes, ttl_field)
    secret = getattr(meta, "lock_secret", None)
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    info = ModelInfo(
        name=cls.__name__,
        table=table,
        hash_attr=hash_attribute.attr_name,
        range_attr=range_attribute.attr_name if range_attribute is not None else None,
        hash_field=hash_field,
        range_field=range_field,
        version_attr=attributes[version_field].attr_name if version_field else None,
        version_field=version_field,
        ttl_attr=attributes[ttl_field].attr_name if ttl_field else None,
        ttl_field=ttl_field,
        constraints=tuple(bound),
        meta_secret=secret,
        hash_type=hash_attribute.attr_type,
        range_type=range_attribute.attr_type if range_attribute is not None else None,
    )
    _register_lock_names(cls, info, attributes, declared)
    _register_model(cls, table)
    return info


# --- lock names per table ------------------------------------------------------------------------


def _one_namespace(claim: _Claim, other: _Claim) -> bool:
    """Whether two models' claims of one lock name may be one namespace: a subclass shares its
    parent's locks, siblings share what they inherit from one parent (a polymorphic family),
    and unrelated models share a name only when both declare it explicitly. Classes are told
    apart by name, as redefinitions are."""

    def lineage(model: type) -> set[str]:
        return {k.__name__ for k in model.__mro__}

    return (claim.model.__name__ in lineage(other.model)
            or other.model.__name__ in lineage(claim.model)
            or claim.origin.__name__ == other.origin.__name__
            or (claim.explicit and other.explicit))


def _replaced(other: _Claim, cls: type) -> bool:
    # A class defined again under its name (a reloaded module, a test) writes the same lock
    # items: it replaces its earlier claims, and those its subclasses inherited from it.
    return cls.__name__ in (other.model.__name__, other.origin.__name__)


def _register_lock_names(cls: type, info: ModelInfo, attributes: Mapping[str, pa.Attribute[Any]],
                         declared: Sequence[tuple[UniqueConstraint, type]]) -> None:
    claims = [_Claim(cls, origin, constraint.explicit_name, meaning_of(info, bound, attributes))
              for (constraint, origin), bound in zip(declared, info.constraints, strict=True)]
    table = info.table
    with _lock_names_guard:
        taken = _lock_names.setdefault(table, {})
        for (constraint, _), claim in zip(declared, claims, strict=True):
            for other in taken.get(constraint.name, ()):
                if _replaced(other, cls):
                    continue
                if not _one_namespace(claim, other):
                    raise ConfigurationError(
                        f"{cls.__name__} and {other.model.__name__} both use lock name "
                        f"{constraint.name!r} on table {table!r}; two models may share a lock "
                        "namespace only when both name it explicitly (lock_name= / name=)"
                    )
                differ = differences(claim.meaning, other.meaning)
                if differ:
                    raise ConfigurationError(
                        f"{cls.__name__} and {other.model.__name__} both use lock name "
                        f"{constraint.name!r} on table {table!r} but declare it differently: "
                        f"{'; '.join(differ)}; models sharing a lock name must agree on its "
                        "fields' stored types and normalizers, on hashing and on the secret"
                    )
        # Only a class that passed every check claims its names.
        for (constraint, _), claim in zip(declared, claims, strict=True):
            kept = [c for c in taken.get(constraint.name, ()) if not _replaced(c, cls)]
            taken[constraint.name] = [*kept, claim]


def table_holds_locks(table: str) -> bool:
    """Whether ``table`` holds lock items: a model defined in this process declares a
    constraint on it, or marks it with ``Meta.holds_locks = True``."""
    with _lock_names_guard:
        return bool(_lock_names.get(table)) or table in _tables_holding_locks


# --- the models of a table -----------------------------------------------------------------------

# table name → model name → the class (a class of the same name redefines it: a reloaded module,
# a test). Every model with a table and keys, constrained or not: which model an item is a record
# of, and which locks it holds, is judged against all of them (dynaunique._write.mixed).
_table_models: dict[str, dict[str, type]] = {}
_table_models_guard = threading.Lock()
#: Bumped whenever a model is registered, so what is derived from the registry can be cached
#: (``GENERATION[0]``: read on every write's path, without a call).
_table_models_generation = GENERATION = [0]


def _register_model(cls: type, table: str) -> None:
    with _table_models_guard:
        _table_models.setdefault(table, {})[cls.__name__] = cls
        _table_models_generation[0] += 1


def table_models(table: str) -> tuple[Any, ...]:
    """Every model class bound to ``table`` in this process, in definition order."""
    with _table_models_guard:
        return tuple(_table_models.get(table, {}).values())


# --- the metaclass -------------------------------------------------------------------------------


class ModelMeta(MetaModel):
    """PynamoDB's model metaclass, plus: collect and validate the unique constraints."""

    #: Read by ``UniqueOptions.__set_name__``: a unique attribute belongs on this class.
    _du_declares_constraints = True

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any],
                discriminator: Any = None) -> ModelMeta:
        # PynamoDB's MapAttribute takes unknown keywords as map values (and drops them when the
        # class is built), so ``unique=True`` there would silently protect nothing.
        for field, value in namespace.items():
            if isinstance(value, pa.MapAttribute) and _UNIQUE_OPTIONS & set(
                    value.__dict__.get("attribute_values", {})):
                raise ConfigurationError(
                    f"{name}.{field} is a {type(value).__name__}, which cannot be unique: "
                    "declare a UniqueConstraint over scalar fields instead"
                )
        cls: ModelMeta = super().__new__(mcs, name, bases, namespace, discriminator)  # type: ignore[no-untyped-call]
        return cls

    def __init__(cls, name: str, bases: tuple[type, ...], namespace: dict[str, Any],
                 discriminator: Any = None) -> None:
        super().__init__(name, bases, namespace, discriminator)
        cls._du_info = model_info(cls)
