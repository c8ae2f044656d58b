"""The models of the mixed-table tests (issue 21): several models on one table, stated once.

``account_and_handle(table)`` gives two constrained models whose records share keys (an
``Account`` with a unique email, a ``Handle`` with a unique handle); ``polymorphic_family(table,
lock_name)`` a DiscriminatorAttribute family: ``Being`` declares a unique email (its lock name
given explicitly), ``Robot`` adds a unique serial, ``Human`` a plain nickname.
"""

from __future__ import annotations

from typing import Any

from dynaunique import Model
from dynaunique.attributes import DiscriminatorAttribute, UnicodeAttribute
from support.declare import declare, pk_attr, sk_attr


def account_and_handle(table: str) -> tuple[Any, Any]:
    """``Account`` (unique ``email``, plain ``name``) and ``Handle`` (unique ``handle``) on
    ``table``, both keyed ``PK``/``SK`` with the range key defaulting to ``PROFILE``."""
    account = declare("Account", table, pk=pk_attr(), sk=sk_attr("PROFILE"),
                      email=UnicodeAttribute(unique=True, null=True),
                      name=UnicodeAttribute(null=True))
    handle = declare("Handle", table, pk=pk_attr(), sk=sk_attr("PROFILE"),
                     handle=UnicodeAttribute(unique=True, null=True))
    return account, handle


def polymorphic_family(table: str, lock_name: str) -> tuple[Any, Any, Any]:
    """``Being``, ``Robot(Being)`` and ``Human(Being)`` on ``table``."""

    class Being(Model, discriminator="being"):
        class Meta:
            table_name = table

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
        cls = DiscriminatorAttribute()
        # Named explicitly: siblings inheriting an implicit lock name are refused today (issue
        # 21, item 4, another change).
        email = UnicodeAttribute(unique=True, null=True, lock_name=lock_name)

    class Robot(Being, discriminator="robot"):
        serial = UnicodeAttribute(unique=True, null=True)

    class Human(Being, discriminator="human"):
        nickname = UnicodeAttribute(null=True)

    return Being, Robot, Human
