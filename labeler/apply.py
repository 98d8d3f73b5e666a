"""Write a label plan: one small merge patch per changed node, a bounded number in flight."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from kubernetes.client.exceptions import ApiException

from .errors import KubeUnreachable
from .kube import CallStats, api_error, call_with_retries
from .plan import NodeChange, Plan
from .progress import Progress, quiet

Patcher = Callable[[str, dict], None]


@dataclass
class ApplyResult:
    """What was written and what was not. `unreachable`: nodes whose write got no answer (a timeout, a refused
    or dropped connection): whether it landed is unknown, so the caller reports an error, not a refusal."""

    written: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unreachable: list[str] = field(default_factory=list)
    retries: int = 0

    def to_dict(self) -> dict:
        return {"written": len(self.written), "failed": dict(sorted(self.failed.items())), "retries": self.retries}


def apply_plan(plan: Plan, patch: Patcher, concurrency: int = 16, retries: int = 5,
               patient: bool = False, progress: Progress = quiet, budget: float | None = None) -> ApplyResult:
    """Send each change through `patch(node, body)`; a failure, whatever it is, is recorded for that node and
    the rest go on, so the result always says what was written. `patient`: retry timeouts too (operator);
    `budget`: seconds within which each node's retries end (the CLI's request timeout)."""
    result = ApplyResult()
    stats = CallStats()

    def write(change: NodeChange) -> tuple[str, str | None, bool]:
        try:
            call_with_retries(lambda: patch(change.node, change.patch()), retries, stats, patient=patient,
                              budget=budget)
            return change.node, None, False
        except ApiException as exc:
            return change.node, api_error(exc), False
        except KubeUnreachable as exc:
            return change.node, str(exc), True
        except Exception as exc:  # noqa: BLE001 - one node's surprise must not hide what the others did
            return change.node, f"{type(exc).__name__}: {exc}", False

    task = progress("writing labels", len(plan.changes))
    try:
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            for node, error, unanswered in pool.map(write, plan.changes):
                task.advance()
                if error is None:
                    result.written.append(node)
                else:
                    result.failed[node] = error
                    if unanswered:
                        result.unreachable.append(node)
    finally:
        task.close()
    result.retries = stats.retries
    return result
