"""Benchmark: topolabel beside NVIDIA Topograph, in the same run, on the same inputs.

Topograph is built into a small Go harness (`bench/topograph-harness`, see its main.go) that calls its
packages, once per version, into ~/.cache/topolabel/topograph-<version>/: from the module proxy at the version
its go.mod requires (v0.5.0; the proxy refuses v1.0.0), or with --topograph-source DIR from a copy of
Topograph's repository (`git clone --branch v1.0.0 https://github.com/NVIDIA/topograph DIR`), named by a
`replace` directive beside the requirements pinned for that version in bench/topograph-harness/v1/. Every
tool runs as a whole process, measured with GNU time (CPU, peak RSS) and a clock, their runs interleaved so
that load from other work falls on all alike; figures are medians of --runs runs. topolabel is this checkout
(`python -m topolabel.cli` run from it).

- ib: the 8,192-HCA fabrics of bench/infiniband.py, served by ibsim; per run, the real ibnetdiscover
  captures the fabric (the reference all ratios divide by), `topolabel discover --source infiniband` reads
  the capture, and the harness runs Topograph's InfiniBand path on it (parse, switch tree, topology.conf and
  node labels). Both tools' leaf groups and blocks are compared with each other and with the generator's truth.
- ibsizes: rail-optimised three-tier fabrics of 1,024 to 32,768 HCAs, each capture as ibnetdiscover prints
  it (`hack.ibfabric.Fabric.capture_text`; ibsim cannot simulate 32,768 HCAs here), read by the bare
  interpreter (`python -c pass`), a minimal Python reader (bench/ibminimal.py), topolabel and Topograph.
  With --installed the three Python steps run from a virtual environment holding this checkout as pip installs
  it (bytecode compiled), so that start-up is a user's: this machine's interpreter runs an editable-install
  finder and site-wide .pth files at every start (0.02-0.04 CPU s of `python -c pass` here) that a
  virtual environment does not. `--installed /usr/bin/python3` makes it of Debian's interpreter, the one the
  image ships (the agent and the collector run there); this machine's pyenv build has neither profile-guided
  nor link-time optimisation and runs the same code 7-25% slower (BENCHMARKS.md, Issue 33, sixth pass). Given again (`--installed --installed
  /usr/bin/python3`), each interpreter's steps run side by side, interleaved with the others. `--baseline REV`
  adds the git revision REV, installed the same way for the last of them: what a change did, in one run.
- aws: instances in moto with DescribeInstanceTopology (testkit/moto_topology.py), as bench/aws.py; topolabel
  is pointed at it with --endpoint-url, Topograph's provider through the AWS SDK's AWS_ENDPOINT_URL_EC2
  (no code change). Calls are counted by the server; both tools' labels are compared layer by layer.

Run: python -m bench.topograph [--runs N] [--parts ib,ibsizes,aws] [--sizes 1024,8192,32768] [--installed [PYTHON]]...
     [--baseline REV] [--topograph-source DIR [--topograph-version v1.0.0]] [--instances N] [--others N]
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
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from bench.measure import ROOT, SHIPPED, Run, load, measure, proc_cpu, topolabel
from bench.table import print_table

HARNESS_SRC = Path(__file__).with_name("topograph-harness")
CACHE = Path.home() / ".cache" / "topolabel"
REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
AWS_ENV_DROP = ("AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_MAX_ATTEMPTS", "AWS_SESSION_TOKEN",
                "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2")
# Topograph's node label keys: v0.5.0 names the switch levels, v1.0.0 numbers them from the node up.
TOPOGRAPH_KEYS = {**{f"network.topology.nvidia.com/{k}": k for k in ("core", "spine", "leaf")},
                  **{f"fabric.topograph.run/tier-{i}": k for i, k in enumerate(("leaf", "spine", "core"))}}


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

@dataclass(frozen=True)
class Harness:
    """The built harness and the Topograph version it runs."""

    binary: Path
    version: str


def proxy_version() -> str:
    """The Topograph version the harness's go.mod requires: the one built from the module proxy."""
    match = re.search(r"github\.com/NVIDIA/topograph (v\S+)", (HARNESS_SRC / "go.mod").read_text())
    if not match:
        raise SystemExit(f"{HARNESS_SRC / 'go.mod'}: no requirement on github.com/NVIDIA/topograph")
    return match.group(1)


def harness(source: Path | None = None, version: str | None = None) -> Harness:
    """The harness binary, built when missing (cached per version and sources): Topograph from the module
    proxy, or from `source`, a copy of its repository at `version` (v1.0.0: the proxy refuses it), named by a
    `replace` directive in a scratch copy of the harness module whose requirements and sums for that version
    are pinned in bench/topograph-harness/<major>/."""
    sources = sorted(p for p in HARNESS_SRC.iterdir() if p.suffix == ".go")
    if source is None:
        version, module, tags = proxy_version(), HARNESS_SRC, []
    else:
        assert version is not None
        module, tags = HARNESS_SRC / version.split(".")[0], ["-tags", "topograph_v1"]
        if not (module / "go.mod").exists():
            raise SystemExit(f"no pinned harness module for Topograph {version} ({module}/go.mod)")
        named = (source / "go.mod").read_text() if (source / "go.mod").exists() else ""
        if "module github.com/NVIDIA/topograph\n" not in named:
            raise SystemExit(f"--topograph-source {source}: not a copy of github.com/NVIDIA/topograph (its go.mod)")
        sources += sorted(p for p in source.rglob("*") if p.suffix == ".go" or p.name in ("go.mod", "go.sum"))
    pinned = [module / "go.mod", module / "go.sum"]
    digest = hashlib.sha256(b"".join(str(p).encode() + p.read_bytes() for p in [*sources, *pinned])).hexdigest()[:12]
    binary = CACHE / f"topograph-{version}" / f"topograph-harness-{digest}"
    if not binary.exists():
        binary.parent.mkdir(parents=True, exist_ok=True)
        where = f"from {source}" if source else "from the module proxy"
        print(f"building {binary} (go build; Topograph {version} {where})", file=sys.stderr)
        with tempfile.TemporaryDirectory(dir=binary.parent) as work:
            for path in [*(p for p in HARNESS_SRC.iterdir() if p.suffix == ".go"), *pinned]:
                shutil.copy(path, work)
            if source is not None:
                with open(Path(work) / "go.mod", "a") as mod:
                    mod.write(f"\nreplace github.com/NVIDIA/topograph => {source.resolve()}\n")
            partial = binary.with_name(binary.name + ".partial")
            subprocess.run(["go", "build", "-mod=readonly", "-trimpath", *tags, "-o", str(partial), "."], cwd=work,
                           check=True, timeout=3600)
            partial.rename(binary)
    return Harness(binary, version)


def topolabel_source() -> str:
    """Where the measured topolabel's code lives (this checkout, run as `python -m topolabel.cli` from it) and
    its commit."""
    commit = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %cs"], capture_output=True,
                            text=True).stdout.strip()
    return f"{ROOT} ({commit or 'not a git checkout'})"


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
    """Topograph's node labels by level: core, spine, leaf (either version's keys)."""
    return {node: {TOPOGRAPH_KEYS[k]: v for k, v in labels.items() if k in TOPOGRAPH_KEYS}
            for node, labels in json.loads(text).items()}


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


# --- InfiniBand --------------------------------------------------------------------------------------------

def infiniband(name: str, spec: object, tmp: Path, runs: int, tg: Harness) -> dict[str, object]:
    from hack.ibfabric import build
    from testkit.ibsim import simulate

    fabric = build(spec)  # type: ignore[arg-type]
    capture, nodes_file = tmp / "fabric.ibnetdiscover", tmp / "nodes.txt"
    nodes_file.write_text("".join(f"{h}\n" for h in sorted(fabric.truth.guids)))
    labels_out, conf_out = tmp / "topograph-labels.json", tmp / "topology.conf"
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
            ours.append(measure(discover_ib(capture), cwd=ROOT))
            theirs.append(measure([str(tg.binary), "ib", "-ibnetdiscover", str(capture), "-nodes", str(nodes_file),
                                   "-labels", str(labels_out), "-slurm", str(conf_out)]))
    graph = [json.loads(r.stdout) for r in theirs]
    cap, us, them = Series(capture_runs), Series(ours), Series(theirs)
    return {
        "fabric": name, "HCAs": sum(len(v) for v in fabric.truth.guids.values()), "hosts": len(fabric.truth.guids),
        "capture MB": round(len(capture.read_bytes()) / 2**20, 1), "ibsim ready s": round(ready, 2),
        "steps": [
            {"step": "ibsim + ibnetdiscover (capture)", "wall s": cap.wall, "CPU s": cap.cpu, "peak RSS MB": cap.rss},
            {"step": "topolabel discover (whole process)", "wall s": us.wall, "CPU s": us.cpu, "peak RSS MB": us.rss},
            {"step": f"Topograph {tg.version} harness (whole process)", "wall s": them.wall,
             "CPU s": them.cpu, "peak RSS MB": them.rss},
        ],
        "topograph in-process s": statistics.median(g["graph s"] + g["slurm s"] + g["labels s"] for g in graph),
        **placements(fabric, ours[-1].stdout, labels_out),
    }


def discover_ib(capture: Path) -> list[str]:
    return topolabel(*discover_args(capture))


def discover_args(capture: Path) -> list[str]:
    return ["discover", "--source", "infiniband", "--ibnetdiscover", str(capture), "-o", "json"]


def placements(fabric: object, ours: str, labels: Path) -> dict[str, object]:
    """How topolabel's snapshot (`ours`, JSON) and Topograph's labels (file `labels`) group the hosts, against
    each other and the generator's truth: leaf groups (topolabel's block + leafgroup, Topograph's core + spine +
    leaf) and blocks."""
    truth_of = fabric.truth  # type: ignore[attr-defined]
    snap = json.loads(ours)["nodes"]
    tg = topograph_labels(labels.read_text())
    truth = {h: {"block": truth_of.block[h], "leafgroup": truth_of.leafgroup[h]} for h in truth_of.guids}
    leaf = {who: partition(n, k) for who, n, k in (("ours", snap, ("block", "leafgroup")),
                                                     ("theirs", tg, ("core", "spine", "leaf")),
                                                     ("truth", truth, ("block", "leafgroup")))}
    block = {who: partition(n, k) for who, n, k in (("ours", snap, ("block",)), ("theirs", tg, ("core", "spine")),
                                                      ("truth", truth, ("block",)))}
    return {"placed": (len(snap), len(tg)),
            "leaf groups": agreement(leaf["ours"], leaf["theirs"]), "blocks": agreement(block["ours"], block["theirs"]),
            "= truth": "/".join("yes" if leaf[w] == leaf["truth"] and block[w] == block["truth"] else "NO"
                                for w in ("ours", "theirs"))}


# Rail-optimised three-tier fat trees (8 rails, 32 hosts a scalable unit, 16 spines a pod, 8 cores) by HCAs.
SIZES = {1024: dict(pods=2, sus=2), 8192: dict(pods=8, sus=4), 32768: dict(pods=32, sus=4)}


def installed(tmp: Path, python: str, rev: str | None = None) -> Path:
    """The bin/ of a virtual environment of the interpreter `python` holding this checkout (or the git revision
    `rev` of its repository, a baseline to compare with) as pip installs it (pinned by its .ci/constraints.txt,
    as the image is), its bytecode compiled; built from a copy of the sources, so that the build's build/ and
    egg-info stay out of the working tree."""
    from testkit.environment import NOT_SOURCES

    source, venv = tmp / (f"src-{rev}" if rev else "src"), Path(tempfile.mkdtemp(prefix="venv-", dir=tmp))
    if not source.exists() and rev:
        source.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True,
                                 timeout=120).stdout
        subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True, timeout=120)
    elif not source.exists():
        shutil.copytree(ROOT, source, ignore=NOT_SOURCES, symlinks=True)
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
    inside = str(venv / "bin" / "python")
    subprocess.run([inside, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--constraint",
                    str(source / ".ci" / "constraints.txt"), str(source)], check=True, timeout=900)
    site = subprocess.run([inside, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    subprocess.run([inside, "-m", "compileall", "-q", *(str(Path(site) / p) for p in SHIPPED)],
                   check=True, capture_output=True, timeout=300)
    return venv / "bin"


def interpreter(venv: Path) -> str:
    """The Python a virtual environment's bin/ runs, as `Python 3.11.2 (/usr/bin/python3.11)`."""
    return subprocess.run([str(venv / "python"), "-c", "import platform, sys; "
                           "print('Python', platform.python_version(), f'({sys._base_executable})')"],
                          check=True, capture_output=True, text=True, timeout=60).stdout.strip()


def ib_sizes(sizes: Sequence[int], tmp: Path, runs: int, tg: Harness,
             venvs: Mapping[str, Path] | None = None) -> list[dict[str, object]]:
    """Each size's capture as ibnetdiscover prints it (`Fabric.capture_text`: ibsim cannot simulate 32,768 HCAs
    here), read by the bare interpreter, a minimal Python reader, topolabel and Topograph, all interleaved; the
    Python steps from each of `venvs` (interpreter -> a bin/ made by `installed`) when given, else from this
    checkout."""
    from hack.ibfabric import Spec, build

    pythons: dict[str, Path | None] = {f" on {name.split(' (')[0]}": venv for name, venv in (venvs or {}).items()}
    pythons = pythons or {"": None}
    rows = []
    for size in sizes:
        fabric = build(Spec(rails=8, hosts=32, spines=16, uplinks=2, cores=8, **SIZES[size]))  # type: ignore[arg-type]
        capture, nodes_file = tmp / f"rail-{size}.ibnetdiscover", tmp / f"nodes-{size}.txt"
        capture.write_text(fabric.capture_text(switches_first=True))
        nodes_file.write_text("".join(f"{h}\n" for h in sorted(fabric.truth.guids)))
        labels_out, conf_out = tmp / "topograph-labels.json", tmp / "topology.conf"
        steps: dict[str, list[str]] = {}
        for on, venv in pythons.items():
            python = str(venv / "python") if venv else sys.executable
            steps[f"python -c pass{on}"] = [python, "-c", "pass"]
            # -P: not bench/ first on its path, where bench/operator.py would stand in for the standard module
            steps[f"minimal Python reader (bench/ibminimal.py){on}"] = [
                python, "-P", str(ROOT / "bench" / "ibminimal.py"), str(capture)]
            steps[f"topolabel{on}"] = ([str(venv / "topolabel"), *discover_args(capture)] if venv
                                       else discover_ib(capture))
        theirs = f"Topograph {tg.version}"
        steps[theirs] = [str(tg.binary), "ib", "-ibnetdiscover", str(capture), "-nodes", str(nodes_file), "-labels",
                         str(labels_out), "-slurm", str(conf_out)]
        found: dict[str, list[Run]] = {name: [] for name in steps}
        for _ in range(runs):
            for name, argv in steps.items():
                found[name].append(measure(argv, cwd=ROOT))
        cpu = {name: Series(r) for name, r in found.items()}
        them = cpu[theirs]
        rows.append({"HCAs": f"{size:,}", "capture MB": round(capture.stat().st_size / 2**20, 1),
                     **{f"{name} CPU s": f"{series.cpu:.3f}" for name, series in cpu.items()},
                     **{f"topolabel{on} / Topograph CPU": ratio(cpu[f"topolabel{on}"].cpu, them.cpu) for on in pythons},
                     **{f"peak RSS MB (topolabel{on} / Topograph)": f"{cpu[f'topolabel{on}'].rss:.0f} / {them.rss:.0f}"
                        for on in pythons},
                     **placements(fabric, found[f"topolabel{next(iter(pythons))}"][-1].stdout, labels_out)})
        rows[-1]["placed"] = "%d / %d" % rows[-1]["placed"]  # type: ignore[str-format]
        print(f"{size:,} HCAs measured ({load()})", file=sys.stderr)
    return rows


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

def aws(tmp: Path, runs: int, instances: int, others: int, tg: Harness) -> list[dict[str, object]]:
    """The same cluster as bench/aws.py, then again with `others` placed instances of another cluster."""
    import logging

    from bench.aws import cluster
    from testkit.moto_topology import TopologyServer

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
            rows += _aws_rows(server, runs, len(items), extra, tg, env, nodes_file, inst_file, tmp)
    return rows


def _launch_others(server: object, count: int) -> None:
    """Another cluster's placed instances in the same regions, launched in bench.aws's batch size."""
    from bench.aws import LAUNCH

    for r, region in enumerate(REGIONS):
        left = count // len(REGIONS) + (r < count % len(REGIONS))
        for start in range(0, left, LAUNCH):
            ids = server.launch(region, min(LAUNCH, left - start))  # type: ignore[attr-defined]
            server.place_tree(ids, f"other-{region}-{start}")  # type: ignore[attr-defined]


def _aws_rows(server: object, runs: int, count: int, extra: int, tg: Harness,
              env: dict[str, str], nodes_file: Path, inst_file: Path, tmp: Path) -> list[dict[str, object]]:
    labels_out = tmp / "topograph-aws-labels.json"
    ours, theirs, calls = [], [], {"topolabel": 0, "Topograph": 0}
    for _ in range(runs):
        server.fabric.calls.clear()  # type: ignore[attr-defined]
        ours.append(measure([*topolabel(), "discover", "--source", "aws", "--nodes", str(nodes_file), "--endpoint-url",
                             server.url, "-o", "json"], env=env, cwd=ROOT))  # type: ignore[attr-defined]
        calls["topolabel"] = sum(server.calls.values())  # type: ignore[attr-defined]
        server.fabric.calls.clear()  # type: ignore[attr-defined]
        theirs.append(measure([str(tg.binary), "aws", "-instances", str(inst_file), "-labels", str(labels_out)],
                              env={**env, "AWS_ENDPOINT_URL_EC2": server.url}))  # type: ignore[attr-defined]
        calls["Topograph"] = sum(server.calls.values())  # type: ignore[attr-defined]
    snap = json.loads(ours[-1].stdout)["nodes"]
    labels = topograph_labels(labels_out.read_text())
    same = all(snap.get(n, {}).get(f"layer-{i + 1}") == labels.get(n, {}).get(key)
               for n in snap.keys() | labels.keys() for i, key in enumerate(("core", "spine", "leaf")))
    us, them = Series(ours), Series(theirs)
    base = {"instances": count, "other instances in the regions": extra}
    rows = []
    for who, series, placed in (("topolabel", us, len(snap)), (f"Topograph {tg.version}", them, len(labels))):
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
    parser.add_argument("--parts", default="ib,aws", help="comma-separated: ib, ibsizes, aws")
    parser.add_argument("--sizes", default="1024,8192,32768", help=f"ibsizes: HCAs, of {', '.join(map(str, SIZES))}")
    parser.add_argument("--instances", type=int, default=10_000, help="aws: the cluster's instances")
    parser.add_argument("--others", type=int, default=10_000,
                        help="aws: other placed instances added for a second row (0: none)")
    parser.add_argument("--topograph-source", type=Path, metavar="DIR",
                        help="a copy of Topograph's repository to build the harness from (default: the version "
                             "bench/topograph-harness/go.mod requires, from the module proxy)")
    parser.add_argument("--topograph-version", default="v1.0.0", help="the version --topograph-source holds")
    parser.add_argument("--installed", nargs="?", const=sys.executable, action="append", metavar="PYTHON",
                        help="ibsizes: run the Python steps from a virtual environment of PYTHON (default: this "
                             "interpreter; /usr/bin/python3 is Debian's, the one the image ships) with this "
                             "checkout pip-installed; again for another interpreter, side by side")
    parser.add_argument("--baseline", metavar="REV", help="ibsizes: also this git revision of topolabel, "
                        "pip-installed for the last --installed interpreter, side by side (what a change did)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    sizes = [int(s) for s in args.sizes.split(",")]
    if not set(sizes) <= set(SIZES):
        parser.error(f"--sizes: each of {', '.join(map(str, SIZES))}")
    tg = harness(args.topograph_source, args.topograph_version if args.topograph_source else None)
    print(f"machine: {machine()}")
    print(f"Topograph {tg.version} harness: {tg.binary}")
    print(f"topolabel: {' '.join(topolabel())} in {topolabel_source()}")
    with tempfile.TemporaryDirectory() as tmp:
        if "ib" in parts:
            from bench.infiniband import FABRICS

            ib_tables([infiniband(name, spec, Path(tmp), args.runs, tg) for name, spec in FABRICS.items()])
        if "ibsizes" in parts:
            pythons = args.installed or []
            venvs = {interpreter(venv): venv for venv in (installed(Path(tmp), p) for p in pythons)}
            if args.baseline:
                venv = installed(Path(tmp), (pythons or [sys.executable])[-1], args.baseline)
                name, _, path = interpreter(venv).partition(" (")
                venvs[f"{name} at {args.baseline} ({path}"] = venv
            how = f"installed for {', '.join(venvs)}" if venvs else "run from this checkout"
            print_table(f"InfiniBand captures by size, CPU s (user + system), medians of {args.runs} interleaved; "
                        f"topolabel {how}", ib_sizes(sizes, Path(tmp), args.runs, tg, venvs))
        if "aws" in parts:
            print_table("AWS against moto, whole processes (medians)",
                        aws(Path(tmp), args.runs, args.instances, args.others, tg))
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
