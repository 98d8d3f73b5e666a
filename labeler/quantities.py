"""Kubernetes quantities (`500m`, `64Gi`, `1e3`) read as exact Decimals, without the Kubernetes client.

kubernetes.utils.parse_quantity's reading of a quantity (the Python client's take on apimachinery's
Quantity, quirks included: `K` as well as `k`, `mi` as 1024**-1), kept here because importing the client
for it costs a quarter of a second of every command that reads a config. tests/test_quantities.py holds
the two to the same answers.
"""

from __future__ import annotations

from decimal import Decimal

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
