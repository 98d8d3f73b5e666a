"""Kubernetes quantities (`500m`, `64Gi`, `1e3`): read as exact Decimals, without the Kubernetes client, and
written in the canonical short form, so sums stay exact. The one place every layer reads and writes them.

`read_quantity` is kubernetes.utils.parse_quantity's reading of a quantity (the Python client's take on
apimachinery's Quantity, quirks included: `K` as well as `k`, `mi` as 1024**-1), kept here because importing
the client for it costs a quarter of a second of every command that reads a config. tests/test_quantities.py holds
the two to the same answers.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from ..errors import TopologyError

_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20))
_EXPONENTS = {"n": -3, "u": -2, "m": -1, "K": 1, "k": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}


def read_quantity(text: str) -> Decimal:
    """The quantity's exact value; ValueError or decimal.InvalidOperation when it is not one."""
    number, suffix = text, ""
    if len(text) >= 2 and text[-1] == "i":
        if text[-2] in _EXPONENTS:
            number, suffix = text[:-2], text[-2:]
    elif text[-1:] in _EXPONENTS:
        number, suffix = text[:-1], text[-1:]
    amount = Decimal(number)
    if not suffix:
        return amount
    if suffix == "ki":  # the client refuses it (SI has no lower-case binary kilo)
        raise ValueError(text)
    return amount * (Decimal(1024 if suffix.endswith("i") else 1000) ** _EXPONENTS[suffix[0]])


def parse(value: str, origin: str = "quantity") -> Decimal:
    """A quantity (`500m`, `64Gi`, `1e3`, `2`) as an exact Decimal."""
    try:
        return read_quantity(str(value))
    except (ValueError, InvalidOperation):
        raise TopologyError(f"{origin}: {value!r} is not a Kubernetes quantity") from None


MAX_AMOUNT = Decimal(2) ** 63  # the API server keeps a quantity in an int64 (of milli-units at most)


def stored(value: str, origin: str = "quantity") -> Decimal:
    """A quantity as the API server would store it: `parse`, less what the client reads and the server
    refuses (NaN, Infinity, a number beyond int64) - those would reach arithmetic that cannot take them."""
    try:
        amount = parse(value, origin)
        if amount.is_finite() and abs(amount) <= MAX_AMOUNT:
            return amount
    except ArithmeticError:  # decimal's Overflow for an exponent beyond its range
        pass
    raise TopologyError(f"{origin}: {str(value)[:40]!r} is not a quantity the API server accepts")


def format_quantity(amount: Decimal) -> str:
    """Integers stay integers (with the largest exact binary suffix from Mi up), fractions become milli-units."""
    if amount == amount.to_integral_value():
        whole = int(amount)
        for suffix, factor in _BINARY:
            if whole and whole % factor == 0:
                return f"{whole // factor}{suffix}"
        return str(whole)
    return f"{int((amount * 1000).to_integral_value())}m"
