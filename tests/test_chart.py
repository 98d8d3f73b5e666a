"""The Helm chart (charts/topolabel): its values schema is generated from the config model and current;
`helm lint`; the default values and the ci/ variants rendered and applied with a server-side dry run to a
real API server; a real `helm install` creating every object; and no drift from the kustomize manifests.
helm is built from its Go module by hack/build-tool (.ci/setup.d/30-tools.sh)."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack import chart_files, chart_schema
from hack.image import project_version
from labeler.settings.config import Config
from providers.infiniband import DEFAULT_NAMESPACE, InfinibandOptions
from testkit.environment import ROOT
from testkit.helmrun import helm  # noqa: F401 (fixture)
from testkit.kubecluster import KubeCluster, kube, kube_cluster  # noqa: F401 (fixtures)
from topolabel.cli import parser
from topolabel.ibcollector import parse_fabric_names

CHART = ROOT / "charts" / "topolabel"
MANIFESTS = ROOT / "manifests"
KUSTOMIZATIONS = sorted(p.parent for p in MANIFESTS.glob("**/kustomization.yaml"))
VARIANTS = sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))
EXAMPLES = sorted(f"examples/{p.name}" for p in (CHART / "examples").glob("*-values.yaml"))  # per source
NAMESPACE = "topolabel-system"   # the kustomize manifests' namespace: the release namespace to compare with
HELM_LABELS = {"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version",
               "helm.sh/chart"}
VAP = "validatingadmissionpolicies.admissionregistration.k8s.io"
# The Prometheus Operator's ServiceMonitor, schemaless: enough for the API server to accept one.
SERVICE_MONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
             "names": {"kind": "ServiceMonitor", "plural": "servicemonitors", "singular": "servicemonitor",
                       "listKind": "ServiceMonitorList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def test_values_schema_is_generated_from_the_config_model() -> None:
    assert chart_schema.SCHEMA.read_text() == chart_schema.render(), "run python3 hack/chart_schema.py"
    schema = json.loads(chart_schema.SCHEMA.read_text())
    assert set(schema["properties"]["config"]["properties"]) == \
        {field.alias or name for name, field in Config.model_fields.items()}


def test_versions_agree() -> None:
    """pyproject.toml's version is the chart's appVersion (the default image tag) and the kustomizations' tag."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == project_version()
    for directory in KUSTOMIZATIONS:
        images = yaml.safe_load((directory / "kustomization.yaml").read_text())["images"]
        assert [(i["name"], i["newName"], str(i["newTag"])) for i in images] == \
            [("topolabel", "topolabel", project_version())], directory


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def template(helm: Any, *args: str) -> list[dict[str, Any]]:
    return documents(helm("template", "topolabel", str(CHART), "--namespace", NAMESPACE, *args).stdout)


def values(variant: str) -> list[str]:
    """The --values of a ci/ variant (by file name) or of an example (examples/NAME)."""
    if variant == "default":
        return []
    return ["--values", str(CHART / (variant if variant.startswith("examples/") else f"ci/{variant}"))]


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["default", *VARIANTS, *EXAMPLES])
def test_lint(helm: Any, variant: str) -> None:
    result = helm("lint", "--strict", str(CHART), *values(variant))
    assert "symbolic link" not in result.stdout + result.stderr  # the chart carries its files


@pytest.mark.slow
def test_lint_checks_config_against_the_model(helm: Any) -> None:
    result = helm("lint", str(CHART), "--set", "config.plan.maxChangeFraction=2", "--set", "config.kueue.queue=x",
                  check=False)
    assert result.returncode != 0
    assert "/config/plan/maxChangeFraction" in result.stdout and "'queue' not allowed" in result.stdout


def test_the_chart_carries_the_manifests_it_shares_as_copies() -> None:
    """crds/ and files/ hold copies of manifests/ (links make Helm print an INFO line for each)."""
    for copy, manifest in chart_files.COPIES.items():
        assert not (CHART / copy).is_symlink(), copy
        assert (CHART / copy).read_bytes() == (ROOT / manifest).read_bytes(), \
            f"{copy} differs from {manifest}: run python3 -m hack.chart_files"
    shared = {p.relative_to(CHART).as_posix() for folder in ("crds", "files") for p in (CHART / folder).iterdir()}
    assert shared == set(chart_files.COPIES)


@pytest.mark.slow
def test_the_packaged_chart_renders_the_same(helm: Any, tmp_path: Path) -> None:
    """`helm package` carries crds/ and files/."""
    helm("package", str(CHART), "--destination", str(tmp_path))
    package = tmp_path / f"topolabel-{yaml.safe_load((CHART / 'Chart.yaml').read_text())['version']}.tgz"
    args = ["--include-crds", *values("agent-values.yaml")]
    packaged = documents(helm("template", "topolabel", str(package), "--namespace", NAMESPACE, *args).stdout)
    assert packaged == template(helm, *args)


def spaced(value: Any) -> Any:
    """`value` with every run of whitespace in its strings made one space. kustomize v5 (kubectl 1.36's)
    re-folds a `>-` scalar whose lines are indented more than its first, adding blank lines to the CEL of
    the admission policy; Helm and kustomize v2 (kubectl 1.20's) keep the file's text. CEL ignores them."""
    if isinstance(value, dict):
        return {k: spaced(v) for k, v in value.items()}
    if isinstance(value, list):
        return [spaced(v) for v in value]
    return " ".join(value.split()) if isinstance(value, str) else value


def comparable(docs: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Objects by (kind, namespace, name) without Helm's bookkeeping labels and annotations, whitespace
    in strings evened out (`spaced`)."""
    out = {}
    for doc in map(spaced, docs):
        meta = doc["metadata"]
        for key, drop in (("labels", lambda k: k in HELM_LABELS), ("annotations", lambda k: k.startswith("helm.sh/"))):
            kept = {k: v for k, v in (meta.get(key) or {}).items() if not drop(k)}
            meta.pop(key, None)
            if kept:
                meta[key] = kept
        out[(doc["kind"], meta.get("namespace", ""), meta["name"])] = doc
    return out


def is_component(directory: Path) -> bool:
    return yaml.safe_load((directory / "kustomization.yaml").read_text())["kind"] == "Component"


def kustomize(cluster: KubeCluster, *directories: Path) -> list[dict[str, Any]]:  # noqa: F811
    """What `kubectl kustomize` renders of each directory; a Component (manifests/capacity) is rendered in an
    overlay of manifests/ beside it, as a user includes it, instead of manifests/ alone."""
    components = [d for d in directories if is_component(d)]
    with tempfile.TemporaryDirectory() as overlay:
        if components:
            base = os.path.relpath(MANIFESTS, overlay)
            (Path(overlay) / "kustomization.yaml").write_text(yaml.safe_dump({
                "resources": [base], "components": [os.path.relpath(c, overlay) for c in components]}))
        roots = [Path(overlay) if d == MANIFESTS and components else d for d in directories if d not in components]
        docs = [d for root in roots or [Path(overlay)]
                for d in documents(cluster.kubectl("kustomize", str(root)).stdout)]
    # `helm install --namespace topolabel-system --create-namespace` makes the release's namespace
    return [d for d in docs if not (d["kind"] == "Namespace" and d["metadata"]["name"] == NAMESPACE)]


# Kustomizations on top of manifests/ (or Components in it), and the values that render the same with the chart
PARTS = {"operator": ((), ()), "with-agent": (("agent",), ("agent",)),
         "with-ib-collector": (("ib-collector",), ("agent", "ibCollector")),  # manifests/ib-collector has ../agent
         "with-capacity": (("capacity",), ("metrics.capacity",))}


@pytest.mark.slow
@pytest.mark.parametrize("part", PARTS)
def test_default_values_render_what_kustomize_does(helm: Any, kube_cluster: KubeCluster,  # noqa: F811
                                                   part: str) -> None:
    directories, enabled = PARTS[part]
    from_kustomize = comparable(kustomize(kube_cluster, MANIFESTS, *(MANIFESTS / d for d in directories)))
    sets = [a for value in enabled for a in ("--set", f"{value}.enabled=true")]
    from_chart = comparable(template(helm, "--include-crds", "--skip-tests", *sets))
    assert sorted(from_chart) == sorted(from_kustomize)
    for key, obj in from_kustomize.items():
        assert from_chart[key] == obj, key


@pytest.mark.slow
def test_one_image_setting_names_every_container(helm: Any, kube_cluster: KubeCluster) -> None:  # noqa: F811
    rendered = template(helm, "--set", "agent.enabled=true", "--set", "ibCollector.enabled=true",
                        "--set", "image.repository=r.example/tl", "--set", "image.tag=9.9")
    assert set(container_images(rendered)) == {"r.example/tl:9.9"}
    for directory in KUSTOMIZATIONS:
        image = yaml.safe_load((directory / "kustomization.yaml").read_text())["images"][0]
        rendered = kustomize(kube_cluster, MANIFESTS, directory) if is_component(directory) else \
            kustomize(kube_cluster, directory)
        assert set(container_images(rendered)) == {f"{image['newName']}:{image['newTag']}"}


def container_images(docs: list[dict[str, Any]]) -> list[str]:
    pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] in ("Deployment", "DaemonSet")]
    return [c["image"] for pod in pods for c in pod["containers"] + pod.get("initContainers", [])]


def serves(cluster: KubeCluster, resource: str) -> bool:  # noqa: F811
    """Whether the server serves `resource` (plural.group, as `kubectl api-resources -o name` names it)."""
    return resource in cluster.kubectl("api-resources", "-o", "name").stdout.split()


@pytest.fixture
def chart_cluster(kube: KubeCluster) -> KubeCluster:  # noqa: F811
    """The chart's CRD and a ServiceMonitor CRD, as `helm install` would find them; the namespaces the
    dry runs put objects in (a dry run creates nothing, so it cannot create them)."""
    kube.kubectl("apply", "-f", str(CHART / "crds"), "-f", "-", input=json.dumps(SERVICE_MONITOR_CRD))
    kube.wait_established("topologylabelers.topolabel.dev", "servicemonitors.monitoring.coreos.com")
    for namespace in (NAMESPACE, "topolabel-agent"):
        kube.kubectl("create", "namespace", namespace, check=False)
    return kube


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["default", *VARIANTS, *EXAMPLES])
def test_variant_passes_a_server_side_dry_run(helm: Any, chart_cluster: KubeCluster, variant: str) -> None:
    extra = [] if serves(chart_cluster, VAP) else [a for v in ("agent", "ibCollector")
                                                   for a in ("--set", f"{v}.admissionPolicy.enabled=false")]
    rendered = template(helm, *values(variant), *extra)
    out = chart_cluster.kubectl("apply", "--dry-run=server", "-f", "-",
                                input=yaml.safe_dump_all(rendered)).stdout
    lines = [line for line in out.splitlines() if line.endswith("(server dry run)")]
    assert len(lines) == len(rendered), out
    kinds = {d["kind"] for d in rendered}
    expected = {"default": set(), "config-values.yaml": {"TopologyLabeler"},
                "monitoring-values.yaml": {"ServiceMonitor", "NetworkPolicy"},
                "agent-values.yaml": {"DaemonSet", "TopologyLabeler"}
                | ({"ValidatingAdmissionPolicy"} if not extra else set()),
                "ib-collector-values.yaml": {"Namespace", "Deployment", "Role", "RoleBinding"}
                | ({"ValidatingAdmissionPolicy"} if not extra else set()),
                "examples/gke-values.yaml": {"TopologyLabeler"}, "examples/eks-values.yaml": {"TopologyLabeler"},
                "examples/infiniband-values.yaml": {"TopologyLabeler", "DaemonSet", "Deployment"},
                "examples/lldp-values.yaml": {"TopologyLabeler", "DaemonSet"}}
    assert expected[variant] | {"Pod"} <= kinds  # the Pod: `helm test`'s


@pytest.mark.slow
@pytest.mark.parametrize("part", ["agent", "ibCollector"])
def test_the_admission_policy_is_refused_where_the_cluster_lacks_it(helm: Any, chart_cluster: KubeCluster,
                                                                    part: str) -> None:
    """On a cluster without ValidatingAdmissionPolicy (< 1.30) the agent and the collector need an explicit
    opt-out."""
    name = f"tl-{uuid.uuid4().hex[:6]}"
    result = helm("install", name, str(CHART), "--namespace", NAMESPACE, "--dry-run=server",
                  "--kubeconfig", str(chart_cluster.kubeconfig), "--set", f"fullnameOverride={name}",
                  "--set", f"{part}.enabled=true", "--set", f"agent.namespace={name}-agent", check=False)
    if serves(chart_cluster, VAP):
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0 and f"{part}.admissionPolicy.enabled=false" in result.stderr


@pytest.mark.slow
def test_install_creates_every_object(helm: Any, chart_cluster: KubeCluster, tmp_path: Path) -> None:
    """A real `helm install` of every option at once (names made unique: the cluster is shared)."""
    name = f"tl-{uuid.uuid4().hex[:6]}"
    args = ["--namespace", name, "--create-namespace", "--kubeconfig", str(chart_cluster.kubeconfig),
            *(a for v in VARIANTS for a in values(v)), "--set", f"fullnameOverride={name}",
            "--set", f"agent.namespace={name}-agent"]
    if not serves(chart_cluster, VAP):
        args += ["--set", "agent.admissionPolicy.enabled=false"]
    helm("install", name, str(CHART), *args)
    try:
        manifest = helm("get", "manifest", name, "--namespace", name,
                        "--kubeconfig", str(chart_cluster.kubeconfig)).stdout
        installed = documents(manifest)
        (tmp_path / "manifest.yaml").write_text(manifest)
        found = chart_cluster.kubectl("get", "-f", str(tmp_path / "manifest.yaml"), "-o", "name").stdout.split()
        assert len(found) == len(installed) >= 12
        assert {d["kind"] for d in installed} >= {"Deployment", "DaemonSet", "ServiceMonitor", "NetworkPolicy",
                                                  "TopologyLabeler", "ClusterRole", "Namespace"}
        labeler = json.loads(chart_cluster.kubectl("get", "topologylabeler", "default", "-o", "json").stdout)
        # config-values.yaml comes after agent-values.yaml and sets every key the latter does
        assert labeler["spec"] == yaml.safe_load((CHART / "ci" / "config-values.yaml").read_text())["config"]
        collector_may_only_write_its_own_objects(chart_cluster, name)
    finally:
        helm("uninstall", name, "--namespace", name, "--kubeconfig", str(chart_cluster.kubeconfig), check=False)


def collector_may_only_write_its_own_objects(cluster: KubeCluster, name: str) -> None:  # noqa: F811
    """The installed collector (release `name`) may write Leases and ConfigMaps in its namespace alone, the
    renamed admission policy keeps it to topolabel-ib-* names, and the operator reads what it publishes."""
    namespace, collector = f"{name}-agent", f"system:serviceaccount:{name}-agent:{name}-ib-collector"

    def can(user: str, verb: str, resource: str, where: str = namespace) -> bool:
        result = cluster.kubectl("auth", "can-i", verb, resource, "-n", where, "--as", user, check=False)
        return result.stdout.strip() == "yes"

    assert can(collector, "create", "leases.coordination.k8s.io") and can(collector, "delete", "configmaps")
    assert not can(collector, "list", "configmaps") and not can(collector, "create", "configmaps", "default")
    # reads by name only, the fabrics of ci/ib-collector-values.yaml (issue 32, S3)
    assert can(collector, "get", "configmaps/topolabel-ib-compute") and not can(collector, "get", "configmaps")
    operator = f"system:serviceaccount:{name}:{name}"
    assert can(operator, "list", "configmaps") and not can(operator, "create", "configmaps")
    if not serves(cluster, VAP):
        return
    labels = {"app.kubernetes.io/managed-by": "topolabel", "topolabel.dev/ib-fabric": name}
    for cm, allowed in ((f"topolabel-ib-{name}", True), (f"{name}-other", False)):
        doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm, "namespace": namespace,
                                                                     "labels": labels}}
        result = cluster.kubectl("create", "--dry-run=server", "--as", collector, "-f", "-",
                                 input=json.dumps(doc), check=False)
        assert (result.returncode == 0) == allowed, result.stderr
        if not allowed:
            assert "may only write ConfigMaps and Leases named topolabel-ib-*" in result.stderr


@pytest.mark.slow
def test_the_collector_runs_what_the_cli_accepts(helm: Any) -> None:
    """The collector's command and the operator's infiniband flags, rendered from ci/ib-collector-values.yaml,
    parse as `topolabel` parses them; the operator looks where the chart's collector publishes."""
    variant = yaml.safe_load((CHART / "ci" / "ib-collector-values.yaml").read_text())
    rendered = template(helm, *values("ib-collector-values.yaml"), "--set", "agent.namespace=fabrics")
    deployments = {d["metadata"]["name"]: d for d in rendered if d["kind"] == "Deployment"}
    pod = deployments["topolabel-ib-collector"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    args = parser().parse_args(container["command"][1:])
    assert args.ib_collector and args.ib_fabric == variant["ibCollector"]["fabrics"] and args.interval == 600
    assert list(parse_fabric_names(args.ib_fabric)) == ["compute", "storage"]
    assert container["securityContext"] == {"runAsUser": 0, "privileged": True, "readOnlyRootFilesystem": True}
    assert "rdma/rdma_shared_device_a" not in container["resources"]["limits"] and pod["hostNetwork"] is True
    assert pod["nodeSelector"] == {"node-role.example.com/infiniband": "true"}   # the default's key dropped
    assert deployments["topolabel-ib-collector"]["metadata"]["namespace"] == "fabrics"
    [operator] = deployments["topolabel"]["spec"]["template"]["spec"]["containers"]
    flags = parser().parse_args(operator["args"])
    options = InfinibandOptions(**{k: v for k, v in vars(flags).items()
                                   if k in InfinibandOptions.model_fields and v is not None})
    assert flags.source == "infiniband" and options.ib_fabric == "compute" and options.ib_namespace == "fabrics"
    assert options.ib_max_age == 3600 and options.hca_pattern == "^mlx5_[0-7]$"
    # the collector's default namespace is where the operator looks by default: no flag needed
    assert yaml.safe_load((CHART / "values.yaml").read_text())["agent"]["namespace"] == DEFAULT_NAMESPACE
    [operator] = next(d for d in template(helm, "--set", "ibCollector.enabled=true")
                      if d["kind"] == "Deployment" and d["metadata"]["name"] == "topolabel")["spec"]["template"][
        "spec"]["containers"]
    assert parser().parse_args(operator["args"]).ib_namespace is None


@pytest.mark.slow
@pytest.mark.parametrize("setting, error", [
    ("ibCollector.replicas=two", "/ibCollector/replicas"),
    ("ibCollector.fabrics[0]=Compute=^mlx5_0$", "/ibCollector/fabrics/0"),
    ("ibCollector.fabrics[0]=compute", "/ibCollector/fabrics/0"),
    ("operator.infiniband.fabric=compute=^mlx5", "/operator/infiniband/fabric"),
    ("ibCollector.privilegd=true", "'privilegd' not allowed"),
])
def test_the_values_schema_refuses_a_bad_collector_value(helm: Any, setting: str, error: str) -> None:
    flag = "--set-string" if setting.startswith("ibCollector.replicas") else "--set"
    result = helm("lint", str(CHART), "--set", "ibCollector.enabled=true", flag, setting, check=False)
    assert result.returncode != 0 and error in result.stdout, result.stdout
