"""Requests DynamoDB refuses, each with the answer DynamoDB gave, as recorded by the public
conformance suite (nubo-db/dynamodb-conformance at 0ba4393, ``python -m conformance.emulator``):
one case per rule of the local server (dynaunique/testing/_request_rules.py, _value_rules.py).

A case is self-contained — operation, request, error code and message — so it can be replayed
against any endpoint (tests/integration/test_local_server_requests.py does, over HTTP) or any
implementation of the rule (tests/unit/test_local_server_rules.py), and sent upstream to moto as
is. ``source`` names the suite's file the answer was recorded in ("" when the suite only checks
the error type there and the message is DynamoDB's documented one). Tables: ``HASH`` has the key
``pk`` (S), ``COMPOSITE`` has ``pk`` and ``sk`` (S) and a local index.
"""

from __future__ import annotations

from typing import Any, NamedTuple

HASH = "recorded_hash"
COMPOSITE = "recorded_composite"
VALIDATION = "ValidationException"
INVALID = "One or more parameter values were invalid: "
CANCELLED = ("Transaction cancelled, please refer cancellation reasons for specific reasons "
             "[ValidationError]")


class Case(NamedTuple):
    """A request DynamoDB refuses, and its answer."""

    name: str
    operation: str
    request: dict[str, Any]
    code: str
    message: str
    source: str


def _put(item: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"TableName": HASH, "Item": {"pk": {"S": "k"}, **item}, **more}


def _gets(count: int) -> list[dict[str, Any]]:
    return [{"Get": {"TableName": HASH, "Key": {"pk": {"S": f"g{n}"}}}} for n in range(count)]


def _java(kind: str, count: int) -> str:
    return ", ".join(f"com.amazonaws.dynamodb.v20120810.{kind}@{0x10000001 + n:x}"
                     for n in range(count))


EM = "tier3/error-messages/"
CASES = [
    # --- the parameters' constraints ------------------------------------------------------------
    Case("table name missing", "PutItem", {"Item": {"pk": {"S": "k"}}}, VALIDATION,
         "1 validation error detected: Value null at 'tableName' failed to satisfy constraint: "
         "Member must not be null", EM + "putItem.test.ts"),
    Case("table name empty", "PutItem", {"TableName": "", "Item": {"pk": {"S": "k"}}}, VALIDATION,
         "1 validation error detected: Value '' at 'tableName' failed to satisfy constraint: "
         "Member must have length greater than or equal to 1", EM + "putItem.test.ts"),
    Case("table name of 256 characters", "GetItem",
         {"TableName": "a" * 256, "Key": {"pk": {"S": "k"}}}, VALIDATION,
         f"1 validation error detected: Value '{'a' * 256}' at 'tableName' failed to satisfy "
         "constraint: Member must have length less than or equal to 255", EM + "putItem.test.ts"),
    Case("table name with invalid characters", "DeleteItem",
         {"TableName": "bad table!@#", "Key": {"pk": {"S": "k"}}}, VALIDATION,
         "1 validation error detected: Value 'bad table!@#' at 'tableName' failed to satisfy "
         "constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+",
         EM + "putItem.test.ts"),
    Case("CreateTable: table name of 2 characters", "CreateTable",
         {"TableName": "ab", "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
          "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
          "BillingMode": "PAY_PER_REQUEST"}, VALIDATION,
         "1 validation error detected: Value 'ab' at 'tableName' failed to satisfy constraint: "
         "Member must have length greater than or equal to 3", EM + "createTable.test.ts"),
    Case("CreateTable: no table name", "CreateTable",
         {"KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
          "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}]}, VALIDATION,
         "The parameter 'TableName' is required but was not present in the request",
         EM + "createTable.test.ts"),
    Case("invalid enums reported together", "UpdateItem",
         {"TableName": HASH, "Key": {"pk": {"S": "k"}}, "ReturnValues": "INVALID",
          "ReturnConsumedCapacity": "INVALID"}, VALIDATION,
         "2 validation errors detected: Value 'INVALID' at 'returnValues' failed to satisfy "
         "constraint: Member must satisfy enum value set: [ALL_NEW, UPDATED_OLD, ALL_OLD, NONE, "
         "UPDATED_NEW]; Value 'INVALID' at 'returnConsumedCapacity' failed to satisfy "
         "constraint: Member must satisfy enum value set: [INDEXES, TOTAL, NONE]",
         "tier3/validation-ordering/updateItem.test.ts"),
    Case("Query Limit 0", "Query",
         {"TableName": HASH, "KeyConditionExpression": "pk = :v",
          "ExpressionAttributeValues": {":v": {"S": "k"}}, "Limit": 0}, VALIDATION,
         "1 validation error detected: Value at 'Limit' failed to satisfy constraint: Member "
         "must have value greater than or equal to 1", EM + "query.test.ts"),
    Case("Scan Limit 0", "Scan", {"TableName": HASH, "Limit": 0}, VALIDATION,
         "1 validation error detected: Value '0' at 'limit' failed to satisfy constraint: Member "
         "must have value greater than or equal to 1", EM + "scan.test.ts"),
    # --- batches ------------------------------------------------------------------------------
    Case("BatchWriteItem: empty RequestItems", "BatchWriteItem", {"RequestItems": {}}, VALIDATION,
         "The requestItems parameter is required for BatchWriteItem",
         EM + "batchWriteItem.test.ts"),
    Case("BatchGetItem: empty RequestItems", "BatchGetItem", {"RequestItems": {}}, VALIDATION,
         "The requestItems parameter is required for BatchGetItem", EM + "batchGetItem.test.ts"),
    Case("BatchWriteItem: 26 requests for one table", "BatchWriteItem",
         {"RequestItems": {HASH: [{"PutRequest": {"Item": {"pk": {"S": f"w{n}"}}}}
                                  for n in range(26)]}}, VALIDATION,
         f"1 validation error detected: Value '{{{HASH}=[{_java('WriteRequest', 26)}]}}' at "
         "'requestItems' failed to satisfy constraint: Map value must satisfy constraint: "
         "[Member must have length less than or equal to 25, Member must have length greater "
         "than or equal to 1]", EM + "batchWriteItem.test.ts"),
    Case("BatchWriteItem: a Put and a Delete of one key", "BatchWriteItem",
         {"RequestItems": {HASH: [{"PutRequest": {"Item": {"pk": {"S": "d"}, "x": {"S": "1"}}}},
                                  {"DeleteRequest": {"Key": {"pk": {"S": "d"}}}}]}}, VALIDATION,
         "Provided list of item keys contains duplicates", EM + "batchWriteItem.test.ts"),
    Case("BatchGetItem: 101 keys for one table", "BatchGetItem",
         {"RequestItems": {HASH: {"Keys": [{"pk": {"S": f"g{n}"}} for n in range(101)]}}},
         VALIDATION,
         f"1 validation error detected: Value at 'RequestItems.{HASH}.member.Keys' failed to "
         "satisfy constraint: Member must have length less than or equal to 100",
         EM + "batchGetItem.test.ts"),
    # --- transactions ---------------------------------------------------------------------------
    Case("TransactWriteItems: empty TransactItems", "TransactWriteItems", {"TransactItems": []},
         VALIDATION, "1 validation error detected: Value '[]' at 'transactItems' failed to "
         "satisfy constraint: Member must have length greater than or equal to 1",
         EM + "transactWriteItems.test.ts"),
    Case("TransactGetItems: empty TransactItems", "TransactGetItems", {"TransactItems": []},
         VALIDATION, "1 validation error detected: Value '[]' at 'transactItems' failed to "
         "satisfy constraint: Member must have length greater than or equal to 1",
         EM + "transactGetItems.test.ts"),
    Case("TransactGetItems: 101 items", "TransactGetItems", {"TransactItems": _gets(101)},
         VALIDATION, f"1 validation error detected: Value '[{_java('TransactGetItem', 101)}]' at "
         "'transactItems' failed to satisfy constraint: Member must have length less than or "
         "equal to 100", EM + "transactGetItems.test.ts"),
    Case("TransactGetItems: one key twice", "TransactGetItems",
         {"TransactItems": _gets(2) + _gets(1)}, VALIDATION,
         "Transaction request cannot include multiple operations on one item",
         "tier2/transactions/transactGet.test.ts"),
    Case("TransactGetItems: an empty key", "TransactGetItems",
         {"TransactItems": [{"Get": {"TableName": HASH, "Key": {}}}]},
         "TransactionCanceledException", CANCELLED, EM + "transactGetItems.test.ts"),
    # --- expressions ----------------------------------------------------------------------------
    Case("expression and non-expression parameters mixed", "PutItem",
         _put({}, Expected={"pk": {"Exists": False}},
              ConditionExpression="attribute_not_exists(pk)"), VALIDATION,
         "Can not use both expression and non-expression parameters in the same request: "
         "Non-expression parameters: {Expected} Expression parameters: {ConditionExpression}",
         EM + "putItem.test.ts"),
    Case("expression values without an expression", "PutItem",
         _put({}, ExpressionAttributeValues={":v": {"S": "unused"}}), VALIDATION,
         "ExpressionAttributeValues can only be specified when using expressions: "
         "ConditionExpression is null", EM + "putItem.test.ts"),
    Case("empty KeyConditionExpression", "Query",
         {"TableName": HASH, "KeyConditionExpression": ""}, VALIDATION,
         "Invalid KeyConditionExpression: The expression can not be empty;", EM + "query.test.ts"),
    Case("empty UpdateExpression", "UpdateItem",
         {"TableName": HASH, "Key": {"pk": {"S": "k"}}, "UpdateExpression": ""}, VALIDATION,
         "Invalid UpdateExpression: The expression can not be empty;", EM + "updateItem.test.ts"),
    Case("a filter name not defined", "Query",
         {"TableName": HASH, "KeyConditionExpression": "pk = :pk",
          "FilterExpression": "#missing = :fv",
          "ExpressionAttributeValues": {":pk": {"S": "k"}, ":fv": {"S": "x"}}}, VALIDATION,
         "Invalid FilterExpression: An expression attribute name used in the document path is "
         "not defined; attribute name: #missing", EM + "query.test.ts"),
    Case("a projection with a character no path holds", "GetItem",
         {"TableName": HASH, "Key": {"pk": {"S": "k"}},
          "ProjectionExpression": "!!! INVALID !!!"}, VALIDATION,
         'Invalid ProjectionExpression: Syntax error; token: "!", near: "!!"',
         EM + "getItem.test.ts"),
    Case("TransactGetItems: a projection with a character no path holds", "TransactGetItems",
         {"TransactItems": [{"Get": {"TableName": HASH, "Key": {"pk": {"S": "k"}},
                                     "ProjectionExpression": "!!!"}}]}, VALIDATION,
         'Invalid ProjectionExpression: Syntax error; token: "!", near: "!!"',
         EM + "transactGetItems.test.ts"),
    Case("Segment not below TotalSegments", "Scan",
         {"TableName": HASH, "Segment": 5, "TotalSegments": 5}, VALIDATION,
         "The Segment parameter is zero-based and must be less than parameter TotalSegments: "
         "Segment: 5 is not less than TotalSegments: 5", EM + "scan.test.ts"),
    # --- values ---------------------------------------------------------------------------------
    Case("a number of 39 significant digits", "PutItem",
         _put({"n": {"N": "1" * 39}}), VALIDATION,
         "Attempting to store more than 38 significant digits in a Number",
         "tier3/limits/numberPrecision.test.ts"),
    Case("a number of 1E+126", "PutItem", _put({"n": {"N": "-1E+126"}}), VALIDATION,
         "Number overflow. Attempting to store a number with magnitude larger than supported "
         "range", "tier3/limits/numberPrecision.test.ts"),
    Case("a number below 1E-130", "UpdateItem",
         {"TableName": HASH, "Key": {"pk": {"S": "k"}}, "UpdateExpression": "SET n = :n",
          "ExpressionAttributeValues": {":n": {"N": "1E-131"}}}, VALIDATION,
         "Number underflow. Attempting to store a number with magnitude smaller than supported "
         "range", ""),
    Case("an empty string set", "PutItem", _put({"s": {"SS": []}}), VALIDATION,
         INVALID + "An string set  may not be empty", EM + "putItem.test.ts"),
    Case("an empty number set in a list", "PutItem", _put({"l": {"L": [{"NS": []}]}}), VALIDATION,
         INVALID + "An number set  may not be empty", "tier3/limits/emptyValues.test.ts"),
    Case("an empty binary set", "PutItem", _put({"b": {"BS": []}}), VALIDATION,
         INVALID + "Binary sets should not be empty", "tier3/limits/emptyValues.test.ts"),
    Case("a string set with duplicates", "PutItem", _put({"s": {"SS": ["a", "a"]}}), VALIDATION,
         INVALID + "Input collection [a, a] contains duplicates.", EM + "putItem.test.ts"),
    Case("NULL false", "PutItem", _put({"n": {"NULL": False}}), VALIDATION,
         INVALID + "Null attribute value types must have the value of true",
         EM + "putItem.test.ts"),
    # --- CreateTable ----------------------------------------------------------------------------
    Case("CreateTable: one attribute twice in the key schema", "CreateTable",
         {"TableName": "dup_key", "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                                                {"AttributeName": "pk", "KeyType": "RANGE"}],
          "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
          "BillingMode": "PAY_PER_REQUEST"}, VALIDATION,
         "Invalid KeySchema: Some index key attribute have no definition",
         EM + "createTable.test.ts"),
    Case("CreateTable: an attribute type outside B, N, S", "CreateTable",
         {"TableName": "bad_type", "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
          "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "INVALID"}],
          "BillingMode": "PAY_PER_REQUEST"}, VALIDATION,
         "1 validation error detected: Value 'INVALID' at 'attributeDefinitions.1.member."
         "attributeType' failed to satisfy constraint: Member must satisfy enum value set: "
         "[B, N, S]", EM + "createTable.test.ts"),
    Case("CreateTable: a local index on a table without a range key", "CreateTable",
         {"TableName": "lsi_hash_only",
          "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
          "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                                   {"AttributeName": "l", "AttributeType": "S"}],
          "LocalSecondaryIndexes": [{"IndexName": "i", "KeySchema": [
              {"AttributeName": "pk", "KeyType": "HASH"},
              {"AttributeName": "l", "KeyType": "RANGE"}],
              "Projection": {"ProjectionType": "ALL"}}],
          "BillingMode": "PAY_PER_REQUEST"}, VALIDATION,
         INVALID + "Table KeySchema does not have a range key, which is required when specifying "
         "a LocalSecondaryIndex", EM + "createTable.test.ts"),
]
