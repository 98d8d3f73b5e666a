"""Quantities read exactly as the Kubernetes Python client reads them (kueue_config keeps its own copy so
`fit`, `show` and `kueue` do not import the client)."""

from __future__ import annotations

import itertools
from decimal import Decimal, InvalidOperation

import pytest
from kubernetes.utils import parse_quantity

from labeler.errors import TopologyError
from labeler.settings.quantities import parse

NUMBERS = ["0", "1", "1.5", "100", "0.25", "1e3", "2E2", "-1", ".5", "5.", "", "abc", "1e", "0x10", " 1", "1 ",
           "+3", "Inf", "NaN", "1_000", "12345678901234567890"]
SUFFIXES = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "K", "M", "G", "T", "P", "E", "ki", "i",
            "mi", "Mb", "e", "KiB"]


def client(text: str) -> Decimal | None:
    try:
        return Decimal(parse_quantity(text))
    except (ValueError, InvalidOperation, TypeError):
        return None


def ours(text: str) -> Decimal | None:
    try:
        return parse(text)
    except TopologyError:
        return None


@pytest.mark.parametrize("text", ["".join(p) for p in itertools.product(NUMBERS, SUFFIXES)])
def test_every_form_reads_as_the_client_reads_it(text: str) -> None:
    want, got = client(text), ours(text)
    if want is not None and want.is_nan():
        assert got is not None and got.is_nan()
    else:
        assert got == want and str(got) == str(want)
