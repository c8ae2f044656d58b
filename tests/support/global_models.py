"""A model on a global table, for ``dynaunique check --regions`` (tests/integration/
test_global_tables_check.py): loaded by module path, as the CLI loads an application's."""

from __future__ import annotations

from dynaunique import Model, normalizers
from dynaunique.attributes import UnicodeAttribute


class Member(Model):
    class Meta:
        table_name = "gt_cli"
        region = "us-east-1"
        home_region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)
