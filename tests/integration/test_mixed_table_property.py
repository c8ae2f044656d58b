"""Random sequences of writes and reads by random models sharing ONE table (issue 21).

The table holds a constrained model, a versioned one, one without constraints, a polymorphic
family (a DiscriminatorAttribute, a subclass adding a constraint) and two models sharing the
lock name HANDLE (both declare it explicitly). Every model uses the same few keys, so their
records meet: never-loaded saves over another model's record, deletes of it, updates, loaded
saves, reads, and ``atomic()`` with two models. After each step the one invariant checker
(``support.invariants``, which judges several models per table by the audit's rule) must find
no duplicate, no orphan and no missing lock. A refused write (a taken value, another model's
record holding locks, a stale copy) is a fine outcome; a broken invariant never is.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pynamodb.exceptions import DoesNotExist
from support.declare import declare, pk_attr, sk_attr
from support.invariants import assert_clean
from support.mixed_models import polymorphic_family

from dynaunique import (
    ConcurrentModificationError,
    InvalidValueError,
    Model,
    OtherModelRecordError,
    UniqueViolation,
    atomic,
)
from dynaunique.attributes import UnicodeAttribute, VersionAttribute
from dynaunique.testing import create_tables, reset_local_dynamodb, use_endpoint

TABLE = "prop_mixed"


def _tag(name: str) -> UnicodeAttribute:
    """An attribute only this model has, always stored: which model an item is a record of is
    then never a tie between models requiring different locks."""
    return UnicodeAttribute(default=name, attr_name=f"t_{name}")


Account = declare("Account", TABLE, pk=pk_attr(), sk=sk_attr("PROFILE"), tag=_tag("acct"),
                  email=UnicodeAttribute(unique=True, null=True), name=UnicodeAttribute(null=True))
Versioned = declare("Versioned", TABLE, pk=pk_attr(), sk=sk_attr("PROFILE"), tag=_tag("ver"),
                    code=UnicodeAttribute(unique=True, null=True),
                    version=VersionAttribute())
Membership = declare("Membership", TABLE, pk=pk_attr(), sk=sk_attr("PROFILE"), tag=_tag("mem"),
                     role=UnicodeAttribute(null=True),
                     # Named like Account's unique field, but not unique here.
                     email=UnicodeAttribute(null=True))
User = declare("User", TABLE, pk=pk_attr(), sk=sk_attr("PROFILE"), tag=_tag("user"),
               handle=UnicodeAttribute(unique=True, null=True, lock_name="HANDLE"))
Team = declare("Team", TABLE, pk=pk_attr(), sk=sk_attr("PROFILE"), tag=_tag("team"),
               handle=UnicodeAttribute(unique=True, null=True, lock_name="HANDLE"))


# On the field Account constrains, under another lock name: two models' constraints over one
# attribute.
Being, Robot, Human = polymorphic_family(TABLE, "MAIL")


MODELS: list[type[Model]] = [Account, Versioned, Membership, User, Team, Being, Robot, Human]
#: The fields each model's writes set (its constrained ones and a plain one).
FIELDS: dict[type[Model], tuple[str, ...]] = {
    Account: ("email", "name"), Versioned: ("code",), Membership: ("role", "email"),
    User: ("handle",), Team: ("handle",), Being: ("email",), Robot: ("email", "serial"),
    Human: ("email", "nickname"),
}
KEYS = ("K1", "K2", "K3")
VALUES = st.sampled_from(["a", "b", None])
OUTCOMES = (UniqueViolation, ConcurrentModificationError, OtherModelRecordError)

models = st.sampled_from(MODELS)
keys = st.sampled_from(KEYS)


@st.composite
def values_for(draw: Any, model: type[Model]) -> dict[str, Any]:
    return {field: draw(VALUES) for field in FIELDS[model]}


@st.composite
def operations(draw: Any) -> tuple[Any, ...]:
    kind = draw(st.sampled_from(["save_new", "save_loaded", "delete_new", "delete_loaded",
                                 "update", "read", "atomic"]))
    model = draw(models)
    key = draw(keys)
    if kind == "atomic":
        other = draw(models)
        second = draw(keys.filter(lambda k: k != key))
        return kind, model, key, draw(values_for(model)), other, second, draw(values_for(other))
    return kind, model, key, draw(values_for(model))


#: PynamoDB's refusals to load a polymorphic record as a class it is not of.
WRONG_CLASS = ("Cannot instantiate", "Cannot refresh", "discriminator attribute must be set")


def _loaded(model: type[Model], key: str) -> Any:
    return model.get(key, "PROFILE", consistent_read=True)


def _apply(op: tuple[Any, ...]) -> None:
    kind, model, key, values = op[:4]
    if kind == "save_new":
        model(pk=key, **values).save()
    elif kind == "save_loaded":
        record = _loaded(model, key)
        for field, value in values.items():
            if field in record.get_attributes():
                setattr(record, field, value)
        record.save()
    elif kind == "delete_new":
        model(pk=key).delete()
    elif kind == "delete_loaded":
        _loaded(model, key).delete()
    elif kind == "update":
        field, value = next(iter(values.items()))
        attribute = model.get_attributes()[field]
        action = attribute.remove() if value is None else attribute.set(value)
        model(pk=key).update([action])
    elif kind == "read":
        found = [*model.batch_get([(key, "PROFILE")]), _loaded(model, key)]
        found[-1].refresh(consistent_read=True)
        for record in found:
            assert not record.pk.startswith("UNIQ#")
        with pytest.raises(InvalidValueError):
            list(model.batch_get([("UNIQ#EMAIL#a", "LOCK")]))
    else:
        other, second, other_values = op[4:]
        with atomic():
            model(pk=key, **values).save()
            other(pk=second, **other_values).save()


@pytest.fixture
def endpoint(dynaunique_db: str) -> str:
    use_endpoint(dynaunique_db, *MODELS)
    return dynaunique_db


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(operations(), min_size=3, max_size=10))
def test_random_models_on_one_table_keep_every_lock_right(endpoint: str,
                                                          steps: list[tuple[Any, ...]]) -> None:
    reset_local_dynamodb(endpoint)
    create_tables(Account)
    for step in steps:
        try:
            _apply(step)
        except OUTCOMES:
            pass
        except DoesNotExist:
            pass
        except ValueError as exc:
            if isinstance(exc, InvalidValueError) or not any(w in str(exc) for w in WRONG_CLASS):
                raise
        assert_clean(MODELS, endpoint)
