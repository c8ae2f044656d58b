"""The UniqueViolation the Model tests provoke and the errors tests build by hand, checked once:
both expect the very same error, field by field."""

from __future__ import annotations

from dynaunique import UniqueViolation


def assert_ada_email_taken(error: UniqueViolation) -> None:
    """``error`` is Account's EMAIL violation on ada@lovelace.io, held by ACCT#a1f9c3: its
    message and every field."""
    assert str(error) == "email 'ada@lovelace.io' is already taken (held by ACCT#a1f9c3)"
    assert error.model == "Account"
    assert error.fields == ("email",)
    assert error.constraint == "EMAIL"
    assert error.value == "ada@lovelace.io"
    assert error.owner == {"PK": "ACCT#a1f9c3", "SK": "PROFILE"}
    assert error.violations == (error,)
