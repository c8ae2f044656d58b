"""A model of an application deployed in eu-west-1 on a global table whose home region is
us-east-1 (named by ``DYNAUNIQUE_HOME_REGION``, as a deployment sets it), with the stream guard's
stream: the models module of tests/integration/test_deploy.py's global-table stream guard."""

from __future__ import annotations

from dynaunique import Model, normalizers
from dynaunique.attributes import UnicodeAttribute

TABLE = "iam_gt_guard"


class GuardedMember(Model):
    class Meta:
        table_name = TABLE
        region = "eu-west-1"
        stream_view_type = "NEW_AND_OLD_IMAGES"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)


MODELS = [GuardedMember]
