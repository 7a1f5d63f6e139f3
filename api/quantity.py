"""Kubernetes quantities (`3Gi`, `1.5G`, `500M`, `1e9`), parsed in one place and range-checked where they enter.

The grammar is the API server's (`resource.Quantity`): a signed decimal number and one optional suffix, binary
(`Ki`..`Ei`), decimal (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`) or an exponent (`e3`, `E-2`). Parsing is exact
(Decimal, never float): `1.1Gi` is not rounded through a binary fraction, and 2**63 stays 2**63.

A byte count (a claim's storage request) is a positive number of bytes that fits int64, the type every size has on
its way to the engine and in CSI. A fraction of a byte is rounded up, as the API server's `Value()` does (`1.1Gi`),
but a sub-byte suffix (`1500m`: 1.5 bytes, `u`, `n`, a negative exponent) is refused: it is always a typo for `M`,
never a size anyone meant. Zero, negative sizes and sizes beyond int64 are refused too.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, localcontext

INT64_MAX = 2**63 - 1

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
# Larger exponents name numbers no int64 can hold (or zero): refused before Decimal is asked to build them.
_MAX_EXPONENT = 40


class InvalidQuantity(ValueError):
    """Not a Kubernetes quantity, or out of the range the caller accepts; the message says which and why."""


def parse_quantity(text: str) -> Decimal:
    """The exact value of a Kubernetes quantity."""
    return _parse(text)[0]


def _parse(text: str) -> tuple[Decimal, int]:
    """(value, decimal exponent of the suffix; 0 for none or a binary suffix)."""
    raw = str(text).strip()
    m = _QUANTITY.match(raw)
    if m is None:
        raise InvalidQuantity(f"{text!r} is not a Kubernetes quantity (a number with an optional suffix such as "
                              "Ki, Mi, Gi, k, M, G)")
    sign, number, suffix = m.group(1), m.group(2), m.group(3) or ""
    # Room for every digit of the number times the largest multiplier (2**60: 19 digits): with Decimal's default 28,
    # 9223372036854775807.0000000001 lost its fraction and passed as an int64.
    with localcontext() as ctx:
        ctx.prec = len(number) + 20
        value = Decimal(number)
        exponent = 0
        if suffix in _BINARY:
            value *= _BINARY[suffix]
        else:
            exponent = _DECIMAL[suffix] if suffix in _DECIMAL else int(suffix[1:])
            if abs(exponent) > _MAX_EXPONENT:
                raise InvalidQuantity(f"{text!r}: the exponent {exponent} is out of range")
            value = value.scaleb(exponent)
        return (-value if sign == "-" else value), exponent


def parse_bytes(text: str, what: str = "size") -> int:
    """A positive byte count that fits int64 (fractions rounded up), from a quantity; InvalidQuantity naming
    `what` otherwise."""
    value, exponent = _parse(text)
    if exponent < 0:
        raise InvalidQuantity(f"{what} {text!r} is given in fractions of a byte (the suffixes m, u and n are "
                              "thousandths, millionths and billionths): write it in bytes or with a suffix such "
                              "as Mi or Gi")
    if value <= 0:
        raise InvalidQuantity(f"{what} {text!r} must be greater than zero")
    value = value.to_integral_value(rounding=ROUND_CEILING)
    if value > INT64_MAX:
        raise InvalidQuantity(f"{what} {text!r} is larger than the largest size there is ({INT64_MAX} bytes, "
                              "int64)")
    return int(value)
