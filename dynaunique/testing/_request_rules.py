"""DynamoDB's rules on the parameters of a request, which moto does not enforce (or words
differently), checked by the local server before moto sees the request.

Each rule is small, fixes one thing and answers with DynamoDB's own error type and message, as
recorded against DynamoDB by the public conformance suite (``conformance/emulator.py``); each has
its own differential test (request → DynamoDB's answer) in ``tests/unit/test_local_server_rules.py``
and, over HTTP, ``tests/integration/test_local_server_requests.py``. In DynamoDB's order:

1. the parameters' constraints, all reported in one message (``2 validation errors detected:
   ...; ...``): table name length and pattern, enum values (an attribute definition's type
   too), ``Limit`` at least 1;
2. the operation's own rules: empty ``RequestItems`` or ``TransactItems``, more than 25 writes or
   100 keys per table of a batch, more than 100 actions of a transaction, duplicate keys in a
   batch write or a ``TransactGetItems``, ``Segment`` not below ``TotalSegments``, an empty
   expression, an expression name not defined, a character no projection path holds,
   expression and non-expression parameters mixed,
   ``CreateTable``'s key schema and local indexes;
3. the attribute values (:mod:`dynaunique.testing._value_rules`).

``key_names(table)`` (given by the server) answers a table's key attribute names, ``None`` when it
does not exist; only the duplicate-key rules need it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from dynaunique._lock.sizes import MAX_TRANSACTION_ACTIONS
from dynaunique.testing._value_rules import (
    Refusal,
    check_item_values,
    check_numbers,
    validation,
)

__all__ = ["MAX_BATCH_GET_KEYS", "MAX_BATCH_WRITE_REQUESTS", "MAX_TRANSACTION_ACTIONS",
           "KeyNames", "check_request"]

MAX_BATCH_WRITE_REQUESTS = 25
MAX_BATCH_GET_KEYS = 100

KeyNames = Callable[[str], "tuple[str, ...] | None"]

_TABLE_PATTERN = re.compile(r"[a-zA-Z0-9_.-]+")
_NAME_REFERENCE = re.compile(r"#[A-Za-z0-9_]+")
_ENUMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ReturnValues": ("returnValues", ("ALL_NEW", "UPDATED_OLD", "ALL_OLD", "NONE",
                                      "UPDATED_NEW")),
    "ReturnConsumedCapacity": ("returnConsumedCapacity", ("INDEXES", "TOTAL", "NONE")),
    "ReturnItemCollectionMetrics": ("returnItemCollectionMetrics", ("SIZE", "NONE")),
    "Select": ("select", ("SPECIFIC_ATTRIBUTES", "COUNT", "ALL_ATTRIBUTES",
                          "ALL_PROJECTED_ATTRIBUTES")),
    "ReturnValuesOnConditionCheckFailure": ("returnValuesOnConditionCheckFailure",
                                            ("ALL_OLD", "NONE")),
    "BillingMode": ("billingMode", ("PROVISIONED", "PAY_PER_REQUEST")),
}
_TABLE_OPERATIONS = frozenset({"PutItem", "GetItem", "DeleteItem", "UpdateItem", "Query", "Scan",
                               "DescribeTable", "CreateTable", "DeleteTable", "UpdateTable"})
_EXPRESSIONS = ("KeyConditionExpression", "FilterExpression", "ConditionExpression",
                "UpdateExpression", "ProjectionExpression")
_NON_EXPRESSIONS = ("AttributesToGet", "KeyConditions", "QueryFilter", "ScanFilter", "Expected",
                    "AttributeUpdates")
_MULTIPLE_OPERATIONS = "Transaction request cannot include multiple operations on one item"
_DUPLICATE_KEYS = "Provided list of item keys contains duplicates"
_INVALID = "One or more parameter values were invalid: "


# --- 1. the parameters' constraints, reported together -------------------------------------------


def _violation(value: object, field: str, constraint: str) -> str:
    shown = "null" if value is None else f"'{value}'"
    return f"Value {shown} at '{field}' failed to satisfy constraint: Member must {constraint}"


def _table_name(operation: str, name: Any) -> list[str]:
    if name is None:
        return [_violation(None, "tableName", "not be null")]
    if not isinstance(name, str):
        return []
    least = 3 if operation == "CreateTable" else 1
    found = []
    if name and not name.startswith("arn:") and _TABLE_PATTERN.fullmatch(name) is None:
        found.append(_violation(name, "tableName",
                                "satisfy regular expression pattern: [a-zA-Z0-9_.-]+"))
    if len(name) < least:
        found.append(_violation(name, "tableName", f"have length greater than or equal to {least}"))
    if len(name) > 255 and not name.startswith("arn:"):
        found.append(_violation(name, "tableName", "have length less than or equal to 255"))
    return found


def constraint_violations(operation: str, request: dict[str, Any]) -> list[str]:
    """Each parameter of ``request`` that breaks its declared constraint, as DynamoDB words it."""
    found = []
    if operation in _TABLE_OPERATIONS and not (operation == "CreateTable"
                                               and "TableName" not in request):
        found += _table_name(operation, request.get("TableName"))
    for parameter, (field, allowed) in _ENUMS.items():
        value = request.get(parameter)
        if isinstance(value, str) and value not in allowed:
            found.append(_violation(value, field,
                                    f"satisfy enum value set: [{', '.join(allowed)}]"))
    if operation == "CreateTable" and isinstance(request.get("AttributeDefinitions"), list):
        for number, definition in enumerate(request["AttributeDefinitions"], start=1):
            kind = definition.get("AttributeType") if isinstance(definition, dict) else None
            if isinstance(kind, str) and kind not in ("B", "N", "S"):
                found.append(_violation(kind, f"attributeDefinitions.{number}.member."
                                        "attributeType", "satisfy enum value set: [B, N, S]"))
    limit = request.get("Limit")
    if operation in ("Query", "Scan") and isinstance(limit, int) and limit < 1:
        # As recorded: Query names the parameter without its value, Scan with it.
        shown = None if operation == "Query" else limit
        text = _violation(shown, "Limit" if operation == "Query" else "limit",
                          "have value greater than or equal to 1")
        found.append(text.replace("Value null at", "Value at"))
    return found


def _report(violations: list[str]) -> Refusal:
    count = len(violations)
    noun = "error" if count == 1 else "errors"
    return validation(f"{count} validation {noun} detected: " + "; ".join(violations))


# --- 2. the operation's own rules ---------------------------------------------------------------


def _java_list(kind: str, count: int) -> str:
    """How DynamoDB echoes a list it refuses: Java's ``toString`` of each member."""
    return "[" + ", ".join(f"com.amazonaws.dynamodb.v20120810.{kind}@{0x10000001 + n:x}"
                           for n in range(count)) + "]"


def _key_of(attributes: dict[str, Any], names: Iterable[str]) -> str:
    return json.dumps({name: attributes.get(name) for name in names}, sort_keys=True)


def _check_batch_write(request: dict[str, Any], key_names: KeyNames) -> None:
    tables = request.get("RequestItems")
    if not tables:
        raise validation("The requestItems parameter is required for BatchWriteItem")
    if not isinstance(tables, dict):
        return
    if any(isinstance(r, list) and not 1 <= len(r) <= MAX_BATCH_WRITE_REQUESTS
           for r in tables.values()):
        shown = ", ".join(f"{t}={_java_list('WriteRequest', len(r))}" for t, r in tables.items())
        raise validation(
            f"1 validation error detected: Value '{{{shown}}}' at 'requestItems' failed to "
            "satisfy constraint: Map value must satisfy constraint: [Member must have length "
            f"less than or equal to {MAX_BATCH_WRITE_REQUESTS}, Member must have length greater "
            "than or equal to 1]")
    if sum(len(r) for r in tables.values()) > MAX_BATCH_WRITE_REQUESTS:
        raise validation("Too many items requested for the BatchWriteItem call")
    for table, requests in tables.items():
        names = key_names(table) if len(requests) > 1 else None
        seen: set[str] = set()
        for write in requests:
            put, delete = write.get("PutRequest"), write.get("DeleteRequest")
            if put is not None:
                check_numbers(put.get("Item"))
                check_item_values(put.get("Item"))
            attributes = (put or {}).get("Item") or (delete or {}).get("Key")
            if names is not None and isinstance(attributes, dict):
                key = _key_of(attributes, names)
                if key in seen:
                    raise validation(_DUPLICATE_KEYS)
                seen.add(key)


def _check_batch_get(request: dict[str, Any], key_names: KeyNames) -> None:
    tables = request.get("RequestItems")
    if not tables:
        raise validation("The requestItems parameter is required for BatchGetItem")
    for table, wanted in tables.items():
        keys = wanted.get("Keys") or []
        if len(keys) > MAX_BATCH_GET_KEYS:
            raise validation(
                f"1 validation error detected: Value at 'RequestItems.{table}.member.Keys' failed "
                f"to satisfy constraint: Member must have length less than or equal to "
                f"{MAX_BATCH_GET_KEYS}")
        for key in keys:
            check_numbers(key)


def _check_transaction_length(request: dict[str, Any], kind: str) -> list[Any]:
    actions = request.get("TransactItems")
    if not isinstance(actions, list):
        return []
    if not actions:
        raise validation("1 validation error detected: Value '[]' at 'transactItems' failed to "
                         "satisfy constraint: Member must have length greater than or equal to 1")
    if len(actions) > MAX_TRANSACTION_ACTIONS:
        raise validation(
            f"1 validation error detected: Value '{_java_list(kind, len(actions))}' at "
            "'transactItems' failed to satisfy constraint: Member must have length less than or "
            f"equal to {MAX_TRANSACTION_ACTIONS}")
    return actions


def _check_transact_write(request: dict[str, Any], key_names: KeyNames) -> None:
    for action in _check_transaction_length(request, "TransactWriteItem"):
        for body in action.values():
            if isinstance(body, dict):
                _check_expressions(body)
                for field in ("Item", "Key", "ExpressionAttributeValues"):
                    check_numbers(body.get(field))
                check_item_values(body.get("Item"))


def _check_transact_get(request: dict[str, Any], key_names: KeyNames) -> None:
    actions = _check_transaction_length(request, "TransactGetItem")
    seen: set[str] = set()
    for action in actions:
        get = action.get("Get") or {}
        if not get.get("Key"):
            reasons = [{"Code": "ValidationError",
                        "Message": "The provided key element does not match the schema"}
                       if (other.get("Get") or {}).get("Key") in (None, {})
                       else {"Code": "None"} for other in actions]
            codes = ", ".join(reason["Code"] for reason in reasons)
            message = ("Transaction cancelled, please refer cancellation reasons for specific "
                       f"reasons [{codes}]")
            raise Refusal("TransactionCanceledException", message, CancellationReasons=reasons,
                          Message=message)
        check_numbers(get.get("Key"))
        _check_projection(get)
        key = json.dumps([get.get("TableName"), get.get("Key")], sort_keys=True)
        if key in seen:
            raise validation(_MULTIPLE_OPERATIONS)
        seen.add(key)


# Tokens of an expression as DynamoDB's parser reads them: a word (a name, "#name", a number)
# or any other single character. A projection holds paths only: words, ".", "[", "]" and ",".
_TOKEN = re.compile(r"[A-Za-z0-9_#]+|\S")
_PROJECTION_PUNCTUATION = frozenset(".[],")


def _check_projection(request: dict[str, Any]) -> None:
    """Refuse a ``ProjectionExpression`` holding a character no path can hold, in the words of
    DynamoDB's parser: the token, and the text from it to the end of the next token."""
    text = request.get("ProjectionExpression")
    if not isinstance(text, str):
        return
    tokens = list(_TOKEN.finditer(text))
    for number, token in enumerate(tokens):
        if len(token.group()) == 1 and not token.group().isalnum() and token.group() not in (
                _PROJECTION_PUNCTUATION | {"_", "#"}):
            end = tokens[number + 1].end() if number + 1 < len(tokens) else token.end()
            raise validation(f'Invalid ProjectionExpression: Syntax error; token: '
                             f'"{token.group()}", near: "{text[token.start():end]}"')


def _check_expressions(request: dict[str, Any]) -> None:
    """Expression and non-expression parameters mixed; an empty expression; a ``#name`` used
    and not defined; expression values with no expression to use them."""
    _check_projection(request)
    expressions = [name for name in _EXPRESSIONS if name in request]
    legacy = [name for name in _NON_EXPRESSIONS if name in request]
    if expressions and legacy:
        raise validation("Can not use both expression and non-expression parameters in the same "
                         f"request: Non-expression parameters: {{{', '.join(legacy)}}} "
                         f"Expression parameters: {{{', '.join(expressions)}}}")
    for name in ("KeyConditionExpression", "UpdateExpression"):
        if request.get(name) == "":
            raise validation(f"Invalid {name}: The expression can not be empty;")
    defined = request.get("ExpressionAttributeNames") or {}
    for name in expressions:
        text = request.get(name)
        for reference in _NAME_REFERENCE.findall(text if isinstance(text, str) else ""):
            if reference not in defined:
                raise validation(f"Invalid {name}: An expression attribute name used in the "
                                 f"document path is not defined; attribute name: {reference}")


def _check_single_write(operation: str, request: dict[str, Any]) -> None:
    _check_expressions(request)
    if (operation in ("PutItem", "DeleteItem") and "ExpressionAttributeValues" in request
            and "ConditionExpression" not in request):
        raise validation("ExpressionAttributeValues can only be specified when using "
                         "expressions: ConditionExpression is null")
    for field in ("Item", "Key", "ExpressionAttributeValues", "ExclusiveStartKey"):
        check_numbers(request.get(field))
    check_item_values(request.get("Item"))


def _check_scan_segments(request: dict[str, Any]) -> None:
    segment, total = request.get("Segment"), request.get("TotalSegments")
    if isinstance(segment, int) and isinstance(total, int) and segment >= total:
        raise validation("The Segment parameter is zero-based and must be less than parameter "
                         f"TotalSegments: Segment: {segment} is not less than TotalSegments: "
                         f"{total}")


def _check_create_table(request: dict[str, Any]) -> None:
    schema = request.get("KeySchema") or []
    names = [element.get("AttributeName") for element in schema if isinstance(element, dict)]
    if len(set(names)) != len(names):
        raise validation("Invalid KeySchema: Some index key attribute have no definition")
    hash_key = next((e.get("AttributeName") for e in schema
                     if isinstance(e, dict) and e.get("KeyType") == "HASH"), None)
    local = request.get("LocalSecondaryIndexes") or []
    if local and not any(isinstance(e, dict) and e.get("KeyType") == "RANGE" for e in schema):
        raise validation(f"{_INVALID}Table KeySchema does not have a range key, which is required "
                         "when specifying a LocalSecondaryIndex")
    for index in local:
        index_hash = next((e.get("AttributeName") for e in index.get("KeySchema") or []
                           if e.get("KeyType") == "HASH"), None)
        if index_hash != hash_key:
            raise validation(
                f"{_INVALID}Index KeySchema does not have the same leading hash key as table "
                f"KeySchema for index: {index.get('IndexName')}. index hash key: {index_hash}, "
                f"table hash key: {hash_key}")
    indexes = [index.get("IndexName") for index in
               [*local, *(request.get("GlobalSecondaryIndexes") or [])]]
    for position, name in enumerate(indexes):
        if name in indexes[:position]:
            raise validation(f"{_INVALID}Duplicate index name: {name}")


# --- the entry point ----------------------------------------------------------------------------


def check_request(operation: str, request: dict[str, Any], key_names: KeyNames) -> None:
    """Raise :class:`Refusal` as DynamoDB would refuse ``request`` to ``operation``; return
    quietly when these rules find nothing (moto then answers)."""
    if operation == "CreateTable" and "TableName" not in request:
        raise validation("The parameter 'TableName' is required but was not present in the "
                         "request")
    violations = constraint_violations(operation, request)
    if violations:
        raise _report(violations)
    if operation == "BatchWriteItem":
        _check_batch_write(request, key_names)
    elif operation == "BatchGetItem":
        _check_batch_get(request, key_names)
    elif operation == "TransactWriteItems":
        _check_transact_write(request, key_names)
    elif operation == "TransactGetItems":
        _check_transact_get(request, key_names)
    elif operation in ("PutItem", "DeleteItem", "UpdateItem", "GetItem", "Query", "Scan"):
        _check_single_write(operation, request)
        if operation == "Scan":
            _check_scan_segments(request)
    elif operation == "CreateTable":
        _check_create_table(request)
