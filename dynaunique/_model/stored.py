"""One field's value as DynamoDB will store it, checked first (for lookups; whole records are
``dynaunique._record``'s, by the same rules).

"""

from __future__ import annotations

from typing import Any

from dynaunique._record import hidden_field, refusal_for, serialize_problem, stored_problem


def as_stored(model: Any, field: str, value: Any) -> Any:
    """``value`` of ``model.field`` as the attribute stores and loads it back (locks derive
    from that)."""
    if value is None:
        return None
    attribute = model.get_attributes()[field]
    try:
        serialized = attribute.serialize(value)
    except Exception as exc:
        error = refusal_for(model, field, value, attribute, serialize_problem(model, field, exc))
        raise error from (None if hidden_field(model, field) else exc)
    problem = stored_problem({attribute.attr_type: serialized})
    if problem == "binary text":
        serialized = serialized.encode("utf-8")
    elif problem is not None:
        raise refusal_for(model, field, value, attribute, problem)
    return attribute.deserialize(serialized)
