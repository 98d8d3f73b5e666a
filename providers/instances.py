"""Which cloud instance each node is, for the sources that ask a cloud's API about instances (oci, nebius)."""

from __future__ import annotations

from typing import Callable, Sequence

from labeler.errors import InputError
from labeler.io.nodes import Node
from labeler.topology.model import Discovery


def instances(nodes: Sequence[Node], discovery: Discovery, instance_of: Callable[[str], str],
              asking: str) -> dict[str, str]:
    """node -> instance id from `instance_of(spec.providerID)`; a node that is no instance of this cloud
    (`instance_of` raises InputError) or shares one with another is a problem (`...; cannot ask <asking>`)."""
    targets: dict[str, str] = {}
    owner: dict[str, str] = {}
    for node in sorted(nodes, key=lambda n: n.name):
        try:
            instance = instance_of(node.provider_id)
        except InputError as exc:
            discovery.problem(f"{exc}; cannot ask {asking}", node.name)
            continue
        if instance in owner:
            discovery.problem(f"instance {instance} is also node {owner[instance]}'s; left as it is", node.name)
            continue
        owner[instance] = node.name
        targets[node.name] = instance
    return targets
