"""Mistakes in declaring constraints, caught at class definition (no server)."""

from __future__ import annotations

from typing import Any

import pytest
from support.declare import declare, pk_attr

from dynaunique import (
    ConfigurationError,
    Model,
    UniqueConstraint,
    normalizers,
)
from dynaunique.attributes import (
    BinarySetAttribute,
    DiscriminatorAttribute,
    JSONAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    NumberSetAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
    UTCDateTimeAttribute,
    VersionAttribute,
)

# --- mistakes caught at class definition ---------------------------------------------------------


def test_unknown_field_in_a_constraint() -> None:
    with pytest.raises(ConfigurationError) as caught:
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_unknown"
                constraints = [UniqueConstraint(("tenant", "slgu"), name="TS")]

            pk = UnicodeAttribute(hash_key=True)
            tenant = UnicodeAttribute()
            slug = UnicodeAttribute()
    assert "'slgu'" in str(caught.value)
    assert "TS" in str(caught.value)


def test_duplicate_constraint_names_across_field_and_meta() -> None:
    with pytest.raises(ConfigurationError, match="'EMAIL' twice"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_duplicate"
                constraints = [UniqueConstraint("other", name="EMAIL")]

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True)
            other = UnicodeAttribute()


def test_duplicate_constraint_names_in_meta() -> None:
    with pytest.raises(ConfigurationError, match="'AB' twice"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_duplicate_meta"
                constraints = [UniqueConstraint(("a", "b"), name="AB"),
                               UniqueConstraint(("b", "a"), name="AB")]

            pk = UnicodeAttribute(hash_key=True)
            a = UnicodeAttribute()
            b = UnicodeAttribute()


def test_hash_sign_in_a_constraint_name() -> None:
    with pytest.raises(ConfigurationError, match="'#'"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_hash_sign"
                constraints = [UniqueConstraint(("a", "b"), name="A#B")]

            pk = UnicodeAttribute(hash_key=True)
            a = UnicodeAttribute()
            b = UnicodeAttribute()


def test_non_string_hash_key() -> None:
    with pytest.raises(ConfigurationError, match="string hash key"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_number_key"

            pk = NumberAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True)


def test_non_string_range_key() -> None:
    with pytest.raises(ConfigurationError, match="range key"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_number_range"

            pk = UnicodeAttribute(hash_key=True)
            sk = NumberAttribute(range_key=True)
            email = UnicodeAttribute(unique=True)


def test_non_string_hash_key_is_fine_without_constraints() -> None:
    class Plain(Model):
        class Meta:
            table_name = "decl_plain_number_key"

        pk = NumberAttribute(hash_key=True)

    assert Plain._du_info is not None
    assert Plain._du_info.constraints == ()


@pytest.mark.parametrize(("first_name", "second_name"), [
    (None, None), ("EMAIL", None), (None, "EMAIL")])
def test_two_models_on_one_table_may_not_share_an_implicit_lock_name(
        first_name: str | None, second_name: str | None) -> None:
    table = f"decl_clash_{first_name}_{second_name}"

    class First(Model):
        class Meta:
            table_name = table

        pk = UnicodeAttribute(hash_key=True)
        email = UnicodeAttribute(unique=True, lock_name=first_name)

    with pytest.raises(ConfigurationError) as caught:
        class Second(Model):
            class Meta:
                table_name = table

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True, lock_name=second_name)
    assert "First" in str(caught.value)
    assert "'EMAIL'" in str(caught.value)


def test_implicit_names_on_different_tables_do_not_clash() -> None:
    for table in ("decl_apart_1", "decl_apart_2"):
        class Holder(Model):
            class Meta:
                table_name = table

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True)

        assert Holder._du_info is not None


def test_two_models_may_share_a_lock_name_both_declare_explicitly() -> None:
    class First(Model):
        class Meta:
            table_name = "decl_shared_explicit"
            constraints = [UniqueConstraint("email", name="EMAIL")]

        pk = UnicodeAttribute(hash_key=True)
        email = UnicodeAttribute()

    class Second(Model):
        class Meta:
            table_name = "decl_shared_explicit"

        pk = UnicodeAttribute(hash_key=True)
        address = UnicodeAttribute(unique=True, lock_name="EMAIL")

    assert [b.name for b in Second._du_info.constraints] == ["EMAIL"]  # type: ignore[union-attr]


def test_a_refused_class_leaves_no_lock_name_registered() -> None:
    class Holder(Model):
        class Meta:
            table_name = "decl_registry_leak"

        pk = UnicodeAttribute(hash_key=True)
        handle = UnicodeAttribute(unique=True)

    with pytest.raises(ConfigurationError):
        class Refused(Model):
            class Meta:
                table_name = "decl_registry_leak"
                constraints = [UniqueConstraint("handle")]   # clashes with Holder's HANDLE

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True)   # registered before the clash was found
            handle = UnicodeAttribute()

    class Later(Model):   # Refused never existed: EMAIL is free on this table
        class Meta:
            table_name = "decl_registry_leak"

        pk = UnicodeAttribute(hash_key=True)
        email = UnicodeAttribute(unique=True)


@pytest.mark.parametrize("attribute", [
    lambda: UnicodeSetAttribute(null=True),
    lambda: MapAttribute(null=True),  # type: ignore[no-untyped-call]
    lambda: VersionAttribute(),
])
def test_constraint_on_a_set_map_or_version_attribute(attribute: Any) -> None:
    with pytest.raises(ConfigurationError, match="unique constraints take"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_kind"
                constraints = [UniqueConstraint("tags")]

            pk = UnicodeAttribute(hash_key=True)
            tags = attribute()


@pytest.mark.parametrize("attribute_class", [
    UnicodeSetAttribute,
    NumberSetAttribute,
    BinarySetAttribute,
    ListAttribute,
    JSONAttribute,
    MapAttribute,
])
def test_unique_true_on_a_set_list_or_map_attribute(attribute_class: Any) -> None:
    with pytest.raises(ConfigurationError, match="cannot be unique"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_unique_set"

            pk = UnicodeAttribute(hash_key=True)
            tags = attribute_class(unique=True)


def test_constraints_without_a_table() -> None:
    with pytest.raises(ConfigurationError, match="table_name"):
        class Bad(Model):
            class Meta:
                constraints = [UniqueConstraint("email")]

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute()


def test_something_else_in_meta_constraints() -> None:
    with pytest.raises(ConfigurationError, match="only UniqueConstraint"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_entry"
                constraints = [("email",)]

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute()


# --- models sharing a lock name must agree on what the lock means --------------------------------


def _handle(**options: Any) -> UnicodeAttribute:
    return UnicodeAttribute(unique=True, lock_name="HANDLE", **options)


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


_LAMBDA = lambda value: value  # noqa: E731 - one lambda object, shared on purpose


@pytest.mark.parametrize(("user", "team", "differs"), [
    ({"user_handle": _handle(hashed=True)}, {"team_handle": _handle()},
     "User hashes it (hashed=True) and Team does not"),
    ({"user_handle": _handle()}, {"team_handle": _handle(hashed=True)},
     "Team hashes it (hashed=True) and User does not"),
    ({"user_handle": _handle(normalize=normalizers.casefold)}, {"team_handle": _handle()},
     "Team.team_handle is normalized by nothing, User.user_handle by "
     "dynaunique.normalizers.casefold"),
    ({"user_handle": _handle(normalize=normalizers.compose(normalizers.strip,
                                                           normalizers.casefold))},
     {"team_handle": _handle(normalize=normalizers.compose(normalizers.casefold,
                                                           normalizers.strip))},
     "Team.team_handle is normalized by compose(dynaunique.normalizers.casefold, "
     "dynaunique.normalizers.strip), User.user_handle by "
     "compose(dynaunique.normalizers.strip, dynaunique.normalizers.casefold)"),
    ({"user_handle": _handle(normalize=lambda v: v)},
     {"team_handle": _handle(normalize=lambda v: v)},
     f"Team.team_handle is normalized by the lambda {__name__}.<lambda>, "
     f"User.user_handle by another lambda {__name__}.<lambda>"),
    ({"user_handle": NumberAttribute(unique=True, lock_name="HANDLE")},
     {"team_handle": _handle()},
     "Team.team_handle is stored as a string (S), User.user_handle as a number (N)"),
    ({"user_handle": UTCDateTimeAttribute(unique=True, lock_name="HANDLE")},
     {"team_handle": _handle()},
     "Team.team_handle is stored as a string (S), User.user_handle as a datetime string (S)"),
    ({"user_handle": _handle(hashed=True), "Meta": {"lock_secret": "one"}},
     {"team_handle": _handle(hashed=True), "Meta": {"lock_secret": "two"}},
     "Team and User set different Meta.lock_secret values"),
    ({"user_handle": _handle(hashed=True), "Meta": {"lock_secret": "one"}},
     {"team_handle": _handle(hashed=True)},
     "User takes its secret from Meta.lock_secret and Team from DYNAUNIQUE_LOCK_SECRET"),
], ids=["hashed-first", "hashed-second", "normalized-one", "composed-apart", "two-lambdas",
        "number-string", "datetime-string", "two-secrets", "secret-sources"])
def test_models_sharing_a_lock_name_must_declare_it_alike(
        user: dict[str, Any], team: dict[str, Any], differs: str,
        request: pytest.FixtureRequest) -> None:
    table = f"decl_share_{request.node.callspec.id}"
    user, team = dict(user), dict(team)
    declare("User", table, meta=user.pop("Meta", None), pk=pk_attr(), **user)
    with pytest.raises(ConfigurationError) as caught:
        declare("Team", table, meta=team.pop("Meta", None), pk=pk_attr(), **team)
    assert str(caught.value) == (
        f"Team and User both use lock name 'HANDLE' on table {table!r} but declare it "
        f"differently: {differs}; models sharing a lock name must agree on its fields' stored "
        "types and normalizers, on hashing and on the secret"
    )


def test_a_composite_and_a_one_field_lock_cannot_share_a_name() -> None:
    declare("User", "decl_share_arity", pk=pk_attr(), user_handle=_handle())
    with pytest.raises(ConfigurationError) as caught:
        declare("Team", "decl_share_arity", pk=pk_attr(), tenant=UnicodeAttribute(),
                name=UnicodeAttribute(),
                meta={"constraints": [UniqueConstraint(("tenant", "name"), name="HANDLE")]})
    assert "Team locks 2 fields (tenant, name), User 1 (user_handle)" in str(caught.value)


def _meta_handle(field: str, **options: Any) -> dict[str, Any]:
    return {"meta": {"constraints": [UniqueConstraint(field, name="HANDLE", **options)]},
            field: UnicodeAttribute()}


@pytest.mark.parametrize(("user", "team"), [
    # the same normalizer, per constraint or per field
    (lambda: _meta_handle("user_handle", normalize=normalizers.casefold),
     lambda: _meta_handle("team_handle", normalize={"team_handle": normalizers.casefold})),
    (lambda: {"user_handle": _handle(normalize=normalizers.casefold)},
     lambda: _meta_handle("team_handle", normalize={"team_handle": normalizers.casefold})),
    # two compose() results of the same chain
    (lambda: {"user_handle": _handle(normalize=normalizers.compose(normalizers.strip,
                                                                   normalizers.casefold))},
     lambda: {"team_handle": _handle(normalize=normalizers.compose(normalizers.strip,
                                                                   normalizers.casefold))}),
    # one lambda object, shared; one named function
    (lambda: {"user_handle": _handle(normalize=_LAMBDA)},
     lambda: {"team_handle": _handle(normalize=_LAMBDA)}),
    (lambda: {"user_handle": _handle(normalize=_lower)},
     lambda: {"team_handle": _handle(normalize=_lower)}),
    # a conditional constraint sharing a name with an unconditional one
    (lambda: {"user_handle": _handle(normalize=normalizers.casefold)},
     lambda: _meta_handle("team_handle", normalize=normalizers.casefold, condition=bool)),
    # a datetime with a datetime, a number with a number
    (lambda: {"user_handle": UTCDateTimeAttribute(unique=True, lock_name="HANDLE")},
     lambda: {"team_handle": UTCDateTimeAttribute(unique=True, lock_name="HANDLE")}),
    (lambda: {"user_handle": NumberAttribute(unique=True, lock_name="HANDLE")},
     lambda: {"team_handle": NumberAttribute(unique=True, lock_name="HANDLE")}),
    # the same secret, and the same source of it
    (lambda: {"user_handle": _handle(hashed=True), "meta": {"lock_secret": "one"}},
     lambda: {"team_handle": _handle(hashed=True), "meta": {"lock_secret": b"one"}}),
    (lambda: {"user_handle": _handle(hashed=True)},
     lambda: {"team_handle": _handle(hashed=True)}),
], ids=["per-field", "attribute-and-per-field", "composed", "one-lambda", "one-function",
        "conditional", "datetimes", "numbers", "one-secret", "env-secret"])
def test_models_sharing_a_lock_name_alike_are_accepted(
        user: Any, team: Any, request: pytest.FixtureRequest) -> None:
    table = f"decl_alike_{request.node.callspec.id}"
    user_fields, team_fields = user(), team()
    declare("User", table, pk=pk_attr(), meta=user_fields.pop("meta", None), **user_fields)
    second = declare("Team", table, pk=pk_attr(), meta=team_fields.pop("meta", None),
                     **team_fields)
    assert [b.name for b in second._du_info.constraints] == ["HANDLE"]


def test_a_redefined_model_replaces_its_earlier_declaration() -> None:
    # A reloaded module defines User again, now without hashing; Team agrees with the new one.
    declare("User", "decl_share_redefined", pk=pk_attr(), user_handle=_handle(hashed=True))
    declare("User", "decl_share_redefined", pk=pk_attr(), user_handle=_handle())
    declare("Team", "decl_share_redefined", pk=pk_attr(), team_handle=_handle())
    with pytest.raises(ConfigurationError, match="Other hashes it"):
        declare("Other", "decl_share_redefined", pk=pk_attr(),
                other_handle=_handle(hashed=True))


def test_a_model_refused_for_a_disagreement_claims_no_name() -> None:
    declare("User", "decl_share_refused", pk=pk_attr(), user_handle=_handle())
    with pytest.raises(ConfigurationError):
        declare("Team", "decl_share_refused", pk=pk_attr(), team_handle=_handle(hashed=True))
    # Team never existed: a third model agreeing with User is accepted.
    declare("Bot", "decl_share_refused", pk=pk_attr(), bot_handle=_handle())


# --- polymorphic families: one namespace ---------------------------------------------------------


def test_polymorphic_siblings_share_the_lock_name_of_a_field_they_inherit() -> None:
    class Party(Model, discriminator="party"):
        class Meta:
            table_name = "decl_family_siblings"

        pk = UnicodeAttribute(hash_key=True)
        kind = DiscriminatorAttribute()
        email = UnicodeAttribute(unique=True, normalize=normalizers.casefold, null=True)

    class Person(Party, discriminator="person"):
        pass

    class Robot(Party, discriminator="robot"):
        serial = UnicodeAttribute(null=True)

    class Android(Robot, discriminator="android"):
        pass

    for model in (Party, Person, Robot, Android):
        assert [b.name for b in model._du_info.constraints] == ["EMAIL"]  # type: ignore[attr-defined]


def test_polymorphic_siblings_share_a_constraint_of_the_parents_meta() -> None:
    class Party(Model, discriminator="party"):
        class Meta:
            table_name = "decl_family_meta"
            constraints = [UniqueConstraint("email")]

        pk = UnicodeAttribute(hash_key=True)
        kind = DiscriminatorAttribute()
        email = UnicodeAttribute(null=True)

    class Person(Party, discriminator="person"):
        pass

    class Robot(Party, discriminator="robot"):
        pass

    assert [b.name for b in Robot._du_info.constraints] == ["EMAIL"]  # type: ignore[attr-defined]


def test_siblings_declaring_their_own_implicit_names_do_not_share() -> None:
    class Party(Model, discriminator="party"):
        class Meta:
            table_name = "decl_family_own"

        pk = UnicodeAttribute(hash_key=True)
        kind = DiscriminatorAttribute()

    class Person(Party, discriminator="person"):
        email = UnicodeAttribute(unique=True, null=True)

    with pytest.raises(ConfigurationError) as caught:
        class Robot(Party, discriminator="robot"):
            email = UnicodeAttribute(unique=True, null=True)
    assert str(caught.value) == (
        "Robot and Person both use lock name 'EMAIL' on table 'decl_family_own'; two models may "
        "share a lock namespace only when both name it explicitly (lock_name= / name=)"
    )


def test_a_subclass_may_not_redeclare_its_parents_lock_differently() -> None:
    class Party(Model, discriminator="party"):
        class Meta:
            table_name = "decl_family_override"

        pk = UnicodeAttribute(hash_key=True)
        kind = DiscriminatorAttribute()
        email = UnicodeAttribute(unique=True, normalize=normalizers.casefold, null=True)

    with pytest.raises(ConfigurationError) as caught:
        class Robot(Party, discriminator="robot"):
            email = UnicodeAttribute(unique=True, null=True)
    assert "Robot.email is normalized by nothing, Party.email by " \
        "dynaunique.normalizers.casefold" in str(caught.value)


def test_a_redefined_parent_replaces_what_its_subclasses_inherited() -> None:
    # A reloaded module defines the family again, the parent first, with another normalizer.
    for normalize in (normalizers.casefold, normalizers.nfkc_casefold):
        class Party(Model, discriminator="party"):
            class Meta:
                table_name = "decl_family_reloaded"

            pk = UnicodeAttribute(hash_key=True)
            kind = DiscriminatorAttribute()
            email = UnicodeAttribute(unique=True, normalize=normalize, null=True)

        class Person(Party, discriminator="person"):
            pass

    assert Person._du_info.constraints[0].constraint.normalize is normalizers.nfkc_casefold  # type: ignore[attr-defined]


class _Suffixer:
    def __init__(self, suffix: str) -> None:
        self.suffix = suffix

    def add(self, value: Any) -> Any:
        return f"{value}{self.suffix}"


def test_normalizer_identity_is_the_import_path_else_the_object() -> None:
    from dynaunique._model.sharing import normalizer_identity

    assert normalizer_identity(normalizers.casefold) == "dynaunique.normalizers.casefold"
    assert normalizer_identity(str.casefold) == "builtins.str.casefold"
    assert normalizer_identity(normalizers.compose(normalizers.strip, str.casefold)) == (
        "compose", ("dynaunique.normalizers.strip", "builtins.str.casefold"))
    assert normalizer_identity(None) is None
    assert normalizer_identity(_LAMBDA) == ("object", _LAMBDA)
    one, two = _Suffixer("!"), _Suffixer("?")
    # Methods bound to different instances do different things under one qualified name.
    assert normalizer_identity(one.add) == ("object", one.add)
    assert normalizer_identity(one.add) != normalizer_identity(two.add)
    assert normalizer_identity(one.add) == normalizer_identity(one.add)


# --- a dynaunique attribute on a class that is not a dynaunique Model (issue 40, trap 1) -------


@pytest.mark.parametrize("options", [
    {"unique": True},
    {"unique": True, "normalize": str.lower},
    {"unique": True, "lock_name": "MAIL"},
])
def test_a_unique_attribute_on_a_plain_pynamodb_model_is_refused_as_defined(
        options: dict[str, Any]) -> None:
    # A half-converted codebase: the attribute comes from dynaunique, the class from PynamoDB,
    # whose save() writes no lock. Accepted, it would enforce nothing.
    from pynamodb.models import Model as PynamoModel

    with pytest.raises(ConfigurationError) as refused:
        class Account(PynamoModel):
            class Meta:
                table_name = "plain-accounts"

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(**options)

    message = str(refused.value)
    assert "Account.email" in message
    assert "pynamodb.models.Model" in message
    assert "dynaunique.Model" in message  # the fix


def test_a_unique_attribute_inside_a_map_attribute_class_is_refused_as_defined() -> None:
    from pynamodb.attributes import MapAttribute as PynamoMap

    with pytest.raises(ConfigurationError, match=r"Address\.street .*UniqueConstraint"):
        class Address(PynamoMap[str, Any]):
            street = UnicodeAttribute(unique=True)


def test_plain_attributes_on_a_plain_pynamodb_model_and_mixins_are_accepted() -> None:
    from pynamodb.models import Model as PynamoModel

    class Plain(PynamoModel):
        class Meta:
            table_name = "plain-accounts"

        pk = UnicodeAttribute(hash_key=True)
        email = UnicodeAttribute()

    # A plain mixin that holds a unique attribute, mixed into a dynaunique Model: the model
    # declares it (the attribute's owner at definition is the mixin, not a PynamoDB class).
    class EmailMixin:
        email = UnicodeAttribute(unique=True)

    class Account(EmailMixin, Model):
        class Meta:
            table_name = "mixin-accounts"

        pk = UnicodeAttribute(hash_key=True)

    assert Plain.email.attr_name == "email"
    assert [c.constraint.fields for c in Account._du_info.constraints] == [("email",)]


@pytest.mark.parametrize("name", ["mrsc_token", "mrsc_pending", "mrsc_at"])
@pytest.mark.parametrize("role", ["hash", "range"])
def test_a_key_attribute_named_like_an_mrsc_mark_is_refused(name: str, role: str) -> None:
    """The MRSC protocol's marks live on every lock item it writes: a key attribute so named
    would be overwritten inside the lock item (as ``owner`` or ``created`` would)."""
    with pytest.raises(ConfigurationError, match=f"stored as '{name}', a name every lock item"):
        class Bad(Model):
            class Meta:
                table_name = f"decl_bad_{role}_{name}"

            pk = UnicodeAttribute(hash_key=True, attr_name=name if role == "hash" else "PK")
            sk = UnicodeAttribute(range_key=True, attr_name=name if role == "range" else "SK")
            email = UnicodeAttribute(unique=True)
