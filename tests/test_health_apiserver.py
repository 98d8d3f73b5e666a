"""Fabric health by `topolabel run` on a real Kubernetes 1.36 control plane, as user `topolabel-operator` bound
only to the manifests' ClusterRole: the FabricHealthy condition and the taint written by field manager
`topolabel`, taints and conditions someone else set never removed, a restart that keeps an isolation for its
clean period, and health turned off taking away only what topolabel wrote. The evidence is what the operator
reads on a cluster: the agents' port records (annotations) and another tool's node condition."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from kubernetes import client

from testkit.environment import ROOT
from testkit.kubecluster import KubeCluster, kube, kube_cluster  # noqa: F401
from testkit.operatorrun import InThread, wait_until
from topolabel.operator.settings import RunOptions

pytestmark = pytest.mark.slow
MANIFESTS = ROOT / "manifests"
OPERATOR = "topolabel-operator"
NAMES = [f"gpu-{i:02d}" for i in range(20)]
FLAP, DOWN, FOREIGN, HANDWRITTEN = "gpu-01", "gpu-02", "gpu-05", "gpu-07"
OURS = {"key": "topolabel.dev/fabric-degraded", "effect": "NoSchedule"}
RECOVER = 10.0  # long enough for a restart under load to find gpu-01 still isolated


def record(up: int = 8) -> str:
    """An agent's port record: 8 NDR ports, the last `8 - up` of them down."""
    return json.dumps({"v": 1, "ports": [[f"mlx5_{i}", 1, 4 if i < up else 1, 5 if i < up else 3, 400, {}]
                                         for i in range(8)]}, separators=(",", ":"))


@pytest.fixture
def cluster(kube: KubeCluster, tmp_path: Path) -> Iterator[KubeCluster]:  # noqa: F811
    """20 Ready nodes in 4 racks with the agents' port records; gpu-05 carries two taints set by hand, one of them
    with topolabel's key; gpu-01 another taint."""
    kube.bind_operator(MANIFESTS)
    taints = {FOREIGN: [{"key": "example.com/maintenance", "effect": "NoExecute"}, dict(OURS)],
              FLAP: [{"key": "example.com/other", "effect": "NoSchedule"}]}
    kube.create_nodes([{"apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n},
                                     "annotations": {"topolabel.dev/ib-port-health": record()}},
                        "spec": {"taints": taints.get(n, [])},
                        "status": {"conditions": [{"type": "Ready", "status": "True"}]}} for n in NAMES])
    yield kube


def report(cluster: KubeCluster, name: str, status: str, reason: str, message: str = "",  # noqa: F811
           type_: str = "NVSentinelIBLinkFlap") -> None:
    """Another tool's condition, written as such tools write it: a strategic merge patch of the status (by type)."""
    client.CoreV1Api(cluster.api()).patch_node_status(
        name, {"status": {"conditions": [{"type": type_, "status": status, "reason": reason, "message": message}]}},
        _content_type="application/strategic-merge-patch+json", _preload_content=False)


def config(tmp_path: Path, enabled: bool = True) -> str:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump({"levels": ["rack"], "hosts": [{"node": n, "rack": f"r{i // 5}"}
                                                                       for i, n in enumerate(NAMES)]}))
    path = tmp_path / "topolabel.yaml"
    path.write_text(yaml.safe_dump({"source": {"type": "inventory", "inventory": str(inventory)},
                                    "health": {"enabled": enabled, "degradeAfter": 2, "recoverAfter": RECOVER,
                                               "maxIsolatedFraction": 0.2, "taint": {"effect": "NoSchedule"},
                                               "conditions": [{"type": "NVSentinelIBLinkFlap", "status": "True"}]}}))
    return str(path)


def operator(cluster: KubeCluster, path: str) -> InThread:  # noqa: F811
    return InThread(RunOptions(kubeconfig=str(cluster.operator_kubeconfig), config_path=path, http_host="127.0.0.1",
                               http_port=0, debounce=0.2, resync=1.0))


def nodes(cluster: KubeCluster) -> dict[str, dict[str, Any]]:  # noqa: F811
    items = json.loads(cluster.kubectl("get", "nodes", "-o", "json", "--show-managed-fields").stdout)["items"]
    return {n["metadata"]["name"]: n for n in items}


def health(node: dict[str, Any]) -> tuple[str, str, str] | None:
    found = next((c for c in node["status"].get("conditions") or [] if c["type"] == "FabricHealthy"), None)
    return (found["status"], found["reason"], found["message"]) if found else None


def taints(node: dict[str, Any]) -> list[dict[str, str]]:
    return [{k: t[k] for k in ("key", "effect")} for t in node["spec"].get("taints") or []]


def isolated(cluster: KubeCluster) -> set[str]:  # noqa: F811
    return {name for name, n in nodes(cluster).items() if (health(n) or ("",))[0] == "False"}


def owners(node: dict[str, Any], path: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """(manager, operation, subresource) of the managedFields entries that hold the field at `path`."""
    out = []
    for entry in node["metadata"]["managedFields"]:
        fields = entry.get("fieldsV1") or {}
        for part in path:
            fields = fields.get(part) if isinstance(fields, dict) else None
        if fields is not None:
            out.append((entry["manager"], entry["operation"], entry.get("subresource", "")))
    return out


def test_conditions_and_taints_by_topolabels_field_manager_and_nothing_else_removed(
        cluster: KubeCluster, tmp_path: Path) -> None:  # noqa: F811
    path = config(tmp_path)
    mark = cluster.audit_mark()
    report(cluster, FLAP, "True", "LinkFlapping", "mlx5_3 went down 4 times")
    cluster.kubectl("annotate", "node", DOWN, "--overwrite", f"topolabel.dev/ib-port-health={record(up=7)}")
    with operator(cluster, path) as op:
        wait_until(lambda: isolated(cluster) == {FLAP, DOWN}, 60, "gpu-01 and gpu-02 isolated")
        op.wait_passes(op.passes() + 2)
        seen = nodes(cluster)
        assert health(seen[FLAP]) == ("False", "FabricDegraded", "condition NVSentinelIBLinkFlap=True (LinkFlapping: "
                                                                 "mlx5_3 went down 4 times)")
        assert health(seen[DOWN]) == ("False", "FabricDegraded", "7 of its InfiniBand ports up, most nodes have 8: "
                                                                 "mlx5_7/1 DOWN/Disabled")
        assert {n: health(seen[n]) for n in NAMES if n not in (FLAP, DOWN)} == \
            {n: ("True", "FabricOK", "no fabric problem seen") for n in NAMES if n not in (FLAP, DOWN)}
        # the condition by strategic merge patch of the status, as topolabel; the other tool's stays its own
        key = ("f:status", "f:conditions", 'k:{"type":"FabricHealthy"}')
        assert owners(seen[FLAP], key) == [("topolabel", "Update", "status")]
        others = owners(seen[FLAP], ("f:status", "f:conditions", 'k:{"type":"NVSentinelIBLinkFlap"}'))
        assert len(others) == 1 and others[0][0] != "topolabel"
        # the taint added beside the one someone else set, and claimed in topolabel's annotation
        assert taints(seen[FLAP]) == [{"key": "example.com/other", "effect": "NoSchedule"}, OURS]
        assert seen[FLAP]["metadata"]["annotations"]["topolabel.dev/managed-taints"] == \
            "topolabel.dev/fabric-degraded:NoSchedule"
        assert ("topolabel", "Update", "") in owners(seen[FLAP], ("f:spec", "f:taints"))
        # taints set by hand, one with topolabel's own key, on a healthy node: untouched and not claimed
        assert taints(seen[FOREIGN]) == [{"key": "example.com/maintenance", "effect": "NoExecute"}, OURS]
        assert "topolabel.dev/managed-taints" not in seen[FOREIGN]["metadata"]["annotations"]
        # steady: passes that find nothing new write nothing
        quiet = cluster.audit_mark()
        op.wait_passes(op.passes() + 2)
        assert [e for e in cluster.requests(quiet, user=OPERATOR) if e.resource == "nodes" and e.verb == "patch"] == []
        assert op.sample("topolabel_fabric_nodes", state="isolated") == 2
        assert op.sample("topolabel_fabric_isolated_nodes", scope="node") == 2

    # evidence gone while the operator is down: the restarted one keeps the isolation for the clean period
    report(cluster, FLAP, "False", "LinkStable")
    with operator(cluster, path) as op:
        op.wait_passes(1)
        assert isolated(cluster) == {FLAP, DOWN}
        assert health(nodes(cluster)[FLAP])[2].startswith("recovering: last bad observation")
        wait_until(lambda: isolated(cluster) == {DOWN}, 30, "gpu-01 healthy again after the clean period")
        seen = nodes(cluster)
        assert taints(seen[FLAP]) == [{"key": "example.com/other", "effect": "NoSchedule"}]
        assert "topolabel.dev/managed-taints" not in seen[FLAP]["metadata"]["annotations"]
        assert health(seen[FLAP])[:2] == ("True", "FabricOK")

    # health off: topolabel's conditions and taints go, the ones others wrote stay (a FabricHealthy written by
    # hand meanwhile, too)
    report(cluster, HANDWRITTEN, "True", "ByHand", "checked by a person", type_="FabricHealthy")
    with operator(cluster, config(tmp_path, enabled=False)) as op:
        wait_until(lambda: all(health(n) is None for name, n in nodes(cluster).items() if name != HANDWRITTEN), 30,
                   "topolabel's conditions removed")
        op.wait_passes(op.passes() + 1)
        seen = nodes(cluster)
        assert taints(seen[DOWN]) == [] and health(seen[HANDWRITTEN]) == ("True", "ByHand", "checked by a person")
        assert taints(seen[FOREIGN]) == [{"key": "example.com/maintenance", "effect": "NoExecute"}, OURS]
        assert taints(seen[FLAP]) == [{"key": "example.com/other", "effect": "NoSchedule"}]
    refused = [(e.verb, e.resource, e.subresource, e.name, e.code) for e in cluster.requests(mark, user=OPERATOR)
               if e.code >= 400 and e.resource in ("nodes",)]
    assert refused == []  # the manifests' ClusterRole is enough, and no patch conflicted
