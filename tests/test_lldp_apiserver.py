"""The agent's RBAC on a real kube-apiserver 1.36 (testkit/kubecluster.py): the ClusterRole in manifests/agent
lets the agent's ServiceAccount send its one merge patch and nothing else, and the DaemonSet passes a
server-side dry run.

The admission policy is left out here, to show what RBAC alone allows: a patch to any Node, which is why
manifests/agent has the policy (enforced by the server in tests/test_agent_policy_apiserver.py).
"""

from __future__ import annotations

import json

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from labeler.cluster.kube import call_with_retries, connect, patch_node
from providers.lldp.facts import ANNOTATION, Neighbor, to_json
from testkit.environment import ROOT
from testkit.kubecluster import KubeCluster, kube, kube_cluster  # noqa: F401
from topolabel.agent import Agent, annotation_patch

pytestmark = pytest.mark.slow
AGENT = ROOT / "manifests" / "agent"
SA = yaml.safe_load((AGENT / "serviceaccount.yaml").read_text())["metadata"]
USER = f"system:serviceaccount:{SA['namespace']}:{SA['name']}"
# the groups a real ServiceAccount token carries (for `kubectl auth can-i`)
GROUPS = ("system:serviceaccounts", f"system:serviceaccounts:{SA['namespace']}", "system:authenticated")
FACTS = to_json([Neighbor("eth0", "leaf-r01", "56:6c:21:32:03:8b", "swp1", "swp1")])


@pytest.fixture
def agent_rbac(kube: KubeCluster) -> KubeCluster:  # noqa: F811
    """The agent's namespace, ServiceAccount and RBAC from manifests/agent; two Nodes."""
    kube.kubectl("apply", *(a for f in ("namespace.yaml", "serviceaccount.yaml", "rbac.yaml")
                            for a in ("-f", str(AGENT / f))))
    kube.create_nodes([{"apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
                                     "annotations": {"example.com/keep": "me"}}} for name in ("gpu-a", "gpu-b")])
    return kube


def as_agent(cluster: KubeCluster) -> client.ApiClient:
    """An API client that the server treats as the agent's ServiceAccount (admin impersonating it)."""
    api = connect(str(cluster.kubeconfig))
    api.set_default_header("Impersonate-User", USER)  # the server adds system:authenticated
    return api


def can(cluster: KubeCluster, *args: str) -> bool:  # noqa: F811
    result = cluster.kubectl("auth", "can-i", *args, f"--as={USER}", *(f"--as-group={g}" for g in GROUPS),
                             check=False)
    return result.stdout.strip() == "yes"


def test_the_agents_patch_is_all_its_role_allows(agent_rbac: KubeCluster) -> None:
    cluster = agent_rbac
    api = as_agent(cluster)
    agent = Agent(lambda: FACTS, lambda value: call_with_retries(
        lambda: patch_node(api, "gpu-a", annotation_patch({ANNOTATION: value}))))
    mark = cluster.audit_mark()
    assert agent.round()
    assert [(e.verb, e.name, e.code) for e in cluster.requests(mark, resource="nodes")] == [("patch", "gpu-a", 200)]
    core = client.CoreV1Api(cluster.api())
    node = json.loads(core.read_node("gpu-a", _preload_content=False).data)
    assert node["metadata"]["annotations"] == {"example.com/keep": "me", ANNOTATION: FACTS}
    assert node["metadata"]["labels"] == {"kubernetes.io/hostname": "gpu-a"}

    agent_core = client.CoreV1Api(api)
    for call in (lambda: agent_core.read_node("gpu-a"), lambda: agent_core.list_node(),
                 lambda: agent_core.delete_node("gpu-b"),
                 lambda: agent_core.patch_node_status("gpu-a", {"status": {"phase": "x"}})):
        with pytest.raises(ApiException) as denied:
            call()
        assert denied.value.status == 403

    assert can(cluster, "patch", "nodes")
    for verb, resource, *extra in (("get", "nodes"), ("list", "nodes"), ("watch", "nodes"), ("update", "nodes"),
                                   ("create", "nodes"), ("delete", "nodes"), ("patch", "nodes", "--subresource=status"),
                                   ("get", "pods", "-A"), ("get", "secrets", "-A"), ("patch", "pods", "-A")):
        assert not can(cluster, verb, resource, *extra), f"the agent may {verb} {resource} {' '.join(extra)}"


def test_rbac_alone_lets_it_patch_any_node(agent_rbac: KubeCluster) -> None:
    # the reason for the admission policy: RBAC cannot tell the agent's own Node from another
    patch_node(as_agent(agent_rbac), "gpu-b", annotation_patch({ANNOTATION: FACTS}))


def test_the_daemonset_passes_a_server_side_dry_run(agent_rbac: KubeCluster) -> None:
    out = agent_rbac.kubectl("apply", "--dry-run=server", "-f", str(AGENT / "daemonset.yaml")).stdout
    assert "daemonset.apps/topolabel-agent created (server dry run)" in out
