"""The library's requests as DynamoDB's JSON body, without botocore's walk over the shapes.

botocore serializes a DynamoDB request by walking the parameters along the service model's
shapes, copying every dict and list, and then calling ``json.dumps`` on the copy. For DynamoDB's
JSON protocol that walk changes only one thing: a blob (``B``, ``BS``) becomes base64 text. The
library's requests are already typed (``{"S": ...}``, ``{"B": b"..."}``: PynamoDB's attribute
serialization and botocore's parsed responses both hold binary values as ``bytes``), so one
``json.dumps`` with a ``default`` for ``bytes`` gives the very same body (the test
``tests/unit/test_wire.py`` checks it byte for byte over every operation the library sends).

:func:`install` puts :class:`FastSerializer` in front of a botocore client's serializer (a
private attribute, ``_serializer``); :class:`FastConnection`, the PynamoDB connection the library
sends through, does so for each botocore client it makes (PynamoDB makes one lazily, and a new one
when the old one lost its credentials). Everything else stays botocore's: the events, the endpoint,
the signing, the sending, the parsing — the request still goes through the model's PynamoDB
connection (``Connection.dispatch``, its signals and settings, and whatever mocks it). Any
request the fast path does not know (another operation, a parameter outside the operation's
input, a value JSON cannot hold) goes to botocore's serializer, and so does every request of a
client whose private hooks are not there (:func:`install` then leaves it alone).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from pynamodb.connection import Connection

#: The operations the library sends: their bodies are made here.
OPERATIONS = frozenset({
    "TransactWriteItems", "PutItem", "UpdateItem", "DeleteItem", "GetItem", "BatchGetItem",
    "BatchWriteItem", "Query", "Scan", "TransactGetItems",
})


def _blob(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        # botocore's Serializer._get_base64.
        return base64.b64encode(value).strip().decode("utf-8")
    raise TypeError(f"not a DynamoDB request value: {type(value).__name__}")


#: ``json.dumps``'s own settings (botocore's), with blobs as base64: the C encoder does it all.
_ENCODER = json.JSONEncoder(default=_blob)


def body(parameters: Any) -> bytes:
    """The JSON body botocore's serializer makes of ``parameters`` (blobs given as bytes)."""
    return _ENCODER.encode(parameters).encode("utf-8")


class _Template:
    """The parameter-independent part of one operation's serialized request."""

    __slots__ = ("members", "request")

    def __init__(self, request: dict[str, Any], members: frozenset[str]) -> None:
        self.request = request
        self.members = members


class FastSerializer:
    """A botocore serializer: the library's requests made by :func:`body`, the rest by botocore.

    Wraps the client's own serializer (``inner``); for each known operation the URL, method and
    headers are botocore's own, taken once from ``inner`` (they do not depend on the
    parameters: DynamoDB's operations have no host prefix).
    """

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
        except (TypeError, ValueError):
            return self.inner.serialize_to_request(parameters, operation_model)  # type: ignore
        request = dict(template.request)
        request["headers"] = dict(template.request["headers"])
        request["body"] = encoded
        return request

    def __getattr__(self, name: str) -> Any:
        # Anything else botocore (or a plugin) asks of its serializer.
        return getattr(self.inner, name)


def install(client: Any) -> bool:
    """Serialize ``client``'s requests with :class:`FastSerializer`; False (and ``client`` left
    as it is) when the private hooks it relies on are missing."""
    inner = getattr(client, "_serializer", None)
    if isinstance(inner, FastSerializer):
        return True
    try:
        from botocore.serialize import JSONSerializer
    except ImportError:  # pragma: no cover - botocore without its serializers
        return False
    if not isinstance(inner, JSONSerializer) or not hasattr(inner, "serialize_to_request"):
        return False
    client._serializer = FastSerializer(inner)
    return True


class FastConnection(Connection):
    """PynamoDB's ``Connection``, its botocore client serializing through :class:`FastSerializer`.

    Only the client's serializer differs: ``dispatch``, the signals, the settings and
    ``_make_api_call`` (what PynamoDB's own tests mock) are PynamoDB's.
    """

    _wired: Any = None

    @property
    def client(self) -> Any:
        """PynamoDB's botocore client (made on first use), with the fast serializer installed."""
        client = super().client
        if client is not self._wired:
            install(client)
            self._wired = client
        return client
