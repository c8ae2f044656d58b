"""The models of the PynamoDB-compatibility tests: models that declare no constraint, alone on
their table or beside one that does (unit and integration tests/*/test_model_compat.py)."""

from __future__ import annotations

from dynaunique import Model
from dynaunique.attributes import NumberAttribute, UnicodeAttribute
from support.declare import declare, pk_attr


class KeylessBase(Model):
    """PynamoDB's test_inherit_metaclass shape: a table name and no key."""

    class Meta:
        table_name = "compat_inherited"


class Inherited(KeylessBase):
    id = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute(null=True)


# No constraint, and no other model on its table declares one.
Plain = declare("Plain", "compat_plain", id=UnicodeAttribute(hash_key=True),
                n=NumberAttribute(null=True))

# A model with a constraint ...
Locked = declare("Locked", "compat_shared", pk=pk_attr(), email=UnicodeAttribute(unique=True))

# ... and one without, on the same table: its reads must not see Locked's lock items.
Neighbour = declare("Neighbour", "compat_shared", pk=pk_attr(), note=UnicodeAttribute(null=True))

