"""Kubernetes resource quantities: parse any form, write the canonical short form, so sums stay exact."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from labeler.errors import TopologyError
from labeler.quantities import read_quantity

_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20))


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
