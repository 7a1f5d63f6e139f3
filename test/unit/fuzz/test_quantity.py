"""Kubernetes quantities (api/quantity.py): any text parses to its exact value or raises InvalidQuantity, and a byte
count is the value rounded up, refused (naming what it is) when it is a fraction of a byte, not positive or beyond
int64. The expected value is computed here from the parts the text is made of, not by parsing it again."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import example, given
from hypothesis import strategies as st

from api.quantity import INT64_MAX, InvalidQuantity, parse_bytes, parse_quantity

from .strategies import texts

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DIGITS = st.text("0123456789", min_size=1, max_size=32)


@st.composite
def quantities(draw):
    """(text, exact value, decimal exponent of the suffix) of a well-formed quantity."""
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(_DIGITS)
    frac = draw(st.one_of(st.none(), st.text("0123456789", max_size=32)))
    number = whole if frac is None else f"{whole}.{frac}"
    value = Fraction(int(whole + (frac or "")), 10 ** len(frac or ""))
    kind = draw(st.sampled_from(["binary", "decimal", "exponent"]))
    if kind == "binary":
        suffix = draw(st.sampled_from(sorted(_BINARY)))
        value, exponent = value * 2 ** _BINARY[suffix], 0
    elif kind == "decimal":
        suffix = draw(st.sampled_from(sorted(_DECIMAL)))
        exponent = _DECIMAL[suffix]
    else:
        exponent = draw(st.integers(-45, 45))
        suffix = draw(st.sampled_from(["e", "E"])) + (f"+{exponent}" if exponent >= 0 and draw(st.booleans())
                                                       else str(exponent))
    if kind != "binary":
        value *= Fraction(10) ** exponent
    pad = draw(st.sampled_from(["", " ", "\t"]))
    return pad + sign + number + suffix + pad, (-value if sign == "-" else value), exponent


@given(quantities())
@example((" 9223372036854775807.0000000001 ", Fraction(92233720368547758070000000001, 10**10), 0))
def test_a_quantity_parses_to_its_exact_value(case):
    text, value, exponent = case
    if abs(exponent) > 40:
        _refused(parse_quantity, text)
        return
    assert Fraction(parse_quantity(text)) == value


@given(quantities())
@example(("9223372036854775807.0000000001", Fraction(92233720368547758070000000001, 10**10), 0))
def test_a_byte_count_is_the_value_rounded_up_or_refused(case):
    text, value, exponent = case
    if abs(exponent) > 40 or exponent < 0 or value <= 0 or math.ceil(value) > INT64_MAX:
        assert "claim size" in _refused(lambda t: parse_bytes(t, "claim size"), text) or abs(exponent) > 40
        return
    assert parse_bytes(text) == math.ceil(value)


@given(texts)
def test_any_text_is_a_quantity_or_refused_as_one(text):
    try:
        parse_bytes(text, "spec.resources.requests.storage")
    except InvalidQuantity as e:
        assert repr(text) in str(e)
    try:
        parse_quantity(text)
    except InvalidQuantity:
        pass


def test_a_fraction_beyond_28_digits_is_not_rounded_into_int64():
    # 2**63 - 1 and a ten-billionth: its next whole byte count is 2**63, one past int64. Decimal's default 28 digits
    # of precision rounded the fraction away and let it through as 2**63 - 1.
    assert Fraction(parse_quantity("9223372036854775807.0000000001")) > INT64_MAX
    _refused(parse_bytes, "9223372036854775807.0000000001")


def test_a_binary_suffix_keeps_every_digit():
    # Found by test_a_quantity_parses_to_its_exact_value: 29 significant digits, rounded to 28.
    assert parse_quantity("9000000001Ei") == 9000000001 * 2**60


def _refused(fn, text) -> str:
    try:
        fn(text)
    except InvalidQuantity as e:
        return str(e)
    raise AssertionError(f"{text!r} was accepted")
