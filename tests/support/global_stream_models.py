"""A model on a global table with a NEW_AND_OLD_IMAGES stream, for ``dynaunique watch --regions``
(tests/integration/test_global_tables_streams.py): loaded by module path, as the CLI loads an
application's."""

from __future__ import annotations

from dynaunique import Model, normalizers
from dynaunique.attributes import UnicodeAttribute


class Member(Model):
    class Meta:
        table_name = "gt_watch"
        region = "us-east-1"
        home_region = "us-east-1"
        stream_view_type = "NEW_AND_OLD_IMAGES"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)
