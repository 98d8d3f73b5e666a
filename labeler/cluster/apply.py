"""Write a label plan (or any node changes: annotations an export asks for): one small merge patch per changed
node, a bounded number in flight."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from kubernetes.client.exceptions import ApiException

from ..errors import KubeUnreachable
from ..progress import Progress, quiet
from ..topology.plan import Plan
from .kube import CallStats, api_error, call_with_retries

Patcher = Callable[[str, dict[str, Any]], None]


class Change(Protocol):
    """One node's change: the node and the merge patch that makes it (`plan.NodeChange`, `AnnotationChange`)."""

    @property
    def node(self) -> str: ...  # read-only: the changes are frozen dataclasses

    def patch(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class AnnotationChange:
    """Set one annotation on one node, touching no other key."""

    node: str
    key: str
    value: str

    def patch(self) -> dict[str, Any]:
        return {"metadata": {"annotations": {self.key: self.value}}}


def annotation_changes(current: Mapping[str, Mapping[str, str]],
                       wanted: Mapping[str, Mapping[str, str]]) -> list[AnnotationChange]:
    """The annotations of `wanted` (node -> key -> value) that nodes in `current` (node -> annotations) do not
    carry yet; nodes not in `current` are not written (a node that is gone is not re-created)."""
    return [AnnotationChange(node, key, value) for node in sorted(wanted) if node in current
            for key, value in sorted(wanted[node].items()) if current[node].get(key) != value]


@dataclass
class ApplyResult:
    """What was written and what was not. `unreachable`: nodes whose write got no answer (a timeout, a refused
    or dropped connection): whether it landed is unknown, so the caller reports an error, not a refusal."""

    written: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unreachable: list[str] = field(default_factory=list)
    retries: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"written": len(self.written), "failed": dict(sorted(self.failed.items())), "retries": self.retries}


def apply_plan(plan: Plan, patch: Patcher, concurrency: int = 16, retries: int = 5,
               patient: bool = False, progress: Progress = quiet, budget: float | None = None) -> ApplyResult:
    """Send each change of the plan through `patch(node, body)` (`apply_changes`)."""
    return apply_changes(plan.changes, patch, concurrency, retries, patient, progress, budget=budget)


def apply_changes(changes: Sequence[Change], patch: Patcher, concurrency: int = 16, retries: int = 5,
                  patient: bool = False, progress: Progress = quiet, what: str = "writing labels",
                  budget: float | None = None) -> ApplyResult:
    """Send each change through `patch(node, body)`; a failure, whatever it is, is recorded for that node and
    the rest go on, so the result always says what was written. `patient`: retry timeouts too (operator);
    `budget`: seconds within which each node's retries end (the CLI's request timeout)."""
    result = ApplyResult()
    stats = CallStats()

    def write(change: Change) -> tuple[str, str | None, bool]:
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

    task = progress(what, len(changes))
    try:
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            for node, error, unanswered in pool.map(write, changes):
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
