"""api/quantity.py: Kubernetes quantities parsed exactly, byte counts range-checked."""

from __future__ import annotations

from decimal import Decimal

import pytest

from api.quantity import INT64_MAX, InvalidQuantity, parse_bytes, parse_quantity


@pytest.mark.parametrize("text, value", [
    ("3Gi", 3 * 2**30), ("1.5Gi", 3 * 2**29), ("500M", 500 * 10**6), ("1e9", 10**9), ("1E3", 1000),
    (".5Ki", 512), ("12Mi ", 12 * 2**20), ("+2k", 2000), (str(INT64_MAX), INT64_MAX),
    ("1.1Gi", 1181116007),  # a fraction of a byte rounds up, as the API server's Value() does
    ("0.5", 1),
])
def test_byte_counts(text, value):
    assert parse_bytes(text) == value


def test_exact_values():
    assert parse_quantity("1500m") == Decimal("1.5")
    assert parse_quantity("-2Ki") == -2048
    assert parse_quantity("8Ei") == 8 * 2**60


@pytest.mark.parametrize("text, says", [
    ("1500m", "fractions of a byte"), ("2u", "fractions of a byte"), ("1e-3", "fractions of a byte"),
    ("-1Gi", "greater than zero"), ("0", "greater than zero"), ("0Gi", "greater than zero"),
    ("8Ei", "int64"), (str(INT64_MAX + 1), "int64"), ("1e30", "int64"),
    ("1e999999999", "out of range"), ("abc", "not a Kubernetes quantity"), ("1K", "not a Kubernetes quantity"),
    ("", "not a Kubernetes quantity"), ("1 Gi", "not a Kubernetes quantity"), ("1Gib", "not a Kubernetes quantity"),
])
def test_refused_with_a_message_naming_the_field(text, says):
    with pytest.raises(InvalidQuantity, match=says) as e:
        parse_bytes(text, "spec.resources.requests.storage")
    if says != "not a Kubernetes quantity" and says != "out of range":
        assert "spec.resources.requests.storage" in str(e.value)
