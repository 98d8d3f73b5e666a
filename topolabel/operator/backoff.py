"""How long to wait before retrying a failed write: 1 s, doubling to 5 min, jittered, as controller-runtime's
requeue does, so a write that failed because something was not there yet (a namespace, Kueue's webhook) heals
in seconds rather than at the next resync, and one that keeps failing does not hammer the API server."""

from __future__ import annotations

import random
from typing import Callable

BASE = 1.0
CAP = 300.0
JITTER = 0.1  # each delay is stretched by up to this share, so replicas or operators do not retry in step


class Backoff:
    def __init__(self, base: float = BASE, cap: float = CAP, jitter: float = JITTER,
                 rng: Callable[[], float] = random.random) -> None:
        self.base, self.cap, self.jitter, self.rng = base, cap, jitter, rng
        self.failures = 0

    def next(self) -> float:
        """The delay before the next retry; each call doubles the one after."""
        delay = min(self.cap, self.base * 2 ** min(self.failures, 32))
        self.failures += 1
        return min(self.cap, delay * (1 + self.jitter * self.rng()))

    def reset(self) -> None:
        """A write succeeded: the next failure waits BASE again."""
        self.failures = 0
