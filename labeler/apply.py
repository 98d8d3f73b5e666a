"""Write a label plan: one small merge patch per changed node, a bounded number in flight."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from kubernetes.client.exceptions import ApiException

from .kube import CallStats, api_error, call_with_retries
from .plan import NodeChange, Plan
from .progress import Progress, quiet

Patcher = Callable[[str, dict], None]


@dataclass
class ApplyResult:
    written: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    retries: int = 0

    def to_dict(self) -> dict:
        return {"written": len(self.written), "failed": dict(sorted(self.failed.items())), "retries": self.retries}


def apply_plan(plan: Plan, patch: Patcher, concurrency: int = 16, retries: int = 5,
               progress: Progress = quiet) -> ApplyResult:
    """Send each change through `patch(node, body)`; a failure is recorded and the rest go on."""
    result = ApplyResult()
    stats = CallStats()

    def write(change: NodeChange) -> tuple[str, str | None]:
        try:
            call_with_retries(lambda: patch(change.node, change.patch()), retries, stats)
            return change.node, None
        except ApiException as exc:
            return change.node, api_error(exc)

    task = progress("writing labels", len(plan.changes))
    try:
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            for node, error in pool.map(write, plan.changes):
                task.advance()
                if error is None:
                    result.written.append(node)
                else:
                    result.failed[node] = error
    finally:
        task.close()
    result.retries = stats.retries
    return result
