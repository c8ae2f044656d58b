"""dynaunique._lock.items and dynaunique._write.writes: the one vocabulary of records, locks and
their writes.

Pure code: exact values, no server.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.declare import declare, pk_attr, sk_attr

from dynaunique import Model, normalizers
from dynaunique._lock.items import (
    claim,
    is_dynaunique_item,
    key_id,
    key_of,
    lock_of,
    locks_of,
    owner_key,
    plain_key,
)
from dynaunique._lock.locks import LockRef
from dynaunique._write.render import render_write
from dynaunique._write.writes import (
    Absent,
    ConditionCheck,
    Expression,
    HeldBy,
    LockDelete,
    LockPut,
    Unchanged,
    lock_delete,
    lock_put,
)
from dynaunique.attributes import NumberAttribute, TTLAttribute, UnicodeAttribute

CREATED = "2024-05-01T12:00:00.000000+00:00"
KEYS = ("PK", "SK")


Person = declare("Person", "items_people", pk=pk_attr(), sk=sk_attr("PROFILE"),
                 email=UnicodeAttribute(unique=True, normalize=normalizers.casefold, null=True),
                 expires=TTLAttribute(null=True, attr_name="ttl"))

Robot = declare("Robot", "items_people", pk=pk_attr(), sk=sk_attr("ROBOT"),
                serial=NumberAttribute(unique=True))


class Picky(Model):
    class Meta:
        table_name = "items_people"

        @staticmethod
        def is_record(item: dict[str, Any]) -> bool:
            return item.get("SK") == {"S": "PICKY"}

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PICKY")
    email = UnicodeAttribute(null=True)


def info(model: type[Model]) -> Any:
    assert model._du_info is not None
    return model._du_info


def test_key_of_reads_the_key_attributes_or_none() -> None:
    item = {"PK": {"S": "A#1"}, "SK": {"S": "PROFILE"}, "email": {"S": "x"}}
    assert key_of(KEYS, item) == {"PK": {"S": "A#1"}, "SK": {"S": "PROFILE"}}
    assert key_of(("PK", None), item) == {"PK": {"S": "A#1"}}
    assert key_of(KEYS, {"PK": {"S": "A#1"}}) is None
    assert key_of(KEYS, {"SK": {"S": "PROFILE"}}) is None


def test_owner_key_accepts_exactly_the_key_attributes() -> None:
    owner = {"PK": {"S": "A#1"}, "SK": {"S": "PROFILE"}}
    assert owner_key(KEYS, owner) == owner
    assert owner_key(KEYS, {"PK": {"S": "A#1"}}) is None
    assert owner_key(("PK", None), owner) is None
    assert owner_key(KEYS, None) is None
    assert owner_key(KEYS, "A#1") is None


@pytest.mark.parametrize("owner", [
    {},
    {"PK": {"S": "A#1"}, "SK": {"S": "PROFILE"}, "X": {"S": "x"}},
    {"PK": "A#1", "SK": {"S": "PROFILE"}},
    {"PK": {"S": "A#1", "N": "1"}, "SK": {"S": "PROFILE"}},
    {"PK": {"SS": ["A#1"]}, "SK": {"S": "PROFILE"}},
    {"PK": {"M": {}}, "SK": {"S": "PROFILE"}},
    {"PK": {"S": ""}, "SK": {"S": "PROFILE"}},
    {"PK": {"B": b""}, "SK": {"S": "PROFILE"}},
    {"PK": {"S": 12}, "SK": {"S": "PROFILE"}},
    {"PK": {"S": "a" * 2049}, "SK": {"S": "PROFILE"}},
    {"PK": {"S": "é" * 1025}, "SK": {"S": "PROFILE"}},   # 2050 bytes
    {"PK": {"S": "A#1"}, "SK": {"S": "s" * 1025}},
])
def test_owner_key_refuses_a_key_dynamodb_could_not_read(owner: Any) -> None:
    assert owner_key(KEYS, owner) is None


def test_owner_key_checks_the_key_types_it_is_given() -> None:
    owner = {"PK": {"N": "1"}, "SK": {"S": "PROFILE"}}
    assert owner_key(KEYS, owner) == owner
    assert owner_key(KEYS, owner, ("N", "S")) == owner
    assert owner_key(KEYS, owner, ("S", "S")) is None
    assert owner_key(KEYS, {"PK": {"S": "a" * 2048}, "SK": {"S": "s" * 1024}}, ("S", "S")) == {
        "PK": {"S": "a" * 2048}, "SK": {"S": "s" * 1024}}
    assert owner_key(("PK", None), {"PK": {"B": b"\x00"}}, ("B", None)) == {"PK": {"B": b"\x00"}}


def test_key_id_ignores_attribute_order_and_plain_key_untypes() -> None:
    one = {"PK": {"S": "A#1"}, "SK": {"S": "P"}}
    other = {"SK": {"S": "P"}, "PK": {"S": "A#1"}}
    assert key_id(one) == key_id(other) == (("PK", (("S", "A#1"),)), ("SK", (("S", "P"),)))
    assert key_id(one) != key_id({"PK": {"S": "A#2"}, "SK": {"S": "P"}})
    assert plain_key({"PK": {"S": "A#1"}, "N": {"N": "5"}}) == {"PK": "A#1", "N": 5}
    assert plain_key(None) == {}


def test_is_dynaunique_item() -> None:
    assert is_dynaunique_item(KEYS, {"PK": {"S": "UNIQ#EMAIL#a"}, "SK": {"S": "LOCK"}})
    assert not is_dynaunique_item(KEYS, {"PK": {"S": "A#1"}, "SK": {"S": "LOCK"}})
    assert not is_dynaunique_item(KEYS, {"PK": {"N": "1"}})


def test_lock_of_is_the_lock_locks_of_computes() -> None:
    bound = info(Person).constraints[0]
    lock = lock_of(info(Person), bound, ["Ada@X.io"])
    assert lock is not None
    assert (lock.constraint, lock.key, lock.value) == ("EMAIL", "UNIQ#EMAIL#ada@x.io", "ada@x.io")
    assert lock_of(info(Person), bound, [None]) is None
    person = Person("A#1", email="Ada@X.io")
    assert locks_of(info(Person), person) == {"EMAIL": lock}


def test_claim_by_hook_then_by_fit() -> None:
    models = [Person, Robot, Picky]
    picky = {"PK": {"S": "A#1"}, "SK": {"S": "PICKY"}, "email": {"S": "a@x.io"}}
    assert claim(models, picky) == (Picky, None)
    robot = {"PK": {"S": "A#1"}, "SK": {"S": "ROBOT"}, "serial": {"N": "7"}}
    assert claim(models, robot) == (Robot, None)
    person = {"PK": {"S": "A#1"}, "SK": {"S": "PROFILE"}, "email": {"S": "a@x.io"}}
    assert claim(models, person) == (Person, None)
    assert claim([Picky], person) == (None, None)  # its hook said no


def test_claim_leaves_locks_and_keyless_items_alone() -> None:
    lock = {"PK": {"S": "UNIQ#EMAIL#a@x.io"}, "SK": {"S": "LOCK"}, "email": {"S": "a@x.io"}}
    assert claim([Person], lock) == (None, None)
    assert claim([Person], {"PK": {"S": "A#1"}}) == (None, None)
    assert claim([], {"PK": {"S": "A#1"}, "SK": {"S": "X"}}) == (None, None)


def test_claim_reports_equal_fits_with_different_locks() -> None:
    class Left(Model):
        class Meta:
            table_name = "items_tie"

        pk = UnicodeAttribute(hash_key=True)
        code = UnicodeAttribute(unique=True, lock_name="LEFT_CODE")

    class Right(Model):
        class Meta:
            table_name = "items_tie"

        pk = UnicodeAttribute(hash_key=True)
        code = UnicodeAttribute(unique=True, lock_name="RIGHT_CODE")

    model, problem = claim([Left, Right], {"pk": {"S": "1"}, "code": {"S": "c"}})
    assert model is None
    assert problem == ("several models fit it equally and require different locks: "
                       "Left, Right")


def test_lock_put_builds_the_item_and_guard() -> None:
    owner = {"PK": {"S": "A#1"}, "SK": {"S": "PROFILE"}}
    item = {**owner, "email": {"S": "ada@x.io"}, "ttl": {"N": "1700000000"}}
    lock = lock_of(info(Person), info(Person).constraints[0], ["ada@x.io"])
    assert lock is not None
    put = lock_put(info(Person), lock, owner, item, created=CREATED)
    assert put == LockPut(
        table="items_people", model="Person", lock=lock, owner=owner,
        item={"PK": {"S": "UNIQ#EMAIL#ada@x.io"}, "SK": {"S": "LOCK"}, "owner": {"M": owner},
              "model": {"S": "Person"}, "constraint": {"S": "EMAIL"},
              "value": {"S": "ada@x.io"}, "created": {"S": CREATED},
              "ttl": {"N": "1700000000"}},
        guard=HeldBy((owner,)),
        key={"PK": {"S": "UNIQ#EMAIL#ada@x.io"}, "SK": {"S": "LOCK"}},
    )
    previous = {"PK": {"S": "A#0"}, "SK": {"S": "PROFILE"}}
    handed = lock_put(info(Person), lock, owner, item, allowed=[previous], created=CREATED)
    assert handed.guard == HeldBy((previous,))
    assert handed.owner == owner


def test_lock_delete_is_guarded_on_its_owner() -> None:
    owner = {"PK": {"S": "A#1"}, "SK": {"S": "PROFILE"}}
    lock = lock_of(info(Person), info(Person).constraints[0], ["ada@x.io"])
    assert lock is not None
    delete = lock_delete("items_people", KEYS, lock, owner, model="Person")
    assert delete == LockDelete(table="items_people", model="Person", lock=lock,
                                key={"PK": {"S": "UNIQ#EMAIL#ada@x.io"}, "SK": {"S": "LOCK"}},
                                guard=HeldBy((owner,)))
    assert render_write(delete) == ("Delete", {
        "TableName": "items_people",
        "Key": {"PK": {"S": "UNIQ#EMAIL#ada@x.io"}, "SK": {"S": "LOCK"}},
        "ConditionExpression": "attribute_not_exists(#g0) OR (#g1.#g0 = :g0 AND #g1.#g2 = :g1)",
        "ExpressionAttributeNames": {"#g0": "PK", "#g1": "owner", "#g2": "SK"},
        "ExpressionAttributeValues": {":g0": {"S": "A#1"}, ":g1": {"S": "PROFILE"}},
    })


@pytest.mark.parametrize(("guard", "condition", "expected"), [
    (Absent(), None, ("attribute_not_exists(#g0)", {"#g0": "PK"}, None)),
    (Unchanged((("email", {"S": "a"}), ("ttl", None))), None,
     ("attribute_exists(#g0) AND #g1 = :g0 AND attribute_not_exists(#g2)",
      {"#g0": "PK", "#g1": "email", "#g2": "ttl"}, {":g0": {"S": "a"}})),
    (None, Expression("attribute_exists(#n)", {"#n": "PK"}),
     ("attribute_exists(#n)", {"#n": "PK"}, None)),
])
def test_condition_check_renders_its_guard_or_its_condition(
        guard: Any, condition: Expression | None, expected: tuple[str, Any, Any]) -> None:
    check = ConditionCheck(table="t", model="Person", key={"PK": {"S": "A#1"}},
                           condition=condition, label="l", guard=guard)
    text, names, values = expected
    params = {"TableName": "t", "Key": {"PK": {"S": "A#1"}}, "ConditionExpression": text,
              "ExpressionAttributeNames": names}
    if values is not None:
        params["ExpressionAttributeValues"] = values
    assert render_write(check) == ("ConditionCheck", params)


def test_kinds_read_as_the_words_they_always_were() -> None:
    import json

    from dynaunique._lock.locks import ChangeKind
    from dynaunique._write.state import OpKind

    assert ChangeKind.MOVED == "moved"
    assert str(ChangeKind.MOVED) == f"{ChangeKind.MOVED}" == "moved"
    assert f"{ChangeKind.ADDED:>7}|" == "  added|"
    assert json.dumps({"kind": ChangeKind.REMOVED}) == '{"kind": "removed"}'
    assert OpKind.SAVE.value == "save" and f"{OpKind.DELETE}" == "delete"
    assert ChangeKind("unchanged") is ChangeKind.UNCHANGED


def test_a_lock_ref_shows_its_value_unless_hashed_repr_included() -> None:
    plain = LockRef(constraint="EMAIL", fields=("email",), key="UNIQ#EMAIL#a@x.io",
                    value="a@x.io")
    hashed = LockRef(constraint="EMAIL", fields=("email",), key="UNIQ#EMAIL#\\kab",
                     value="a@x.io", hashed=True)
    assert (plain.shown, hashed.shown) == ("'a@x.io'", "<hashed>")
    assert repr(hashed) == ("LockRef(constraint='EMAIL', fields=('email',), "
                            "key='UNIQ#EMAIL#\\\\kab', value=<hashed>, hashed=True)")
    assert "a@x.io" in repr(plain)


def test_hashed_fields_are_those_of_hashed_constraints() -> None:
    model = declare("HashedFields", "items_hashed", meta={"lock_secret": "s"}, pk=pk_attr(),
                    ssn=UnicodeAttribute(unique=True, hashed=True),
                    email=UnicodeAttribute(unique=True), note=UnicodeAttribute(null=True))
    assert model._du_info.hashed_fields == frozenset({"ssn"})
