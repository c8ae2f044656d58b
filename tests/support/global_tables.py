"""Global tables on the local server for the tests of dynaunique/_transport/regions.py: a
constrained model bound to one region of a table made global, and the invariant check of every
region."""

from __future__ import annotations

from typing import Any

import boto3

from dynaunique import Model, normalizers
from dynaunique._transport import regions as _regions
from dynaunique.attributes import UnicodeAttribute
from dynaunique.testing import create_tables, use_endpoint
from support import invariants

EAST, WEST = "us-east-1", "eu-west-1"


def member_model(table: str, region: str, endpoint: str, *, home: str | None = None,
                 name: str = "Member", stream: bool = False) -> type[Model]:
    """A model ``name`` (the same class name in every region, as one application deployed in two
    regions has it) on ``table``, bound to ``region`` on the local ``endpoint``; ``stream``: its
    table has a NEW_AND_OLD_IMAGES stream (the stream guard's)."""
    meta_attrs: dict[str, Any] = {"table_name": table, "region": region}
    if home is not None:
        meta_attrs["home_region"] = home
    if stream:
        meta_attrs["stream_view_type"] = "NEW_AND_OLD_IMAGES"
    model = type(name, (Model,), {
        "__module__": __name__,
        "Meta": type("Meta", (), meta_attrs),
        "pk": UnicodeAttribute(hash_key=True, attr_name="PK"),
        "email": UnicodeAttribute(unique=True, normalize=normalizers.casefold),
    })
    use_endpoint(endpoint, model)
    return model


def regional_client(endpoint: str, region: str) -> Any:
    return boto3.client("dynamodb", endpoint_url=endpoint, region_name=region,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def replica_stream(endpoint: str, region: str, table: str) -> list[dict[str, Any]]:
    """Every record of ``region``'s replica's stream so far, as Lambda delivers them there."""
    arn = regional_client(endpoint, region).describe_table(TableName=table)["Table"][
        "LatestStreamArn"]
    streams = boto3.client("dynamodbstreams", endpoint_url=endpoint, region_name=region,
                           aws_access_key_id="testing", aws_secret_access_key="testing")
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records += [{**r, "eventSourceARN": arn}
                    for r in streams.get_records(ShardIterator=iterator)["Records"]]
    return records


def make_global(model: type[Model], endpoint: str, *, regions: tuple[str, ...] = (WEST,),
                mode: str | None = None) -> None:
    """Create ``model``'s table in its region and add a replica in each of ``regions``."""
    create_tables(model)
    extra = {"MultiRegionConsistency": mode} if mode else {}
    regional_client(endpoint, model.Meta.region).update_table(
        TableName=model.Meta.table_name,
        ReplicaUpdates=[{"Create": {"RegionName": r}} for r in regions], **extra)
    _regions.forget()   # create_tables told it the table had no replica: a process restarts


def check_region(model: type[Model], endpoint: str, region: str) -> invariants.Report:
    """The invariant checker's report on ``model``'s table as ``region``'s replica holds it."""
    return invariants.check([model], endpoint, region=region)
