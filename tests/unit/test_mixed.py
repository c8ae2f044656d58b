"""dynaunique._write.mixed (pure): the guard that keeps a write off other models' locks, its
rendering, and how an item is checked against it in Python."""

from __future__ import annotations

from support.declare import declare, pk_attr, sk_attr
from support.mixed_models import polymorphic_family

from dynaunique._write.mixed import exactly, identity, lacking, same_model
from dynaunique._write.render import _guard_text, _Placeholders
from dynaunique._write.state import holds
from dynaunique._write.writes import Lacking, Shaped
from dynaunique.attributes import UnicodeAttribute
from dynaunique.constraints import UniqueConstraint

TABLE = "unit_mixed"
Account = declare("Account", TABLE, meta={"constraints": [
    UniqueConstraint(("tenant", "slug"), name="TENANT_SLUG")]},
    pk=pk_attr(), sk=sk_attr("PROFILE"), email=UnicodeAttribute(unique=True, null=True),
    tenant=UnicodeAttribute(null=True), slug=UnicodeAttribute(null=True))
Workspace = declare("Workspace", TABLE, pk=pk_attr(), sk=sk_attr("WORKSPACE"),
                    slug=UnicodeAttribute(unique=True, lock_name="WORKSPACE_SLUG", null=True))
Coded = declare("Coded", "unit_mixed_defaults", pk=pk_attr(), sk=sk_attr("C"),
                code=UnicodeAttribute(unique=True, null=True, default="x"))
Other = declare("Other", "unit_mixed_defaults", pk=pk_attr(), sk=sk_attr("O"),
                email=UnicodeAttribute(unique=True, null=True))
Membership = declare("Membership", TABLE, pk=pk_attr(), sk=sk_attr(),
                     role=UnicodeAttribute(null=True))
Alone = declare("Alone", "unit_mixed_alone", pk=pk_attr(),
                email=UnicodeAttribute(unique=True, null=True))
Being, Robot, Human = polymorphic_family("unit_mixed_family", "UNIT_MIXED_EMAIL")
Hooked = declare("Hooked", "unit_mixed_hooked",
                 meta={"is_record": staticmethod(lambda raw: "hooked" in raw)},
                 pk=pk_attr(), email=UnicodeAttribute(unique=True, null=True))
Unhooked = declare("Unhooked", "unit_mixed_hooked", pk=pk_attr(),
                   note=UnicodeAttribute(null=True))


def test_the_guard_covers_every_constraint_the_writer_does_not_declare() -> None:
    # (slug, tenant) is implied by (slug) and left out.
    assert lacking(Membership) == Lacking((("email",), ("slug",)))
    assert lacking(Account) == Lacking((("slug",),))
    assert lacking(Workspace) == Lacking((("email",), ("slug", "tenant")))
    assert lacking(Alone) is None


def test_a_field_with_a_default_proves_nothing_absent() -> None:
    # PynamoDB fills the default in when the attribute is absent: the item must not exist (()),
    # which implies every other group.
    assert lacking(Other) == Lacking(((),))
    assert lacking(Coded) == Lacking((("email",),))


def test_the_guard_renders_as_one_absent_field_per_constraint() -> None:
    placeholders = _Placeholders()
    text = _guard_text(Lacking(((), ("email",), ("slug", "tenant"))), "PK", placeholders)
    assert text == ("attribute_not_exists(#g0) AND attribute_not_exists(#g1) AND "
                    "(attribute_not_exists(#g2) OR attribute_not_exists(#g3))")
    assert placeholders.names == {"#g0": "PK", "#g1": "email", "#g2": "slug", "#g3": "tenant"}


def test_an_item_is_checked_against_the_guard_as_dynamodb_would() -> None:
    guard = Lacking((("email",), ("slug", "tenant")))
    assert holds(guard, None)
    assert holds(guard, {"PK": {"S": "K"}, "tenant": {"S": "t"}})
    assert not holds(guard, {"PK": {"S": "K"}, "email": {"S": "e"}})
    assert not holds(guard, {"PK": {"S": "K"}, "slug": {"S": "s"}, "tenant": {"S": "t"}})
    assert not holds(Lacking(((),)), {"PK": {"S": "K"}})
    assert holds(Lacking(((),)), None)


def test_exactly_pins_what_decides_the_model_and_its_locks() -> None:
    """Presence of every attribute the table's models know; values of the constrained ones."""
    item = {"PK": {"S": "K"}, "SK": {"S": "PROFILE"}, "email": {"S": "e"}, "extra": {"N": "1"}}
    guard = exactly(Membership, item)
    assert guard == Shaped(equal=(("email", {"S": "e"}),), present=("extra",),
                           absent=("role", "slug", "tenant"))
    assert holds(guard, {**item, "extra": {"N": "2"}})
    assert not holds(guard, {**item, "email": {"S": "f"}})
    assert not holds(guard, {**item, "role": {"S": "r"}})
    assert not holds(guard, {"PK": {"S": "K"}, "SK": {"S": "PROFILE"}, "email": {"S": "e"}})
    assert not holds(guard, None)


def test_exactly_renders_each_kind_of_term() -> None:
    placeholders = _Placeholders()
    text = _guard_text(Shaped(equal=(("email", {"S": "e"}),), present=("extra",),
                              absent=("role",)), "PK", placeholders)
    assert text == ("attribute_exists(#g0) AND #g1 = :g0 AND attribute_exists(#g2) AND "
                    "attribute_not_exists(#g3)")
    assert placeholders.values == {":g0": {"S": "e"}}


# --- identity: "still a record of the model it was read as" (task ident) ------------------------


def test_identity_is_nothing_on_a_table_one_model_uses() -> None:
    assert identity([Alone], Alone, {"PK": {"S": "K"}, "email": {"S": "e"}}) is None


def test_identity_pins_the_presence_of_what_ranks_the_models() -> None:
    """No discriminator, no hook: the claim ranks by which attributes are present. Each
    attribute a model knows is pinned (but the keys), unless the write's own guard pins it."""
    item = {"PK": {"S": "K"}, "SK": {"S": "PROFILE"}, "email": {"S": "e"}, "extra": {"N": "1"}}
    models = [Account, Workspace, Membership]
    guard = identity(models, Account, item)
    assert guard == Shaped(equal=(), present=("email",), absent=("role", "slug", "tenant"))
    assert identity(models, Account, item, ["email", "slug", "tenant"]) == Shaped(
        equal=(), present=(), absent=("role",))
    assert holds(guard, {**item, "email": {"S": "f"}, "extra": {"N": "2"}})
    assert not holds(guard, {**item, "role": {"S": "r"}})


def test_identity_of_a_family_record_is_its_discriminator() -> None:
    """A stored discriminator naming a class of the table decides alone: one term. An unknown
    one (or none) decides nothing: the presence of what only some models know is pinned too."""
    models = [Being, Robot, Human]
    robot = {"PK": {"S": "K"}, "SK": {"S": "PROFILE"}, "cls": {"S": "robot"},
             "email": {"S": "e"}}
    assert identity(models, Robot, robot) == Shaped(equal=(("cls", {"S": "robot"}),))
    assert not holds(identity(models, Robot, robot), {**robot, "cls": {"S": "human"}})
    alien = {**robot, "cls": {"S": "alien"}}
    assert identity(models, Being, alien) == Shaped(
        equal=(("cls", {"S": "alien"}),), absent=("nickname", "serial"))
    bare = {"PK": {"S": "K"}, "SK": {"S": "PROFILE"}}
    assert identity(models, Being, bare) == Shaped(
        equal=(), absent=("cls", "nickname", "serial"))


def test_identity_with_a_hook_pins_every_value() -> None:
    item = {"PK": {"S": "K"}, "hooked": {"S": "y"}, "email": {"S": "e"}}
    guard = identity([Hooked, Unhooked], Hooked, item)
    assert guard == exactly(Hooked, item, [Hooked, Unhooked])
    assert guard == Shaped(equal=(("email", {"S": "e"}), ("hooked", {"S": "y"})),
                           absent=("note",))


def test_same_model_asks_the_claim_of_both_items() -> None:
    account = {"PK": {"S": "K"}, "SK": {"S": "PROFILE"}, "email": {"S": "e"}}
    membership = {"PK": {"S": "K"}, "SK": {"S": "PROFILE"}, "role": {"S": "r"}}
    assert same_model(Account, account, {**account, "email": {"S": "f"}})
    assert not same_model(Account, account, membership)
