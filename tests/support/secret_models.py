"""A model whose hashed constraint takes its secret from ``DYNAUNIQUE_LOCK_SECRET``, for the
tests of what a check or a repair run with another secret does (the CLI imports this module by
its dotted name)."""

from __future__ import annotations

from dynaunique import Model, normalizers
from dynaunique.attributes import NumberAttribute, UnicodeAttribute

TABLE = "audit_patients"


class Patient(Model):
    """An email (plain lock) and a hashed phone, its secret from the environment."""

    class Meta:
        table_name = TABLE

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PATIENT")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)
    phone = UnicodeAttribute(null=True, unique=True, hashed=True)
    visits = NumberAttribute(null=True)


MODELS = [Patient]


def patient_key(pk: str) -> dict[str, dict[str, str]]:
    """The typed primary key of a patient record."""
    return {"PK": {"S": pk}, "SK": {"S": "PATIENT"}}
