"""`topolabel job annotate`: every kind gets its queue label and TAS annotations where Kueue reads them."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from kueue_config.tas import jobfile
from kueue_config.tas.workloads import workloads_in
from testkit.tas_cluster import BLOCK, HOST, RACK, kueue_objects
from testkit.tas_jobs import KINDS, SCHEMAS
from topolabel.cli import main

REQ = "kueue.x-k8s.io/podset-required-topology"
PREF = "kueue.x-k8s.io/podset-preferred-topology"
GROUP = "kueue.x-k8s.io/podset-group-name"
SLICE_LEVEL = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
QUEUE = "kueue.x-k8s.io/queue-name"


@pytest.fixture
def kueue_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "kueue"
    directory.mkdir()
    for i, obj in enumerate(kueue_objects([BLOCK, RACK, HOST])):
        (directory / f"{i}.yaml").write_text(yaml.safe_dump(obj))
    return directory


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def _templates(kind: str, obj: dict) -> dict[str, dict]:
    """Pod templates by PodSet name, found by hand-written paths (not by the code under test)."""
    spec = obj["spec"]
    if kind == "Job":
        return {"main": spec["template"]}
    if kind == "JobSet":
        return {rj["name"]: rj["template"]["spec"]["template"] for rj in spec["replicatedJobs"]}
    if kind == "PyTorchJob":
        return {k.lower(): v["template"] for k, v in spec["pytorchReplicaSpecs"].items()}
    if kind == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        return {"leader": lwt["leaderTemplate"], "worker": lwt["workerTemplate"]}
    ray = spec.get("rayClusterSpec", spec)
    return {"head": ray["headGroupSpec"]["template"],
            **{g["groupName"].lower(): g["template"] for g in ray["workerGroupSpecs"]}}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_pod_counts_follow_kueue(kind: str) -> None:
    text, expected, workloads = KINDS[kind]
    [w] = workloads_in(jobfile.load(text, kind), kind)
    assert [(ps.name, ps.count) for ps in w.podsets] == expected
    assert w.workloads == workloads


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_annotated_then_checked_passes_validates_and_keeps_comments(kind: str, tmp_path: Path,
                                                                   kueue_dir: Path, capsys) -> None:
    text = KINDS[kind][0]
    path = _write(tmp_path, text)
    assert main(["job", "annotate", str(path), "--queue", "gpu", "--within", "block",
                 "--kueue-dir", str(kueue_dir), "-i"]) == 0
    out = path.read_text()
    for line in text.splitlines():
        if "#" in line and "kueue.x-k8s.io/podset" not in line:  # misplaced TAS keys are removed on purpose
            assert line.split("#", 1)[1] in out, f"comment lost: {line}"
    obj = yaml.safe_load(out)
    jsonschema.validate(obj, SCHEMAS[kind])
    assert list(obj) == list(yaml.safe_load(text))  # top-level key order kept
    assert obj["metadata"]["labels"][QUEUE] == "gpu"
    assert "annotations" not in obj["metadata"] or not any(k.startswith("kueue.x-k8s.io/podset")
                                                          for k in obj["metadata"]["annotations"])
    for name, template in _templates(kind, obj).items():
        assert template["metadata"]["annotations"][REQ] == BLOCK, name
        assert PREF not in template["metadata"]["annotations"]
    capsys.readouterr()
    assert main(["job", "check", str(path), "--kueue-dir", str(kueue_dir), "--strict", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []


def test_groups_pair_one_pod_podset_with_the_other(tmp_path: Path, kueue_dir: Path) -> None:
    groups = {}
    for kind in ("LeaderWorkerSet", "PyTorchJob", "RayCluster", "RayJob", "Job", "JobSet"):
        path = _write(tmp_path, KINDS[kind][0])
        main(["job", "annotate", str(path), "--queue", "gpu", "--within", "block", "--kueue-dir", str(kueue_dir), "-i"])
        obj = yaml.safe_load(path.read_text())
        groups[kind] = {n: t["metadata"]["annotations"].get(GROUP) for n, t in _templates(kind, obj).items()}
    assert groups["LeaderWorkerSet"] == {"leader": "leader-worker", "worker": "leader-worker"}
    assert groups["PyTorchJob"] == {"master": "master-worker", "worker": "master-worker"}
    assert groups["RayCluster"] == {"head": "head-gpu-workers", "gpu-workers": "head-gpu-workers"}
    assert groups["RayJob"] == {"head": "head-gpu", "gpu": "head-gpu"}  # the default submitter has no template
    assert groups["Job"] == {"main": None} and groups["JobSet"] == {"workers": None}


def test_jobset_misplaced_annotations_are_moved_to_the_pod_template(tmp_path: Path, kueue_dir: Path) -> None:
    path = _write(tmp_path, KINDS["JobSet"][0])
    main(["job", "annotate", str(path), "--queue", "gpu", "--within", "rack", "--preferred",
          "--slice-size", "4", "--slice-within", "hostname", "--kueue-dir", str(kueue_dir), "-i"])
    obj = yaml.safe_load(path.read_text())
    rjob = obj["spec"]["replicatedJobs"][0]
    assert "annotations" not in obj["metadata"]
    assert "metadata" not in rjob["template"]  # emptied by the move: no stray `metadata: {}` left behind
    assert rjob["template"]["spec"]["template"]["metadata"]["annotations"] == {
        PREF: RACK, SLICE_LEVEL: HOST, SLICE_SIZE: "4"}


def test_slices_skip_single_pod_podsets_and_refuse_sizes_that_do_not_divide(tmp_path: Path, kueue_dir: Path,
                                                                           capsys) -> None:
    path = _write(tmp_path, KINDS["PyTorchJob"][0])
    assert main(["job", "annotate", str(path), "--queue", "gpu", "--within", "block", "--slice-size", "3",
                 "--slice-within", "rack", "--kueue-dir", str(kueue_dir), "-i"]) == 0
    obj = yaml.safe_load(path.read_text())
    specs = obj["spec"]["pytorchReplicaSpecs"]
    assert specs["Worker"]["template"]["metadata"]["annotations"] == {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: "3"}
    assert specs["Master"]["template"]["metadata"]["annotations"] == {REQ: BLOCK}  # no group beside slices
    capsys.readouterr()
    job = _write(tmp_path, KINDS["Job"][0])
    assert main(["job", "annotate", str(job), "--queue", "gpu", "--within", "block", "--slice-size", "3",
                 "--slice-within", "hostname", "--kueue-dir", str(kueue_dir)]) == 2
    assert "slice size 3 does not divide the pod count of main (4 pods)" in capsys.readouterr().err
    assert main(["job", "annotate", str(job), "--queue", "gpu", "--within", "hostname", "--slice-size", "2",
                 "--slice-within", "block", "--kueue-dir", str(kueue_dir)]) == 2
    assert "is above the level" in capsys.readouterr().err


def test_levels_resolve_through_the_topology(tmp_path: Path, kueue_dir: Path, capsys) -> None:
    job = _write(tmp_path, KINDS["Job"][0])
    assert main(["job", "annotate", str(job), "--queue", "gpu", "--within", "zone", "--kueue-dir", str(kueue_dir)]) == 2
    err = capsys.readouterr().err
    assert "level 'zone' is not in the Topology" in err and f"{BLOCK} (block)" in err
    assert main(["job", "annotate", str(job), "--queue", "gpu", "--within", "block"]) == 2
    assert "is a name; give --kueue-dir" in capsys.readouterr().err
    assert main(["job", "annotate", str(job), "--queue", "gpu", "--within", RACK]) == 0
    captured = capsys.readouterr()
    assert yaml.safe_load(captured.out)["spec"]["template"]["metadata"]["annotations"] == {REQ: RACK}
    assert "not checked against a Topology" in captured.err


def test_level_names_come_from_a_snapshot(tmp_path: Path, capsys) -> None:
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps({"levels": [{"name": "spine", "label": "net.example/tier-2"},
                                           {"name": "leaf", "label": "net.example/tier-1"}],
                                "nodes": {"n1": {"spine": "s1", "leaf": "l1"}}, "problems": []}))
    job = _write(tmp_path, KINDS["Job"][0])
    assert main(["job", "annotate", str(job), "--queue", "gpu", "--within", "spine", "--snapshot", str(snap)]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["spec"]["template"]["metadata"]["annotations"] == {
        REQ: "net.example/tier-2"}


def test_multi_document_files_keep_other_documents(tmp_path: Path, kueue_dir: Path, capsys) -> None:
    text = "---\n# config first\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: b}\n---\n" \
           + KINDS["Job"][0]
    job = _write(tmp_path, text)
    assert main(["job", "annotate", str(job), "--queue", "gpu", "--within", "block", "--kueue-dir", str(kueue_dir)]) == 0
    out = capsys.readouterr().out
    docs = list(yaml.safe_load_all(out))
    assert docs[0] == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "b"}}
    assert docs[1]["metadata"]["labels"] == {QUEUE: "gpu"}
    assert "# config first" in out
    notjob = _write(tmp_path, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert main(["job", "annotate", str(notjob), "--queue", "gpu", "--within", BLOCK]) == 2
    assert "no workload of a supported kind" in capsys.readouterr().err


INDENTED = """\
# a Job written with indented lists
apiVersion: batch/v1
kind: Job
metadata:
    name: train   # four-space mappings
    namespace: team
spec:
    parallelism: 2
    template:
        spec:
            containers:
                - name: train
                  image: train:1
                  args:
                      - --epochs=3   # keep me
                  resources:
                      limits: {nvidia.com/gpu: 8}
"""


def test_annotate_keeps_the_files_indentation_comments_and_order(tmp_path: Path, kueue_dir: Path, capsys) -> None:
    path = _write(tmp_path, INDENTED)
    assert main(["job", "annotate", str(path), "--queue", "gpu", "--within", "block", "--kueue-dir",
                 str(kueue_dir)]) == 0
    out = capsys.readouterr().out
    assert out == INDENTED.replace("""    namespace: team
""", """    namespace: team
    labels:
        kueue.x-k8s.io/queue-name: gpu
""").replace("""    template:
        spec:
""", f"""    template:
        metadata:
            annotations:
                {REQ}: {BLOCK}
        spec:
""")
    assert "{}" not in out


def test_annotating_twice_changes_nothing_more(tmp_path: Path, kueue_dir: Path) -> None:
    for kind, (text, _, _) in KINDS.items():
        path = _write(tmp_path, text)
        args = ["job", "annotate", str(path), "--queue", "gpu", "--within", "rack", "--kueue-dir", str(kueue_dir), "-i"]
        assert main(args) == 0, kind
        once = path.read_text()
        assert main(args) == 0, kind
        assert path.read_text() == once, kind
        assert "metadata: {}" not in once, kind


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="module")
def bundled(tmp_path_factory) -> dict[str, str]:
    """The bundled example cluster: its snapshot and the Kueue objects `topolabel kueue` writes for it."""
    tmp = tmp_path_factory.mktemp("bundled")
    cfg, nodes = str(EXAMPLES / "topolabel.yaml"), str(EXAMPLES / "nodes.yaml")
    done = __import__("subprocess").run(
        ["python3", "-m", "topolabel.cli", "discover", "--config", cfg, "--nodes", nodes, "-o", "json"],
        capture_output=True, text=True, check=True, timeout=120)
    (tmp / "snap.json").write_text(done.stdout)
    assert main(["kueue", "--config", cfg, "--snapshot", str(tmp / "snap.json"), "--nodes", nodes,
                 "--output-dir", str(tmp / "kueue")]) == 0
    return {"config": cfg, "nodes": nodes, "snapshot": str(tmp / "snap.json"), "kueue": str(tmp / "kueue")}


@pytest.mark.parametrize("example", ["pytorchjob", "jobset", "leaderworkerset", "rayjob"])
def test_the_bundled_examples_annotate_check_clean_and_fit(example: str, bundled: dict[str, str], tmp_path: Path,
                                                          capsys) -> None:
    out = tmp_path / f"{example}.yaml"
    source = EXAMPLES / "jobs" / f"{example}.yaml"
    assert main(["job", "annotate", str(source), "--queue", "gpu", "--within", "block",
                 "--kueue-dir", bundled["kueue"]]) == 0
    annotated = capsys.readouterr().out
    out.write_text(annotated)
    assert annotated.startswith(source.read_text().split("apiVersion")[0])  # the comments above stay
    assert main(["job", "check", str(out), "--kueue-dir", bundled["kueue"], "--strict"]) == 0
    assert "no problems found" in capsys.readouterr().out
    assert main(["fit", str(out), "--config", bundled["config"], "--snapshot", bundled["snapshot"],
                 "--nodes", bundled["nodes"], "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["fits"] and report["topology"].startswith("gke-")


def test_required_is_kueues_name_for_within_and_contradicts_preferred(tmp_path: Path, kueue_dir: Path,
                                                                      capsys) -> None:
    job = _write(tmp_path, KINDS["Job"][0])
    base = ["job", "annotate", str(job), "--queue", "gpu", "--kueue-dir", str(kueue_dir)]
    assert main([*base, "--within", "block"]) == 0
    within = capsys.readouterr().out
    assert main([*base, "--required", "block"]) == 0
    assert capsys.readouterr().out == within
    assert yaml.safe_load(within)["spec"]["template"]["metadata"]["annotations"] == {REQ: BLOCK}
    assert main([*base, "--required", "block", "--preferred"]) == 2
    assert capsys.readouterr().err.strip().endswith("--required and --preferred contradict each other: use "
                                                    "--within LEVEL --preferred")
    with pytest.raises(SystemExit) as both:  # argparse: one of them, not both
        main([*base, "--required", "block", "--within", "rack"])
    assert both.value.code == 2


def test_a_queue_that_does_not_resolve_in_the_jobs_namespace_is_a_warning(tmp_path: Path, kueue_dir: Path,
                                                                          capsys) -> None:
    """LocalQueue gpu exists in namespace team only: a job in namespace ml would wait forever (Kueue: "LocalQueue
    gpu doesn't exist"), so annotate and check say so and where the queue is; in team they say nothing."""
    job = _write(tmp_path, KINDS["Job"][0].replace("namespace: team", "namespace: ml"))
    assert main(["job", "annotate", str(job), "--queue", "gpu", "--within", "block", "--kueue-dir", str(kueue_dir),
                 "-i"]) == 0
    err = capsys.readouterr().err
    assert "warning: Job/" in err and "Kueue would keep it pending: LocalQueue gpu doesn't exist in namespace ml" in err
    assert "LocalQueue gpu exists in namespace(s) team" in err
    assert main(["job", "check", str(job), "--kueue-dir", str(kueue_dir), "-o", "json"]) == 0
    (found,) = [f for f in json.loads(capsys.readouterr().out)["findings"] if "pending" in f["message"]]
    assert found["severity"] == "warning" and "exists in namespace(s) team" in found["message"]
    assert main(["job", "check", str(job), "--kueue-dir", str(kueue_dir), "--strict"]) == 1
    capsys.readouterr()
    job.write_text(job.read_text().replace("namespace: ml", "namespace: team"))
    assert main(["job", "check", str(job), "--kueue-dir", str(kueue_dir), "--strict"]) == 0
    assert "doesn't exist" not in capsys.readouterr().out
