"""The models of the PynamoDB-compatibility tests: models that declare no constraint, alone on
their table or beside one that does (unit and integration tests/*/test_model_compat.py)."""

from __future__ import annotations

from dynaunique import Model
from dynaunique.attributes import NumberAttribute, UnicodeAttribute


class KeylessBase(Model):
    """PynamoDB's test_inherit_metaclass shape: a table name and no key."""

    class Meta:
        table_name = "compat_inherited"


class Inherited(KeylessBase):
    id = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute(null=True)


class Plain(Model):
    """No constraint, and no other model on its table declares one."""

    class Meta:
        table_name = "compat_plain"

    id = UnicodeAttribute(hash_key=True)
    n = NumberAttribute(null=True)


class Locked(Model):
    """A model with a constraint ..."""

    class Meta:
        table_name = "compat_shared"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute(unique=True)


class Neighbour(Model):
    """... and one without, on the same table: its reads must not see Locked's lock items."""

    class Meta:
        table_name = "compat_shared"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    note = UnicodeAttribute(null=True)

