"""moto's JSON response serializer, compiled once per DynamoDB operation instead of re-derived
per value: the same output, byte for byte, at a fraction of the cost.

moto serializes a response by walking the operation's output shape and, for every member of
every structure it meets (ten per attribute value: ``S``, ``N``, ``B``, ... ``BOOL``), asking
its attribute picker which spellings of the member's name to look up (six alias providers, each
an object, plus ``botocore.xform_name`` of each alias), then looking each spelling up through
``moto.core.utils.get_value``. On a ``GetItem`` of a six-attribute item that is about 90 members
and 300 look-ups, half the server's CPU for the request. For a plain ``dict`` the spellings
depend only on the shape and the member's name (the providers that read the object look at its
class and its ``Meta``, which a ``dict`` does not have), so :func:`serialize_result` asks moto's
own picker once per member, at the first response of an operation, and keeps the answer; the
walk itself is moto's, type by type (strings, blobs in base64, numbers, timestamps through
moto's own ``TimestampSerializer``, maps, lists, document types), and the body is moto's
``json.dumps`` of the same dictionary, in the same order.

It takes a response only when it can guarantee moto's answer: the serializer's attribute picker
is moto's ``XFormedAttributePicker`` with the default alias providers and no response
transformers, and every object in the result is a plain ``dict``, ``list`` or ``tuple``, or a
scalar; anything else (and every error) goes to moto's serializer, unchanged.
:mod:`dynaunique.testing._moto_patch` checks the source of each moto function this relies on.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from enum import Enum
from typing import Any

__all__ = ["STATS", "serialize_result"]

#: How many results took the compiled path (``fast``) and how many went to moto's (``moto``).
STATS = {"fast": 0, "moto": 0}

# A member whose value is absent from the serialized output (moto's "wrote nothing").
_SKIP: Any = object()


class _Unsupported(Exception):
    """The result holds something only moto's own serializer knows how to read."""


Convert = Callable[[Any], Any]
# (output key, possible keys in moto's order, converter) of each member, in the shape's order.
Members = list[tuple[str, tuple[str, ...], Convert]]

# The serializer methods the compiled walk reproduces, by type name (any other type name must
# resolve to no method at all: moto then writes the value as it is; so do moto 5.2.0 and 5.2.1
# for a string, which have no method of their own for it).
_METHODS = {
    "structure": "BaseJSONSerializer._serialize_type_structure",
    "map": "BaseJSONSerializer._serialize_type_map",
    "list": "BaseJSONSerializer._serialize_type_list",
    "string": "BaseJSONSerializer._serialize_type_string",
    "timestamp": "ResponseSerializer._serialize_type_timestamp",
    "blob": "ResponseSerializer._serialize_type_blob",
    "integer": "ResponseSerializer._serialize_type_integer",
    "long": "ResponseSerializer._serialize_type_integer",
    "float": "ResponseSerializer._serialize_type_float",
    "double": "ResponseSerializer._serialize_type_float",
}


# moto's alias providers, in its order. Of these only ExplicitAlias (the object's ``Meta``) and
# ClassPrefixAlias (its class name) read the object, so for a ``dict`` the keys to try depend
# on the shape and the member's name alone.
_ALIAS_PROVIDERS = ("ExplicitAlias", "ShapeNameAlias", "NoAlias", "ShapePrefixAlias",
                    "ClassPrefixAlias", "ModelAlias")


class _Compiler:
    """Builds the converter of each shape once, structures memoized by name (they recurse)."""

    def __init__(self, serializer: Any) -> None:
        from moto.core.serialize import TimestampSerializer

        self._cls = type(serializer)
        self._serializer = serializer  # only its shape-reading methods are called
        self._picker = serializer._value_picker
        self._operation = serializer.operation_model
        self._timestamps = TimestampSerializer(self._cls.DEFAULT_TIMESTAMP_FORMAT)
        self._encoding: str = self._cls.DEFAULT_ENCODING
        self.structures: dict[str, Members] = {}

    def _check_method(self, type_name: str) -> None:
        method = getattr(self._cls, f"_serialize_type_{type_name}", None)
        expected = _METHODS.get(type_name)
        actual = None if method is None else method.__qualname__
        if actual != expected and not (type_name == "string" and actual is None):
            raise _Unsupported(f"{type_name}: {actual}")

    def converter(self, shape: Any) -> Convert:
        """The function turning a value of ``shape`` into its serialized form (or ``_SKIP``)."""
        type_name = shape.type_name
        self._check_method(type_name)
        if type_name == "structure":
            if shape.is_document_type:
                return _as_is
            return self._structure(shape)
        if type_name == "map":
            return self._map(shape)
        if type_name == "list":
            return self._list(shape)
        if type_name == "string":
            return _as_is if getattr(self._cls, "_serialize_type_string", None) is None else _string
        if type_name == "timestamp":
            return self._timestamp(shape)
        if type_name == "blob":
            return self._blob
        if type_name in ("integer", "long"):
            return int
        if type_name in ("float", "double"):
            return float
        return _as_is

    def _out_key(self, shape: Any, key: str) -> str:
        if shape.type_name == "structure" and shape.is_document_type:
            return key  # moto writes a document under the key itself
        name: str = self._serializer.get_serialized_name(shape, key)
        return name

    def _structure(self, shape: Any) -> Convert:
        name = shape.name
        if name not in self.structures:
            # (the members' converters are built at their first use, so a shape that holds
            # itself, as an attribute value's M and L do, is complete before it recurses)
            self.structures[name] = [self._member(shape, key, member) for key, member in
                                     shape.members.items()]
        members = self.structures[name]

        def structure(value: Any) -> Any:
            if value is None:
                return _SKIP
            return _fill({}, value, members)

        return structure

    def _member(self, parent: Any, key: str, shape: Any) -> tuple[str, tuple[str, ...], Convert]:
        from moto.core.serialize import AttributePickerContext

        shape.parent = parent  # as moto's walk sets it before it picks
        context = AttributePickerContext(
            obj={}, key=key, shape=shape, operation_model=self._operation,
            service_model=self._operation.service_model, key_path="")
        keys = tuple(dict.fromkeys(self._picker.get_possible_keys(context)))
        if any("." in possible for possible in keys):
            raise _Unsupported(f"a dotted key path: {keys}")  # get_value would walk it
        return self._out_key(shape, key), keys, _Lazy(self, shape)

    def _map(self, shape: Any) -> Convert:
        convert = _Lazy(self, shape.value)
        fixed = shape.value.serialization.get("name")
        if shape.value.type_name == "structure" and shape.value.is_document_type:
            fixed = None

        def mapping(value: Any) -> Any:
            if type(value) is not dict:
                raise _Unsupported(type(value).__name__)
            out: dict[str, Any] = {}
            for sub_key, sub_value in value.items():
                converted = convert(sub_value)
                if converted is not _SKIP:
                    out[sub_key if fixed is None else fixed] = converted
            return out

        return mapping

    def _list(self, shape: Any) -> Convert:
        member = shape.member
        convert = _Lazy(self, member)
        # moto serializes an element under the member's name and keeps it only if it landed
        # there; under a serialized name of its own, the element stays as it was.
        kept = self._out_key(member, member.name) == member.name

        def listing(value: Any) -> Any:
            if type(value) not in (list, tuple):
                raise _Unsupported(type(value).__name__)
            out = []
            for element in value:
                converted = convert(element) if kept else _SKIP
                out.append(element if converted is _SKIP else converted)
            return out

        return listing

    def _timestamp(self, shape: Any) -> Convert:
        timestamps = self._timestamps

        def timestamp(value: Any) -> Any:
            wrapper: dict[str, Any] = {}
            timestamps.serialize(wrapper, value, shape, "timestamp")
            return wrapper["timestamp"]

        return timestamp

    def _blob(self, value: Any) -> str:
        if isinstance(value, str):
            value = value.encode(self._encoding)
        return base64.b64encode(value).strip().decode(self._encoding)


class _Lazy:
    """A shape's converter, built at its first use (so recursive shapes compile)."""

    __slots__ = ("_compiler", "_convert", "_shape")

    def __init__(self, compiler: _Compiler, shape: Any) -> None:
        self._compiler = compiler
        self._shape = shape
        self._convert: Convert | None = None

    def __call__(self, value: Any) -> Any:
        convert = self._convert
        if convert is None:
            convert = self._convert = self._compiler.converter(self._shape)
        return convert(value)


def _fill(out: dict[str, Any], value: Any, members: Members) -> dict[str, Any]:
    if type(value) is not dict:
        raise _Unsupported(type(value).__name__)
    for out_key, keys, convert in members:
        for key in keys:
            if key in value:
                member = value[key]
                break
        else:
            continue
        if member is not None:
            converted = convert(member)
            if converted is not _SKIP:
                out[out_key] = converted
    return out


def _as_is(value: Any) -> Any:
    return value


def _string(value: Any) -> Any:
    if type(value) is str:
        return value
    if isinstance(value, Enum):
        value = value.value
    return str(value) if value not in [None, {}, []] else value


# (service, operation) -> the output shape's members, or None where moto must serialize.
_PLANS: dict[tuple[str, str], Members | None] = {}


def _plan(serializer: Any) -> Members | None:
    from moto.core.serialize import DEFAULT_ALIAS_PROVIDERS, XFormedAttributePicker

    picker = serializer._value_picker
    if (type(picker) is not XFormedAttributePicker or picker.response_transformers
            or picker.alias_providers is not DEFAULT_ALIAS_PROVIDERS
            or tuple(p.__name__ for p in DEFAULT_ALIAS_PROVIDERS) != _ALIAS_PROVIDERS):
        return None
    operation = serializer.operation_model
    where = (operation.service_model.service_name, operation.name)
    if where not in _PLANS:
        shape = operation.output_shape
        plan: Members | None = None
        if (where[0] == "dynamodb" and shape is not None and shape.type_name == "structure"
                and not shape.is_document_type):
            compiler = _Compiler(serializer)
            try:
                compiler._check_method("structure")
                compiler.converter(shape)
                plan = compiler.structures[shape.name]
            except _Unsupported:
                plan = None
        _PLANS[where] = plan
    return _PLANS[where]


def serialize_result(original: Callable[..., Any]) -> Callable[..., Any]:
    """``ResponseSerializer._serialize_result`` for moto's ``JSONSerializer``, compiled."""

    def _serialize_result(self: Any, resp: Any, result: Any) -> Any:
        members = _plan(self)
        if members is not None and result is not None:
            try:
                serialized = _fill(self.MAP_TYPE(), result, members)
            except _Unsupported:
                pass
            else:
                STATS["fast"] += 1
                return self._serialized_result_to_response(
                    resp, result, self.operation_model.output_shape, serialized)
        STATS["moto"] += 1
        return original(self, resp, result)

    return _serialize_result
