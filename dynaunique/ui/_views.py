"""What each page shows, computed from the models and audit reports; pure, no request is sent.

The one rule this module keeps for every page: the value of a hashed constraint is never shown.
Lock items of hashed constraints hold only a digest, but records hold the plain value, and so do
the ConditionChecks a repair sends (they compare a record's constrained attributes), so every
text and request shown for a finding passes through its :class:`Redactor`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from dynaunique import audit
from dynaunique._lock.items import BoundConstraint
from dynaunique._lock.locks import untyped
from dynaunique.model import Model

#: What replaces a hashed value wherever it would have been shown.
HIDDEN_TEXT = "«hidden: hashed»"


@attrs.frozen
class ConstraintRow:
    """One constraint of one model, as the models page lists it."""

    model: str
    table: str
    name: str
    #: Python field names, in order.
    fields: tuple[str, ...]
    #: The stored attribute names, in the fields' order.
    attributes: tuple[str, ...]
    #: ``field: normalizer`` for each field with one (``email: casefold``); empty: none.
    normalizers: tuple[str, ...]
    hashed: bool
    #: The condition callable's name, or None for an unconditional constraint.
    condition: str | None


def callable_name(function: Callable[..., Any] | None) -> str | None:
    """``dynaunique.normalizers.casefold`` → ``casefold``; any other callable by its qualname."""
    if function is None:
        return None
    name = getattr(function, "__qualname__", None)
    if name is None:
        return repr(function)
    module = getattr(function, "__module__", "") or ""
    if module in ("dynaunique.normalizers", "builtins"):
        return str(name)
    return f"{module}.{name}" if module else str(name)


def _row(model: type[Model], bound: BoundConstraint) -> ConstraintRow:
    info = model._du_info
    assert info is not None
    constraint = bound.constraint
    normalizers = tuple(f"{field}: {callable_name(constraint.normalizer_for(field))}"
                        for field in constraint.fields if constraint.normalizer_for(field))
    return ConstraintRow(model.__name__, info.table, bound.name, constraint.fields,
                         bound.attr_names, normalizers, constraint.hashed,
                         callable_name(constraint.condition))


def constraint_rows(models: Sequence[type[Model]]) -> list[ConstraintRow]:
    """Every constraint of every model, in model order then declaration order."""
    return [_row(model, bound) for model in models if model._du_info is not None
            for bound in model._du_info.constraints]


def constraint_named(models: Sequence[type[Model]], name: str) -> ConstraintRow | None:
    """The first declared constraint whose lock name is ``name``."""
    return next((row for row in constraint_rows(models) if row.name == name), None)


def lock_names(models: Sequence[type[Model]]) -> list[str]:
    """The lock names the models declare, sorted, each once."""
    return sorted({row.name for row in constraint_rows(models)})


# --- keys in URLs -------------------------------------------------------------------------------


def key_param(key: Mapping[str, Any]) -> str:
    """A typed primary key as one URL-safe token (the reverse of :func:`parse_key_param`)."""
    plain: dict[str, Any] = {}
    for name, value in key.items():
        (kind, raw), = value.items()
        plain[name] = ({"B64": base64.b64encode(bytes(raw)).decode("ascii")} if kind == "B"
                       else {kind: raw})
    return base64.urlsafe_b64encode(json.dumps(plain, sort_keys=True).encode()).decode("ascii")


def parse_key_param(text: str) -> dict[str, Any]:
    """A typed primary key from :func:`key_param`'s token; ValueError when it is not one."""
    try:
        plain = json.loads(base64.urlsafe_b64decode(text.encode("ascii")))
    except (UnicodeError, binascii.Error, json.JSONDecodeError) as exc:
        raise ValueError(f"not a record key: {text!r}") from exc
    if not isinstance(plain, dict) or not 1 <= len(plain) <= 2:
        raise ValueError(f"not a record key: {text!r}")
    key: dict[str, Any] = {}
    for name, value in plain.items():
        if not isinstance(value, dict) or len(value) != 1:
            raise ValueError(f"not a record key: {text!r}")
        (kind, raw), = value.items()
        if kind not in ("S", "N", "B64") or not isinstance(raw, str):
            raise ValueError(f"not a record key: {text!r}")
        key[name] = {"B": base64.b64decode(raw)} if kind == "B64" else {kind: raw}
    return key


# --- hiding hashed values -----------------------------------------------------------------------


@attrs.frozen
class Redactor:
    """Replaces the plain values of hashed fields, in texts and in rendered requests."""

    secrets: frozenset[str]

    def text(self, text: str) -> str:
        """``text`` with every secret value replaced by :data:`HIDDEN_TEXT`."""
        # Longest first, so that a value containing another is hidden whole.
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, HIDDEN_TEXT)
        return text

    def value(self, value: Any) -> Any:
        """A JSON-like structure with every string that holds a secret value hidden."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        return value


def _texts(value: Mapping[str, Any]) -> Iterable[str]:
    plain = untyped(value)
    items = plain if isinstance(plain, (list, tuple, set, frozenset)) else [plain]
    for item in items:
        if isinstance(item, (bytes, bytearray)):
            continue
        if item is not None and str(item) != "":
            yield str(item)


def redactor_for(models: Sequence[type[Model]], finding: audit.Finding) -> Redactor:
    """The redactor of one finding: the hashed fields' values of every record it was read with."""
    hidden = audit.hashed_attributes(models, finding.table)
    secrets: set[str] = set()
    for record in finding.evidence.records:
        item = record.item or {}
        for name in hidden & set(item):
            secrets.update(_texts(item[name]))
    return Redactor(frozenset(secrets))


def request_json(action: audit.RepairAction, redactor: Redactor) -> str:
    """The TransactWriteItems an action sends, as indented JSON, hashed values hidden."""
    return json.dumps(redactor.value(_jsonable(action.request())), indent=2, ensure_ascii=False)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


# --- findings -----------------------------------------------------------------------------------



@attrs.frozen
class FindingRow:
    """One finding with the repair that would fix it (or what a person must do)."""

    finding: audit.Finding
    kind: str
    detail: str
    message: str
    #: The index of its action in the check's repair plan, or None when repair leaves it.
    action: int | None
    #: The action's one-line description, or the remedy for a person.
    repair: str
    #: The exact TransactWriteItems request, as JSON; None when repair leaves it.
    request: str | None


def finding_rows(models: Sequence[type[Model]], report: audit.AuditReport,
                 plan: audit.RepairPlan) -> list[FindingRow]:
    """The report's findings in its order, each with its planned action, hashed values hidden."""
    actions = {id(action.finding): (i, action) for i, action in enumerate(plan.actions)}
    rows = []
    for finding in report.findings:
        redactor = redactor_for(models, finding)
        index, action = actions.get(id(finding), (None, None))
        if action is None:
            repair = audit.remedy(finding, other_secret=finding in plan.other_secret)
            request = None
        else:
            repair, request = action.description, request_json(action, redactor)
        rows.append(FindingRow(finding, audit.KIND_LABELS[finding.kind],
                               redactor.text(finding.detail), redactor.text(finding.message),
                               index, redactor.text(repair), request))
    return rows


#: What the MRSC protocol's kinds mean, for the report page (its findings' "why" column says
#: how old each intent is).
INTENT_MEANINGS: dict[str, str] = {
    audit.PENDING: (
        "a write in flight on a multi-Region strong consistency (MRSC) table: its writer put the "
        "lock as a pending intent and has not yet written its record; within its grace period it "
        "is not an orphan, and repair leaves it alone (past it, if its record still does not "
        "hold the value, it is an orphan and repair deletes it)"),
    audit.CONFIRMABLE: (
        "a pending intent whose record holds the value: the write happened and its writer has "
        "not (yet) cleared the mark; repair clears it, conditioned on the intent's token"),
}


def intent_meanings(report: audit.AuditReport) -> list[tuple[str, str]]:
    """``(label, meaning)`` of each MRSC intent kind the report found, in the kinds' order."""
    found = {finding.kind for finding in report.findings}
    return [(audit.KIND_LABELS[kind], meaning) for kind, meaning in INTENT_MEANINGS.items()
            if kind in found]


def outcome_message(models: Sequence[type[Model]], outcome: audit.RepairOutcome) -> str:
    """A repair outcome's message, hashed values hidden."""
    return redactor_for(models, outcome.action.finding).text(outcome.message)
