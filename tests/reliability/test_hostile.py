"""Hostile input: every value gets its own lock or a clear error, never another value's lock.

Pure property tests decode lock keys back to the values they protect (a left inverse proves the
encoding injective) over arbitrary unicode, numbers, binary, booleans and composites, spiced
with separators, escapes, empty strings and look-alikes of the tagged and hashed forms. The
integration tests push such values through real models and the local server: collisions happen
exactly when the normalized values are equal; keys at and over DynamoDB's 2048-byte limit,
items near 400 KB, DynamoDB reserved words and dynaunique's own lock attribute names as
attribute names, and names or values crafted to reach another constraint's namespace.
"""

from __future__ import annotations

import base64
import hashlib
import re
import string
from collections.abc import Callable, Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support.declare import declare, pk_attr, sk_attr
from support.examples import examples
from support.invariants import assert_clean, raw_client, scan_table

from dynaunique import (
    ConfigurationError,
    DynauniqueError,
    InvalidValueError,
    Model,
    UniqueConstraint,
    UniqueViolation,
    atomic,
    normalizers,
)
from dynaunique._lock.items import locks_of
from dynaunique._lock.locks import (
    LENGTH_HASH_TAG,
    LOCK_ATTRIBUTES,
    MAX_HASH_KEY_BYTES,
    RESERVED_PREFIX,
    canonical_number,
    encode_value,
    lock_key,
    split_lock_key,
)
from dynaunique._write.record import serialize_checked
from dynaunique.attributes import (
    BinaryAttribute,
    BooleanAttribute,
    NumberAttribute,
    TTLAttribute,
    UnicodeAttribute,
)
from dynaunique.testing import create_tables

from . import fresh_tables, point

NAME = "EMAIL"

# --- a test-side decoder: the left inverse of the encoding --------------------------------------


def canon(value: Any) -> tuple[str, Any]:
    """What a component means: its kind and value (numbers by value, so 1 == 1.0)."""
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, float):
        return ("num", Decimal(repr(value)))
    if isinstance(value, (int, Decimal)):
        return ("num", Decimal(value))
    if isinstance(value, (bytes, bytearray)):
        return ("bytes", bytes(value))
    raise TypeError(value)


def _split(encoded: str) -> list[str]:
    """Split on the bare ``#`` separators, leaving escape pairs intact."""
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(encoded):
        char = encoded[i]
        if char == "\\":
            assert i + 1 < len(encoded), f"dangling escape in {encoded!r}"
            current.append(encoded[i:i + 2])
            i += 2
        elif char == "#":
            parts.append("".join(current))
            current = []
            i += 1
        else:
            current.append(char)
            i += 1
    parts.append("".join(current))
    return parts


def decode_component(text: str) -> tuple[str, Any]:
    """One encoded component back to ``canon`` form; fails on anything malformed."""
    if text.startswith("\\n"):
        digits = text[2:]
        number = Decimal(digits)
        assert canonical_number(number) == digits, f"non-canonical number {digits!r}"
        return ("num", number)
    if text.startswith("\\b"):
        return ("bytes", base64.b64decode(text[2:], validate=True))
    if text in ("\\t", "\\f"):
        return ("bool", text == "\\t")
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\\":
            escaped = text[i + 1]
            assert escaped in "\\#", f"unknown escape \\{escaped} in {text!r}"
            out.append(escaped)
            i += 2
        else:
            assert text[i] != "#"
            out.append(text[i])
            i += 1
    return ("str", "".join(out))


def decode(encoded: str) -> tuple[tuple[str, Any], ...]:
    """An encoded value back to the tuple of ``canon`` components it protects."""
    return tuple(decode_component(part) for part in _split(encoded))


# --- strategies ----------------------------------------------------------------------------------

SPECIALS = ["", "#", "##", "\\", "\\\\", "\\#", "#\\", "\\h", "\\k", "\\n", "\\n1", "\\t", "\\f",
            "\\b", "\\bAP8=", "UNIQ#", "UNIQ#EMAIL#", "~", "x#y", "EMAIL#x", " ", "\x00",
            "\\h" + "0" * 64, "\\k" + "f" * 64, "é", "e\u0301", "ß", "İ", "😀", "\u200b"]
#: Any string DynamoDB can store: every code point except lone surrogates.
texts = st.one_of(
    st.sampled_from(SPECIALS),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12),
    st.lists(st.sampled_from([*SPECIALS, "a", "B", "1"]), max_size=5).map("".join),
)
numbers = st.one_of(
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -0.0, 1, 1.0, Decimal("1.00"), Decimal("-0"), 10**20, 1e20, 0.1,
                     Decimal("0.10"), 2**53 + 1, float(2**53)]),
)
components = st.one_of(texts, numbers, st.binary(max_size=8), st.booleans())
values = st.lists(components, min_size=1, max_size=3).map(tuple)


def equivalent(value: Any) -> st.SearchStrategy[Any]:
    """Another spelling of the same value (numbers: int/float/Decimal with trailing zeros)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return st.just(value)
    number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    padded = Decimal((sign, (*digits, 0), exponent - 1))  # one more trailing zero, same value
    spellings: list[Any] = [number, padded]
    if number == number.to_integral_value() and abs(number) < 10**30:
        spellings.append(int(number))
    if float(number) == number:
        spellings.append(float(number))
    return st.sampled_from(spellings)


# --- the encoding, pure ------------------------------------------------------------------------


@settings(max_examples=examples(400))
@given(values)
def test_every_lock_key_decodes_back_to_its_value(value: tuple[Any, ...]) -> None:
    """A left inverse exists: the key names its constraint and holds exactly the value (or,
    too long for a key, a marked SHA-256 of it)."""
    key = lock_key(NAME, value)
    split = split_lock_key(key)
    assert split is not None and split[0] == NAME
    encoded = encode_value(value)
    prefix = f"{RESERVED_PREFIX}{NAME}#"
    if len((prefix + encoded).encode("utf-8")) > MAX_HASH_KEY_BYTES:
        digest = hashlib.sha256(encoded.encode("utf-8")).hexdigest()
        assert key == prefix + LENGTH_HASH_TAG + digest
    else:
        assert split[1] == encoded
        assert decode(split[1]) == tuple(canon(v) for v in value)


@settings(max_examples=examples(400))
@given(values, st.data())
def test_two_values_share_a_lock_exactly_when_they_are_equal(a: tuple[Any, ...],
                                                             data: st.DataObject) -> None:
    """Keys are equal iff the values are (compared by kind, numbers by value)."""
    if data.draw(st.booleans()):
        b = tuple(data.draw(equivalent(v)) for v in a)
    else:
        b = data.draw(values)
    same = tuple(canon(v) for v in a) == tuple(canon(v) for v in b)
    assert (lock_key(NAME, a) == lock_key(NAME, b)) == same, (a, b)


@given(components)
def test_an_encoding_spelled_as_a_string_is_a_different_value(value: Any) -> None:
    """The string that looks like a value's encoding ("\\n1" for 1) never takes its lock."""
    spelled = encode_value((value,))
    assume(not (isinstance(value, str) and value == spelled))
    assert lock_key(NAME, (spelled,)) != lock_key(NAME, (value,))


@settings(max_examples=50)
@given(st.integers(min_value=2030, max_value=2100), texts)
def test_a_string_spelling_a_hashed_key_never_takes_the_hashed_lock(length: int,
                                                                    tail: str) -> None:
    """Over 2048 bytes a key is ``\\h`` + SHA-256; a short string holding exactly that text is
    escaped (``\\\\h...``), so it can never collide with the hashed key."""
    long_value = "x" * length + tail
    hashed = lock_key(NAME, (long_value,))
    assume(LENGTH_HASH_TAG in hashed)
    look_alike = split_lock_key(hashed)
    assert look_alike is not None
    assert lock_key(NAME, (look_alike[1],)) != hashed


@given(st.text(alphabet=st.characters(whitelist_categories=["Cs"]), min_size=1, max_size=3),
       texts)
def test_lone_surrogates_are_a_clear_error(surrogates: str, around: str) -> None:
    """DynamoDB cannot store a lone surrogate: InvalidValueError, never a lock."""
    with pytest.raises(InvalidValueError):
        lock_key(NAME, (around + surrogates + around,))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), Decimal("NaN"),
                                   Decimal("sNaN"), Decimal("Infinity")])
def test_non_finite_numbers_are_a_clear_error(value: Any) -> None:
    with pytest.raises(InvalidValueError):
        lock_key(NAME, (value,))


# A hashed constraint over every type, and a hostile value for it: it may be refused, never shown.
Confidential = declare("Confidential", "rel_hostile_confidential",
                       meta={"lock_secret": "not-a-real-secret"}, pk=pk_attr(),
                       email=UnicodeAttribute(unique=True, hashed=True, null=True,
                                              normalize=normalizers.nfkc_casefold),
                       badge=NumberAttribute(unique=True, hashed=True, null=True),
                       blob=BinaryAttribute(unique=True, hashed=True, null=True,
                                            legacy_encoding=False))
_MARK = "Zq7"   # in every hostile value, so a leak of any spelling of it is found
hostile = st.one_of(
    st.builds(lambda a, b: a + _MARK + b, texts, texts),
    st.builds(lambda a, s: _MARK + a + s, texts,
              st.text(alphabet=st.characters(whitelist_categories=["Cs"]), min_size=1,
                      max_size=2)),
    st.builds(lambda n: _MARK + str(n), st.integers()),
    st.builds(lambda t: [_MARK, t], texts),
)


def _shown_nowhere(exc: BaseException) -> None:
    """Neither the error, its repr, nor its recorded traceback (chain included) holds _MARK in
    any case: not the value, not its normalized form."""
    import traceback

    text = repr(exc) + "".join(traceback.format_exception(exc))
    assert _MARK.casefold() not in text.casefold(), text


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(["email", "badge", "blob"]), hostile)
def test_a_hashed_value_is_never_shown_by_a_refusal(field: str, value: Any) -> None:
    """What a save (the stored item, then its locks) and a lookup (up to its first request)
    do with a hostile value for a hashed field: accept it, or refuse it without showing it."""
    record = Confidential(pk="C1", **{field: value})
    try:
        serialize_checked(record)
        locks_of(Confidential._du_info, record)
    except (InvalidValueError, ValueError, TypeError) as exc:
        _shown_nowhere(exc)
    try:
        next(Confidential._du_get_by_unique_steps(field, value, {}))
    except (InvalidValueError, ValueError, TypeError, Confidential.DoesNotExist) as exc:
        _shown_nowhere(exc)


# --- through models and the server ---------------------------------------------------------------

# NFKC + casefold: different strings may be one value, e.g. "ﬁ" and "FI".
HostileText = declare("HostileText", "rel_hostile_text", pk=pk_attr(),
                      email=UnicodeAttribute(unique=True, normalize=normalizers.nfkc_casefold))

HostileNumber = declare("HostileNumber", "rel_hostile_number", pk=pk_attr(),
                        number=NumberAttribute(unique=True))

HostilePair = declare("HostilePair", "rel_hostile_pair",
                      meta={"constraints": [UniqueConstraint(fields=("tenant", "slug"),
                                                             name="TENANT_SLUG")]},
                      pk=pk_attr(), tenant=UnicodeAttribute(), slug=UnicodeAttribute())


def wipe(endpoint: str, table: str) -> None:
    """Delete every item of a small table (between hypothesis examples)."""
    client = raw_client(endpoint)
    for item in scan_table(endpoint, table):
        client.delete_item(TableName=table, Key={k: item[k] for k in ("PK", "SK") if k in item})


@pytest.fixture
def hostile(dynaunique_db: str) -> Iterator[str]:
    """The integration models on the freshly reset local server."""
    models = (HostileText, HostileNumber, HostilePair)
    point(dynaunique_db, *models)
    fresh_tables(dynaunique_db, *models)
    yield dynaunique_db


def race_values(endpoint: str, model: type[Model], table: str, field_values: list[dict[str, Any]],
                same: Callable[[dict[str, Any], dict[str, Any]], bool]) -> None:
    """Save one record per value in order: each must succeed unless an earlier saved record
    holds an equal value, and then fail with that record as the owner. Then every value must
    be found through its lock, and the table must be clean."""
    wipe(endpoint, table)
    holders: list[tuple[str, dict[str, Any]]] = []
    for i, fields in enumerate(field_values):
        pk = f"R{i}"
        earlier = [h for h, f in holders if same(f, fields)]
        if earlier:
            with pytest.raises(UniqueViolation) as caught:
                model(pk=pk, **fields).save()
            assert caught.value.owner == {"PK": earlier[0]}
        else:
            model(pk=pk, **fields).save()
            holders.append((pk, fields))
    assert_clean([model], endpoint)
    for pk, fields in holders:
        lookup = fields if len(fields) > 1 else None
        found = (model.get_by_unique(**lookup) if lookup is not None
                 else model.get_by_unique(*next(iter(fields.items()))))
        assert found.pk == pk  # type: ignore[attr-defined]


integration = settings(max_examples=20, deadline=None,
                       suppress_health_check=[HealthCheck.function_scoped_fixture])


@integration
@given(st.lists(texts, min_size=1, max_size=5))
def test_strings_collide_exactly_when_equal_after_normalization(hostile: str,
                                                                emails: list[str]) -> None:
    norm = normalizers.nfkc_casefold
    race_values(hostile, HostileText, "rel_hostile_text", [{"email": e} for e in emails],
                lambda a, b: bool(norm(a["email"]) == norm(b["email"])))


#: What DynamoDB can store: at most 38 significant digits, magnitude within 1e-130..1e126.
storable_numbers = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(min_value=-1e100, max_value=1e100, allow_nan=False, allow_infinity=False)
    .filter(lambda f: f == 0 or abs(f) > 1e-100),
    st.sampled_from([1, 1.0, -0.0, 0, 10**20, 1e20, 0.1, 2**53 + 1, float(2**53), 2**53]),
)


@integration
@given(st.lists(storable_numbers, min_size=1, max_size=5))
def test_numbers_collide_exactly_when_numerically_equal(hostile: str,
                                                        numbers_: list[Any]) -> None:
    race_values(hostile, HostileNumber, "rel_hostile_number",
                [{"number": n} for n in numbers_],
                lambda a, b: canon(a["number"]) == canon(b["number"]))


@integration
@given(st.lists(st.tuples(texts, texts), min_size=1, max_size=5))
def test_composites_collide_exactly_when_every_part_is_equal(
        hostile: str, pairs: list[tuple[str, str]]) -> None:
    """("a#b", "c") and ("a", "b#c") are different pairs: separators inside parts are escaped."""
    race_values(hostile, HostilePair, "rel_hostile_pair",
                [{"tenant": t, "slug": s} for t, s in pairs], lambda a, b: a == b)


def test_crafted_composites_do_not_collide(hostile: str) -> None:
    """Every pair here would share a key under a naive "#".join encoding."""
    pairs = [("a#b", "c"), ("a", "b#c"), ("a\\", "#b"), ("a\\#", "b"), ("a", "\\#b"),
             ("", "#"), ("#", ""), ("", ""), ("\\h" + "0" * 64, ""), ("x", "y")]
    for i, (tenant, slug) in enumerate(pairs):
        HostilePair(pk=f"R{i}", tenant=tenant, slug=slug).save()
    assert_clean([HostilePair], hostile)
    keys = {i["PK"]["S"] for i in scan_table(hostile, "rel_hostile_pair")
            if i["PK"]["S"].startswith(RESERVED_PREFIX)}
    assert len(keys) == len(pairs)


def test_a_lone_surrogate_is_refused_before_anything_is_written(hostile: str) -> None:
    with pytest.raises(InvalidValueError):
        HostileText(pk="R1", email="ada\ud800").save()
    assert scan_table(hostile, "rel_hostile_text") == []


@pytest.mark.parametrize("number", [10**130, -(10**130), 1e300])
def test_numbers_dynamodb_cannot_store_are_a_clear_error(hostile: str, number: Any) -> None:
    """Out of DynamoDB's range: an error naming it, and no record or lock left behind."""
    with pytest.raises(DynauniqueError, match=r"(?i)number"):
        HostileNumber(pk="R1", number=number).save()
    assert scan_table(hostile, "rel_hostile_number") == []


# --- one lock namespace: strings that spell other encodings; declarations that may not share ---

TokenText = declare("TokenText", "rel_hostile_tokens", pk=pk_attr(),
                    token=UnicodeAttribute(unique=True, lock_name="TOKEN"))

#: A second model sharing the TOKEN namespace, declared alike (a string, no normalizer).
TokenAlias = declare("TokenAlias", "rel_hostile_tokens", pk=pk_attr(),
                     code=UnicodeAttribute(unique=True, lock_name="TOKEN"))

TOKEN_MODELS: tuple[type[Model], ...] = (TokenText, TokenAlias)


def token_model_of(raw: dict[str, Any]) -> type[Model] | None:
    return {"T": TokenText, "A": TokenAlias}.get(raw["PK"]["S"][0])


def test_strings_that_spell_another_encoding_never_share_a_lock(dynaunique_db: str) -> None:
    """In one shared lock namespace a string that spells a number's, a binary's, a boolean's,
    a composite's or a hashed key's encoding gets its own lock; equal strings still collide,
    whichever model holds them."""
    point(dynaunique_db, *TOKEN_MODELS)
    fresh_tables(dynaunique_db, TokenText)
    spelled = ["\\n1", "1", "\\bAP8=", "AP8=", "\\t", "True", "x#y", "x#y#", "x\\#y",
               lock_key("TOKEN", ("ada",), secret=b"not-a-real-secret").split("#", 2)[2]]
    for n, value in enumerate(spelled):
        TokenText(pk=f"T{n}", token=value).save()
    for n, value in enumerate(spelled):
        with pytest.raises(UniqueViolation):
            TokenAlias(pk=f"A{n}", code=value).save()
    assert_clean(list(TOKEN_MODELS), dynaunique_db, model_of=token_model_of)


@pytest.mark.parametrize(("options", "differs"), [
    ({"token": BinaryAttribute(unique=True, lock_name="TOKEN", legacy_encoding=False)},
     "stored as a binary value (B)"),
    ({"token": NumberAttribute(unique=True, lock_name="TOKEN")}, "stored as a number (N)"),
    ({"token": BooleanAttribute(unique=True, lock_name="TOKEN")}, "stored as a boolean (BOOL)"),
    ({"left": UnicodeAttribute(), "right": UnicodeAttribute(),
      "meta": {"constraints": [UniqueConstraint(fields=("left", "right"), name="TOKEN")]}},
     "locks 2 fields (left, right)"),
    ({"token": UnicodeAttribute(unique=True, lock_name="TOKEN", hashed=True),
      "meta": {"lock_secret": "not-a-real-secret"}}, "TokenOther hashes it"),
], ids=["binary", "number", "boolean", "composite", "hashed"])
def test_another_type_arity_or_hashing_cannot_join_the_namespace(
        options: dict[str, Any], differs: str) -> None:
    """What once shared TOKEN with strings — other types, a composite, a hashed constraint — is
    refused when the class is defined: a namespace means one encoding of one kind of value."""
    fields = dict(options)
    with pytest.raises(ConfigurationError, match="declare it differently") as caught:
        declare("TokenOther", "rel_hostile_tokens", meta=fields.pop("meta", None), pk=pk_attr(),
                **fields)
    assert differs in str(caught.value)


# --- key size ----------------------------------------------------------------------------------


def _value_for_key_bytes(total: int, filler: str = "x") -> str:
    """An email whose lock key ``UNIQ#EMAIL#<email>`` is exactly ``total`` UTF-8 bytes."""
    prefix = len(f"{RESERVED_PREFIX}EMAIL#".encode())
    width = len(filler.encode("utf-8"))
    count, rest = divmod(total - prefix, width)
    return filler * count + "y" * rest


Sized = declare("Sized", "rel_hostile_sized", pk=pk_attr(),
                email=UnicodeAttribute(unique=True, null=True), note=UnicodeAttribute(null=True))


@pytest.fixture
def sized(dynaunique_db: str) -> str:
    point(dynaunique_db, Sized)
    fresh_tables(dynaunique_db, Sized)
    return dynaunique_db


@pytest.mark.parametrize("filler", ["x", "é", "😀"])
def test_values_at_and_over_the_key_limit_are_both_lockable_and_distinct(sized: str,
                                                                         filler: str) -> None:
    """2048 bytes is a plain key, 2049 a hashed one; both hold, both collide with themselves,
    neither with the other, and a string spelling the hashed key is a third value."""
    at_limit = _value_for_key_bytes(MAX_HASH_KEY_BYTES, filler)
    over = _value_for_key_bytes(MAX_HASH_KEY_BYTES + 1, filler)
    assert len(lock_key("EMAIL", (at_limit,)).encode()) == MAX_HASH_KEY_BYTES
    hashed = lock_key("EMAIL", (over,))
    assert LENGTH_HASH_TAG in hashed
    spelled = hashed.split("#", 2)[2]

    Sized(pk="AT", email=at_limit).save()
    Sized(pk="OVER", email=over).save()
    Sized(pk="SPELLED", email=spelled).save()
    for pk, email in (("AT2", at_limit), ("OVER2", over)):
        with pytest.raises(UniqueViolation):
            Sized(pk=pk, email=email).save()
    assert Sized.get_by_unique("email", at_limit).pk == "AT"
    assert Sized.get_by_unique("email", over).pk == "OVER"
    assert Sized.get_by_unique("email", spelled).pk == "SPELLED"
    keys = sorted(i["PK"]["S"] for i in scan_table(sized, "rel_hostile_sized"))
    assert hashed in keys and lock_key("EMAIL", (at_limit,)) in keys
    # Moving a hashed value and deleting it leave nothing behind.
    record = Sized.get("OVER", consistent_read=True)
    record.email = at_limit + "z"
    record.save()
    Sized.get("AT", consistent_read=True).delete()
    assert_clean([Sized], sized)


NEAR_LIMIT = 390_000


def test_an_item_near_400_kb_saves_with_its_lock(sized: str) -> None:
    Sized(pk="BIG", email="big@x.io", note="n" * NEAR_LIMIT).save()
    record = Sized.get("BIG", consistent_read=True)
    record.email = "bigger@x.io"
    record.save()
    assert Sized.get_by_unique("email", "bigger@x.io").pk == "BIG"
    assert_clean([Sized], sized)


def test_an_update_over_400_kb_fails_whole(sized: str) -> None:
    """The local server enforces the item limit on updates: the transaction that would also
    move the lock fails as a whole — record, old lock and new lock untouched."""
    Sized(pk="BIG", email="big@x.io", note="n" * NEAR_LIMIT).save()
    before = sorted(map(str, scan_table(sized, "rel_hostile_sized")))
    record = Sized.get("BIG", consistent_read=True)
    with pytest.raises(DynauniqueError):
        record.update(actions=[Sized.email.set("moved@x.io"),
                               Sized.note.set("n" * (NEAR_LIMIT + 20_000))])
    assert sorted(map(str, scan_table(sized, "rel_hostile_sized"))) == before
    assert_clean([Sized], sized)


def test_a_put_over_400_kb_is_refused_or_whole(sized: str) -> None:
    """DynamoDB refuses a put over 400 KB (the whole transaction); the local server accepts
    puts of any size. Either way the record and its lock land together or not at all."""
    try:
        Sized(pk="HUGE", email="huge@x.io", note="n" * 420_000).save()
    except DynauniqueError:
        assert scan_table(sized, "rel_hostile_sized") == []
    else:
        assert_clean([Sized], sized)
        assert Sized.get_by_unique("email", "huge@x.io").pk == "HUGE"


def test_a_huge_unique_value_is_hashed_and_its_lock_still_holds(sized: str) -> None:
    value = "v" * 200_000
    Sized(pk="A", email=value).save()
    with pytest.raises(UniqueViolation):
        Sized(pk="B", email=value).save()
    keys = [i["PK"]["S"] for i in scan_table(sized, "rel_hostile_sized")
            if i["PK"]["S"].startswith(RESERVED_PREFIX)]
    assert [len(k) for k in keys] == [len(f"{RESERVED_PREFIX}EMAIL#") + 2 + 64]
    assert_clean([Sized], sized)


# --- reserved words and dynaunique's own attribute names as record attributes -------------------


class Reserved(Model):
    """DynamoDB reserved words, and the names lock items use, as record attribute names."""

    class Meta:
        table_name = "rel_hostile_reserved"
        constraints = [UniqueConstraint(fields=("status", "size"), name="STATUS_SIZE")]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    name = UnicodeAttribute(unique=True, null=True)
    value = UnicodeAttribute(unique=True, null=True)
    owner = UnicodeAttribute(unique=True, null=True)
    status = UnicodeAttribute(null=True)
    size = NumberAttribute(null=True)
    model = UnicodeAttribute(null=True)
    constraint = UnicodeAttribute(null=True)
    created = UnicodeAttribute(null=True)
    # Python name differs: a field named `count` would hide the Model.count() classmethod.
    tally = NumberAttribute(null=True, attr_name="count")


def test_reserved_words_and_lock_attribute_names_work_as_record_attributes(
        dynaunique_db: str) -> None:
    point(dynaunique_db, Reserved)
    fresh_tables(dynaunique_db, Reserved)
    a = Reserved(pk="A", name="ada", value="v1", owner="o1", status="on", size=1, model="m",
                 constraint="c", created="yesterday", tally=3)
    a.save()
    b = Reserved(pk="B", name="bob", value="v2", owner="o2", status="on", size=2)
    b.save()
    for clash in ({"name": "ada"}, {"value": "v1"}, {"owner": "o1"},
                  {"status": "on", "size": 1.0}):
        with pytest.raises(UniqueViolation):
            Reserved(pk="C", **clash).save()
    lock = raw_client(dynaunique_db).get_item(
        TableName="rel_hostile_reserved",
        Key={"PK": {"S": "UNIQ#OWNER#o1"}, "SK": {"S": "LOCK"}}, ConsistentRead=True)["Item"]
    assert lock["owner"] == {"M": {"PK": {"S": "A"}, "SK": {"S": "PROFILE"}}}
    assert lock["value"] == {"S": "o1"}

    a.owner = "o3"
    a.model = "changed"
    a.save()
    b.update(actions=[Reserved.value.set("v9"), Reserved.status.set("off")])
    stale = Reserved.get("A", "PROFILE", consistent_read=True)
    fresh = Reserved.get("A", "PROFILE", consistent_read=True)
    fresh.name = "ada2"
    fresh.save()
    stale.name = "ada3"
    with pytest.raises(DynauniqueError):
        stale.save()
    with atomic():
        a = Reserved.get("A", "PROFILE", consistent_read=True)
        b = Reserved.get("B", "PROFILE", consistent_read=True)
        a.owner, b.owner = b.owner, a.owner
        a.save()
        b.save()
    assert Reserved.get_by_unique("owner", "o3").pk == "B"
    assert Reserved.get_by_unique("STATUS_SIZE", ("off", 2)).pk == "B"
    assert_clean([Reserved], dynaunique_db)
    Reserved.get("A", "PROFILE", consistent_read=True).delete()
    Reserved(pk="B").delete()
    assert scan_table(dynaunique_db, "rel_hostile_reserved") == []


# A key or TTL attribute named like a lock item's own attribute would collide inside the lock
# item (lock_item() writes the key attribute, then its own attribute of the same name): such a
# model is refused at class definition.
def _clash_cases() -> list[Any]:
    return [pytest.param(role, attr, id=f"{role}-{attr}")
            for role in ("hash", "range", "ttl") for attr in LOCK_ATTRIBUTES]


@pytest.mark.parametrize(("role", "attr"), _clash_cases())
def test_key_attributes_named_like_lock_attributes_are_refused_or_work(
        dynaunique_db: str, role: str, attr: str) -> None:
    """The model is refused at class definition (were it accepted, its locks must be right)."""
    names = {"hash": "PK", "range": "SK", "ttl": "expires"}
    names[role] = attr
    namespace: dict[str, Any] = {
        "Meta": type("Meta", (), {"table_name": f"rel_hostile_clash_{role}_{attr}"}),
        "pk": UnicodeAttribute(hash_key=True, attr_name=names["hash"]),
        "sk": UnicodeAttribute(range_key=True, attr_name=names["range"], default="PROFILE"),
        "email": UnicodeAttribute(unique=True, null=True),
        "expires": TTLAttribute(attr_name=names["ttl"], null=True),
    }
    try:
        model: type[Model] = type(f"Clash_{role}_{attr}", (Model,), namespace)
    except ConfigurationError:
        return
    point(dynaunique_db, model)
    create_tables(model)
    first: Any = model(pk="A", email="x@x.io", expires=timedelta(days=365))
    first.save()
    first.email = "y@x.io"
    first.save()
    model(pk="B", email="x@x.io").save()  # the freed value
    assert_clean([model], dynaunique_db)
    model(pk="A").delete()
    model(pk="B").delete()
    assert scan_table(dynaunique_db, f"rel_hostile_clash_{role}_{attr}") == []


# --- names and values crafted to reach another namespace ----------------------------------------


@pytest.mark.parametrize("name", ["EMAIL#x", "#", "a#", "~ledger", "", "UNIQ#EMAIL", "a b",
                                  "e\u0301", "x" * 201])
def test_lock_names_that_could_reach_another_namespace_are_refused(name: str) -> None:
    with pytest.raises(ConfigurationError):
        UniqueConstraint(fields=("a", "b"), name=name)


@pytest.mark.parametrize("lock_name", ["EMAIL#x", "~ledger", "x y"])
def test_attribute_lock_names_are_refused_at_class_definition(lock_name: str) -> None:
    with pytest.raises(ConfigurationError):
        type("BadLockName", (Model,), {
            "Meta": type("Meta", (), {"table_name": "rel_hostile_bad_name"}),
            "pk": UnicodeAttribute(hash_key=True, attr_name="PK"),
            "email": UnicodeAttribute(unique=True, lock_name=lock_name),
        })


Prefixed = declare("Prefixed", "rel_hostile_prefixed", pk=pk_attr(), sk=sk_attr("PROFILE"),
                   email=UnicodeAttribute(unique=True, null=True))


def test_record_keys_in_the_lock_namespace_are_refused(dynaunique_db: str) -> None:
    """A record can never be written, read, updated or deleted under ``UNIQ#``: such a key
    would be a lock's (here the real lock of ada@x.io, which must stay untouched)."""
    point(dynaunique_db, Prefixed)
    fresh_tables(dynaunique_db, Prefixed)
    Prefixed(pk="ACCT#1", email="ada@x.io").save()
    lock_pk = "UNIQ#EMAIL#ada@x.io"
    before = scan_table(dynaunique_db, "rel_hostile_prefixed")

    attempts: list[Callable[[], object]] = [
        lambda: Prefixed(pk=lock_pk, sk="LOCK", email="eve@x.io").save(),
        lambda: Prefixed(pk=lock_pk, sk="LOCK").delete(),
        lambda: Prefixed(pk="UNIQ#~ledger", sk="LOCK").save(),
        lambda: Prefixed.get(lock_pk, "LOCK"),
        lambda: list(Prefixed.query(lock_pk)),
        lambda: Prefixed(pk=lock_pk, sk="LOCK").update(actions=[Prefixed.email.set("e")]),
    ]

    def in_atomic() -> None:
        with atomic():
            Prefixed(pk=lock_pk, sk="LOCK", email="eve@x.io").save()

    attempts.append(in_atomic)
    for attempt in attempts:
        with pytest.raises(InvalidValueError):
            attempt()
    assert scan_table(dynaunique_db, "rel_hostile_prefixed") == before
    assert [r.pk for r in Prefixed.scan()] == ["ACCT#1"]


@pytest.mark.parametrize("pk", ["UNIQ", "uniq#EMAIL#ada@x.io", "UNIQ EMAIL#x", "#UNIQ#x"])
def test_look_alike_record_keys_are_ordinary_records(dynaunique_db: str, pk: str) -> None:
    """Only the exact prefix is reserved: near misses are records like any other."""
    point(dynaunique_db, Prefixed)
    fresh_tables(dynaunique_db, Prefixed)
    Prefixed(pk=pk, email="ada@x.io").save()
    assert Prefixed.get_by_unique("email", "ada@x.io").pk == pk
    assert_clean([Prefixed], dynaunique_db)


@given(st.text(alphabet=string.ascii_letters + string.digits + "_.-#~ ", max_size=12))
def test_only_well_formed_lock_names_are_accepted(name: str) -> None:
    well_formed = re.fullmatch(r"[A-Za-z0-9_.\-]{1,200}", name) is not None
    try:
        UniqueConstraint(fields=("a", "b"), name=name)
    except ConfigurationError:
        assert not well_formed
    else:
        assert well_formed
