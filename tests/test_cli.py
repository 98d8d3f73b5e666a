"""The command line end to end on the bundled example, and its errors: one clear line, no traceback."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from labeler.io.nodes import parse_nodes
from labeler.topology.placement import snapshot_from_dict
from labeler.topology.plan import make_plan
from testkit.environment import EXAMPLES
from topolabel.cli import main, parser as cli_parser


def topolabel(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "topolabel.cli", *args], capture_output=True, text=True,
                          input=stdin, timeout=120)


def test_discover_prints_the_snapshot_format(capsys) -> None:
    assert main(["discover", "--source", "labels", "--preset", "gke", "--nodes", str(EXAMPLES / "nodes.yaml"),
                 "-o", "json"]) == 0
    snap = json.loads(capsys.readouterr().out)
    assert list(snap) == ["levels", "nodes", "problems"]
    assert [lv["name"] for lv in snap["levels"]] == ["block", "subblock", "host"]
    assert len(snap["nodes"]) == 64
    assert snap["problems"] == [{"node": "gke-a3-new-n000", "source": "labels",
                                 "message": "has none of the labels cloud.google.com/gce-topology-block, "
                                            "cloud.google.com/gce-topology-subblock, cloud.google.com/gce-topology-host"}]


def test_yaml_output_equals_json(capsys) -> None:
    args = ["discover", "--config", str(EXAMPLES / "topolabel.yaml"), "--nodes", str(EXAMPLES / "nodes.yaml")]
    main([*args, "-o", "json"])
    as_json = json.loads(capsys.readouterr().out)
    main([*args, "-o", "yaml"])
    assert yaml.safe_load(capsys.readouterr().out) == as_json


def test_example_pipeline_snapshot_plan_kueue_check(tmp_path: Path, capsys) -> None:
    cfg, nodes = str(EXAMPLES / "topolabel.yaml"), str(EXAMPLES / "nodes.yaml")
    main(["discover", "--config", cfg, "--nodes", nodes, "-o", "json"])
    snap = tmp_path / "snap.json"
    snap.write_text(capsys.readouterr().out)
    assert main(["plan", "--config", cfg, "--snapshot", str(snap), "--nodes", nodes, "-o", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert len(plan["changes"]) == 64 and plan["unchanged"] == 1
    out = tmp_path / "kueue"
    kueue = ["kueue", "--config", cfg, "--snapshot", str(snap), "--nodes", nodes, "--output-dir", str(out)]
    assert main(kueue) == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(kueue) == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    assert main([*kueue, "--check"]) == 0
    flavor = next(out.glob("resourceflavor-nvidia-b200-*.yaml"))
    flavor.write_text(flavor.read_text().replace("value: present", "value: presenT"))
    capsys.readouterr()
    assert main([*kueue, "--check"]) == 1
    assert "-    value: presenT" in capsys.readouterr().out


def test_stream_to_stdout(capsys) -> None:
    assert main(["kueue", "--config", str(EXAMPLES / "topolabel.yaml"), "--nodes", str(EXAMPLES / "nodes.yaml"),
                 "--output-dir", "-"]) == 0
    kinds = [d["kind"] for d in yaml.safe_load_all(capsys.readouterr().out)]
    assert kinds == ["Topology", "ResourceFlavor", "ResourceFlavor", "ClusterQueue", "LocalQueue", "LocalQueue"]


@pytest.mark.parametrize("files, args, fragment", [
    ({"c.yaml": "plan: {maxChangeFraction: 2}\n"}, ["discover", "--config", "c.yaml"],
     "c.yaml: plan.maxChangeFraction: must be at most 1"),
    ({"c.yaml": "keyPrefix: topolabel.dev\n"}, ["discover", "--config", "c.yaml"], "c.yaml: keyPrefix: must end with '/'"),
    ({"c.yaml": "sources: {}\n"}, ["discover", "--config", "c.yaml"], "c.yaml: sources: unknown key; did you mean 'source'?"),
    ({"n.yaml": "kind: Pod\n"}, ["discover", "--source", "labels", "--preset", "gke", "--nodes", "n.yaml"],
     "n.yaml: expected a NodeList"),
    ({"n.yaml": "items: [\n"}, ["discover", "--source", "labels", "--preset", "gke", "--nodes", "n.yaml"],
     "n.yaml: not valid YAML: line 2, column 1: did not find expected node content"),
    ({}, ["discover", "--source", "labels", "--preset", "gke", "--nodes", "missing.yaml"], "missing.yaml: cannot read"),
    ({"s.json": "{\"levels\": []}"}, ["plan", "--snapshot", "s.json", "--nodes", str(EXAMPLES / "nodes.yaml")],
     "s.json: 'levels' must be a non-empty list"),
    ({}, ["discover", "--nodes", str(EXAMPLES / "nodes.yaml")], "no source: give --source"),
    ({"s.json": json.dumps({"levels": [{"name": "host", "label": "kubernetes.io/hostname"}],
                            "nodes": {"gke-a3-b00-s00-n000": {"host": "evil"}}})},
     ["plan", "--snapshot", "s.json", "--nodes", str(EXAMPLES / "nodes.yaml")],
     "s.json: label key 'kubernetes.io/hostname' for level 'host' belongs to Kubernetes"),
])
def test_errors_are_one_clear_line(tmp_path: Path, files: dict, args: list, fragment: str, monkeypatch) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    result = subprocess.run([sys.executable, "-m", "topolabel.cli", *args], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path, env={"PYTHONPATH": str(EXAMPLES.parent), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_joining_rack_whose_name_collides_leaves_the_labelled_rack_alone(tmp_path: Path, capsys) -> None:
    managed = {"topolabel.dev/managed-labels": "topolabel.dev/rack"}
    items = [{"kind": "Node", "metadata": {"name": f"a{i}", "labels": {"topolabel.dev/rack": "rack-1"},
                                           "annotations": managed}} for i in range(3)]
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump({"items": [*items, {"kind": "Node", "metadata": {"name": "new"}}]}))
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("levels: [rack]\nhosts:\n" + "".join(f"  - {{node: a{i}, rack: rack-1}}\n" for i in range(3))
                         + "  - {node: new, rack: rack 1}\n")
    assert main(["plan", "--source", "inventory", "--inventory", str(inventory), "--nodes", str(nodes), "-o", "json"]) == 0
    changes = json.loads(capsys.readouterr().out)["changes"]
    assert [c["node"] for c in changes] == ["new"] and changes[0]["set"]["topolabel.dev/rack"].startswith("rack-1-")


def test_help_has_examples() -> None:
    result = topolabel("kueue", "--help")
    assert result.returncode == 0 and "--check" in result.stdout and "examples:" in result.stdout


def applied(items: list[dict], snap_file: Path) -> list[dict]:
    """The nodes as they are once `topolabel apply` has written the snapshot's plan (each merge patch merged)."""
    plan = make_plan(snapshot_from_dict(json.loads(snap_file.read_text()), "snap"), parse_nodes(items, "nodes"))
    patches = {c.node: c.patch()["metadata"] for c in plan.changes}
    out = []
    for item in items:
        meta = dict(item["metadata"])
        patch = patches.get(meta["name"], {})
        meta["labels"] = {k: v for k, v in {**meta.get("labels", {}), **patch.get("labels", {})}.items() if v is not None}
        meta["annotations"] = {**meta.get("annotations", {}), **patch.get("annotations", {})}
        out.append({**item, "metadata": meta})
    return out


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    """`topolabel ARGS` in this process: exit status, stdout, stderr."""
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_plan_exit_code_is_1_with_changes_0_without_and_2_on_errors(tmp_path: Path, capsys) -> None:
    cfg, nodes = str(EXAMPLES / "topolabel.yaml"), EXAMPLES / "nodes.yaml"
    snap = tmp_path / "snap.json"
    snap.write_text(run_main(capsys, "discover", "--config", cfg, "--nodes", str(nodes), "-o", "json")[1])
    plan = ["plan", "--config", cfg, "--snapshot", str(snap), "--exit-code"]
    assert run_main(capsys, *plan, "--nodes", str(nodes))[0] == 1
    assert run_main(capsys, "plan", "--config", cfg, "--snapshot", str(snap), "--nodes", str(nodes))[0] == 0
    done = tmp_path / "labelled.yaml"
    done.write_text(yaml.safe_dump({"kind": "List", "items": applied(yaml.safe_load(nodes.read_text())["items"], snap)}))
    code, out, _ = run_main(capsys, *plan, "--nodes", str(done), "-o", "json")
    assert code == 0 and json.loads(out)["changes"] == []
    assert run_main(capsys, *plan, "--nodes", str(tmp_path / "missing.yaml"))[0] == 2


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """Every (sub)subcommand's parser, by its command line (`job check`)."""
    out = {}

    def walk(prefix: str, parser: argparse.ArgumentParser) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            out[prefix.strip()] = parser
        for action in subs:
            for name, child in action.choices.items():
                walk(f"{prefix} {name}", child)

    walk("", cli_parser())
    return out


OUTPUT_COMMANDS = {"discover", "plan", "apply", "verify", "fit", "why", "capacity", "show", "kueue", "job check",
                   "health"}


def test_only_commands_that_print_a_result_take_o() -> None:
    """`-o` means something everywhere it is accepted (checked below); elsewhere argparse refuses it."""
    taking = {name for name, parser in subcommands().items()
              if any("-o" in a.option_strings for a in parser._actions)}
    assert taking == OUTPUT_COMMANDS
    result = topolabel("run", "-o", "json")
    assert result.returncode == 2 and "unrecognized arguments: -o json" in result.stderr


def test_o_json_and_yaml_are_machine_output_wherever_o_is_taken(tmp_path: Path, capsys) -> None:
    cfg, nodes = str(EXAMPLES / "topolabel.yaml"), str(EXAMPLES / "nodes.yaml")
    snap = tmp_path / "snap.json"
    snap.write_text(run_main(capsys, "discover", "--config", cfg, "--nodes", nodes, "-o", "json")[1])
    common = ["--config", cfg, "--snapshot", str(snap), "--nodes", nodes]
    job = str(EXAMPLES / "jobs" / "pytorchjob.yaml")
    runs = {"discover": ["discover", "--config", cfg, "--nodes", nodes], "plan": ["plan", *common],
            "verify": ["verify", "--config", cfg, "--nodes", nodes, "--against", str(snap)],
            "fit": ["fit", job, *common], "show": ["show", *common], "kueue": ["kueue", *common],
            "job check": ["job", "check", job, "--snapshot", str(snap)], "health": ["health", "--nodes", nodes],
            "capacity": ["capacity", "--size", "8", "--gpus", "8", "--within", "block", "--queue", "gpu",
                         "--namespace", "ml-research", *common]}
    # apply writes to a cluster (tests/test_apply_apiserver.py), why reads one (tests/test_admission_stack.py)
    assert set(runs) == OUTPUT_COMMANDS - {"apply", "why"}
    for name, args in runs.items():
        code, as_json, err = run_main(capsys, *args, "-o", "json")
        assert code in (0, 1), (name, err)
        as_yaml = list(yaml.safe_load_all(run_main(capsys, *args, "-o", "yaml")[1]))
        data = json.loads(as_json)
        if name == "kueue":  # a List of the objects, as kubectl prints several; the YAML is one document each
            assert data["kind"] == "List" and data["items"] == as_yaml
        else:
            assert as_yaml == [data], name


def test_kueue_streams_are_the_objects_and_refuse_flags_they_would_ignore(capsys) -> None:
    base = ["kueue", "--config", str(EXAMPLES / "topolabel.yaml"), "--nodes", str(EXAMPLES / "nodes.yaml")]
    assert main([*base, "-o", "yaml"]) == 0
    as_yaml = capsys.readouterr().out
    assert main([*base, "--output-dir", "-"]) == 0
    assert capsys.readouterr().out == as_yaml
    for extra, fragment in ((["-o", "json", "--output-dir", "x"], "give one of them"),
                            (["-o", "yaml", "--check"], "--check compares a directory"),
                            (["--output-dir", "-", "--check"], "--check compares a directory"),
                            ([], "give --output-dir DIR (files for Git) or -o yaml|json")):
        assert main([*base, *extra]) == 2
        assert fragment in capsys.readouterr().err


def test_snapshot_without_nodes_says_what_else_is_needed_and_why(tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    snap.write_text(topolabel("discover", "--source", "labels", "--preset", "gke", "--nodes",
                              str(EXAMPLES / "nodes.yaml"), "-o", "json").stdout)
    env = {"PYTHONPATH": str(EXAMPLES.parent), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "KUBECONFIG": str(tmp_path / "none")}
    for args, why in ((["kueue", "-o", "yaml"], "the pool labels and taints, ClusterQueue quotas the allocatable"),
                      (["plan"], "which labels the nodes carry now")):
        result = subprocess.run([sys.executable, "-m", "topolabel.cli", *args, "--snapshot", str(snap)],
                                capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "--snapshot says where nodes sit, not" in result.stderr and why in result.stderr
        assert "add --nodes FILE (`kubectl get nodes -o yaml`) or a cluster with --kubeconfig/--context" in result.stderr


def test_source_flags_with_a_snapshot_are_refused(tmp_path: Path, capsys) -> None:
    snap = tmp_path / "snap.json"
    snap.write_text(run_main(capsys, "discover", "--source", "labels", "--preset", "gke", "--nodes",
                             str(EXAMPLES / "nodes.yaml"), "-o", "json")[1])
    code, _, err = run_main(capsys, "plan", "--snapshot", str(snap), "--nodes", str(EXAMPLES / "nodes.yaml"),
                            "--source", "labels", "--preset", "eks")
    assert code == 2 and "--source, --preset: a source's flags have no effect with --snapshot" in err


def test_a_node_joining_leaves_kueue_check_green_under_rounding_quotas(tmp_path: Path, capsys) -> None:
    """examples/teams.yaml rounds quotas down to steps: one more H100 node changes no file. The single-queue
    example (exact capacity) is the control: the same join makes --check fail."""
    items = yaml.safe_load((EXAMPLES / "nodes.yaml").read_text())["items"]
    twin = json.loads(json.dumps(next(i for i in items if i["metadata"]["name"] == "gke-a3-b00-s00-n000")))
    twin["metadata"]["name"] = twin["metadata"]["labels"]["kubernetes.io/hostname"] = "gke-a3-b00-s00-n099"
    twin["metadata"]["labels"]["cloud.google.com/gce-topology-host"] = "joined-host"
    joined = tmp_path / "joined.yaml"
    joined.write_text(yaml.safe_dump({"kind": "List", "items": [*items, twin]}))
    for config, expected in (("teams.yaml", 0), ("topolabel.yaml", 1)):
        out = tmp_path / config
        args = ["kueue", "--config", str(EXAMPLES / config), "--output-dir", str(out)]
        assert run_main(capsys, *args, "--nodes", str(EXAMPLES / "nodes.yaml"))[0] == 0
        code, diff, _ = run_main(capsys, *args, "--nodes", str(joined), "--check")
        assert code == expected, (config, diff)
        discovered = run_main(capsys, "discover", "--config", str(EXAMPLES / config), "--nodes", str(joined), "-o", "json")
        assert "gke-a3-b00-s00-n099" in json.loads(discovered[1])["nodes"]


def test_plan_for_people_as_diff_lines_wide_without_headers_and_as_names(tmp_path: Path, capsys, monkeypatch) -> None:
    """kubectl's habits: one line per node, values shortened to fit 80 columns; -o wide whole; --no-headers
    without the summary; -o name as `node/NAME`; and YAML without anchors or aliases."""
    monkeypatch.setenv("COLUMNS", "80")
    cfg, nodes = str(EXAMPLES / "topolabel.yaml"), str(EXAMPLES / "nodes.yaml")
    snap = tmp_path / "snap.json"
    snap.write_text(run_main(capsys, "discover", "--config", cfg, "--nodes", nodes, "-o", "json")[1])
    plan = ["plan", "--config", cfg, "--snapshot", str(snap), "--nodes", nodes]
    lines = run_main(capsys, *plan)[1].splitlines()
    assert lines[:3] == ["64 node(s) to change (0 rewriting or removing labels), 1 unchanged; keys under",
                         "topolabel.dev/:",
                         "gke-a3-b00-s00-n000  +block=30e60…77f88 +host=2e51f…033f6 +subblock=1a972…97678"]
    assert lines[52:54] == ["... and 14 more (-o wide or -o json for all)", "1 problem(s):"]
    wide = run_main(capsys, *plan, "-o", "wide")[1].splitlines()
    assert wide[65:67] == ["1 problem(s):", "NODE              SOURCE   MESSAGE"] and wide[1] == (
        "gke-a3-b00-s00-n000 +topolabel.dev/block=30e605f63be4da3943b8649f74877f88 "
        "+topolabel.dev/host=2e51f13b0bf89c2e6ca2d001191033f6 +topolabel.dev/subblock=1a97236e068e9e7e7e05ca02b6e97678")
    bare = run_main(capsys, *plan, "--no-headers")[1].splitlines()
    assert bare[0].startswith("gke-a3-b00-s00-n000  +block=") and bare[51].startswith("gke-a3-new-n000   labels")
    named = run_main(capsys, *plan, "-o", "name")[1].splitlines()
    assert len(named) == 64 and named[0] == "node/gke-a3-b00-s00-n000"
    as_yaml = run_main(capsys, *plan, "-o", "yaml")[1]
    assert "&id" not in as_yaml and "*id" not in as_yaml and "  remove: []" in as_yaml


def test_tables_drop_headers_and_kueue_names_its_objects_as_kubectl_does(tmp_path: Path, capsys) -> None:
    cfg, nodes = str(EXAMPLES / "topolabel.yaml"), str(EXAMPLES / "nodes.yaml")
    out = run_main(capsys, "discover", "--config", cfg, "--nodes", nodes, "--no-headers")[1].splitlines()
    assert out[0].split() == ["block", "topolabel.dev/block", "4", "16", "/", "16"]
    assert not any(line.startswith(("LEVEL", "NODE", "64 node(s)", "1 problem(s)")) for line in out)
    assert out[-4].startswith("gke-a3-new-n000   labels   has none of the labels")
    names = run_main(capsys, "kueue", "--config", cfg, "--nodes", nodes, "-o", "name")[1].splitlines()
    assert names == ["topology.kueue.x-k8s.io/gke-0fed95", "resourceflavor.kueue.x-k8s.io/nvidia-b200-16432c",
                     "resourceflavor.kueue.x-k8s.io/nvidia-h100-mega-80gb-3969e0", "clusterqueue.kueue.x-k8s.io/gpu",
                     "localqueue.kueue.x-k8s.io/gpu", "localqueue.kueue.x-k8s.io/gpu"]


def test_kueue_says_unchanged_and_why_each_file_was_removed(tmp_path: Path, capsys) -> None:
    nodes = str(EXAMPLES / "nodes.yaml")
    out = tmp_path / "kueue"
    kueue = ["kueue", "--nodes", nodes, "--output-dir", str(out)]
    assert run_main(capsys, *kueue, "--config", str(EXAMPLES / "topolabel.yaml"))[2].splitlines()[0] == \
        f"{out}: 7 created"
    assert run_main(capsys, *kueue, "--config", str(EXAMPLES / "topolabel.yaml"))[2] == f"{out}: unchanged (7 files)\n"
    fewer = tmp_path / "fewer.yaml"  # no host level (a new Topology and flavors), one LocalQueue namespace less
    fewer.write_text((EXAMPLES / "topolabel.yaml").read_text().replace(
        "  - {name: host, label: topolabel.dev/host}\n", "").replace("preset: gke", "keys: [cloud.google.com/"
        "gce-topology-block, cloud.google.com/gce-topology-subblock]").replace("[ml-research, ml-prod]", "[ml-research]"))
    err = run_main(capsys, *kueue, "--config", str(fewer))[2].splitlines()
    assert err[0] == f"{out}: 3 created, 2 updated, 1 unchanged, 4 removed"
    removed = sorted(line for line in err if line.startswith("  removed: "))
    assert removed[0] == "  removed: localqueue-ml-prod-gpu.yaml (no longer in the config)"
    assert removed[1].startswith("  removed: resourceflavor-nvidia-b200-16432c.yaml (replaced by "
                                 "resourceflavor-nvidia-b200-")
    assert removed[3].startswith("  removed: topology-gke-0fed95.yaml (replaced by topology-gke-")
    assert all(line.endswith(": a field Kueue cannot change in place changed)") for line in removed[1:])


def test_errors_carry_the_prefix_and_suggest_what_was_meant(tmp_path: Path) -> None:
    for args, line in ((["run", "--nodes", "f"], "topolabel run: error: --nodes is a file; the operator watches a "
                                                  "cluster (use --kubeconfig)"),
                       (["plan", "--outptu", "json"], "topolabel plan: error: unrecognized arguments: --outptu json; "
                                                      "did you mean --output? (see topolabel plan --help)"),
                       (["pln"], "topolabel: error: argument COMMAND: invalid choice: 'pln'; did you mean 'plan'? "
                                 "(see topolabel --help)"),
                       (["discover", "--source", "labels", "--preset", "gkee"],
                        "topolabel discover: error: argument --preset: invalid choice: 'gkee'; did you mean 'gke'? "
                        "(see topolabel discover --help)"),
                       (["discover", "--source", "labels", "--nodes", str(EXAMPLES / "nodes.yaml")],
                        "topolabel discover: error: --source labels: give a preset (coreweave, crusoe, eks, gke, nebius, "
                        "nvlink, oci, topograph) or keys (label keys, coarsest first)")):
        result = topolabel(*args)
        assert result.returncode == 2 and result.stderr == line + "\n", result.stderr


def test_help_puts_the_command_first_and_each_source_under_its_heading() -> None:
    text = topolabel("help", "plan").stdout
    order = [text.index(part) for part in ("options:", "  --exit-code", "common flags:", "  --kubeconfig",
                                           "examples:", "source flags (", "labels source:", "  --preset")]
    assert order == sorted(order)
    assert topolabel("job", "check", "--help").stdout.count("topolabel job annotate") == 0
    sources = topolabel("help", "sources").stdout
    assert "labels       yes     Topology from labels the nodes already carry" in sources
    assert "gke         block            cloud.google.com/gce-topology-block" in sources
    assert "eks         layer-1          topology.k8s.aws/network-node-layer-1" in sources
    assert "            capacity-block   topology.k8s.aws/capacity-block-id" in sources  # a preset's NVLink level
    assert "ufm          no      UFM source" in sources
