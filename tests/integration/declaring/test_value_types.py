"""Value types and hashed locks against the local server: numbers, binary values, tuples of
them, and locks that keep no plaintext."""

from __future__ import annotations

import hashlib
import hmac
import json
from decimal import Decimal
from typing import Any

import pytest

from dynaunique import (
    ConfigurationError,
    UniqueViolation,
    atomic,
)
from dynaunique._lock.items import SECRET_ENV
from dynaunique._lock.locks import RESERVED_PREFIX, secret_id

from .declared import (
    SECRET,
    EnvSecret,
    Numbered,
    Secretive,
    Wire,
    assert_consistent,
    lock_items,
    lock_owners,
    raw_items,
    strings_in,
    tables,
)

# --- value types ---------------------------------------------------------------------------------


@pytest.mark.parametrize("second", [1, 1.0])
def test_equal_numbers_collide(wire: Wire, second: Any) -> None:
    tables(wire, Numbered)
    Numbered(pk="N#1", number=1).save()
    with pytest.raises(UniqueViolation) as caught:
        Numbered(pk="N#2", number=second).save()
    assert caught.value.constraint == "NUMBER"
    assert lock_owners(Numbered) == {"UNIQ#NUMBER#\\n1": {"PK": "N#1"}}
    assert lock_items(Numbered)["UNIQ#NUMBER#\\n1"]["value"] == {"N": "1"}
    assert Numbered.get_by_unique("number", Decimal("1.00")).pk == "N#1"
    assert_consistent(Numbered)


def test_different_numbers_do_not_collide(wire: Wire) -> None:
    tables(wire, Numbered)
    Numbered(pk="N#1", number=1).save()
    Numbered(pk="N#2", number=1.5).save()
    Numbered(pk="N#3", number=10).save()
    assert set(lock_owners(Numbered)) == {"UNIQ#NUMBER#\\n1", "UNIQ#NUMBER#\\n1.5",
                                          "UNIQ#NUMBER#\\n10"}
    assert_consistent(Numbered)


def test_binary_values_are_locked(wire: Wire) -> None:
    tables(wire, Numbered)
    Numbered(pk="N#1", blob=b"\x00\xff").save()
    Numbered(pk="N#2", blob=b"\x00\xfe").save()
    with pytest.raises(UniqueViolation) as caught:
        Numbered(pk="N#3", blob=b"\x00\xff").save()
    assert caught.value.fields == ("blob",)
    assert lock_items(Numbered)["UNIQ#BLOB#\\bAP8="]["value"] == {"B": b"\x00\xff"}
    assert Numbered.get_by_unique("blob", b"\x00\xfe").pk == "N#2"
    assert_consistent(Numbered)


def test_tuples_of_string_number_and_binary(wire: Wire) -> None:
    tables(wire, Numbered)
    Numbered(pk="N#1", kind="k", number=1, blob=b"x").save()
    Numbered(pk="N#2", kind="k", number=2, blob=b"y").save()
    with pytest.raises(UniqueViolation) as caught:
        Numbered(pk="N#3", kind="k", number=1.0, blob=b"z").save()
    assert caught.value.constraint == "NUMBER"
    # Both the number and the tuple are taken by N#1: both are reported together.
    with pytest.raises(UniqueViolation) as caught:
        Numbered(pk="N#4", kind="k", number=1.0, blob=b"x").save()
    violation = caught.value
    assert sorted(v.constraint for v in violation.violations) == ["BLOB", "MIX", "NUMBER"]
    mix = next(v for v in violation.violations if v.constraint == "MIX")
    assert mix.fields == ("kind", "number", "blob")
    assert mix.value == ("k", 1, b"x")
    assert lock_items(Numbered)["UNIQ#MIX#k#\\n1#\\beA=="]["value"] == {
        "L": [{"S": "k"}, {"N": "1"}, {"B": b"x"}]}
    assert Numbered.get_by_unique("MIX", ("k", 1.0, b"x")).pk == "N#1"
    assert_consistent(Numbered)


def test_explain_shows_binary_values_as_base64(wire: Wire) -> None:
    tables(wire, Numbered)
    with atomic(dry_run=True) as tx:
        Numbered(pk="N#1", blob=b"\x00\xff").save()
    (lock,) = [e["Put"]["Item"] for e in json.loads(tx.explain())["TransactItems"]
               if e["Put"]["Item"]["PK"]["S"].startswith(RESERVED_PREFIX)]
    assert lock["PK"] == {"S": "UNIQ#BLOB#\\bAP8="}
    assert lock["value"] == {"B": "AP8="}
    assert wire.sent == []


# --- hashed locks --------------------------------------------------------------------------------


def test_hashed_field_keeps_no_plaintext_in_the_lock(wire: Wire) -> None:
    tables(wire, Secretive)
    Secretive(pk="S#1", email="Zanzibar@Lovelace.IO").save()
    digest = hmac.new(SECRET, b"zanzibar@lovelace.io", hashlib.sha256).hexdigest()
    (key, item), = lock_items(Secretive).items()
    assert key == "UNIQ#EMAIL#\\k" + digest
    assert "value" not in item
    assert item["secret_id"] == {"S": secret_id(SECRET)}   # which secret made the key
    for text in strings_in(item):
        assert "zanzibar" not in text.casefold()
        assert "lovelace" not in text.casefold()
    assert Secretive.get_by_unique("email", "ZANZIBAR@lovelace.io").pk == "S#1"
    with pytest.raises(UniqueViolation) as caught:
        Secretive(pk="S#2", email="zanzibar@lovelace.io").save()
    assert caught.value.constraint == "EMAIL"
    assert "zanzibar" not in str(caught.value).casefold()   # messages do not show it either
    assert_consistent(Secretive)


def test_hashed_constraint_with_the_secret_from_the_environment(
        wire: Wire, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "decl-env-secret")
    tables(wire, EnvSecret)
    EnvSecret(pk="E#1", tenant="zanzibar", slug="quixotic").save()
    digest = hmac.new(b"decl-env-secret", b"zanzibar#quixotic", hashlib.sha256).hexdigest()
    (key, item), = lock_items(EnvSecret).items()
    assert key == "UNIQ#TS#\\k" + digest
    for text in strings_in(item):
        assert "zanzibar" not in text
        assert "quixotic" not in text
    assert EnvSecret.get_by_unique("TS", ("zanzibar", "quixotic")).pk == "E#1"
    assert EnvSecret.get_by_unique(tenant="zanzibar", slug="quixotic").pk == "E#1"
    with pytest.raises(UniqueViolation):
        EnvSecret(pk="E#2", tenant="zanzibar", slug="quixotic").save()
    assert_consistent(EnvSecret)


def test_missing_secret_is_a_configuration_error_and_sends_nothing(
        wire: Wire, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    tables(wire, EnvSecret)
    with pytest.raises(ConfigurationError) as caught:
        EnvSecret(pk="E#1", tenant="acme", slug="home").save()
    assert "Meta.lock_secret" in str(caught.value)
    assert "DYNAUNIQUE_LOCK_SECRET" in str(caught.value)
    assert wire.sent == []
    assert raw_items(EnvSecret) == []
    with pytest.raises(ConfigurationError, match="DYNAUNIQUE_LOCK_SECRET"):
        EnvSecret.get_by_unique(tenant="acme", slug="home")
