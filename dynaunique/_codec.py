"""DynamoDB's JSON on the wire, both ways, and its SigV4 signature: pure functions, no I/O.

Each gives exactly what botocore gives, without botocore's per-value walk over the service
model's shapes (``tests/unit/test_wire.py`` and ``tests/unit/test_fastpath.py`` compare them):

* :func:`body` — the JSON body botocore's serializer makes of an already-typed request: for
  DynamoDB's JSON protocol the walk changes only blobs (``B``, ``BS``: bytes become base64), so one
  ``json.dumps`` with a ``default`` for bytes is the same body;
* :func:`decoder` — a function that turns a decoded JSON answer into what botocore's JSON parser
  returns for an output shape (members in the shape's order, ``null`` members left out, unknown
  members dropped, blobs as bytes, timestamps parsed): compiled once per shape, it looks at an
  attribute value only where it holds a blob, a map or a list;
* :func:`signature` — SigV4's signature of a string to sign, the derived key kept per day.

``dynaunique._wire`` uses them for the requests it sends past botocore's pipeline.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

Convert = Callable[[Any], Any]


def _blob(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        # botocore's Serializer._get_base64.
        return base64.b64encode(value).strip().decode("utf-8")
    raise TypeError(f"not a DynamoDB request value: {type(value).__name__}")


#: ``json.dumps``'s own settings (botocore's), with blobs as base64: the C encoder does it all.
_ENCODER = json.JSONEncoder(default=_blob, check_circular=False)


def body(parameters: Any) -> bytes:
    """The JSON body botocore's serializer makes of ``parameters`` (blobs given as bytes)."""
    return _ENCODER.encode(parameters).encode("utf-8")


#: The operations the library sends: their bodies are made here.
OPERATIONS = frozenset({
    "TransactWriteItems", "PutItem", "UpdateItem", "DeleteItem", "GetItem", "BatchGetItem",
    "BatchWriteItem", "Query", "Scan", "TransactGetItems",
})


class _Template:
    """The parameter-independent part of one operation's serialized request."""

    __slots__ = ("members", "request")

    def __init__(self, request: dict[str, Any], members: frozenset[str]) -> None:
        self.request = request
        self.members = members


class FastSerializer:
    """A botocore serializer: the library's requests made by :func:`body`, the rest by
    botocore. Wraps the client's own serializer (``inner``); for each known operation the URL,
    method and headers are botocore's own, taken once from ``inner`` (they do not depend on the
    parameters: DynamoDB's operations have no host prefix)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._templates: dict[str, _Template | None] = {}

    def _template(self, operation_model: Any) -> _Template | None:
        name = operation_model.name
        if name in self._templates:
            return self._templates[name]
        template = None
        shape = operation_model.input_shape
        if (name in OPERATIONS and shape is not None and operation_model.endpoint is None
                and operation_model.metadata.get("protocol") == "json"):
            request = self.inner.serialize_to_request({}, operation_model)
            if request.get("body") == b"{}" and "host_prefix" not in request:
                template = _Template(request, frozenset(shape.members))
        self._templates[name] = template
        return template

    def serialize_to_request(self, parameters: Any, operation_model: Any) -> dict[str, Any]:
        """What ``inner.serialize_to_request`` returns, made without the walk when it can be."""
        template = self._template(operation_model)
        if template is None or not isinstance(parameters, dict) \
                or not parameters.keys() <= template.members:
            return self.inner.serialize_to_request(parameters, operation_model)  # type: ignore
        try:
            encoded = body(parameters)
        except (TypeError, ValueError, RecursionError):
            return self.inner.serialize_to_request(parameters, operation_model)  # type: ignore
        request = dict(template.request)
        request["headers"] = dict(template.request["headers"])
        request["body"] = encoded
        return request

    def __getattr__(self, name: str) -> Any:
        # Anything else botocore (or a plugin) asks of its serializer.
        return getattr(self.inner, name)


# --- answers -------------------------------------------------------------------------------------

#: DynamoDB's AttributeValue: its members and their types, as the service model has them.
_ATTRIBUTE_VALUE = {"S": "string", "N": "string", "B": "blob", "SS": "list", "NS": "list",
                    "BS": "list", "M": "map", "L": "list", "NULL": "boolean", "BOOL": "boolean"}
_PLAIN = frozenset({"S", "N", "SS", "NS", "NULL", "BOOL"})


class Unsupported(Exception):
    """A shape :func:`decoder` does not compile (botocore's parser handles it)."""


def _identity(value: Any) -> Any:
    return value


def _attribute_value(blob: Convert) -> Convert:
    def value(node: Any) -> Any:
        if len(node) == 1:
            for tag, inner in node.items():
                if inner is not None:
                    if tag in _PLAIN:
                        return node
                    if tag == "M":
                        return {"M": {k: None if v is None else value(v)
                                      for k, v in inner.items()}}
                    if tag == "L":
                        return {"L": [None if v is None else value(v) for v in inner]}
                    if tag == "B":
                        return {"B": blob(inner)}
        # The general case, as botocore's _handle_structure: members in order, None left out.
        out: dict[str, Any] = {}
        for tag in _ATTRIBUTE_VALUE:
            inner = node.get(tag)
            if inner is None:
                continue
            if tag == "M":
                out[tag] = {k: None if v is None else value(v) for k, v in inner.items()}
            elif tag == "L":
                out[tag] = [None if v is None else value(v) for v in inner]
            elif tag == "B":
                out[tag] = blob(inner)
            elif tag == "BS":
                out[tag] = [None if v is None else blob(v) for v in inner]
            else:
                out[tag] = inner
        return out
    return value


def _is_attribute_value(shape: Any) -> bool:
    members = getattr(shape, "members", None)
    return (shape.type_name == "structure" and shape.name == "AttributeValue"
            and not shape.is_tagged_union and members is not None
            and {k: m.type_name for k, m in members.items()} == _ATTRIBUTE_VALUE
            and all(not m.serialization.get("name") for m in members.values())
            and members["M"].value.name == "AttributeValue"
            and members["L"].member.name == "AttributeValue"
            and members["BS"].member.type_name == "blob")


def decoder(shape: Any, blob: Convert, timestamp: Convert) -> Convert:
    """What botocore's JSON parser does to a decoded answer of ``shape``, as one function.

    ``blob`` and ``timestamp`` are the parser's own converters. :raises Unsupported: a shape
    this does not compile (a document, a union, a recursion other than AttributeValue's)."""
    compiled: dict[str, Convert | None] = {}

    def compile_(shape: Any) -> Convert | None:   # None: the value is kept as it is
        kind = shape.type_name
        if kind == "structure":
            if shape.name in compiled:
                done = compiled[shape.name]
                if done is None:
                    raise Unsupported(f"recursive shape {shape.name}")
                return done
            compiled[shape.name] = None
            if _is_attribute_value(shape):
                made: Convert = _attribute_value(blob)
            elif shape.is_document_type or shape.is_tagged_union:
                raise Unsupported(f"{shape.name}: a document or a union")
            else:
                made = _structure([(name, member.serialization.get("name", name),
                                    compile_(member)) for name, member in shape.members.items()])
            compiled[shape.name] = made
            return made
        if kind == "list":
            item = compile_(shape.member)
            if item is None:
                return list
            return lambda node: [None if v is None else item(v) for v in node]
        if kind == "map":
            if shape.key.type_name != "string":
                raise Unsupported(f"{shape.name}: a map keyed by {shape.key.type_name}")
            value = compile_(shape.value)
            if value is None:
                return dict
            return lambda node: {k: value(v) for k, v in node.items()}
        if kind == "blob":
            return blob
        if kind == "timestamp":
            return timestamp
        return None

    made = compile_(shape)
    return _identity if made is None else made


def _structure(members: list[tuple[str, str, Convert | None]]) -> Convert:
    def structure(node: Any) -> Any:
        if node is None:
            return None
        out: dict[str, Any] = {}
        get = node.get
        for name, wire, convert in members:
            value = get(wire)
            if value is not None:
                out[name] = value if convert is None else convert(value)
        return out
    return structure


#: What the JSON of a ResourceArnList operation context parameter may be (DynamoDB's model).
ARN_LISTS = {"keys(RequestItems)": "RequestItems",
             "TransactItems[*].Get.TableName": "TransactItems",
             "TransactItems[*].[ConditionCheck.TableName, Put.TableName, Delete.TableName, "
             "Update.TableName][]": "TransactItems"}


def tables(params: dict[str, Any], member: str | None) -> Any:
    """The table names a request names where ``member`` says (the endpoint ruleset's input)."""
    if member is None:
        return None
    value = params.get(member)
    if member == "TableName":
        return value
    if member == "RequestItems":
        return tuple(value or ())
    # Each item's kinds and tables, in order: all the ResourceArnList paths can depend on.
    key: list[Any] = []
    for item in value or ():
        key.append(len(item))
        for kind, slot in item.items():
            key.append(kind)
            key.append(slot.get("TableName"))
    return tuple(key)


def metadata(headers: Any, status: int) -> dict[str, Any]:
    """The ``ResponseMetadata`` botocore gives an answer at its first and only attempt (its
    retry handler says ``MaxAttemptsReached`` at attempt 1 of 1)."""
    meta: dict[str, Any] = {}
    if "x-amzn-requestid" in headers:
        meta["RequestId"] = headers["x-amzn-requestid"]
    meta["HTTPStatusCode"] = status
    meta["HTTPHeaders"] = {key.lower(): headers[key] for key in headers}   # lowercase_dict
    meta["MaxAttemptsReached"] = True
    meta["RetryAttempts"] = 0
    return meta


# --- signing -------------------------------------------------------------------------------------


@lru_cache(maxsize=32)
def _signing_key(secret: str, day: str, region: str, service: str) -> bytes:
    key = hmac.new(f"AWS4{secret}".encode(), day.encode("utf-8"), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        key = hmac.new(key, part.encode("utf-8"), hashlib.sha256).digest()
    return key


def signature(secret: str, day: str, region: str, service: str, string_to_sign: str) -> str:
    """SigV4's signature (hex) of ``string_to_sign`` with the key derived for the ``day``."""
    return hmac.new(_signing_key(secret, day, region, service), string_to_sign.encode("utf-8"),
                    hashlib.sha256).hexdigest()


def sha256_hex(data: bytes) -> str:
    """The payload hash SigV4 signs."""
    return hashlib.sha256(data).hexdigest()


def authorization(headers: dict[str, str], host: str, path: str, payload: bytes, stamp: str,
                  credentials: Any, region: str, service: str, unsigned: Any) -> str:
    """SigV4's ``Authorization`` header of a POST, as botocore's ``SigV4Auth.add_auth`` makes it:
    every header but the ``unsigned`` ones (lower-cased names), plus ``host``; the payload
    hashed."""
    signed = {k.lower(): v for k, v in headers.items() if k.lower() not in unsigned}
    signed.setdefault("host", host)
    names = sorted(signed)
    signed_names = ";".join(names)
    canonical = "\n".join((
        "POST", path, "", "\n".join(f"{n}:{' '.join(signed[n].split())}" for n in names) + "\n",
        signed_names, sha256_hex(payload)))
    day = stamp[:8]
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{sha256_hex(canonical.encode())}"
    return (f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={signed_names}, "
            f"Signature={signature(credentials.secret_key, day, region, service, to_sign)}")


def signed(headers: dict[str, str], host: str, path: str, payload: bytes, stamp: str,
           credentials: Any, region: str, service: str, unsigned: Any,
           invocation: str) -> dict[str, Any]:
    """The headers botocore sends a POST with, in its order: the request's, the SigV4 ones
    (``X-Amz-Date``, the session token, ``Authorization``), the SDK's retry headers of a first
    attempt, values as UTF-8 bytes, and ``Content-Length``."""
    sent = dict(headers)
    sent["X-Amz-Date"] = stamp
    if credentials.token:
        sent["X-Amz-Security-Token"] = credentials.token
    sent["Authorization"] = authorization(sent, host, path, payload, stamp, credentials, region,
                                          service, unsigned)
    sent["amz-sdk-invocation-id"] = invocation
    sent["amz-sdk-request"] = "attempt=1; max=1"
    out: dict[str, Any] = {k: v.encode("utf-8") if isinstance(v, str) else v
                           for k, v in sent.items()}
    out["Content-Length"] = str(len(payload))
    return out
