"""`topolabel job check`: each mistake Kueue rejects or silently ignores is found, with object, path and fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kueue_config.tas.lint import Finding, LintContext, lint
from kueue_config.tas.workloads import workload_of
from testkit.tas_cluster import BLOCK, HOST, RACK, batch_job, kueue_objects, pod_template
from topolabel.cli import main

KEYS = [BLOCK, RACK, HOST]
REQ = "kueue.x-k8s.io/podset-required-topology"
PREF = "kueue.x-k8s.io/podset-preferred-topology"
UNC = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_LEVEL = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
GROUP = "kueue.x-k8s.io/podset-group-name"
LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
ANN = "spec.template.metadata.annotations"


def _findings(obj: dict, keys=KEYS, tas_only: bool | None = None) -> list[Finding]:
    return lint([workload_of(obj, "test")], LintContext((tuple(keys),) if keys else None, tas_only))


def _one(findings: list[Finding], path: str) -> Finding:
    found = [f for f in findings if f.path == path]
    assert len(found) == 1, findings
    return found[0]


def test_a_correct_job_has_no_findings() -> None:
    assert _findings(batch_job(4, {REQ: BLOCK})) == []


def test_more_than_one_mode() -> None:
    f = _one(_findings(batch_job(4, {REQ: BLOCK, PREF: RACK})), ANN)
    assert (f.severity, f.object) == ("error", "Job/train")
    assert REQ in f.message and PREF in f.message and "rejects" in f.message
    assert f.fix == "keep exactly one of required, preferred, unconstrained"


def test_annotations_on_the_job_instead_of_the_pod_template() -> None:
    job = batch_job(4, {REQ: BLOCK})
    job["metadata"]["annotations"] = {PREF: RACK}
    f = _one(_findings(job), f'metadata.annotations["{PREF}"]')
    assert f.severity == "error" and "ignores it" in f.message
    assert f.fix == f"move it to {ANN}"


def test_annotations_on_a_jobset_job_template() -> None:
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "js", "labels": {"kueue.x-k8s.io/queue-name": "gpu"}},
              "spec": {"replicatedJobs": [{"name": "w", "replicas": 2, "template": {
                  "metadata": {"annotations": {REQ: BLOCK}},
                  "spec": {"parallelism": 2, "template": pod_template(annotations={REQ: BLOCK})}}}]}}
    f = _one(_findings(jobset), f'spec.replicatedJobs[0].template.metadata.annotations["{REQ}"]')
    assert f.object == "JobSet/js"
    assert f.fix == "move it to spec.replicatedJobs[0].template.spec.template.metadata.annotations"


def test_level_not_in_the_flavors_topology() -> None:
    f = _one(_findings(batch_job(4, {REQ: "block"})), f'{ANN[:-len(".annotations")]}.annotations["{REQ}"]')
    assert "not in the Topology of any flavor" in f.message and f.effect == "pending"
    assert f.fix == f"use the label key {BLOCK}"
    g = _one(_findings(batch_job(4, {REQ: "example.com/zone"})), f'spec.template.metadata.annotations["{REQ}"]')
    assert g.fix == f"use one of {BLOCK}, {RACK}, {HOST}"


def test_level_key_over_63_characters() -> None:
    key = "example.com/" + "x" * 55
    findings = _findings(batch_job(4, {REQ: key}), keys=None)
    [f] = [f for f in findings if "63" in f.message]
    assert f.path == f'spec.template.metadata.annotations["{REQ}"]'
    assert f"is {len(key)} characters" in f.message and "at most 63" in f.fix


def test_slice_size_missing_or_not_dividing_the_pod_count() -> None:
    path = f'spec.template.metadata.annotations["{SLICE_SIZE}"]'
    f = _one(_findings(batch_job(8, {REQ: BLOCK, SLICE_LEVEL: RACK})), path)
    assert "slice size is missing" in f.message and "a divisor of the PodSet's 8 pods" in f.fix
    g = _one(_findings(batch_job(10, {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: "4"})), path)
    assert "does not divide the PodSet's 10 pods: Kueue places 8 and the other 2 never start" in g.message
    h = _one(_findings(batch_job(2, {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: "4"})), path)
    assert "must not be greater than pod set count 2" in h.message and h.effect == "rejected"
    i = _one(_findings(batch_job(8, {REQ: BLOCK, SLICE_SIZE: "4"})), path)
    assert "is not specified" in i.message and SLICE_LEVEL in i.fix
    j = _one(_findings(batch_job(8, {REQ: RACK, SLICE_LEVEL: BLOCK, SLICE_SIZE: "4"})),
             f'spec.template.metadata.annotations["{SLICE_LEVEL}"]')
    assert "is above the podset topology" in j.message and j.effect == "pending"


def test_queue_name_given_as_an_annotation() -> None:
    job = batch_job(4, {REQ: BLOCK}, queue=None)
    job["metadata"]["annotations"] = {"kueue.x-k8s.io/queue-name": "gpu"}
    f = _one(_findings(job), 'metadata.annotations["kueue.x-k8s.io/queue-name"]')
    assert f.severity == "error" and "reads only the label" in f.message
    assert f.fix == "move it to metadata.labels[kueue.x-k8s.io/queue-name]"
    g = _one(_findings(batch_job(4, {REQ: BLOCK}, queue=None)), "metadata.labels")
    assert g.severity == "warning"


def test_values_and_groups_kueue_rejects() -> None:
    f = _one(_findings(batch_job(8, {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: 4})), f'{ANN}["{SLICE_SIZE}"]')
    assert "not a string" in f.message
    g = _one(_findings(batch_job(1, {UNC: "yes"})), f'{ANN}["{UNC}"]')
    assert "must be a boolean value" in g.message
    # Kueue's Job webhook does not check groups: a group on the only PodSet is accepted and changes nothing
    [h] = [x for x in _findings(batch_job(4, {REQ: BLOCK, GROUP: "g"})) if GROUP in x.path]
    assert (h.severity, h.effect) == ("warning", "note") and "places the PodSet on its own" in h.message
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": {"name": "l", "labels": {"kueue.x-k8s.io/queue-name": "gpu"}},
           "spec": {"leaderWorkerTemplate": {"size": 4,
                                             "leaderTemplate": pod_template(annotations={REQ: BLOCK, GROUP: "g"}),
                                             "workerTemplate": pod_template(annotations={REQ: RACK, GROUP: "g"})}}}
    [m] = [x for x in _findings(lws) if "topology consistent with" in x.message]
    assert m.path == ("spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations"
                      f'["{GROUP}"], spec.leaderWorkerTemplate.workerTemplate.metadata.annotations["{GROUP}"]')


def test_a_podset_left_without_a_request_is_flagged() -> None:
    pt = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
          "metadata": {"name": "pt", "labels": {"kueue.x-k8s.io/queue-name": "gpu"}},
          "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": pod_template()},
                                           "Worker": {"replicas": 4, "template": pod_template(
                                               annotations={REQ: BLOCK})}}}}
    f = _one(_findings(pt), "spec.pytorchReplicaSpecs.Master.template.metadata.annotations")
    assert f.severity == "warning" and "another domain" in f.message


def test_check_command_exit_codes_and_json(tmp_path: Path, capsys) -> None:
    kdir = tmp_path / "kueue"
    kdir.mkdir()
    (kdir / "all.yaml").write_text(yaml.safe_dump_all(kueue_objects(KEYS)))
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(batch_job(4, {REQ: "block", PREF: RACK})))
    assert main(["job", "check", str(bad), "--kueue-dir", str(kdir), "-o", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["error"] == 2 and {f["fix"] for f in report["findings"]} == {
        "keep exactly one of required, preferred, unconstrained", f"use the label key {BLOCK}"}
    assert main(["job", "check", str(bad), "--kueue-dir", str(kdir)]) == 1
    table = " ".join(capsys.readouterr().out.split())  # the title may wrap in a narrow terminal
    assert "2 error(s), 0 warning(s)" in table and "Job/" in table
    warn = tmp_path / "warn.yaml"
    warn.write_text(yaml.safe_dump(batch_job(4, {REQ: BLOCK}, queue=None)))
    assert main(["job", "check", str(warn), "--kueue-dir", str(kdir)]) == 0
    assert main(["job", "check", str(warn), "--kueue-dir", str(kdir), "--strict"]) == 1


@pytest.mark.parametrize("text, message", [("a: [", "not valid YAML"), ("", "no workload of a supported kind")])
def test_bad_files_are_one_line_errors(tmp_path: Path, capsys, text: str, message: str) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    assert main(["job", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_check_agrees_with_kueues_validation_on_the_manifest_table() -> None:
    from testkit.tas_manifests import MANIFESTS, verdict
    assert len(MANIFESTS) >= 30
    assert {m.verdict for m in MANIFESTS} == {"accepted", "rejected", "no-workload"}
    got = {m.name: verdict(lint([workload_of(m.obj, "test")])) for m in MANIFESTS}
    assert got == {m.name: m.verdict for m in MANIFESTS}


def test_where_kueue_accepts_check_says_what_the_scheduler_does() -> None:
    from testkit.tas_manifests import MANIFESTS
    by_name = {m.name: lint([workload_of(m.obj, "test")]) for m in MANIFESTS}
    [pairs] = [f for f in by_name["PyTorchJob group of 2 and 3 pods"] if GROUP in f.path]
    assert (pairs.severity, pairs.effect) == ("error", "stuck") and "Kueue accepts it" in pairs.message
    assert "treats master as a one-pod leader: it places 1 of its 2 pods" in pairs.message
    assert "rejects" not in pairs.message
    [levels] = [f for f in by_name["PyTorchJob group with different levels"] if GROUP in f.path]
    assert levels.effect == "note" and "places both by worker's request" in levels.message
    [alone] = [f for f in by_name["group on a Job's only PodSet"] if GROUP in f.path]
    assert alone.severity == "warning" and "rejects" not in alone.message


def test_a_job_without_annotations_says_what_kueue_does_in_its_queue() -> None:
    plain = batch_job(4)
    [implied] = [f for f in _findings(plain, tas_only=True) if f.path == ANN]
    assert "implied TAS" in implied.message and "without topology" not in implied.message
    [other] = [f for f in _findings(plain, tas_only=False) if f.path == ANN]
    assert "kube-scheduler places the pods" in other.message


def test_multi_layer_levels_and_order_are_checked_against_the_topology() -> None:
    from testkit.tas_manifests import layers
    wrong_order = batch_job(8, {REQ: BLOCK, LAYERS: layers((HOST, 4), (RACK, 2))})
    [f] = [f for f in _findings(wrong_order) if f.effect == "pending"]
    assert f"additional slice layer topology {RACK} must be at a lower level than {HOST}" in f.message
    unknown = batch_job(8, {REQ: BLOCK, LAYERS: layers(("example.com/zone", 4))})
    assert [f.effect for f in _findings(unknown) if "zone" in f.message] == ["pending"]
