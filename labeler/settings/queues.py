"""How teams share the pools, as the `kueue` section of topolabel.yaml says it: ClusterQueues with quotas per
pool, Cohorts, LocalQueues per namespace.

A quota (or a borrowing or lending limit) for one resource of one pool is an `Amount`: a fixed quantity
(`64`, `1850Gi`), or a share of the pool's capacity (its nodes' summed allocatable): `{fraction: 0.5}` is
half of it, and `{fraction: 0.5, step: 8}` half of it rounded down to a multiple of 8, so one node joining
or leaving does not change the number written to Git. Without a quota a flavor gets the whole capacity.

Single values are checked by the models; references between queues, cohorts and pools by `kueue_issues`,
which reports each problem at its own path.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, Iterator, Literal, Sequence

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema, field_validator, model_validator

from ..topology.names import DNS_LABEL, DNS_SUBDOMAIN, name_problem
from .quantities import read_quantity
from .validation import Issue, Loc, did_you_mean

# Kubernetes' quantity syntax, as the Kueue CRDs check nominalQuota, without a minus sign (quotas are not negative).
QUANTITY_PATTERN = (r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
QUANTITY_SCHEMA = {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "number", "minimum": 0},
                             {"type": "string", "pattern": QUANTITY_PATTERN}],
                   "description": "A Kubernetes quantity: 64, 0.5, 1850Gi, 500m"}
TINY_WEIGHT = Decimal("1e-9")  # Kueue: a fair-sharing weight is 0 or more than this


def quantity(value: Any) -> Decimal:
    """A non-negative Kubernetes quantity from YAML (a number or a string)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 64, 0.5, 1850Gi)")
    try:
        amount = read_quantity(str(value))
    except (ValueError, InvalidOperation, TypeError):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 64, 0.5, 1850Gi)") from None
    if amount < 0:
        raise ValueError(f"{value!r} is negative")
    return amount


def _quantity_text(value: Any) -> str:
    quantity(value)
    return str(value)


def _name(limit: int, dots: bool = True) -> Any:
    def check(value: str) -> str:
        problem = name_problem(value, limit, dots)
        if problem:
            raise ValueError(problem)
        return value
    return AfterValidator(check)


Quantity = Annotated[int | float | str, AfterValidator(_quantity_text), WithJsonSchema(QUANTITY_SCHEMA)]
ObjectName = Annotated[str, _name(253), Field(json_schema_extra={"pattern": DNS_SUBDOMAIN, "maxLength": 253})]
# A LocalQueue's name is also the value of a job's kueue.x-k8s.io/queue-name label: at most 63 characters.
QueueName = Annotated[str, _name(63), Field(json_schema_extra={"pattern": DNS_SUBDOMAIN, "maxLength": 63})]
Namespace = Annotated[str, _name(63, dots=False), Field(json_schema_extra={"pattern": DNS_LABEL, "maxLength": 63})]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _amount_schema(schema: dict[str, Any]) -> None:
    """In the JSON schema an amount is a quantity or `{fraction, step}` (`value` is internal)."""
    props = schema.get("properties") or {}
    props.pop("value", None)
    share = {key: schema.pop(key) for key in ("type", "properties", "additionalProperties") if key in schema}
    schema.pop("title", None)
    schema["anyOf"] = [QUANTITY_SCHEMA, share]


class Amount(_Model):
    """A fixed quantity, or `fraction` of the pool's capacity rounded down to a multiple of `step`
    (default: whole units)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_amount_schema)
    value: Quantity | None = None
    fraction: float = Field(1.0, ge=0, le=1, description="Share of the pool's capacity, 0 to 1")
    step: Quantity | None = Field(None, description="Round down to a multiple of this (default: 1)")

    @field_validator("step")
    @classmethod
    def _positive(cls, value: str | None) -> str | None:
        if value is not None and quantity(value) == 0:
            raise ValueError("must be more than 0")
        return value

    @model_validator(mode="before")
    @classmethod
    def _scalar_is_fixed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "value" in data:
            raise ValueError("write a fixed amount as the quantity itself (64, 1850Gi), not {value: ...}")
        if isinstance(data, dict):
            return data
        return {"value": _quantity_text(data)}

    def of(self, capacity: Decimal) -> Decimal:
        """The amount for a pool with `capacity` of the resource."""
        if self.value is not None:
            return quantity(self.value)
        step = quantity(self.step) if self.step is not None else Decimal(1)
        share = capacity * Decimal(str(self.fraction))
        return (share // step) * step


Amounts = dict[str, Amount]  # resource name -> amount


class Limits(_Model):
    quota: Amounts = Field(default_factory=dict, description="nominalQuota per resource (default: the capacity)")
    borrowing_limit: Amounts = Field(default_factory=dict, alias="borrowingLimit",
                                     description="How much more than its quota it may borrow from its cohort")
    lending_limit: Amounts = Field(default_factory=dict, alias="lendingLimit",
                                   description="How much of its quota it may lend to its cohort")

    def sections(self) -> Iterator[tuple[str, Amounts]]:
        yield "quota", self.quota
        yield "borrowingLimit", self.borrowing_limit
        yield "lendingLimit", self.lending_limit


class FlavorConfig(Limits):
    """One pool in a ClusterQueue (its ResourceFlavor), in the order Kueue tries them."""

    pool: str = Field(description="The pool label's value, e.g. nvidia-h100-mega-80gb")


class BorrowWithinCohort(_Model):
    policy: Literal["Never", "LowerPriority"]
    max_priority_threshold: int | None = Field(None, alias="maxPriorityThreshold")


class Preemption(_Model):
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] | None = Field(None, alias="reclaimWithinCohort")
    borrow_within_cohort: BorrowWithinCohort | None = Field(None, alias="borrowWithinCohort")
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] | None = Field(
        None, alias="withinClusterQueue")


def _weight(value: str) -> str:
    amount = quantity(value)
    if 0 < amount <= TINY_WEIGHT:
        raise ValueError(f"{value!r}: a weight is 0 or more than 1e-9")
    return value


class FairSharing(_Model):
    weight: Annotated[Quantity, AfterValidator(_weight)]


class ClusterQueueConfig(Limits):
    """A ClusterQueue: its pools and quotas (the section's defaults apply per resource), its cohort."""

    name: ObjectName
    cohort: ObjectName | None = None
    flavors: list[FlavorConfig] | None = Field(None, description="Pools in the order Kueue tries them "
                                                                 "(default: every pool, sorted)")
    preemption: Preemption | None = None
    fair_sharing: FairSharing | None = Field(None, alias="fairSharing")
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] | None = Field(None, alias="queueingStrategy")

    def amount(self, section: str, pool: str, resource: str, default: Amounts | None = None) -> Amount | None:
        """The amount for one resource of one pool: the flavor's, else the queue's, else `default`'s."""
        flavor = next((f for f in self.flavors or [] if f.pool == pool), None)
        for source in (flavor, self):
            if source is not None:
                found = dict(source.sections())[section].get(resource)
                if found is not None:
                    return found
        return (default or {}).get(resource)


class CohortConfig(_Model):
    """A Cohort object: where it sits in the cohort tree and its fair-sharing weight."""

    name: ObjectName
    parent: ObjectName | None = None
    fair_sharing: FairSharing | None = Field(None, alias="fairSharing")


class LocalQueueConfig(_Model):
    name: QueueName
    namespaces: list[Namespace] = Field(min_length=1)
    cluster_queue: ObjectName | None = Field(None, alias="clusterQueue",
                                             description="default: kueue.clusterQueue, or the only ClusterQueue")


def kueue_issues(queues: Sequence[ClusterQueueConfig], cohorts: Sequence[CohortConfig],
                 local: Sequence[LocalQueueConfig], resources: Sequence[str], default_queue: str | None,
                 loc: Loc) -> list[Issue]:
    """References between the parts: names unique, LocalQueues naming a ClusterQueue, limits only in a
    cohort, resources among `pools.resources`, no cycle of cohorts."""
    found = _duplicates([q.name for q in queues], (*loc, "clusterQueues"))
    found += _duplicates([c.name for c in cohorts], (*loc, "cohorts"))
    for i, queue in enumerate(queues):
        found += _queue_issues(queue, resources, (*loc, "clusterQueues", i))
    names = [q.name for q in queues]
    seen: set[tuple[str, str]] = set()
    for i, lq in enumerate(local):
        target = lq.cluster_queue or default_queue
        if target is None:
            found.append(Issue((*loc, "localQueues", i, "clusterQueue"),
                               f"name its ClusterQueue: there are several ({', '.join(names)})"))
        elif target not in names:
            found.append(Issue((*loc, "localQueues", i, "clusterQueue"),
                               f"no ClusterQueue {target!r}{did_you_mean(target, names)}"))
        for ns in lq.namespaces:
            if (ns, lq.name) in seen:
                found.append(Issue((*loc, "localQueues", i), f"LocalQueue {lq.name!r} in namespace {ns!r} is "
                                                             "listed twice"))
            seen.add((ns, lq.name))
    found += _cycles(cohorts, (*loc, "cohorts"))
    return found


def _queue_issues(queue: ClusterQueueConfig, resources: Sequence[str], loc: Loc) -> list[Issue]:
    found = _duplicates([f.pool for f in queue.flavors or []], (*loc, "flavors"))
    parts: list[tuple[Loc, Limits]] = [(loc, queue)]
    parts += [((*loc, "flavors", i), f) for i, f in enumerate(queue.flavors or [])]
    for where, part in parts:
        for section, amounts in part.sections():
            for resource in amounts:
                if resource not in resources:
                    found.append(Issue((*where, section, resource), "not one of pools.resources"
                                       + did_you_mean(resource, resources)))
                elif section != "quota" and queue.cohort is None:
                    found.append(Issue((*where, section, resource), "limits need a cohort to borrow from "
                                                                    "or lend to; set cohort"))
    pre = queue.preemption
    if (pre and pre.reclaim_within_cohort == "Never" and pre.borrow_within_cohort
            and pre.borrow_within_cohort.policy != "Never"):
        found.append(Issue((*loc, "preemption", "borrowWithinCohort", "policy"),
                           "must be Never when reclaimWithinCohort is Never (Kueue refuses it)"))
    return found


def _duplicates(names: Sequence[str], loc: Loc) -> list[Issue]:
    seen: set[str] = set()
    out = []
    for i, name in enumerate(names):
        if name in seen:
            out.append(Issue((*loc, i), f"{name!r} is listed twice"))
        seen.add(name)
    return out


def _cycles(cohorts: Sequence[CohortConfig], loc: Loc) -> list[Issue]:
    """Kueue stops admitting in every member of a cohort tree with a cycle; refuse it here."""
    parent = {c.name: c.parent for c in cohorts}
    out = []
    for i, cohort in enumerate(cohorts):
        chain, current = [cohort.name], cohort.parent
        while current is not None and current not in chain:
            chain.append(current)
            current = parent.get(current)
        if current == cohort.name:
            out.append(Issue((*loc, i, "parent"), f"cohorts form a cycle: {' -> '.join([*chain, current])}"))
    return out
