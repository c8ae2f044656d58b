"""Reads, batches and table requests of the in-memory model (:mod:`.memory` describes it).

GetItem, BatchGetItem, TransactGetItems, Query and Scan (pages as the local server cuts them:
``Limit`` items or 1 MB evaluated, ``LastEvaluatedKey`` when it stopped short — and, as DynamoDB
does, when it stopped at ``Limit`` on the last item), BatchWriteItem, and CreateTable,
DescribeTable, DeleteTable, ListTables, UpdateTimeToLive for the tables tests create. Every read
is strongly consistent (``ConsistentRead`` or not): the model has one copy of each item.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dynaunique._lock.sizes import item_size

from .memory_expr import (
    Expressions,
    Item,
    Unsupported,
    client_error,
    holds,
    ordered,
    parse_condition,
    project,
    projection,
    validation,
)

if TYPE_CHECKING:
    from .memory import Fault, MemoryDynamoDB

#: The most a Query or Scan page evaluates (the local server's limit; DynamoDB's is 1 MB).
PAGE_BYTES = 1_000_000


def _projected(params: dict[str, Any], placeholders: Expressions) -> Callable[[Item], Item]:
    text = params.get("ProjectionExpression")
    if text is None:
        return copy.deepcopy
    paths = projection(text, placeholders)
    return lambda item: project(item, paths)


def get_item(db: MemoryDynamoDB, params: dict[str, Any], fault: Fault | None) -> Any:
    table = params["TableName"]
    placeholders = Expressions(params)
    shape = _projected(params, placeholders)
    placeholders.check_all_used()
    ident, _ = db.key("GetItem", table, params["Key"], exact=True)
    item = db.items[table].get(ident)
    return {"Item": shape(item)} if item is not None else {}


def batch_get_item(db: MemoryDynamoDB, params: dict[str, Any], fault: Fault | None) -> Any:
    requests = params["RequestItems"]
    if sum(len(r["Keys"]) for r in requests.values()) > 100:
        raise validation("Too many items requested for the BatchGetItem call")
    keep = fault.keep if fault is not None else None
    responses: dict[str, list[Item]] = {}
    unprocessed: dict[str, Any] = {}
    done = 0
    for table, request in requests.items():
        unknown = set(request) - {"Keys", "ConsistentRead", "ProjectionExpression",
                                  "ExpressionAttributeNames"}
        if unknown:
            raise Unsupported(f"BatchGetItem parameters {sorted(unknown)} are not modelled")
        placeholders = Expressions(request)
        shape = _projected(request, placeholders)
        placeholders.check_all_used()
        idents = [db.key("BatchGetItem", table, key, exact=True)[0] for key in request["Keys"]]
        if len(set(idents)) != len(idents):
            raise validation("Provided list of item keys contains duplicates")
        found = responses.setdefault(table, [])
        for key, ident in zip(request["Keys"], idents, strict=True):
            if keep is not None and done >= keep:
                unprocessed.setdefault(table, {**{k: v for k, v in request.items()
                                                  if k != "Keys"}, "Keys": []})
                unprocessed[table]["Keys"].append(copy.deepcopy(key))
                continue
            done += 1
            item = db.items[table].get(ident)
            if item is not None:
                found.append(shape(item))
    return {"Responses": responses, "UnprocessedKeys": unprocessed}


def transact_get_items(db: MemoryDynamoDB, params: dict[str, Any], fault: Fault | None) -> Any:
    entries = params["TransactItems"]
    if len(entries) > 100:
        raise validation("Member must have length less than or equal to 100")
    answers = []
    for entry in entries:
        if list(entry) != ["Get"]:
            raise Unsupported(f"TransactGetItems item {list(entry)} is not modelled")
        body = entry["Get"]
        unknown = set(body) - {"TableName", "Key", "ProjectionExpression",
                               "ExpressionAttributeNames"}
        if unknown:
            raise Unsupported(f"TransactGetItems parameters {sorted(unknown)} are not modelled")
        answers.append(get_item(db, body, None))
    return {"Responses": answers}


def batch_write_item(db: MemoryDynamoDB, params: dict[str, Any], fault: Fault | None) -> Any:
    requests = params["RequestItems"]
    if sum(len(r) for r in requests.values()) > 25:
        raise validation("Too many items requested for the BatchWriteItem call")
    planned = []
    for table, writes in requests.items():
        idents = set()
        for write in writes:
            (kind, body), = write.items()
            if kind == "PutRequest":
                ident, _ = db.key("BatchWriteItem", table, body["Item"])
                new: Item | None = copy.deepcopy(body["Item"])
            elif kind == "DeleteRequest":
                ident, _ = db.key("BatchWriteItem", table, body["Key"], exact=True)
                new = None
            else:
                raise Unsupported(f"BatchWriteItem request {kind} is not modelled")
            if ident in idents:
                raise validation("Provided list of item keys contains duplicates")
            idents.add(ident)
            planned.append((table, write, ident, new))
    keep = fault.keep if fault is not None else len(planned)
    unprocessed: dict[str, list[Any]] = {}
    for n, (table, write, ident, new) in enumerate(planned):
        if n >= keep:
            unprocessed.setdefault(table, []).append(copy.deepcopy(write))
        else:
            db.store(table, ident, new)
    return {"UnprocessedItems": unprocessed}


# --- query and scan ------------------------------------------------------------------------------


def _page(db: MemoryDynamoDB, operation: str, params: dict[str, Any], candidates: list[Item],
          placeholders: Expressions, forward: bool = True) -> Any:
    """One page of ``candidates`` (in order): start key, limit, filter, projection, select."""
    table = params["TableName"]
    names = db.key_names(operation, table)
    start = params.get("ExclusiveStartKey")
    if start is not None:
        if any(n not in start for n in names):
            raise validation("The provided starting key is invalid")
        mark = db.sort_key(table, start)
        candidates = [i for i in candidates
                      if (db.sort_key(table, i) > mark) == forward
                      and db.sort_key(table, i) != mark]
    text = params.get("FilterExpression")
    tree = parse_condition(text, placeholders) if text is not None else None
    shape = _projected(params, placeholders)
    placeholders.check_all_used()
    select = params.get("Select", "ALL_ATTRIBUTES")
    if select not in ("ALL_ATTRIBUTES", "COUNT"):
        raise Unsupported(f"Select={select} is not modelled")
    limit = params.get("Limit")
    if limit is not None and limit < 1:
        raise validation("1 validation error detected: Value at 'limit' failed to satisfy "
                         "constraint: Member must have value greater than or equal to 1")
    evaluated: list[Item] = []
    size = 0
    stopped = False
    for item in candidates:
        if (limit is not None and len(evaluated) == limit) or size + item_size(item) > PAGE_BYTES:
            stopped = True
            break
        evaluated.append(item)
        size += item_size(item)
    if limit is not None and len(evaluated) == limit:
        stopped = True   # DynamoDB reports where it stopped, even on the last item
    matched = [i for i in evaluated if tree is None or holds(tree, i)]
    answer: dict[str, Any] = {"Count": len(matched), "ScannedCount": len(evaluated)}
    if select != "COUNT":
        answer["Items"] = [shape(i) for i in matched]
    if stopped and evaluated:
        answer["LastEvaluatedKey"] = {n: copy.deepcopy(evaluated[-1][n]) for n in names}
    return answer


def _ordered_items(db: MemoryDynamoDB, table: str) -> list[Item]:
    return sorted(db.items[table].values(), key=lambda i: db.sort_key(table, i))


def scan(db: MemoryDynamoDB, params: dict[str, Any], fault: Fault | None) -> Any:
    table = params["TableName"]
    hash_attr, _ = db.schema("Scan", table)
    placeholders = Expressions(params)
    items = _ordered_items(db, table)
    segment, total = params.get("Segment"), params.get("TotalSegments")
    if (segment is None) != (total is None):
        raise validation("Segment and TotalSegments must be given together")
    if total is not None:
        if not 0 <= segment < total:
            raise validation("The Segment parameter is zero-based and must be less than "
                             "parameter TotalSegments")
        items = [i for i in items if _segment(i[hash_attr], total) == segment]
    return _page(db, "Scan", params, items, placeholders)


def _segment(value: dict[str, Any], total: int) -> int:
    """The local server's segment of a hash key: its text's MD5, first byte, modulo total."""
    (_, inner), = value.items()
    return hashlib.md5(str(inner).encode("utf-8")).digest()[0] % total


def query(db: MemoryDynamoDB, params: dict[str, Any], fault: Fault | None) -> Any:
    table = params["TableName"]
    hash_attr, range_attr = db.schema("Query", table)
    if "IndexName" in params:
        raise Unsupported("a Query of an index is not modelled")
    placeholders = Expressions(params)
    tree = parse_condition(params["KeyConditionExpression"], placeholders)
    if not _fixes_hash(tree, hash_attr):
        raise validation("Query condition missed key schema element: " + hash_attr)
    items = [i for i in db.items[table].values() if holds(tree, i)]
    items.sort(key=lambda i: ordered(i[range_attr]) if range_attr else 0)
    forward = params.get("ScanIndexForward", True)
    if not forward:
        items.reverse()
    return _page(db, "Query", params, items, placeholders, forward=forward)


def _fixes_hash(tree: Any, hash_attr: str) -> bool:
    if tree[0] == "and":
        return _fixes_hash(tree[1], hash_attr) or _fixes_hash(tree[2], hash_attr)
    return bool(tree[0] == "=" and ("path", (hash_attr,)) in tree[1:])


# --- tables --------------------------------------------------------------------------------------


def _description(db: MemoryDynamoDB, table: str) -> dict[str, Any]:
    info = db.tables.get(table, {})
    return {"TableName": table, "TableStatus": "ACTIVE",
            "KeySchema": copy.deepcopy(info.get("KeySchema", [])),
            "AttributeDefinitions": copy.deepcopy(info.get("AttributeDefinitions", [])),
            "ItemCount": len(db.items[table])}


def create_table(db: MemoryDynamoDB, params: dict[str, Any], fault: Fault | None) -> Any:
    table = params["TableName"]
    if table in db.schemas:
        raise client_error("CreateTable", "ResourceInUseException",
                           f"Table already exists: {table}")
    for unmodelled in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        if params.get(unmodelled):
            raise Unsupported(f"CreateTable {unmodelled} are not modelled")
    roles = {k["KeyType"]: k["AttributeName"] for k in params["KeySchema"]}
    types = {a["AttributeName"]: a["AttributeType"] for a in params["AttributeDefinitions"]}
    if "HASH" not in roles or any(name not in types for name in roles.values()):
        raise validation("One or more parameter values were invalid: Some index key attributes "
                         "are not defined in AttributeDefinitions")
    db.schemas[table] = (roles["HASH"], roles.get("RANGE"))
    db.items[table] = {}
    db.tables[table] = {"KeySchema": params["KeySchema"], "types": types,
                        "AttributeDefinitions": params["AttributeDefinitions"]}
    return {"TableDescription": _description(db, table)}


def describe_table(db: MemoryDynamoDB, params: dict[str, Any], fault: Fault | None) -> Any:
    db.schema("DescribeTable", params["TableName"])
    return {"Table": _description(db, params["TableName"])}


def delete_table(db: MemoryDynamoDB, params: dict[str, Any], fault: Fault | None) -> Any:
    table = params["TableName"]
    db.schema("DeleteTable", table)
    description = _description(db, table)
    del db.schemas[table], db.items[table]
    db.tables.pop(table, None)
    return {"TableDescription": description}


def list_tables(db: MemoryDynamoDB, params: dict[str, Any], fault: Fault | None) -> Any:
    return {"TableNames": sorted(db.schemas)}


def update_time_to_live(db: MemoryDynamoDB, params: dict[str, Any], fault: Fault | None) -> Any:
    db.schema("UpdateTimeToLive", params["TableName"])
    spec = params["TimeToLiveSpecification"]
    db.tables.setdefault(params["TableName"], {})["ttl"] = copy.deepcopy(spec)
    return {"TimeToLiveSpecification": copy.deepcopy(spec)}


HANDLERS: dict[str, Callable[[MemoryDynamoDB, dict[str, Any], Fault | None], Any]] = {
    "GetItem": get_item, "BatchGetItem": batch_get_item, "TransactGetItems": transact_get_items,
    "BatchWriteItem": batch_write_item, "Query": query, "Scan": scan,
    "CreateTable": create_table, "DescribeTable": describe_table, "DeleteTable": delete_table,
    "ListTables": list_tables, "UpdateTimeToLive": update_time_to_live,
}

_READ = {"TableName", "ExpressionAttributeNames", "ExpressionAttributeValues",
         "ReturnConsumedCapacity", "ConsistentRead", "ProjectionExpression", "FilterExpression",
         "Limit", "ExclusiveStartKey", "Select"}
KNOWN_PARAMS: dict[str, set[str]] = {
    "GetItem": {"TableName", "Key", "ConsistentRead", "ReturnConsumedCapacity",
                "ProjectionExpression", "ExpressionAttributeNames"},
    "BatchGetItem": {"RequestItems", "ReturnConsumedCapacity"},
    "TransactGetItems": {"TransactItems", "ReturnConsumedCapacity"},
    "BatchWriteItem": {"RequestItems", "ReturnConsumedCapacity", "ReturnItemCollectionMetrics"},
    "Scan": _READ | {"Segment", "TotalSegments"},
    "Query": _READ | {"KeyConditionExpression", "ScanIndexForward", "IndexName"},
    "CreateTable": {"TableName", "KeySchema", "AttributeDefinitions", "BillingMode",
                    "ProvisionedThroughput", "GlobalSecondaryIndexes", "LocalSecondaryIndexes",
                    "StreamSpecification", "Tags"},
    "DescribeTable": {"TableName"},
    "DeleteTable": {"TableName"},
    "ListTables": {"Limit", "ExclusiveStartTableName"},
    "UpdateTimeToLive": {"TableName", "TimeToLiveSpecification"},
}
