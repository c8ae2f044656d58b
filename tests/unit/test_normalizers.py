"""dynaunique.normalizers: each normalizer's exact output, and compose()'s order and identity."""

from __future__ import annotations

from decimal import Decimal

import pytest

from dynaunique import normalizers
from dynaunique.normalizers import Composed, casefold, compose, nfkc_casefold, strip


def test_casefold_lowers_and_folds_special_cases() -> None:
    assert casefold("Ada@Lovelace.IO") == "ada@lovelace.io"
    # casefold, not lower: the German sharp s folds to "ss".
    assert casefold("Straße") == "strasse"
    assert "Straße".lower() == "straße"


def test_casefold_keeps_width_variants_apart() -> None:
    assert casefold("ＡＤＡ") == "ａｄａ"
    assert casefold("ＡＤＡ") != "ada"


def test_nfkc_casefold_equates_full_width_and_ascii() -> None:
    assert nfkc_casefold("ＡＤＡ＠Ｘ．ＩＯ") == "ada@x.io"
    assert nfkc_casefold("ﬁle") == "file"
    assert nfkc_casefold("Straße") == "strasse"


def test_nfkc_casefold_renormalizes_after_folding() -> None:
    # U+1E9B U+0323 folds to s-dot-above + combining dot below; the second NFKC recomposes it.
    assert nfkc_casefold("\u1e9b\u0323") == "\u1e69"
    assert casefold("\u1e9b\u0323") == "\u1e61\u0323"


def test_strip_removes_surrounding_whitespace_only() -> None:
    assert strip("  ada lovelace \t\n") == "ada lovelace"
    assert strip("ada") == "ada"


@pytest.mark.parametrize("function", [casefold, nfkc_casefold, strip])
@pytest.mark.parametrize("value", [5, Decimal("1.5"), b"AB ", True, None])
def test_non_strings_pass_through_untouched(function: normalizers.Normalizer,
                                            value: object) -> None:
    assert function(value) is value


def test_compose_applies_left_to_right() -> None:
    def upper(value: str) -> str:
        return value.upper()

    assert compose(casefold, upper)("aB") == "AB"
    assert compose(upper, casefold)("aB") == "ab"
    assert compose(strip, casefold)("  AdA@X.io ") == "ada@x.io"


def test_compose_of_one_function_is_that_function() -> None:
    assert compose(strip)("  x ") == "x"


def test_compose_is_a_comparable_hashable_value_with_a_readable_repr() -> None:
    first = compose(strip, casefold)
    assert isinstance(first, Composed)
    assert first == compose(strip, casefold)
    assert hash(first) == hash(compose(strip, casefold))
    assert first != compose(casefold, strip)
    assert first.functions == (strip, casefold)
    assert repr(first) == f"Composed(functions=({strip!r}, {casefold!r}))"


def test_compose_refuses_nothing_and_non_callables() -> None:
    with pytest.raises(TypeError, match="at least one normalizer"):
        compose()
    with pytest.raises(TypeError, match="takes callables"):
        compose(strip, "casefold")  # type: ignore[arg-type]


def test_compose_is_frozen() -> None:
    composed = compose(strip)
    with pytest.raises(AttributeError):
        composed.functions = (casefold,)  # type: ignore[misc]
