"""Tests of UniqueConstraint as a value: equality, names, normalize, the keys it yields. No I/O.

Everything here is pure: constraints, attribute options and the locks an instance requires
(``locks_of``) are computed without a server. Integration behaviour is in ``test_declaring.py``.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.declare import declare, pk_attr

from dynaunique import ConfigurationError, Model, UniqueConstraint, normalizers
from dynaunique._lock.items import SECRET_ENV, locks_of
from dynaunique._lock.locks import LockRef, lock_key
from dynaunique.attributes import (
    BinaryAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UTCDateTimeAttribute,
)


def is_active(member: Any) -> bool:
    """The condition of the partial unique index used below."""
    return bool(member.status == "active")


# A unique=True field (default name), one with lock_name=, and a composite constraint.
Account = declare("Account", "cons_accounts",
                  meta={"constraints": [UniqueConstraint(fields=("tenant", "slug"),
                                                         name="TENANT_SLUG")]},
                  pk=pk_attr(),
                  email=UnicodeAttribute(unique=True, normalize=normalizers.casefold, null=True),
                  username=UnicodeAttribute(unique=True, lock_name="HANDLE", null=True),
                  tenant=UnicodeAttribute(null=True), slug=UnicodeAttribute(null=True))

# normalize= as a mapping: only the slug is compared without case.
Scoped = declare("Scoped", "cons_scoped",
                 meta={"constraints": [UniqueConstraint(
                     fields=("tenant", "slug"), name="TS",
                     normalize={"slug": normalizers.casefold})]},
                 pk=pk_attr(), tenant=UnicodeAttribute(null=True), slug=UnicodeAttribute(null=True))

# A conditional constraint: the email is unique among active members only.
Member = declare("Member", "cons_members",
                 meta={"constraints": [UniqueConstraint(
                     "email", name="ACTIVE_EMAIL", normalize=normalizers.casefold,
                     condition=is_active)]},
                 pk=pk_attr(), email=UnicodeAttribute(null=True),
                 status=UnicodeAttribute(default="active"))

# Numbers, binary, and a tuple mixing them.
Typed = declare("Typed", "cons_typed",
                meta={"constraints": [UniqueConstraint(fields=("kind", "number", "blob"),
                                                       name="MIX")]},
                pk=pk_attr(), kind=UnicodeAttribute(null=True),
                number=NumberAttribute(unique=True, null=True),
                blob=BinaryAttribute(unique=True, null=True, legacy_encoding=False))

# A unique datetime: compared as the UTC string PynamoDB stores.
Stamped = declare("Stamped", "cons_stamped", pk=pk_attr(), at=UTCDateTimeAttribute(unique=True))

# A field-level hashed lock with the secret in Meta.
Hashed = declare("Hashed", "cons_hashed", meta={"lock_secret": "meta-secret"}, pk=pk_attr(),
                 email=UnicodeAttribute(unique=True, hashed=True, normalize=normalizers.casefold))

# A constraint-level hashed lock with no Meta secret: the environment must supply it.
HashedFromEnv = declare("HashedFromEnv", "cons_hashed_env",
                        meta={"constraints": [UniqueConstraint(("tenant", "slug"), name="TS",
                                                               hashed=True)]},
                        pk=pk_attr(), tenant=UnicodeAttribute(), slug=UnicodeAttribute())


def info_of(model: type[Model]) -> Any:
    info = model._du_info
    assert info is not None
    return info


def hmac_hex(secret: bytes, encoded: str) -> str:
    return hmac.new(secret, encoded.encode("utf-8"), hashlib.sha256).hexdigest()


# --- a constraint is an attrs value --------------------------------------------------------------


def test_constraints_with_the_same_declaration_are_equal_and_hash_alike() -> None:
    first = UniqueConstraint(fields=("tenant", "slug"), name="TENANT_SLUG")
    second = UniqueConstraint(fields=["tenant", "slug"], name="TENANT_SLUG")
    assert first == second
    assert hash(first) == hash(second)
    assert len({first, second}) == 1


@pytest.mark.parametrize("other", [
    UniqueConstraint(fields=("slug", "tenant"), name="TENANT_SLUG"),   # field order matters
    UniqueConstraint(fields=("tenant", "slug"), name="OTHER"),
    UniqueConstraint(fields=("tenant", "slug"), name="TENANT_SLUG", hashed=True),
    UniqueConstraint(fields=("tenant", "slug"), name="TENANT_SLUG", normalize=normalizers.strip),
    UniqueConstraint(fields=("tenant", "slug"), name="TENANT_SLUG", condition=is_active),
])
def test_constraints_differing_in_any_part_are_unequal(other: UniqueConstraint) -> None:
    assert UniqueConstraint(fields=("tenant", "slug"), name="TENANT_SLUG") != other


def test_constraint_repr_shows_every_part() -> None:
    constraint = UniqueConstraint(fields=("tenant", "slug"), name="TENANT_SLUG")
    assert repr(constraint) == (
        "UniqueConstraint(fields=('tenant', 'slug'), name='TENANT_SLUG', normalize=None, "
        "condition=None, hashed=False)"
    )


def test_constraint_is_frozen() -> None:
    constraint = UniqueConstraint("email")
    with pytest.raises(AttributeError):
        constraint.name = "OTHER"  # type: ignore[misc]


def test_one_field_name_defaults_to_the_field_upper_cased() -> None:
    constraint = UniqueConstraint("email")
    assert constraint.fields == ("email",)
    assert constraint.name == "EMAIL"
    assert constraint.explicit_name is False
    assert UniqueConstraint("email", name="MAIL").explicit_name is True


def test_implicit_and_explicit_default_name_are_the_same_constraint() -> None:
    # Whether the name was typed or derived does not change what the constraint is.
    assert UniqueConstraint("email") == UniqueConstraint(("email",), name="EMAIL")


# --- unique=True is shorthand for a one-field constraint ----------------------------------------


def test_unique_true_equals_the_explicit_one_field_constraint() -> None:
    by_name = {b.name: b.constraint for b in info_of(Account).constraints}
    assert by_name["EMAIL"] == UniqueConstraint(("email",), name="EMAIL",
                                                normalize=normalizers.casefold)
    assert by_name["HANDLE"] == UniqueConstraint(("username",), name="HANDLE")
    assert by_name["TENANT_SLUG"] == UniqueConstraint(("tenant", "slug"), name="TENANT_SLUG")
    assert by_name["EMAIL"].explicit_name is False
    assert by_name["HANDLE"].explicit_name is True


def test_hashed_on_a_field_becomes_a_hashed_constraint() -> None:
    (bound,) = info_of(Hashed).constraints
    assert bound.constraint == UniqueConstraint(("email",), name="EMAIL",
                                                normalize=normalizers.casefold, hashed=True)


def test_bound_constraint_maps_fields_to_stored_attribute_names() -> None:
    by_name = {b.name: b.attr_names for b in info_of(Account).constraints}
    assert by_name == {"EMAIL": ("email",), "HANDLE": ("username",),
                       "TENANT_SLUG": ("tenant", "slug")}


# --- normalize= ----------------------------------------------------------------------------------


def test_normalize_callable_applies_to_every_field() -> None:
    constraint = UniqueConstraint(("tenant", "slug"), name="TS", normalize=normalizers.casefold)
    assert constraint.normalizer_for("tenant") is normalizers.casefold
    assert constraint.normalized(("AcMe", "HoMe")) == ("acme", "home")


def test_normalize_mapping_applies_per_field_and_is_stored_as_sorted_pairs() -> None:
    constraint = UniqueConstraint(
        ("tenant", "slug"), name="TS",
        normalize={"tenant": normalizers.strip, "slug": normalizers.casefold},
    )
    assert constraint.normalize == (("slug", normalizers.casefold),
                                    ("tenant", normalizers.strip))
    assert constraint.normalized((" AcMe ", " HoMe ")) == ("AcMe", " home ")


def test_normalize_mapping_leaves_unmapped_fields_alone() -> None:
    constraint = UniqueConstraint(("tenant", "slug"), name="TS",
                                  normalize={"slug": normalizers.casefold})
    assert constraint.normalizer_for("tenant") is None
    assert constraint.normalized(("AcMe", "HoMe")) == ("AcMe", "home")


def test_normalize_mapping_order_does_not_change_equality_or_hash() -> None:
    first = UniqueConstraint(("a", "b"), name="AB",
                             normalize={"a": normalizers.strip, "b": normalizers.casefold})
    second = UniqueConstraint(("a", "b"), name="AB",
                              normalize={"b": normalizers.casefold, "a": normalizers.strip})
    assert first == second
    assert hash(first) == hash(second)


def test_normalize_leaves_none_as_none() -> None:
    constraint = UniqueConstraint(("tenant", "slug"), name="TS", normalize=normalizers.casefold)
    assert constraint.normalized((None, "HoMe")) == (None, "home")


def test_composed_normalizers_are_comparable_values() -> None:
    first = UniqueConstraint("email", normalize=normalizers.compose(normalizers.strip,
                                                                    normalizers.casefold))
    second = UniqueConstraint("email", normalize=normalizers.compose(normalizers.strip,
                                                                     normalizers.casefold))
    assert first == second
    assert first.normalized(("  Ada@X.io ",)) == ("ada@x.io",)


# --- mistakes in a constraint --------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"fields": ()}, "at least one field"),
    ({"fields": ("a", "a"), "name": "AA"}, "twice"),
    ({"fields": ("a", 3), "name": "A3"}, "attribute names"),
    ({"fields": ("a", ""), "name": "A"}, "attribute names"),
    ({"fields": ("tenant", "slug")}, "needs a name="),
    ({"fields": "a", "name": "A#B"}, "'#'"),
    ({"fields": "a", "name": "~LEDGER"}, "not allowed"),
    ({"fields": "a", "name": "A B"}, "not allowed"),
    ({"fields": "a", "name": "X" * 201}, "not allowed"),
    ({"fields": "a", "normalize": "casefold"}, "normalize="),
    ({"fields": "a", "normalize": {"a": "casefold"}}, "not callable"),
    ({"fields": "a", "normalize": {"b": normalizers.casefold}}, "['b']"),
    ({"fields": "a", "condition": "status == 'active'"}, "condition="),
    ({"fields": "a", "hashed": "yes"}, "hashed="),
])
def test_bad_constraint_raises_configuration_error(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        UniqueConstraint(**kwargs)
    assert needle in str(caught.value)


def test_a_hash_in_a_field_lock_name_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="'#'"):
        class BadLockName(Model):
            class Meta:
                table_name = "cons_bad_lock_name"

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True, lock_name="E#MAIL")


@pytest.mark.parametrize("kwargs", [
    {"normalize": normalizers.casefold},
    {"lock_name": "MAIL"},
    {"hashed": True},
])
def test_unique_options_without_unique_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="unique=True"):
        UnicodeAttribute(**kwargs)


@pytest.mark.parametrize("key", ["hash_key", "range_key"])
def test_unique_on_a_key_attribute_is_refused(key: str) -> None:
    with pytest.raises(ConfigurationError, match="already unique"):
        options: dict[str, Any] = {key: True}
        UnicodeAttribute(unique=True, **options)


def test_non_callable_attribute_normalize_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="callable"):
        UnicodeAttribute(unique=True, normalize="casefold")  # type: ignore[arg-type]


# --- the locks an instance requires --------------------------------------------------------------


def test_composite_lock_key_joins_the_fields() -> None:
    locks = locks_of(info_of(Account), Account(pk="A#1", tenant="acme", slug="home"))
    assert locks == {"TENANT_SLUG": LockRef(
        constraint="TENANT_SLUG", fields=("tenant", "slug"),
        key="UNIQ#TENANT_SLUG#acme#home", value=("acme", "home"), hashed=False,
    )}


def test_one_field_locks_use_their_names_and_normalize() -> None:
    locks = locks_of(info_of(Account), Account(pk="A#1", email="Ada@Lovelace.IO", username="Ada"))
    assert {name: lock.key for name, lock in locks.items()} == {
        "EMAIL": "UNIQ#EMAIL#ada@lovelace.io",
        "HANDLE": "UNIQ#HANDLE#Ada",
    }
    assert locks["EMAIL"].value == "ada@lovelace.io"


def test_composite_encoding_keeps_hashes_inside_values_apart() -> None:
    info = info_of(Account)
    first = locks_of(info, Account(pk="A#1", tenant="acme", slug="x#y"))["TENANT_SLUG"].key
    second = locks_of(info, Account(pk="A#2", tenant="acme#x", slug="y"))["TENANT_SLUG"].key
    assert first == "UNIQ#TENANT_SLUG#acme#x\\#y"
    assert second == "UNIQ#TENANT_SLUG#acme\\#x#y"


def test_normalize_mapping_reaches_the_lock_key() -> None:
    locks = locks_of(info_of(Scoped), Scoped(pk="S#1", tenant="AcMe", slug="HoMe"))
    assert locks["TS"].key == "UNIQ#TS#AcMe#home"
    assert locks["TS"].value == ("AcMe", "home")


@pytest.mark.parametrize(("tenant", "slug"), [(None, "home"), ("acme", None), (None, None)])
def test_none_in_any_field_means_no_lock(tenant: str | None, slug: str | None) -> None:
    assert locks_of(info_of(Account), Account(pk="A#1", tenant=tenant, slug=slug)) == {}


def test_condition_decides_whether_the_lock_is_held() -> None:
    info = info_of(Member)
    active = locks_of(info, Member(pk="M#1", email="Ada@X.io", status="active"))
    assert {n: lock.key for n, lock in active.items()} == {
        "ACTIVE_EMAIL": "UNIQ#ACTIVE_EMAIL#ada@x.io"
    }
    assert locks_of(info, Member(pk="M#1", email="Ada@X.io", status="deleted")) == {}
    assert locks_of(info, Member(pk="M#1", email=None, status="active")) == {}


@pytest.mark.parametrize("number", [1, 1.0, Decimal("1.00"), Decimal("1"), Decimal("1E0")])
def test_equal_numbers_share_one_lock_key(number: Any) -> None:
    locks = locks_of(info_of(Typed), Typed(pk="T#1", number=number))
    assert locks["NUMBER"].key == "UNIQ#NUMBER#\\n1"


def test_different_numbers_have_different_keys() -> None:
    info = info_of(Typed)
    keys = {locks_of(info, Typed(pk="T#1", number=n))["NUMBER"].key
            for n in (1, 10, 0.1, -1, Decimal("1.5"), 100)}
    assert len(keys) == 6


def test_a_number_and_its_digits_as_text_are_different_values() -> None:
    info = info_of(Typed)
    number = locks_of(info, Typed(pk="T#1", kind="k", number=1, blob=b"x"))["MIX"].key
    # The string "\n1" escapes its backslash, so it can never look like the number 1.
    assert number == "UNIQ#MIX#k#\\n1#\\beA=="
    assert lock_key("MIX", ("k", "\\n1", b"x")) != number


def test_binary_values_are_base64_tagged() -> None:
    locks = locks_of(info_of(Typed), Typed(pk="T#1", blob=b"\x00\xffab"))
    assert locks["BLOB"].key == "UNIQ#BLOB#\\bAP9hYg=="
    assert locks["BLOB"].value == b"\x00\xffab"


def test_datetimes_lock_on_their_utc_string() -> None:
    info = info_of(Stamped)
    utc = locks_of(info, Stamped(pk="D#1", at=datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)))
    shifted = locks_of(info, Stamped(pk="D#2", at=datetime(
        2030, 1, 2, 4, 4, 5, tzinfo=timezone(timedelta(hours=1)))))
    assert utc["AT"].key == shifted["AT"].key == "UNIQ#AT#2030-01-02T03:04:05.000000+0000"


# --- hashed locks --------------------------------------------------------------------------------


def test_hashed_key_is_hmac_of_the_normalized_value_with_meta_secret() -> None:
    locks = locks_of(info_of(Hashed), Hashed(pk="H#1", email="Ada@Lovelace.IO"))
    digest = hmac_hex(b"meta-secret", "ada@lovelace.io")
    assert locks["EMAIL"].key == "UNIQ#EMAIL#\\k" + digest
    assert locks["EMAIL"].hashed is True
    assert "ada" not in locks["EMAIL"].key


def test_hashed_key_uses_the_environment_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "env-secret")
    locks = locks_of(info_of(HashedFromEnv), HashedFromEnv(pk="E#1", tenant="acme", slug="x#y"))
    assert locks["TS"].key == "UNIQ#TS#\\k" + hmac_hex(b"env-secret", "acme#x\\#y")


def test_meta_secret_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "env-secret")
    locks = locks_of(info_of(Hashed), Hashed(pk="H#1", email="ada@lovelace.io"))
    assert locks["EMAIL"].key == "UNIQ#EMAIL#\\k" + hmac_hex(b"meta-secret", "ada@lovelace.io")


def test_different_secrets_give_different_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    instance = HashedFromEnv(pk="E#1", tenant="acme", slug="home")
    monkeypatch.setenv(SECRET_ENV, "one")
    first = locks_of(info_of(HashedFromEnv), instance)["TS"].key
    monkeypatch.setenv(SECRET_ENV, "two")
    assert locks_of(info_of(HashedFromEnv), instance)["TS"].key != first


@pytest.mark.parametrize("value", [None, ""])
def test_missing_secret_names_both_places(monkeypatch: pytest.MonkeyPatch,
                                          value: str | None) -> None:
    if value is None:
        monkeypatch.delenv(SECRET_ENV, raising=False)
    else:
        monkeypatch.setenv(SECRET_ENV, value)
    with pytest.raises(ConfigurationError) as caught:
        locks_of(info_of(HashedFromEnv), HashedFromEnv(pk="E#1", tenant="acme", slug="home"))
    assert "Meta.lock_secret" in str(caught.value)
    assert "DYNAUNIQUE_LOCK_SECRET" in str(caught.value)


def test_no_secret_is_needed_while_a_hashed_field_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    assert locks_of(info_of(HashedFromEnv), HashedFromEnv(pk="E#1", tenant=None, slug="x")) == {}


# --- injectivity over tuples (hypothesis) --------------------------------------------------------

_component = st.one_of(
    st.text(max_size=12),
    st.text(alphabet="#\\abn", max_size=8),   # the characters the encoding treats specially
    st.integers(min_value=-10**6, max_value=10**6),
    st.decimals(allow_nan=False, allow_infinity=False, places=3,
                min_value=-1000, max_value=1000),
    st.binary(max_size=8),
    st.booleans(),
)


def _canonical(value: Any) -> tuple[str, Any]:
    """What makes two lock values the same: the kind, then the value (numbers by value)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float, Decimal)):
        return ("number", Decimal(value).normalize() if value else Decimal(0))
    if isinstance(value, bytes):
        return ("binary", value)
    return ("string", value)


@given(st.lists(_component, min_size=1, max_size=4), st.lists(_component, min_size=1, max_size=4))
def test_lock_keys_are_equal_exactly_when_the_values_are(first: list[Any],
                                                         second: list[Any]) -> None:
    same = [_canonical(v) for v in first] == [_canonical(v) for v in second]
    assert (lock_key("TS", first) == lock_key("TS", second)) is same


@given(st.text(max_size=10), st.text(max_size=10), st.text(max_size=10), st.text(max_size=10))
def test_composite_locks_of_distinct_tuples_differ(tenant_a: str, slug_a: str, tenant_b: str,
                                                   slug_b: str) -> None:
    info = info_of(Account)
    first = locks_of(info, Account(pk="A#1", tenant=tenant_a, slug=slug_a))["TENANT_SLUG"].key
    second = locks_of(info, Account(pk="A#2", tenant=tenant_b, slug=slug_b))["TENANT_SLUG"].key
    assert (first == second) is ((tenant_a, slug_a) == (tenant_b, slug_b))
