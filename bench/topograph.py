"""Benchmark: topolabel beside NVIDIA Topograph, in the same run, on the same inputs.

Topograph is built from the Go module proxy: `bench/topograph-harness` is a small Go module that requires it
and calls its packages (see its main.go); it is built with `go build` into ~/.cache/topolabel/topograph-<version>/
the first time. Both tools run as whole processes, measured with GNU time (CPU, peak RSS) and a clock, their runs
interleaved so that load from other work falls on both alike; figures are medians of --runs runs.

- InfiniBand: the 8,192-HCA fabrics of bench/infiniband.py, served by ibsim; per run, the real ibnetdiscover
  captures the fabric (the reference all ratios divide by), `topolabel discover --source infiniband` reads
  the capture, and the harness runs Topograph's InfiniBand path on it (parse, switch tree, topology.conf and
  node labels). Both tools' leaf groups and blocks are compared with each other and with the generator's truth.
- AWS: instances in moto with DescribeInstanceTopology (tests/moto_topology.py), as bench/aws.py; topolabel
  is pointed at it with --endpoint-url, Topograph's provider through the AWS SDK's AWS_ENDPOINT_URL_EC2
  (no code change). Calls are counted by the server; both tools' labels are compared layer by layer.

Run: python -m bench.topograph [--runs N] [--parts ib,aws] [--instances N] [--others N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from bench.measure import Run, measure, proc_cpu
from bench.table import print_table

HARNESS_SRC = Path(__file__).with_name("topograph-harness")
CACHE = Path.home() / ".cache" / "topolabel"
REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
AWS_ENV_DROP = ("AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_MAX_ATTEMPTS", "AWS_SESSION_TOKEN",
                "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2")
TOPOGRAPH_LABEL = "network.topology.nvidia.com/"


@dataclass
class Series:
    """Repeated runs of one step; medians are what the tables show."""

    runs: list[Run]

    @property
    def wall(self) -> float:
        return statistics.median(r.wall for r in self.runs)

    @property
    def cpu(self) -> float:
        return statistics.median(r.cpu for r in self.runs)

    @property
    def rss(self) -> float:
        return statistics.median(r.rss_mb for r in self.runs)


# --- the two tools ---------------------------------------------------------------------------------------

def topograph_version() -> str:
    """The Topograph version the harness's go.mod requires: the one built and reported."""
    match = re.search(r"github\.com/NVIDIA/topograph (v\S+)", (HARNESS_SRC / "go.mod").read_text())
    if not match:
        raise SystemExit(f"{HARNESS_SRC / 'go.mod'}: no requirement on github.com/NVIDIA/topograph")
    return match.group(1)


def harness() -> Path:
    """The harness binary, built from the module proxy when missing (cached per version and harness source)."""
    sources = sorted(p for p in HARNESS_SRC.iterdir() if p.suffix == ".go" or p.name in ("go.mod", "go.sum"))
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in sources)).hexdigest()[:12]
    binary = CACHE / f"topograph-{topograph_version()}" / f"topograph-harness-{digest}"
    if not binary.exists():
        binary.parent.mkdir(parents=True, exist_ok=True)
        partial = binary.with_name(binary.name + ".partial")
        print(f"building {binary} (go build; Topograph {topograph_version()} from the module proxy)", file=sys.stderr)
        subprocess.run(["go", "build", "-mod=readonly", "-trimpath", "-o", str(partial), "."], cwd=HARNESS_SRC,
                       check=True, timeout=3600)
        partial.rename(binary)
    return binary


def topolabel() -> list[str]:
    """The installed `topolabel` console script (this interpreter's own, not a pyenv shim), else the module."""
    script = shutil.which("topolabel", path=sysconfig.get_path("scripts")) or shutil.which("topolabel")
    if script:
        return [script]
    return [sys.executable, "-m", "topolabel.cli"]


def topolabel_source(command: Sequence[str]) -> str:
    """Where the measured topolabel's code lives and its commit: the script may import another checkout."""
    python = command[0] if command[0] == sys.executable else _script_python(command[0])
    probe = "import importlib.util as u; print(u.find_spec('topolabel.cli').origin)"
    origin = subprocess.run([python, "-c", probe], cwd="/", capture_output=True, text=True, check=True).stdout.strip()
    top = Path(origin).parent.parent
    commit = subprocess.run(["git", "-C", str(top), "log", "-1", "--format=%h %cs"], capture_output=True,
                            text=True).stdout.strip()
    return f"{top} ({commit or 'not a git checkout'})"


def _script_python(script: str) -> str:
    first = Path(script).read_text(errors="replace").splitlines()[0]
    return first[2:].strip() if first.startswith("#!") and "python" in first else sys.executable


# --- comparing placements --------------------------------------------------------------------------------

def partition(nodes: Mapping[str, Mapping[str, str]], keys: Sequence[str]) -> set[frozenset[str]]:
    """Hosts grouped by their values for `keys` (coarsest first, so a group is a path in the tree)."""
    groups: dict[tuple[str | None, ...], set[str]] = defaultdict(set)
    for host, labels in nodes.items():
        groups[tuple(labels.get(k) for k in keys)].add(host)
    return {frozenset(g) for g in groups.values()}


def agreement(ours: set[frozenset[str]], theirs: set[frozenset[str]]) -> str:
    if ours == theirs:
        return f"same ({len(ours)})"
    return f"DIFFER ({len(ours)} vs {len(theirs)}; {len(ours - theirs)} of ours not theirs)"


def topograph_labels(text: str) -> dict[str, dict[str, str]]:
    """Topograph's node labels with its key prefix dropped: core, spine, leaf."""
    return {node: {k.removeprefix(TOPOGRAPH_LABEL): v for k, v in labels.items()}
            for node, labels in json.loads(text).items()}


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


# --- InfiniBand --------------------------------------------------------------------------------------------

def infiniband(name: str, spec: object, tmp: Path, runs: int, tool: list[str], binary: Path) -> dict[str, object]:
    from hack.ibfabric import build
    from tests.ibsim import simulate

    fabric = build(spec)  # type: ignore[arg-type]
    capture, nodes_file = tmp / "fabric.ibnetdiscover", tmp / "nodes.txt"
    nodes_file.write_text("".join(f"{h}\n" for h in sorted(fabric.truth.guids)))
    ours_out, labels_out, conf_out = tmp / "topolabel.json", tmp / "topograph-labels.json", tmp / "topology.conf"
    capture_runs, ours, theirs = [], [], []
    start = time.perf_counter()
    with simulate(fabric, tmp) as sim:
        ready = time.perf_counter() - start
        for _ in range(runs):
            before = proc_cpu(sim.proc.pid)
            run = measure(["ibnetdiscover"], env=sim.env())
            run.cpu += proc_cpu(sim.proc.pid) - before
            capture_runs.append(run)
            capture.write_text(run.stdout)
            run.stdout = ""
            ours.append(measure([*tool, "discover", "--source", "infiniband", "--ibnetdiscover", str(capture),
                                 "-o", "json"]))
            theirs.append(measure([str(binary), "ib", "-ibnetdiscover", str(capture), "-nodes", str(nodes_file),
                                   "-labels", str(labels_out), "-slurm", str(conf_out)]))
    ours_out.write_text(ours[-1].stdout)
    snap = json.loads(ours[-1].stdout)["nodes"]
    graph = [json.loads(r.stdout) for r in theirs]
    tg = topograph_labels(labels_out.read_text())
    truth = {h: {"block": fabric.truth.block[h], "leafgroup": fabric.truth.leafgroup[h]} for h in fabric.truth.guids}
    leaf = {who: partition(n, k) for who, n, k in (("ours", snap, ("block", "leafgroup")),
                                                     ("theirs", tg, ("core", "spine", "leaf")),
                                                     ("truth", truth, ("block", "leafgroup")))}
    block = {who: partition(n, k) for who, n, k in (("ours", snap, ("block",)), ("theirs", tg, ("core", "spine")),
                                                      ("truth", truth, ("block",)))}
    cap, us, them = Series(capture_runs), Series(ours), Series(theirs)
    return {
        "fabric": name, "HCAs": sum(len(v) for v in fabric.truth.guids.values()), "hosts": len(fabric.truth.guids),
        "capture MB": round(len(capture.read_bytes()) / 2**20, 1), "ibsim ready s": round(ready, 2),
        "steps": [
            {"step": "ibsim + ibnetdiscover (capture)", "wall s": cap.wall, "CPU s": cap.cpu, "peak RSS MB": cap.rss},
            {"step": "topolabel discover (whole process)", "wall s": us.wall, "CPU s": us.cpu, "peak RSS MB": us.rss},
            {"step": f"Topograph {topograph_version()} harness (whole process)", "wall s": them.wall,
             "CPU s": them.cpu, "peak RSS MB": them.rss},
        ],
        "topograph in-process s": statistics.median(g["graph s"] + g["slurm s"] + g["labels s"] for g in graph),
        "placed": (len(snap), len(tg)),
        "leaf groups": agreement(leaf["ours"], leaf["theirs"]), "blocks": agreement(block["ours"], block["theirs"]),
        "= truth": "/".join("yes" if leaf[w] == leaf["truth"] and block[w] == block["truth"] else "NO"
                            for w in ("ours", "theirs")),
    }


def ib_tables(results: Iterable[dict[str, object]]) -> None:
    steps, summary = [], []
    for r in results:
        cap, us, them = r["steps"]  # type: ignore[misc]
        for s in r["steps"]:  # type: ignore[attr-defined]
            steps.append({"fabric": r["fabric"], **s, "wall s": f"{s['wall s']:.2f}", "CPU s": f"{s['CPU s']:.2f}",
                          "peak RSS MB": f"{s['peak RSS MB']:.0f}",
                          "wall / capture": ratio(s["wall s"], cap["wall s"])})
        summary.append({
            "fabric": r["fabric"], "HCAs": r["HCAs"], "capture MB": r["capture MB"],
            "topolabel / Topograph wall": ratio(us["wall s"], them["wall s"]),
            "topolabel / Topograph CPU": ratio(us["CPU s"], them["CPU s"]),
            "topolabel / Topograph RSS": ratio(us["peak RSS MB"], them["peak RSS MB"]),
            "topolabel / capture wall": ratio(us["wall s"], cap["wall s"]),
            "Topograph / capture wall": ratio(them["wall s"], cap["wall s"]),
            "hosts placed (topolabel / Topograph)": "%d / %d" % r["placed"],  # type: ignore[str-format]
            "leaf groups": r["leaf groups"], "blocks": r["blocks"], "= truth (topolabel/Topograph)": r["= truth"],
        })
        print(f"{r['fabric']}: ibsim ready in {r['ibsim ready s']} s; Topograph's work inside its process "
              f"(graph + topology.conf + labels): {r['topograph in-process s']:.3f} s median")
    print_table("InfiniBand, whole processes (medians)", steps)
    print_table("InfiniBand, ratios from the same run", summary)


# --- AWS ----------------------------------------------------------------------------------------------------

def aws(tmp: Path, runs: int, instances: int, others: int, tool: list[str], binary: Path) -> list[dict[str, object]]:
    """The same cluster as bench/aws.py, then again with `others` placed instances of another cluster."""
    import logging

    from bench.aws import cluster
    from tests.moto_topology import TopologyServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    env = {k: v for k, v in os.environ.items() if k not in AWS_ENV_DROP}
    env.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_CONFIG_FILE=str(tmp / "no-config"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp / "no-credentials"))
    os.environ.update(env)  # moto's own boto3 client in this process, for the setup
    for key in AWS_ENV_DROP:
        os.environ.pop(key, None)
    rows = []
    with TopologyServer() as server:
        start = time.perf_counter()
        items = cluster(server, instances, REGIONS)
        print(f"aws setup: {len(items)} instances launched and placed in {time.perf_counter() - start:.0f} s",
              file=sys.stderr)
        nodes_file, inst_file = tmp / "nodes.json", tmp / "instances.json"
        nodes_file.write_text(json.dumps({"kind": "List", "items": items}))
        by_region: dict[str, dict[str, str]] = defaultdict(dict)
        for item in items:
            region_zone, instance = item["spec"]["providerID"].removeprefix("aws:///").split("/")  # type: ignore[index]
            by_region[region_zone[:-1]][instance] = item["metadata"]["name"]  # type: ignore[index]
        inst_file.write_text(json.dumps(by_region))
        for extra in (0, others) if others else (0,):
            if extra:
                _launch_others(server, extra)
            rows += _aws_rows(server, runs, len(items), extra, tool, binary, env, nodes_file, inst_file, tmp)
    return rows


def _launch_others(server: object, count: int) -> None:
    """Another cluster's placed instances in the same regions, launched in bench.aws's batch size."""
    from bench.aws import LAUNCH

    for r, region in enumerate(REGIONS):
        left = count // len(REGIONS) + (r < count % len(REGIONS))
        for start in range(0, left, LAUNCH):
            ids = server.launch(region, min(LAUNCH, left - start))  # type: ignore[attr-defined]
            server.place_tree(ids, f"other-{region}-{start}")  # type: ignore[attr-defined]


def _aws_rows(server: object, runs: int, count: int, extra: int, tool: list[str], binary: Path,
              env: dict[str, str], nodes_file: Path, inst_file: Path, tmp: Path) -> list[dict[str, object]]:
    labels_out = tmp / "topograph-aws-labels.json"
    ours, theirs, calls = [], [], {"topolabel": 0, "Topograph": 0}
    for _ in range(runs):
        server.fabric.calls.clear()  # type: ignore[attr-defined]
        ours.append(measure([*tool, "discover", "--source", "aws", "--nodes", str(nodes_file), "--endpoint-url",
                             server.url, "-o", "json"], env=env))  # type: ignore[attr-defined]
        calls["topolabel"] = sum(server.calls.values())  # type: ignore[attr-defined]
        server.fabric.calls.clear()  # type: ignore[attr-defined]
        theirs.append(measure([str(binary), "aws", "-instances", str(inst_file), "-labels", str(labels_out)],
                              env={**env, "AWS_ENDPOINT_URL_EC2": server.url}))  # type: ignore[attr-defined]
        calls["Topograph"] = sum(server.calls.values())  # type: ignore[attr-defined]
    snap = json.loads(ours[-1].stdout)["nodes"]
    tg = topograph_labels(labels_out.read_text())
    same = all(snap.get(n, {}).get(f"layer-{i + 1}") == tg.get(n, {}).get(key)
               for n in snap.keys() | tg.keys() for i, key in enumerate(("core", "spine", "leaf")))
    us, them = Series(ours), Series(theirs)
    base = {"instances": count, "other instances in the regions": extra}
    rows = []
    for who, series, placed in (("topolabel", us, len(snap)), (f"Topograph {topograph_version()}", them, len(tg))):
        rows.append({"tool": who, **base, "calls": calls[who.split()[0]], "placed": placed,
                     "wall s": f"{series.wall:.2f}", "CPU s": f"{series.cpu:.2f}", "peak RSS MB": f"{series.rss:.0f}"})
    rows.append({"tool": "topolabel / Topograph", **base,
                 "calls": ratio(calls["topolabel"], calls["Topograph"]), "placed": "same labels, layers 1-3" if same
                 else "LABELS DIFFER", "wall s": ratio(us.wall, them.wall), "CPU s": ratio(us.cpu, them.cpu),
                 "peak RSS MB": ratio(us.rss, them.rss)})
    return rows


# --- main -----------------------------------------------------------------------------------------------

def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem = int(Path("/proc/meminfo").read_text().split()[1]) / 2**20
    go = subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()
    return (f"{os.cpu_count()} vCPUs ({cpu}), {mem:.0f} GiB RAM, Python {platform.python_version()}, {go}, "
            f"load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--parts", default="ib,aws", help="comma-separated: ib, aws")
    parser.add_argument("--instances", type=int, default=10_000, help="aws: the cluster's instances")
    parser.add_argument("--others", type=int, default=10_000,
                        help="aws: other placed instances added for a second row (0: none)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    binary, tool = harness(), topolabel()
    print(f"machine: {machine()}")
    print(f"Topograph {topograph_version()} harness: {binary}")
    print(f"topolabel: {' '.join(tool)} -> {topolabel_source(tool)}")
    with tempfile.TemporaryDirectory() as tmp:
        if "ib" in parts:
            from bench.infiniband import FABRICS

            ib_tables([infiniband(name, spec, Path(tmp), args.runs, tool, binary) for name, spec in FABRICS.items()])
        if "aws" in parts:
            print_table("AWS against moto, whole processes (medians)",
                        aws(Path(tmp), args.runs, args.instances, args.others, tool, binary))
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
