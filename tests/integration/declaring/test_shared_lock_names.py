"""Lock names shared by several models, end to end: a polymorphic family is one namespace, and
models sharing a name explicitly hold one lock per value — or are refused when defined."""

from __future__ import annotations

from typing import Any

import pytest
from support.declare import declare, pk_attr
from support.invariants import assert_clean

from dynaunique import ConfigurationError, Model, UniqueViolation, normalizers
from dynaunique.attributes import DiscriminatorAttribute, UnicodeAttribute
from dynaunique.testing import create_tables, use_endpoint

from .declared import lock_owners

# --- a polymorphic family ------------------------------------------------------------------------


def _family(endpoint: str) -> tuple[Any, Any, Any]:
    """Party, and its subclasses Person and Robot, which inherit its implicit EMAIL lock."""

    class Party(Model, discriminator="party"):
        class Meta:
            table_name = "decl_family"

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        kind = DiscriminatorAttribute(attr_name="kind")
        email = UnicodeAttribute(unique=True, normalize=normalizers.casefold, null=True)

    class Person(Party, discriminator="person"):
        pass

    class Robot(Party, discriminator="robot"):
        serial = UnicodeAttribute(null=True)

    use_endpoint(endpoint, Party)
    create_tables(Party)
    return Party, Person, Robot


def _kind_of(family: tuple[Any, ...]) -> Any:
    by_kind = {"party": family[0], "person": family[1], "robot": family[2]}
    return lambda raw: by_kind[raw["kind"]["S"]]


def test_polymorphic_siblings_hold_one_lock_per_value(dynaunique_db: str) -> None:
    Party, Person, Robot = family = _family(dynaunique_db)
    Person(pk="P1", email="Ada@x.io").save()
    with pytest.raises(UniqueViolation) as caught:
        Robot(pk="R1", email="ADA@x.io", serial="r2d2").save()
    assert (caught.value.model, caught.value.owner) == ("Robot", {"PK": "P1"})
    assert lock_owners(Party) == {"UNIQ#EMAIL#ada@x.io": {"PK": "P1"}}

    # The family is one namespace for lookups: the parent finds any member's record, as the
    # member's class; a sibling does not return a record that is not one of its own.
    found = Party.get_by_unique("email", "ada@X.io")
    assert (type(found), found.pk) == (Person, "P1")
    assert Person.get_by_unique("email", "ada@x.io").pk == "P1"
    with pytest.raises(Robot.DoesNotExist, match="no Robot holds"):
        Robot.get_by_unique("email", "ada@x.io")

    # Released by the person, the value is the robot's to take.
    person = Person.get("P1")
    person.email = "countess@x.io"
    person.save()
    Robot(pk="R1", email="ada@x.io", serial="r2d2").save()
    assert lock_owners(Party) == {"UNIQ#EMAIL#ada@x.io": {"PK": "R1"},
                                  "UNIQ#EMAIL#countess@x.io": {"PK": "P1"}}
    assert type(Party.get_by_unique("email", "ada@x.io")) is Robot
    assert_clean([Party, Person, Robot], dynaunique_db, model_of=_kind_of(family))


def test_a_subclass_lookup_of_a_value_its_parent_holds_finds_nothing(dynaunique_db: str) -> None:
    """A record of the parent class itself (kind "party") is no Person: the lookup says so
    rather than fail to make one (PynamoDB refuses to build a Person from a Party item)."""
    Party, Person, _ = _family(dynaunique_db)
    Party(pk="X1", email="a@x.io").save()
    with pytest.raises(Person.DoesNotExist, match="no Person holds"):
        Person.get_by_unique("email", "a@x.io")
    assert type(Party.get_by_unique("email", "a@x.io")) is Party


@pytest.mark.anyio
async def test_a_subclass_lookup_of_a_value_its_parent_holds_finds_nothing_async(
        dynaunique_aio_db: str) -> None:
    Party, Person, _ = _family(dynaunique_aio_db)
    await Party(pk="X1", email="a@x.io").asave()
    with pytest.raises(Person.DoesNotExist, match="no Person holds"):
        await Person.aget_by_unique("email", "a@x.io")


@pytest.mark.anyio
async def test_polymorphic_siblings_hold_one_lock_per_value_async(dynaunique_aio_db: str) -> None:
    Party, Person, Robot = family = _family(dynaunique_aio_db)
    await Person(pk="P1", email="Ada@x.io").asave()
    with pytest.raises(UniqueViolation) as caught:
        await Robot(pk="R1", email="ADA@x.io").asave()
    assert (caught.value.model, caught.value.owner) == ("Robot", {"PK": "P1"})
    found = await Party.aget_by_unique("email", "ada@X.io")
    assert (type(found), found.pk) == (Person, "P1")
    with pytest.raises(Robot.DoesNotExist):
        await Robot.aget_by_unique("email", "ada@x.io")
    assert_clean([Party, Person, Robot], dynaunique_aio_db, model_of=_kind_of(family))


# --- unrelated models sharing a lock name explicitly ---------------------------------------------


def _handle(**options: Any) -> Any:
    return lambda: UnicodeAttribute(unique=True, lock_name="HANDLE", **options)


#: (User's handle, Team's handle, Team's Meta): declarations of one shared HANDLE lock.
PAIRS = {
    "plain": (_handle(), _handle(), {}),
    "casefolded": (_handle(normalize=normalizers.casefold),
                   _handle(normalize=normalizers.casefold), {}),
    "composed": (_handle(normalize=normalizers.compose(normalizers.strip, normalizers.casefold)),
                 _handle(normalize=normalizers.compose(normalizers.strip, normalizers.casefold)),
                 {}),
    "hashed": (_handle(hashed=True), _handle(hashed=True), {}),
    "one-hashed": (_handle(hashed=True), _handle(), {}),
    "one-casefolded": (_handle(normalize=normalizers.casefold), _handle(), {}),
    "two-secrets": (_handle(hashed=True), _handle(hashed=True), {"lock_secret": "other"}),
}


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_a_user_and_a_team_never_both_hold_a_handle(
        pair: str, dynaunique_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the two declarations, "Ada" cannot be a user's and a team's handle at once:
    declarations that agree share one lock; ones that do not are refused when defined."""
    monkeypatch.setenv("DYNAUNIQUE_LOCK_SECRET", "shared-secret")
    user_handle, team_handle, team_meta = PAIRS[pair]
    table = f"decl_handles_{pair}"
    user = declare("User", table, pk=pk_attr(), handle=user_handle())
    try:
        team = declare("Team", table, meta=team_meta, pk=pk_attr(), handle=team_handle())
    except ConfigurationError as refused:
        assert "Team and User both use lock name 'HANDLE'" in str(refused)
        assert pair in ("one-hashed", "one-casefolded", "two-secrets")
        return
    use_endpoint(dynaunique_db, user, team)
    create_tables(user)
    user(pk="USER#1", handle="Ada").save()
    with pytest.raises(UniqueViolation) as caught:
        team(pk="TEAM#1", handle="Ada").save()
    assert caught.value.owner == {"PK": "USER#1"}
    assert_clean([user, team], dynaunique_db,
                 model_of=lambda raw: user if raw["PK"]["S"].startswith("USER#") else team)
