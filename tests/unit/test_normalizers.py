"""dynaunique.normalizers: each normalizer's exact output, and compose()'s order and identity."""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Sequence
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dynaunique import ConfigurationError, normalizers
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


# --- compose() settles, and not_fixed() finds what does not --------------------------------------


def test_compose_applies_the_chain_until_the_value_settles() -> None:
    # NFKC turns the spacing acute accent into a space and a combining acute: strip() ran too
    # early to remove that space, so the chain runs again.
    once = nfkc_casefold(strip("\u00b4"))
    assert once == " \u0301"
    assert compose(strip, nfkc_casefold)("\u00b4") == "\u0301"
    assert compose(strip, nfkc_casefold)(" \u00a8x\u00b8 ") == "\u0308x \u0327"
    assert compose(strip, nfkc_casefold)("  \uff21da ") == "ada"   # the documented example


def test_compose_refuses_a_chain_that_never_settles() -> None:
    swap = compose(str.swapcase)
    with pytest.raises(ConfigurationError) as caught:
        swap("a")
    assert str(caught.value) == (
        f"{swap!r} does not settle: after 8 applications the value still changes, so its "
        "normalizers undo one another; each must be a fixed point (n(n(x)) == n(x)) and none "
        "may reverse another's change"
    )


def test_compose_settles_on_values_not_equal_to_themselves() -> None:
    nan, signaling = float("nan"), Decimal("sNaN")
    assert compose(strip, casefold)(nan) is nan
    assert compose(strip, casefold)(signaling) is signaling


def test_not_fixed_lists_the_values_a_normalizer_does_not_settle_on() -> None:
    assert normalizers.not_fixed(str.swapcase, ["a", "B", "1"]) == ["a", "B"]
    assert normalizers.not_fixed(lambda v: strip(nfkc_casefold(v)), ["\u00b4", "a"]) == []
    assert normalizers.not_fixed(lambda v: nfkc_casefold(strip(v)), ["\u00b4", "a"]) == \
        ["\u00b4"]
    assert normalizers.not_fixed(casefold, []) == []


# --- every normalizer is a fixed point over all of Unicode ---------------------------------------
#
# Marked exhaustive (about 17 CPU-seconds over all of Unicode): CI's second pytest step runs them,
# the default run does not (tests/README.md, "Two runs"); the random strings below run in both.
#
# Not a sample: every code point, surrogates included (a str may hold one; the value check that
# refuses it runs after the normalizer). A normalizer that acts code point by code point (its
# result on a string is the concatenation of its results on the characters) is a fixed point on
# every string once it is one on every code point; the others are proven below from properties
# of single code points, plus the pairs where code points interact.

@functools.cache
def _all() -> tuple[str, ...]:
    """Every code point, in order (made when a test first needs it, not at collection, which
    every xdist worker repeats)."""
    return tuple(chr(c) for c in range(0x110000))


@functools.cache
def _casefold_acts_code_point_by_code_point() -> bool:
    """casefold of all of Unicode in one string is the casefolds of its code points, joined
    (two tests below rest on it; computed once)."""
    return casefold("".join(_all())) == "".join(c.casefold() for c in _all())


def _nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


@functools.cache
def _fold_unstable() -> frozenset[str]:
    """The code points whose case folding is not canonically equivalent to themselves."""
    return frozenset(c for c in _all() if c.casefold() != c and _nfd(c.casefold()) != _nfd(c))


@functools.cache
def _nfkc_casefolded() -> tuple[str, ...]:
    """nfkc_casefold of every code point, in code point order."""
    return tuple(map(nfkc_casefold, _all()))


@functools.cache
def _compositions() -> tuple[frozenset[str], frozenset[str], tuple[str, ...]]:
    """The characters canonical composition joins (first and second of each pair) and the
    composites it can produce (Hangul syllables included)."""
    first, second, composites = set(), set(), []
    for char in _all():
        mapping = unicodedata.decomposition(char)
        hangul = "\uac00" <= char <= "\ud7a3"   # decomposed by rule, not by the table
        if not hangul and (not mapping or mapping.startswith("<")):
            continue   # no canonical decomposition: nothing composes into it
        if unicodedata.normalize("NFC", char) != char:
            continue   # a singleton or an exclusion: composition never produces it
        composites.append(char)
        if not hangul and len(mapping.split()) == 2:
            a, b = (chr(int(h, 16)) for h in mapping.split())
            first.add(a)
            second.add(b)
    return frozenset(first), frozenset(second), tuple(composites)


def _marks() -> list[str]:
    """Every combining mark (canonical combining class > 0) and every second half of a
    canonical composition (some are starters: Hangul vowels, Indic length marks)."""
    _, second, _ = _compositions()
    return sorted({c for c in _all() if unicodedata.combining(c)} | second)


def _settles(function: normalizers.Normalizer, values: Sequence[str],
             once: Sequence[str] | None = None) -> list[str]:
    """The values (as hex) on which ``function`` is not a fixed point; ``once`` is
    ``function`` of each value, if known. Where ``function(v) == v`` the second application
    is the first again, so only the values it changes are normalized twice."""
    once = list(map(function, values)) if once is None else once
    return [" ".join(hex(ord(c)) for c in v) for v, o in zip(values, once, strict=True)
            if o != v and function(o) != o]


@pytest.mark.exhaustive
def test_casefold_and_strip_are_fixed_points_on_every_code_point_and_every_string() -> None:
    assert _settles(casefold, _all()) == []
    assert _settles(strip, _all()) == []
    # casefold acts code point by code point, so it is a fixed point on every string.
    assert _casefold_acts_code_point_by_code_point()
    # strip's result neither starts nor ends with whitespace, so strip leaves it as it is.
    assert all(not strip(c + "x" + c)[0].isspace() for c in _all())


@pytest.mark.exhaustive
def test_nfkc_casefold_is_a_fixed_point_on_every_string() -> None:
    """y = nfkc_casefold(x) = NFKC(casefold(z)) with z = NFKC(x). A second pass gives
    NFKC(casefold(NFKC(y))) = NFKC(casefold(y)), which is y when every character of y is
    fold-stable (its folding canonically equivalent to it): casefold acts code point by code
    point, so casefold(y) is then canonically equivalent to y, and NFKC of two canonically
    equivalent strings is the same (y, as y is NFKC). y's characters are those of
    NFKD(casefold(z)) — fold-stable by (1) — and the composites NFKC builds from them —
    fold-stable by (2). Both are properties of single code points, checked on all of them."""
    _, _, composites = _compositions()
    unstable = _fold_unstable()
    assert _settles(nfkc_casefold, _all(), _nfkc_casefolded()) == []
    assert _casefold_acts_code_point_by_code_point()
    # (1) what casefold makes of a character that can occur in NFKC text (such a character is
    # its own NFKC) decomposes into fold-stable characters.
    # (casefold acts code point by code point, asserted above: the characters of the casefold
    # of those characters joined are the characters of their casefolds.)
    folded = set(casefold("".join(c for c in _all() if unicodedata.is_normalized("NFKC", c))))
    assert len(folded) > 1_000_000
    # NFKD decomposes each character and reorders marks, so the characters of NFKD of the joined
    # characters are those of their NFKDs: where none is unstable, no character is; only then
    # is the list of those that are computed one by one.
    if not unstable.isdisjoint(folded) or not unstable.isdisjoint(
            unicodedata.normalize("NFKD", "".join(folded))):
        assert sorted(hex(ord(c)) for c in folded if c in unstable or unstable.intersection(
            unicodedata.normalize("NFKD", c))) == []
    # (2) a composite of fold-stable characters is fold-stable.
    assert [hex(ord(c)) for c in composites
            if not unstable.intersection(_nfd(c)) and c in unstable] == []


@pytest.mark.exhaustive
def test_nfkc_casefold_is_a_fixed_point_on_every_letter_and_mark_pair_that_composes() -> None:
    """Every character that composition can join with a following mark (it, its folding or its
    compatibility decomposition contains the first half of a composition), followed by every
    mark. The pairs are checked as one string, joined by NUL: NUL is a starter that composes
    with nothing, maps to itself and is produced from nothing else, so normalization never
    crosses it and the string's result is the pairs' results joined by NUL."""
    first, second, _ = _compositions()
    nul = "\x00"
    assert unicodedata.combining(nul) == 0 and nul not in first | second
    assert [c for c, n in zip(_all(), _nfkc_casefolded(), strict=True) if nul in n] == [nul]
    bases = [c for c, n in zip(_all(), _nfkc_casefolded(), strict=True)
             if not first.isdisjoint(unicodedata.normalize("NFKD", c)
                                     + unicodedata.normalize("NFKD", c.casefold()) + n)]
    marks = _marks()
    assert len(bases) > 2000 and len(marks) > 900
    # b m1 NUL b m2 NUL ... for each base, one join a base
    text = nul.join(b + (nul + b).join(marks) for b in bases)
    once = nfkc_casefold(text)
    twice = nfkc_casefold(once)
    if twice != once:  # name the pairs, not a 7-million-character string
        pairs = [b + m for b in bases for m in marks]
        pytest.fail(f"not fixed on {_settles(nfkc_casefold, pairs)[:20]}")


@pytest.mark.exhaustive
@pytest.mark.parametrize("composed", [
    compose(strip, nfkc_casefold),   # docs/declaring-constraints.md
    compose(strip, casefold),        # compose()'s docstring
], ids=["strip-nfkc_casefold", "strip-casefold"])
def test_the_documented_compositions_are_fixed_points(composed: Composed) -> None:
    """compose() applies the chain until it settles, so its result is a fixed point of the
    chain wherever the chain settles. For strip then a normalizer N it settles in two rounds:
    the first yields a fixed point y of N; strip(y) is one too, since whitespace is made of
    starters that take no part in canonical composition and fold to themselves, so cutting it
    off y changes nothing N would; the second round yields strip(y), which the third confirms.
    Checked on every code point and on every pair of a character whose normalized form starts
    or ends with whitespace with a mark or another such character."""
    first, second, composites = _compositions()
    spaces = [c for c in _all() if c.isspace()]
    assert all(unicodedata.combining(c) == 0 and c.casefold() == c for c in spaces)
    assert not set(spaces) & (first | second | set(composites))
    assert not {d for c in composites for d in _nfd(c)} & set(spaces)
    assert _settles(composed, _all()) == []
    edged = [c for c, n in zip(_all(), _nfkc_casefolded(), strict=True)
             if c.isspace() or n[:1].isspace() or n[-1:].isspace()]
    marks = _marks()
    assert len(edged) > 70
    pairs = [e + m for e in edged for m in marks] + [m + e for e in edged for m in marks] + \
        [e + f for e in edged for f in edged]
    assert _settles(composed, pairs) == []


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec=None), max_size=12))
def test_every_normalizer_is_a_fixed_point_on_random_strings(text: str) -> None:
    for function in (casefold, strip, nfkc_casefold, compose(strip, nfkc_casefold),
                     compose(strip, casefold)):
        once = function(text)
        assert function(once) == once
