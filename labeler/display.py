"""Names as people read them in a narrow space: shortened in the middle, and sorted with their numbers as
numbers. Shared by the terminal tables and the pictures of `show`."""

from __future__ import annotations

import re
from typing import Any

ELLIPSIS = "…"
_DIGITS = re.compile(r"(\d+)")


def elide(text: str, width: int) -> str:
    """`text` shortened to `width` characters by an ellipsis in the middle; unchanged when it fits. Both ends
    stay: hashes and numbered names (`gke-a4-b01-s00-n007`) differ at either end."""
    if len(text) <= width:
        return text
    if width < 3:
        return text[:width]
    head = width // 2
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + text[len(text) - tail:]


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key for names with numbers in them: b2 before b10, n009 before n010."""
    return tuple((0, int(part), part) if part.isdigit() else (1, 0, part) for part in _DIGITS.split(text) if part)
