"""What the cloud sources share: reading a node's providerID, batching ids, one worker per region or zone."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Hashable, Iterable, Sequence, TypeVar

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")
T = TypeVar("T")


def provider_path(provider_id: str, scheme: str) -> list[str] | None:
    """The '/'-separated parts after `scheme://`, or None for another cloud's (or no) providerID.

    `aws:///us-east-1a/i-0abc` gives `['', 'us-east-1a', 'i-0abc']`; `gce://proj/us-central1-a/vm-1` gives
    `['proj', 'us-central1-a', 'vm-1']`. Empty parts are kept so a caller can tell which ones were left out.
    """
    prefix = f"{scheme}://"
    if not provider_id.startswith(prefix):
        return None
    return provider_id[len(prefix):].split("/")


def chunked(items: Sequence[T], size: int) -> list[list[T]]:
    """`items` in consecutive lists of at most `size` (APIs that cap the ids per request)."""
    if size < 1:
        raise ValueError(f"chunk size must be at least 1, not {size}")
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def per_key(fn: Callable[[K], R], keys: Iterable[K], max_workers: int = 16) -> tuple[dict[K, R], dict[K, Exception]]:
    """Run `fn(key)` for every key (region, zone) in a thread pool: the answers and the failures per key.

    Failures are collected rather than raised at the first one, so a caller can name every region that
    failed in one error instead of the one that happened to fail first.
    """
    keys = list(dict.fromkeys(keys))
    answers: dict[K, R] = {}
    failures: dict[K, Exception] = {}
    if not keys:
        return answers, failures
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(keys)))) as pool:
        futures = {key: pool.submit(fn, key) for key in keys}
        for key, future in futures.items():
            try:
                answers[key] = future.result()
            except Exception as exc:  # noqa: BLE001 - handed back to the caller, who decides what it means
                failures[key] = exc
    return answers, failures
