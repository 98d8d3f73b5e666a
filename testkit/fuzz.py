"""Fuzz every topolabel command with malformed input, in-process, and count what goes wrong.

    python3 -m testkit.fuzz --cases 3000 --seed 1            # random cases, then the fixed checks
    python3 -m testkit.fuzz --cases 0 --json report.json     # only the fixed checks, a machine-readable report
    python3 -m testkit.fuzz --cases 60 --seed 32 --quick --budget 60   # what CI runs (tests/test_fuzz.py)

Random cases: each writes one malformed input (a valid document with wrong types, deleted or added keys,
odd strings; junk and non-UTF-8 bytes; nesting deeper than 1000; an alias bomb; a directory where a file
belongs) and runs `topolabel.cli.main` on it in a forked child, so a hang can be killed and a crash cannot
take the driver down. The hostile world's inputs are cases too (testkit/fuzz_hostile.py): kubeconfigs, the API
server's answers (a raw-socket server in the driver answers the case), an exec plugin's and lldpcli's
output, nodes' InfiniBand claims. Fixed checks: inputs with a known right answer (wrong results), scenarios
that lose data (a user's file overwritten, a label topolabel does not own removed), network faults (a silent
server, a slow-drip body, an unanswered PATCH, refused connections, non-JSON answers), and the hostile
world's: headers and TLS dripped, Retry-After 60, endless lists and bodies, plugins and tools that never end
or flood, a closed or full stdout, devices and FIFOs as targets, nodes claiming others' HCAs or switches,
another tool's label key. `--quick` leaves out the checks that wait for a default timeout (20 to 60 s each).

Outcomes counted:
- traceback: an exception escaped `main`, or main reported an internal error (a bug caught by its last net);
  grouped by exception type and innermost project frame (a root cause);
- hang: no exit within --timeout seconds (faults: the command's own timeout plus slack);
- bad exit: an exit code other than 0, 1, 2, or an error (exit 2) that is not one line;
- leak: an error message quoting a canary string planted in the file away from the fault;
- wrong result / data loss: a fixed check that failed.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import random
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

from testkit.ibcaptures import SMALL

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TRACEBACK_EXIT = 99
CANARY = "CANARY-s3cr3t"
INTERNAL = "internal error"  # what main's last net prints; counted as a traceback
MEMORY_LIMIT = 2 << 30


# --- running one case ---------------------------------------------------------------------------------

@dataclass
class Outcome:
    code: int | None  # None: killed after the timeout
    out: str
    err: str
    seconds: float

    @property
    def traceback(self) -> bool:
        return self.code == TRACEBACK_EXIT or INTERNAL in self.err

    @property
    def hang(self) -> bool:
        return self.code is None

    def signature(self) -> str:
        """Exception type and innermost frame in topolabel's code: one root cause."""
        lines = self.err.strip().splitlines()
        frames = [ln.strip() for ln in lines if ln.strip().startswith("File ") and str(ROOT) in ln
                  and "/hack/" not in ln]
        where = re.sub(r'File "[^"]*/(\w+/[\w/]+\.py)", line (\d+), in ([\w<>]+)', r"\1:\2 \3", frames[-1]) if frames else "?"
        last = lines[-1] if lines else "?"
        return f"{last.split(':')[0][:60]} at {where}"


def run_case(argv: list[str], timeout: float, stdin: bytes = b"", fsize: int | None = None,
             stdout: int | None = None) -> Outcome:
    """`main(argv)` in a forked child with its own stdout/stderr (or `stdout`, a file descriptor: a closed pipe,
    /dev/full); killed after `timeout` seconds."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    inp = tempfile.TemporaryFile()
    inp.write(stdin)
    inp.seek(0)
    sys.stdout.flush()
    sys.stderr.flush()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # child
        code = TRACEBACK_EXIT
        try:
            os.setpgid(0, 0)
            os.dup2(inp.fileno(), 0)
            os.dup2(out.fileno() if stdout is None else stdout, 1)
            os.dup2(err.fileno(), 2)
            sys.stdin = io.TextIOWrapper(os.fdopen(0, "rb", closefd=False))
            sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), write_through=True)
            sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), write_through=True)
            resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
            if fsize is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            from topolabel.cli import main
            try:
                result = main(argv)
                code = result if isinstance(result, int) else 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
            except BaseException:  # noqa: BLE001 - what the driver counts
                traceback.print_exc()
                code = TRACEBACK_EXIT
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    deadline = start + timeout
    status = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.005)
    else:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        status = None
    seconds = time.monotonic() - start
    code = None if status is None else (os.waitstatus_to_exitcode(status))
    if code is not None and code < 0:
        code = 128 - code  # killed by a signal: a crash, never a valid exit
    out.seek(0)
    err.seek(0)
    return Outcome(code, out.read().decode(errors="replace"), err.read().decode(errors="replace"), seconds)


# --- valid inputs the mutations start from ------------------------------------------------------------


INVENTORY = {"levels": ["room", "row", "rack"], "localNames": True,
             "hosts": [{"node": "gke-a3-b00-s00-n000", "room": "dc1", "row": "r3", "rack": "12"},
                       {"pattern": "gke-a4-*", "room": "dc1", "row": "r4", "rack": "12"}]}
INVENTORY_CSV = "node,room,row,rack\n# CANARY-s3cr3t\ngke-a3-b00-s00-n000,dc1,r3,12\ngke-a4-*,dc1,r4,12\n"
LLDP_FACTS = {"version": 1, "neighbors": [{"interface": "eth0", "chassisName": "leaf-r01", "chassisId": "56:6c:21:32:03:8b",
                                           "portId": "swp1", "portDescr": "swp1"}]}
LLDP_JSON0 = {"lldp": [{"interface": [{"name": "eth0", "chassis": [{"id": [{"type": "mac", "value": "56:6c"}],
                                                                    "name": [{"value": "leaf-r01"}]}],
                                       "port": [{"id": [{"type": "ifname", "value": "swp1"}],
                                                 "descr": [{"value": "swp1"}]}]}]}]}
SWITCH_MAP = {"levels": ["block"], "switches": {"leaf-r01": {"block": "b1"}, "leaf-r02": {"block": "b1"}},
              "pairs": [["leaf-r01", "leaf-r02"]]}
GUID_MAP = {"node-a": ["mlx5_0=0x2c90300005670"], "node-b": "0x2c90300005680"}
NODE_NAME_MAP = '# CANARY-s3cr3t\n0x2c90300005680 "node-b mlx5_0"\n0x2c90300009999 spine-1\n'
PODS = {"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml", "annotations": {}},
     "spec": {"nodeName": "gke-a3-b00-s00-n000", "containers": [
         {"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}}}]},
     "status": {"phase": "Running"}}]}


OCI = "oci.oraclecloud.com/"
MULTI_LINE = {"config/check"}  # lists every problem of the file, one per line, by design


@dataclass
class Fixtures:
    """Valid inputs in a directory; targets combine them with the one malformed file of a case. `server`: the
    driver's raw-socket API server (testkit.fuzz_hostile.HostileServer), which answers served cases."""

    dir: Path
    docs: dict[str, Any] = field(default_factory=dict)
    server: Any = None

    def path(self, name: str) -> str:
        return str(self.dir / name)


def small_fabric() -> str:
    """The small capture of testkit/ibcaptures.py, with a canary comment (no error may quote it)."""
    return f"# {CANARY}\n{SMALL}"


def make_fixtures(root: Path, run: Callable[[list[str], float], Outcome] = run_case) -> Fixtures:
    """Valid inputs in `root`; `run` runs a command (a forked child by default; tests run it in-process)."""
    fx = Fixtures(root)
    fx.docs["nodes"] = yaml.safe_load((EXAMPLES / "nodes.yaml").read_text())
    fx.docs["config"] = yaml.safe_load((EXAMPLES / "topolabel.yaml").read_text())
    fx.docs["job"] = yaml.safe_load((EXAMPLES / "jobs" / "pytorchjob.yaml").read_text())
    for name in ("nodes.yaml", "topolabel.yaml"):
        shutil.copy(EXAMPLES / name, root / name)
    shutil.copy(EXAMPLES / "jobs" / "pytorchjob.yaml", root / "job.yaml")
    snap = run(["discover", "--config", fx.path("topolabel.yaml"), "--nodes", fx.path("nodes.yaml"), "-o", "json"], 60)
    if snap.code != 0:
        raise SystemExit(f"cannot make the fixture snapshot: {snap.err}")
    fx.docs["snapshot"] = json.loads(snap.out)
    (root / "snap.json").write_text(snap.out)
    made = run(["kueue", "--config", fx.path("topolabel.yaml"), "--nodes", fx.path("nodes.yaml"),
                     "--snapshot", fx.path("snap.json"), "--output-dir", fx.path("kueue")], 60)
    if made.code != 0:
        raise SystemExit(f"cannot make the fixture Kueue dir: {made.err}")
    fx.docs["kueue-object"] = yaml.safe_load(next((root / "kueue").glob("topology-*.yaml")).read_text())
    topograph = [node(f"tg-{i}", {"fabric.topograph.run/tier-1": f"leaf{i // 2}", "fabric.topograph.run/tier-2": "spine0",
                                  "nvidia.com/gpu.clique": f"uuid.{i // 2}"}) for i in range(4)]
    oci = [node(f"oci-{i}", {OCI + "rdma.hpc_island_id": "isl1", OCI + "rdma.network_block_id": f"nb{i // 2}",
                             OCI + "rdma.local_block_id": f"lb{i}", OCI + "host.rack_id": f"r{i}"}) for i in range(4)]
    fx.docs["topograph-nodes"] = {"apiVersion": "v1", "kind": "List", "items": topograph}
    fx.docs["oci-nodes"] = {"apiVersion": "v1", "kind": "List", "items": oci}
    fx.docs.update(inventory=INVENTORY, facts=LLDP_FACTS, json0=LLDP_JSON0, switchmap=SWITCH_MAP, guidmap=GUID_MAP,
                   pods=PODS)
    (root / "pods.yaml").write_text(yaml.safe_dump(PODS))
    (root / "fabric.ibnet").write_text(small_fabric())
    (root / "lldp").mkdir()
    (root / "lldp" / "gpu-a.json").write_text(json.dumps(LLDP_FACTS))
    return fx


# --- targets: which command reads the malformed input, and how --------------------------------------

@dataclass
class Target:
    name: str
    seed: str  # a key of Fixtures.docs, or "text:<name>" for a text format
    argv: Callable[[Fixtures, str], list[str]]
    as_dir: str | None = None  # the input goes into a directory as this file name; the dir is the argument
    served: str | None = None  # the input is the fuzz server's answer to paths holding this, not a file


def _f(fx: Fixtures, name: str) -> str:
    return fx.path(name)


TARGETS = [
    Target("config/check", "config", lambda fx, p: ["config", "check", p]),
    Target("config/slurm-yaml", "config", lambda fx, p: ["export", "slurm", "--config", p, "--snapshot",
                                                        _f(fx, "snap.json"), "--nodes", _f(fx, "nodes.yaml"),
                                                        "--format", "yaml"]),
    Target("config/discover", "config", lambda fx, p: ["discover", "--config", p, "--nodes", _f(fx, "nodes.yaml")]),
    Target("config/kueue", "config", lambda fx, p: ["kueue", "--config", p, "--nodes", _f(fx, "nodes.yaml"),
                                                   "--snapshot", _f(fx, "snap.json"), "--output-dir", "-"]),
    Target("nodes/discover", "nodes", lambda fx, p: ["discover", "--source", "labels", "--preset", "gke", "--nodes", p,
                                                     "-o", "json"]),
    Target("nodes/topograph", "topograph-nodes", lambda fx, p: ["discover", "--source", "labels", "--preset",
                                                                "topograph", "--nodes", p, "-o", "json"]),
    Target("nodes/oci", "oci-nodes", lambda fx, p: ["discover", "--source", "labels", "--preset", "oci", "--nodes", p,
                                                    "-o", "json"]),
    Target("nodes/slurm", "nodes", lambda fx, p: ["export", "slurm", "--snapshot", _f(fx, "snap.json"), "--nodes", p,
                                                  "--no-topology"]),
    Target("nodes/plan", "nodes", lambda fx, p: ["plan", "--snapshot", _f(fx, "snap.json"), "--nodes", p, "-o", "json"]),
    Target("nodes/kueue", "nodes", lambda fx, p: ["kueue", "--config", _f(fx, "topolabel.yaml"), "--nodes", p,
                                                  "--source", "labels", "--preset", "gke", "--output-dir", "-"]),
    Target("nodes/show", "nodes", lambda fx, p: ["show", "--snapshot", _f(fx, "snap.json"), "--nodes", p,
                                                 "--config", _f(fx, "topolabel.yaml"), "-o", "json"]),
    Target("nodes/fit", "nodes", lambda fx, p: ["fit", _f(fx, "job.yaml"), "--snapshot", _f(fx, "snap.json"),
                                                "--nodes", p, "--config", _f(fx, "topolabel.yaml"), "-o", "json"]),
    Target("snapshot/plan", "snapshot", lambda fx, p: ["plan", "--snapshot", p, "--nodes", _f(fx, "nodes.yaml"),
                                                       "-o", "json"]),
    Target("snapshot/kueue", "snapshot", lambda fx, p: ["kueue", "--snapshot", p, "--nodes", _f(fx, "nodes.yaml"),
                                                        "--output-dir", "-"]),
    Target("snapshot/slurm", "snapshot", lambda fx, p: ["export", "slurm", "--snapshot", p]),
    Target("snapshot/slurm-yaml", "snapshot", lambda fx, p: ["export", "slurm", "--snapshot", p, "--format", "yaml"]),
    Target("snapshot/volcano", "snapshot", lambda fx, p: ["export", "volcano", "--snapshot", p]),
    Target("snapshot/kai", "snapshot", lambda fx, p: ["export", "kai", "--snapshot", p]),
    Target("snapshot/verify", "snapshot", lambda fx, p: ["verify", "--snapshot", p, "--against", _f(fx, "snap.json"),
                                                         "-o", "json"]),
    Target("snapshot/against", "snapshot", lambda fx, p: ["verify", "--snapshot", _f(fx, "snap.json"), "--against", p,
                                                          "-o", "json"]),
    Target("snapshot/show", "snapshot", lambda fx, p: ["show", "--snapshot", p, "--nodes", _f(fx, "nodes.yaml"),
                                                       "-o", "json"]),
    Target("snapshot/job", "snapshot", lambda fx, p: ["job", "annotate", _f(fx, "job.yaml"), "--queue", "gpu",
                                                      "--within", "block", "--snapshot", p]),
    Target("inventory/yaml", "inventory", lambda fx, p: ["discover", "--source", "inventory", "--inventory", p,
                                                         "-o", "json"]),
    Target("inventory/csv", "text:inventory-csv", lambda fx, p: ["discover", "--source", "inventory", "--inventory",
                                                                 p + ".csv", "-o", "json"]),
    Target("infiniband/ibnetdiscover", "text:ib", lambda fx, p: ["discover", "--source", "infiniband",
                                                                  "--ibnetdiscover", p, "-o", "json"]),
    Target("infiniband/guid-map", "guidmap", lambda fx, p: ["discover", "--source", "infiniband", "--ibnetdiscover",
                                                           _f(fx, "fabric.ibnet"), "--guid-map", p, "-o", "json"]),
    Target("infiniband/node-name-map", "text:name-map", lambda fx, p: [
        "discover", "--source", "infiniband", "--ibnetdiscover", _f(fx, "fabric.ibnet"), "--node-name-map", p]),
    Target("infiniband/health", "text:ib", lambda fx, p: ["health", "--nodes", _f(fx, "nodes.yaml"), "--ibnetdiscover",
                                                          p, "-o", "json"]),
    Target("infiniband/queryerrors", "text:queryerrors", lambda fx, p: [
        "health", "--nodes", _f(fx, "nodes.yaml"), "--ibnetdiscover", _f(fx, "fabric.ibnet"), "--ibqueryerrors", p,
        "-o", "json"]),
    Target("nodes/health", "nodes", lambda fx, p: ["health", "--nodes", p, "--config", _f(fx, "topolabel.yaml"),
                                                   "-o", "json"]),
    Target("config/health", "config", lambda fx, p: ["health", "--config", p, "--nodes", _f(fx, "nodes.yaml"),
                                                     "--ibnetdiscover", _f(fx, "fabric.ibnet"), "-o", "json"]),
    Target("lldp/facts", "facts", lambda fx, p: ["discover", "--source", "lldp", "--lldp-dir", p, "-o", "json"],
           as_dir="gpu-a.json"),
    Target("lldp/json0", "json0", lambda fx, p: ["discover", "--source", "lldp", "--lldp-dir", p, "-o", "json"],
           as_dir="gpu-a.json"),
    Target("lldp/switch-map", "switchmap", lambda fx, p: ["discover", "--source", "lldp", "--lldp-dir",
                                                         _f(fx, "lldp"), "--switch-map", p]),
    Target("lldp/switch-lldp", "json0", lambda fx, p: ["discover", "--source", "lldp", "--lldp-dir", _f(fx, "lldp"),
                                                      "--switch-lldp", p], as_dir="spine-1.json"),
    Target("job/annotate", "job", lambda fx, p: ["job", "annotate", p, "--queue", "gpu", "--within", "block",
                                                 "--snapshot", _f(fx, "snap.json")]),
    Target("job/annotate-slice", "job", lambda fx, p: ["job", "annotate", p, "--queue", "gpu", "--within", "block",
                                                       "--slice-size", "2", "--slice-within", "host",
                                                       "--snapshot", _f(fx, "snap.json")]),
    Target("job/check", "job", lambda fx, p: ["job", "check", p, "--snapshot", _f(fx, "snap.json"), "-o", "json"]),
    Target("job/fit-gates", "job", lambda fx, p: ["fit", p, "--snapshot", _f(fx, "snap.json"), "--nodes",
                                                  _f(fx, "nodes.yaml"), "--config", _f(fx, "topolabel.yaml"),
                                                  "--kueue-feature-gates", "TASMultiLayerTopology=false", "-o", "json"]),
    Target("job/show", "job", lambda fx, p: ["show", "--snapshot", _f(fx, "snap.json"), "--nodes", _f(fx, "nodes.yaml"),
                                             "--config", _f(fx, "topolabel.yaml"), "--job", p, "--svg",
                                             str(Path(p).parent / "out.svg")]),
    Target("job/fit", "job", lambda fx, p: ["fit", p, "--snapshot", _f(fx, "snap.json"), "--nodes",
                                            _f(fx, "nodes.yaml"), "--config", _f(fx, "topolabel.yaml"), "-o", "json"]),
    Target("kueue-dir/show", "kueue-object", lambda fx, p: ["show", "--kueue-dir", p, "--nodes", _f(fx, "nodes.yaml"),
                                                            "-o", "json"], as_dir="topology-x.yaml"),
    Target("kueue-dir/fit", "kueue-object", lambda fx, p: ["fit", _f(fx, "job.yaml"), "--kueue-dir", p, "--nodes",
                                                           _f(fx, "nodes.yaml"), "-o", "json"], as_dir="topology-x.yaml"),
    Target("pods/fit", "pods", lambda fx, p: ["fit", _f(fx, "job.yaml"), "--snapshot", _f(fx, "snap.json"), "--nodes",
                                              _f(fx, "nodes.yaml"), "--pods", p, "--config", _f(fx, "topolabel.yaml"),
                                              "-o", "json"]),
    Target("pods/show", "pods", lambda fx, p: ["show", "--snapshot", _f(fx, "snap.json"), "--nodes",
                                               _f(fx, "nodes.yaml"), "--pods", p, "--config", _f(fx, "topolabel.yaml")]),
]

QUERY_ERRORS = f"""Errors for "node-a mlx5_0"
   GUID 0x0002c9030000567a port 1: [LinkDownedCounter == 3] [PortXmitDiscards == 57]
# {CANARY}
Errors for 0x0002c90200400cc4 "leaf-1"
   GUID 0x0002c90200400cc4 port ALL: [SymbolErrorCounter == 1234]
   GUID 0x0002c90200400cc4 port 1: [SymbolErrorCounter == 1234]
"""
TEXT_SEEDS = {"ib": small_fabric, "inventory-csv": lambda: INVENTORY_CSV, "name-map": lambda: NODE_NAME_MAP,
              "queryerrors": lambda: QUERY_ERRORS}


# --- mutations ----------------------------------------------------------------------------------------

EVIL: list[Any] = [None, True, False, 0, -1, 2**64, 1.5, float("nan"), "", " ", "x" * 300, "²", "١٢",
                   "a/b/c", "../../etc/passwd", "kubernetes.io/hostname", "\x00", "🙂", [], {}, [None], {"": None},
                   [[[]]], "0x1F", "012", "1:30", "1_000", "~", "yes", "-", "*", "[", "a\nb", "\u202e", "ⅷ", "٣٫٥"]


def paths(data: Any, prefix: tuple = (), limit: int = 400) -> Iterator[tuple]:
    """Every path into nested data (breadth first, at most `limit`)."""
    queue = [(prefix, data)]
    count = 0
    while queue and count < limit:
        where, value = queue.pop(0)
        yield where
        count += 1
        if isinstance(value, dict):
            queue.extend((where + (k,), v) for k, v in value.items())
        elif isinstance(value, list):
            queue.extend((where + (i,), v) for i, v in enumerate(value[:20]))


def _parent(data: Any, path: tuple) -> tuple[Any, Any]:
    node = data
    for step in path[:-1]:
        node = node[step]
    return node, path[-1]


def mutate(data: Any, rng: random.Random) -> Any:
    data = copy.deepcopy(data)
    for _ in range(rng.randint(1, 3)):
        where = rng.choice(list(paths(data)))
        if not where:
            return rng.choice(EVIL) if rng.random() < 0.3 else data
        parent, key = _parent(data, where)
        op = rng.random()
        if op < 0.55:
            parent[key] = copy.deepcopy(rng.choice(EVIL))
        elif op < 0.7:
            del parent[key]
        elif op < 0.8 and isinstance(parent, dict):
            parent[rng.choice(["x", "levels", "nodes", "spec", "kind", 7, "", "name"])] = copy.deepcopy(rng.choice(EVIL))
        elif op < 0.9:
            parent[key] = [parent[key]] if rng.random() < 0.5 else {"v": parent[key]}
        else:
            value = parent[key]
            if isinstance(value, str):
                parent[key] = rng.choice([value * 40, value + "²", value.replace("1", "¹"), " " + value, value.upper(),
                                          value + "/x", "-" + value, value + "\udcff"[:0] + "é"])
            elif isinstance(value, list) and value:
                parent[key] = value * rng.randint(2, 5)
    return data


def encode(data: Any, rng: random.Random) -> bytes:
    try:
        if rng.random() < 0.5:
            return json.dumps(data, default=str).encode()
        return ("# " + CANARY + "\n" + yaml.safe_dump(data, allow_unicode=True, sort_keys=False)).encode()
    except (ValueError, TypeError, yaml.YAMLError):
        return json.dumps(str(data)).encode()


def mutate_text(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    for _ in range(rng.randint(1, 4)):
        if not lines:
            break
        i = rng.randrange(len(lines))
        op = rng.random()
        if op < 0.25:
            del lines[i]
        elif op < 0.4:
            lines.insert(i, lines[i])
        elif op < 0.75:
            tokens = re.split(r"(\s+)", lines[i])
            j = rng.randrange(len(tokens))
            tokens[j] = str(rng.choice([e for e in EVIL if isinstance(e, (str, int, float))]))
            lines[i] = "".join(tokens)
        else:
            cut = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:cut] + rng.choice(["\x00", "\"", "[", "]", "(", "0x", "²", "#", ",", "\t", "\r"]) + lines[i][cut:]
    return "".join(lines)


def junk(rng: random.Random) -> bytes | None:
    """Inputs whatever the format: None stands for a directory where a file belongs."""
    depth = rng.choice([1001, 5000, 100000])
    choices: list[Callable[[], bytes | None]] = [
        lambda: bytes(rng.randrange(256) for _ in range(rng.randint(1, 400))),
        lambda: b"\xff\xfe\x00n\x00o\x00d\x00e",
        lambda: "nodes: [é]\n".encode("latin-1"),
        lambda: b"",
        lambda: b"   \n\n",
        lambda: b"null",
        lambda: rng.choice([b"42", b"[]", b'"text"', b"true", b"-", b"{}", b"---\n---\n", b"!!binary aGk=",
                            b"!!set {a, b}", b"2024-01-01", b"!!python/object:os.system {}", b"1e999"]),
        lambda: b"[" * depth + b"]" * depth,
        lambda: b"{\"a\":" * depth + b"1" + b"}" * depth,
        lambda: b"a:\n" + b"".join(b"  " * i + b"b:\n" for i in range(1, 1200)),
        lambda: b"- " * depth + b"x",
        lambda: ALIAS_BOMB,
        lambda: None,
        lambda: "\ufeff".encode() + b"{}",
        lambda: b'{"levels": ' + b"9" * 5000 + b"}",
        lambda: b"levels: " + b"9" * 5000 + b"\n",
        lambda: b"a: 1\n" * 2 + b"\tb: [\n",
    ]
    return rng.choice(choices)()


ALIAS_BOMB = b"""a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
levels: *i
nodes: *i
hosts: *i
items: *i
spec: *i
"""


def make_input(target: Target, fx: Fixtures, rng: random.Random) -> bytes | None:
    if rng.random() < 0.2:
        found = junk(rng)
        return b"" if found is None and target.served else found  # a server answers bytes, never a directory
    if target.seed.startswith("text:"):
        return mutate_text(TEXT_SEEDS[target.seed[5:]](), rng).encode(errors="surrogateescape")
    return encode(mutate(fx.docs[target.seed], rng), rng)


def place_input(target: Target, case_dir: Path, content: bytes | None) -> str:
    """Write the input where the target reads it; returns the command's argument."""
    if target.as_dir:
        folder = case_dir / "in"
        folder.mkdir()
        file = folder / target.as_dir
        if content is None:
            file.mkdir()
        else:
            file.write_bytes(content)
        return str(folder)
    file = case_dir / "input"
    name = str(file) + (".csv" if target.name == "inventory/csv" else "")
    if content is None:
        Path(name).mkdir()
    else:
        Path(name).write_bytes(content)
    return str(file)


# --- the report -----------------------------------------------------------------------------------------

@dataclass
class Report:
    cases: int = 0
    tracebacks: int = 0
    hangs: int = 0
    bad_exits: int = 0
    leaks: int = 0
    wrong: int = 0
    loss: int = 0
    causes: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    by_target: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))

    def judge(self, name: str, outcome: Outcome, note: str) -> None:
        self.cases += 1
        if outcome.hang:
            self.hangs += 1
            self.by_target[name]["hang"] += 1
            self.causes[f"hang in {name}"] += 1
            self.examples.setdefault(f"hang in {name}", note)
        elif outcome.traceback:
            self.tracebacks += 1
            self.by_target[name]["traceback"] += 1
            sig = outcome.signature() if outcome.code == TRACEBACK_EXIT else outcome.err.strip()[:120]
            self.causes[sig] += 1
            self.examples.setdefault(sig, note)
        elif outcome.code not in (0, 1, 2) or (outcome.code == 2 and len(outcome.err.strip().splitlines()) != 1
                                               and not outcome.err.startswith("usage:") and name not in MULTI_LINE):
            self.bad_exits += 1
            self.by_target[name]["bad exit"] += 1
            key = f"bad exit {outcome.code} in {name}: {outcome.err.strip().splitlines()[:1]}"
            self.causes[key[:160]] += 1
            self.examples.setdefault(key[:160], note)
        elif CANARY in outcome.err:
            self.leaks += 1
            self.by_target[name]["leak"] += 1
            self.causes[f"leak in {name}"] += 1
            self.examples.setdefault(f"leak in {name}", note + " :: " + outcome.err.strip()[:200])
        else:
            self.by_target[name]["ok"] += 1

    def check(self, kind: str, name: str, ok: bool, detail: str = "") -> None:
        self.cases += 1
        if not ok:
            if kind == "loss":
                self.loss += 1
            elif kind == "hang":
                self.hangs += 1
            elif kind == "traceback":
                self.tracebacks += 1
            else:
                self.wrong += 1
            self.findings.append(f"[{kind}] {name}: {detail}"[:400])

    def to_dict(self) -> dict[str, Any]:
        return {"cases": self.cases, "tracebacks": self.tracebacks, "root_causes": len(self.causes), "hangs": self.hangs,
                "bad_exits": self.bad_exits, "leaks": self.leaks, "wrong_results": self.wrong, "data_loss": self.loss,
                "causes": dict(self.causes.most_common()), "findings": self.findings,
                "by_target": {k: dict(v) for k, v in sorted(self.by_target.items())}}


def fuzz(report: Report, fx: Fixtures, cases: int, rng: random.Random, timeout: float, show: int,
         save: Path | None, budget: float = float("inf")) -> None:
    """`cases` random cases (fewer when `budget` seconds run out), the targets in turn."""
    from testkit.fuzz_hostile import TARGETS as HOSTILE

    targets = HOSTILE + TARGETS  # the hostile world first: a short budget still covers it
    deadline = time.monotonic() + budget
    for i in range(cases):
        if time.monotonic() > deadline:
            report.findings.append(f"[budget] {i} of {cases} random cases run within {budget:g}s")
            break
        target = targets[i % len(targets)]
        content = make_input(target, fx, rng)
        case_dir = Path(tempfile.mkdtemp(dir=fx.dir))
        arg = place_input(target, case_dir, content) if target.served is None else fx.server.serve(target.served, content)
        argv = target.argv(fx, arg)
        outcome = run_case(argv, timeout)
        note = f"{target.name} case {i}: {(content or b'<dir>')[:160]!r}"
        report.judge(target.name, outcome, note)
        if show and (outcome.traceback or outcome.hang) and report.causes[outcome.signature()] == 1:
            print(f"--- {note}\n{outcome.err[-1500:]}", file=sys.stderr)
        if save and content is not None and (outcome.traceback or outcome.hang or outcome.code not in (0, 1, 2)):
            save.mkdir(parents=True, exist_ok=True)
            (save / f"{target.name.replace('/', '--')}-{i}").write_bytes(content)
        shutil.rmtree(case_dir, ignore_errors=True)


# --- fixed checks: known answers, data loss, faults -----------------------------------------------------

def node(name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta}


def write(path: Path, data: Any) -> str:
    path.write_text(json.dumps(data) if path.suffix == ".json" else yaml.safe_dump(data) if not isinstance(data, str) else data)
    return str(path)


def snapshot_doc(label: str, values: dict[str, Any], name: str = "block") -> dict[str, Any]:
    return {"levels": [{"name": name, "label": label}], "nodes": {n: {name: v} for n, v in values.items()}, "problems": []}


def checks(report: Report, fx: Fixtures, timeout: float, quick: bool = False) -> None:
    d = Path(tempfile.mkdtemp(dir=fx.dir))
    nodes = write(d / "nodes.yaml", {"apiVersion": "v1", "kind": "List", "items": [node("n1"), node("n2")]})

    # A snapshot is untrusted: the same checks as discovery output.
    refused = {"hostname level": snapshot_doc("kubernetes.io/hostname", {"n1": "evil", "n2": "evil"}),
               "node.kubernetes.io level": snapshot_doc("node.kubernetes.io/instance-type", {"n1": "a", "n2": "a"}),
               "topology.kubernetes.io level": snapshot_doc("topology.kubernetes.io/zone", {"n1": "a", "n2": "a"}),
               "GKE level": snapshot_doc("cloud.google.com/gce-topology-block", {"n1": "a", "n2": "a"}),
               "EKS level": snapshot_doc("topology.k8s.aws/network-node-layer-1", {"n1": "a", "n2": "a"}),
               "invalid value": snapshot_doc("topolabel.dev/block", {"n1": "a b", "n2": "x" * 64}),
               "integer value": snapshot_doc("topolabel.dev/block", {"n1": 1, "n2": 2}),
               "invalid key": snapshot_doc("Bad Key/x y", {"n1": "a", "n2": "a"}),
               "not a tree": {"levels": [{"name": "block", "label": "topolabel.dev/block"},
                                         {"name": "rack", "label": "topolabel.dev/rack"}],
                              "nodes": {"n1": {"block": "b1", "rack": "r1"}, "n2": {"block": "b2", "rack": "r1"}}},
               "17 levels": {"levels": [{"name": f"l{i}", "label": f"topolabel.dev/l{i}"} for i in range(17)],
                             "nodes": {"n1": {f"l{i}": "a" for i in range(17)}}}}
    for what, doc in refused.items():
        snap = write(d / "bad-snap.json", doc)
        out = run_case(["plan", "--snapshot", snap, "--nodes", nodes, "-o", "json"], timeout)
        report.check("wrong", f"snapshot with {what} refused", out.code == 2 and not out.traceback,
                     f"exit {out.code}: {(out.out + out.err)[-200:]}")

    # Inventory values are strings: 012, 1:30, 0x1F, 1_000 are racks, 0 is a rack.
    racks = ["012", "1:30", "0x1F", "1_000", "0"]
    inv_nodes = write(d / "inv-nodes.yaml", {"items": [node(f"n{i}") for i in range(len(racks))]})
    inv = d / "inv.yaml"
    inv.write_text("levels: [rack]\nhosts:\n" + "".join(f"  - {{node: n{i}, rack: {r}}}\n" for i, r in enumerate(racks)))
    out = run_case(["discover", "--source", "inventory", "--inventory", str(inv), "--nodes", inv_nodes, "-o", "json"], timeout)
    got = json.loads(out.out)["nodes"] if out.code == 0 else {}
    # as strings: '1:30' is the rack 1:30 (label value 1-30, ':' is not allowed there), not YAML 1.1's 5400
    values = ["012", "1-30", "0x1F", "1_000", "0"]
    report.check("wrong", "inventory values read as strings", [got.get(f"n{i}", {}).get("rack") for i in range(len(racks))] == values,
                 f"exit {out.code}: {got or out.err.strip()}")
    inv.write_text('levels: [rack]\nlocalNames: "false"\nhosts: [{node: n1, rack: r1}]\n')
    out = run_case(["discover", "--source", "inventory", "--inventory", str(inv), "-o", "json"], timeout)
    report.check("wrong", "localNames: \"false\" is an error", out.code == 2, f"exit {out.code}")

    # A config may not make topolabel write a label it does not own.
    cfg = write(d / "cfg.yaml", {"levels": [{"name": "rack", "label": "kubernetes.io/hostname"}]})
    inv.write_text("levels: [rack]\nhosts: [{node: n1, rack: r1}, {node: n2, rack: r2}]\n")
    out = run_case(["plan", "--config", cfg, "--source", "inventory", "--inventory", str(inv), "--nodes", nodes, "-o", "json"], timeout)
    report.check("loss", "config level key kubernetes.io/hostname refused", out.code == 2, f"exit {out.code}: {out.out[:200]}")

    # A managed-labels annotation naming a key topolabel does not own never removes it.
    crafted = write(d / "crafted.yaml", {"items": [node("n1", {"topolabel.dev/rack": "r1"},
                                                        {"topolabel.dev/managed-labels": "kubernetes.io/hostname,topolabel.dev/rack"})]})
    snap = write(d / "snap-ok.json", snapshot_doc("topolabel.dev/rack", {"n1": "r1"}, "rack"))
    out = run_case(["plan", "--snapshot", snap, "--nodes", crafted, "-o", "json"], timeout)
    removed = [k for c in (json.loads(out.out)["changes"] if out.code == 0 else []) for k in c["remove"]]
    report.check("loss", "crafted managed-labels annotation cannot remove kubernetes.io/hostname",
                 "kubernetes.io/hostname" not in removed, f"removes {removed}")

    # Stable values: a newcomer named `rack 1` beside `rack-1` must not rename rack-1.
    managed = {"topolabel.dev/managed-labels": "topolabel.dev/rack"}
    joined = write(d / "joined.yaml", {"items": [node(f"a{i}", {"topolabel.dev/rack": "rack-1"}, managed) for i in range(3)]
                                       + [node("new")]})
    inv.write_text("levels: [rack]\nhosts:\n" + "".join(f"  - {{node: a{i}, rack: rack-1}}\n" for i in range(3))
                   + "  - {node: new, rack: rack 1}\n")
    out = run_case(["plan", "--source", "inventory", "--inventory", str(inv), "--nodes", joined, "-o", "json"], timeout)
    changed = sorted(c["node"] for c in json.loads(out.out)["changes"]) if out.code == 0 else None
    report.check("wrong", "a joining domain never renames an existing one", changed == ["new"],
                 f"exit {out.code}, changed {changed}: {out.err.strip()[:200]}")

    _file_checks(report, fx, d, timeout)
    _cluster_checks(report, fx, d, timeout)
    if not quick:
        _fault_checks(report, fx, d, timeout)
    from testkit.fuzz_hostile import hostile_checks

    hostile_checks(report, fx, d, quick)


def _file_checks(report: Report, fx: Fixtures, d: Path, timeout: float) -> None:
    base = ["--config", fx.path("topolabel.yaml"), "--nodes", fx.path("nodes.yaml"), "--snapshot", fx.path("snap.json")]
    # A hand-written file in the output dir that carries the managed-by label, but was not generated.
    out_dir = d / "kueue-out"
    shutil.copytree(fx.dir / "kueue", out_dir)
    mine = out_dir / "clusterqueue-mine.yaml"
    mine.write_text("# my own queue\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: mine\n"
                    "  labels: {app.kubernetes.io/managed-by: topolabel}\nspec: {}\n")
    kust = out_dir / "kustomization.yaml"
    kust.write_text("# hand-written\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                    "resources: [clusterqueue-mine.yaml]\npatches: [{path: my-patch.yaml}]\n")
    before = kust.read_text()
    out = run_case(["kueue", *base, "--output-dir", str(out_dir)], timeout)
    report.check("loss", "kueue keeps a hand-written file carrying the managed-by label", mine.exists(),
                 f"exit {out.code}: {out.err.strip()[-200:]}")
    after = kust.read_text() if kust.exists() else ""
    merged = out.code == 0 and "clusterqueue-mine.yaml" in after and "my-patch.yaml" in after
    report.check("loss", "kueue merges or refuses a hand-written kustomization.yaml",
                 merged or (out.code == 2 and after == before), f"exit {out.code}; now {after[:200]!r}")

    # export kai into a Kueue directory.
    kai_dir = d / "kueue-kai"
    shutil.copytree(fx.dir / "kueue", kai_dir)
    kueue_files = sorted(p.name for p in kai_dir.glob("*.yaml") if p.name != "kustomization.yaml")
    out = run_case(["export", "kai", "--snapshot", fx.path("snap.json"), "--output-dir", str(kai_dir)], timeout)
    left = sorted(p.name for p in kai_dir.glob("*.yaml"))
    report.check("loss", "export kai into a Kueue dir keeps the Kueue files", set(kueue_files) <= set(left),
                 f"exit {out.code}; left {left}")

    # A file-size limit: the user's file stays byte-identical, exit 2 with one line.
    job = d / "job.yaml"
    shutil.copy(fx.dir / "job.yaml", job)
    original = job.read_bytes()
    out = run_case(["job", "annotate", str(job), "--queue", "gpu", "--within", "block", "--snapshot", fx.path("snap.json"),
                    "-i"], timeout, fsize=len(original) // 2)
    report.check("loss", "job annotate -i under a file-size limit keeps the file", job.read_bytes() == original,
                 f"exit {out.code}; {len(job.read_bytes())} of {len(original)} bytes left")
    report.check("wrong", "job annotate -i under a file-size limit exits 2 with one line",
                 out.code == 2 and len(out.err.strip().splitlines()) == 1, f"exit {out.code}: {out.err.strip()[-200:]}")
    svg = d / "topo.svg"
    svg.write_text("<svg>old picture</svg>\n" * 3)
    old_svg = svg.read_bytes()
    out = run_case(["show", *base, "--svg", str(svg)], timeout, fsize=len(old_svg))
    report.check("loss", "show --svg under a file-size limit keeps the old picture", svg.read_bytes() == old_svg,
                 f"exit {out.code}: {out.err.strip()[-200:]}")
    limited = d / "kueue-limited"
    shutil.copytree(fx.dir / "kueue", limited)
    other_cfg = write(d / "cfg-other.yaml", {**fx.docs["config"], "kueue": {**fx.docs["config"]["kueue"], "topologyName": "other"}})
    snapshot_before = {p.name: p.read_bytes() for p in limited.iterdir()}
    out = run_case(["kueue", "--config", other_cfg, "--nodes", fx.path("nodes.yaml"), "--snapshot", fx.path("snap.json"),
                    "--output-dir", str(limited)], timeout, fsize=300)
    snapshot_after = {p.name: p.read_bytes() for p in limited.iterdir()}
    report.check("loss", "kueue --output-dir under a file-size limit keeps every file",
                 all(snapshot_after.get(k) == v for k, v in snapshot_before.items()), f"exit {out.code}")
    report.check("wrong", "kueue --output-dir under a file-size limit exits 2", out.code == 2, f"exit {out.code}")


def _cluster_checks(report: Report, fx: Fixtures, d: Path, timeout: float) -> None:
    """Two-step scenarios against kmock: what one run writes must not let the next remove foreign labels."""
    try:
        from testkit.kmockcluster import MockCluster
    except ImportError as exc:
        report.findings.append(f"[skipped] cluster checks: {exc}")
        return
    with MockCluster() as cluster:
        kubeconfig = str(cluster.kubeconfig(d))
        cluster.create_nodes([node("n1", {"example.com/rack": "r1"}), node("n2")])
        inv = d / "inv2.yaml"
        inv.write_text("levels: [rack]\nhosts: [{node: n1, rack: r1}, {node: n2, rack: r2}]\n")
        cfg_a = write(d / "cfg-a.yaml", {"levels": [{"name": "rack", "label": "example.com/rack"}]})
        cfg_b = write(d / "cfg-b.yaml", {"levels": [{"name": "rack", "label": "example.com/rack-v2"}]})
        common = ["--source", "inventory", "--inventory", str(inv), "--kubeconfig", kubeconfig, "--force", "-o", "json"]
        run_case(["apply", "--config", cfg_a, *common], timeout)
        run_case(["apply", "--config", cfg_b, *common], timeout)
        labels = cluster.node_labels()
        report.check("loss", "a key a node already carried never becomes managed",
                     labels["n1"].get("example.com/rack") == "r1", f"n1 labels now {labels['n1']}")

        # One crafted snapshot must not make the next run delete kubernetes.io/hostname.
        evil = write(d / "evil.json", snapshot_doc("kubernetes.io/hostname", {"n1": "evil", "n2": "evil"}, "host"))
        good = write(d / "good.json", snapshot_doc("topolabel.dev/block", {"n1": "b1", "n2": "b1"}))
        run_case(["apply", "--snapshot", evil, "--kubeconfig", kubeconfig, "--force", "-o", "json"], timeout)
        run_case(["apply", "--snapshot", good, "--kubeconfig", kubeconfig, "--force", "-o", "json"], timeout)
        labels = cluster.node_labels()
        report.check("loss", "a crafted snapshot cannot rewrite or delete kubernetes.io/hostname",
                     labels["n1"].get("kubernetes.io/hostname") == "n1", f"n1 labels now {labels['n1']}")


# --- network faults: tiny raw servers (testkit/faultserver.py) ------------------------------------------

def _fault_checks(report: Report, fx: Fixtures, d: Path, timeout: float) -> None:
    from testkit.faultserver import FaultServer, closed_port, html, no_patch_answer, silent, slow_drip

    limit = 20.0 + 10.0  # the default read timeout (20 s) plus slack for start-up
    plan = ["plan", "--source", "labels", "--preset", "gke", "-o", "json", "--kubeconfig"]
    snap = write(d / "snap-n1.json", snapshot_doc("topolabel.dev/block", {"n1": "b1"}))
    apply = ["apply", "--snapshot", snap, "-o", "json", "--kubeconfig"]
    for name, behave, argv in [("silent server", silent, plan), ("slow-drip body", slow_drip, plan),
                               ("unanswered PATCH", no_patch_answer, apply), ("HTML answer", html, plan)]:
        with FaultServer(behave) as server:
            out = run_case([*argv, server.kubeconfig(d)], max(limit, timeout) + 60)
        ended = out.code is not None and out.seconds <= limit
        report.check("hang", f"{name} ends within the timeout", ended, f"exit {out.code} after {out.seconds:.0f}s")
        report.check("traceback", f"{name}: one line, exit 2",
                     out.code == 2 and not out.traceback and len(out.err.strip().splitlines()) == 1,
                     f"exit {out.code}: {out.err.strip()[-300:]}")
        if name == "unanswered PATCH":
            report.check("wrong", "apply prints its report when a PATCH is never answered", '"result"' in out.out,
                         f"stdout {out.out[:200]!r}")
    server = FaultServer(silent)
    server.port = closed_port()
    out = run_case([*plan, server.kubeconfig(d)], 120)
    server.__exit__()
    report.check("traceback", "refused connection: one line, exit 2",
                 out.code == 2 and not out.traceback and len(out.err.strip().splitlines()) == 1 and out.seconds < limit,
                 f"exit {out.code} after {out.seconds:.0f}s: {out.err.strip()[-300:]}")

    # a tool that hangs is killed with everything it started, even a child that keeps its output open
    pidfile = d / "tool-child.pid"
    tool = d / "hangs.sh"
    tool.write_text(f"#!/bin/sh\nsleep 600 &\necho $! > {pidfile}\nsleep 600\n")
    tool.chmod(0o755)
    out = run_case(["agent", "--once", "--print", "--lldpcli", str(tool)], 90)
    report.check("hang", "a tool that hangs is stopped within its timeout (agent lldpcli, 30 s)",
                 out.code is not None and out.seconds < 40, f"exit {out.code} after {out.seconds:.0f}s")
    time.sleep(1)
    child = int(pidfile.read_text()) if pidfile.exists() else 0
    left = child and Path(f"/proc/{child}").exists() and "zombie" not in Path(f"/proc/{child}/status").read_text()
    report.check("hang", "a timed-out tool leaves no process behind", not left, f"pid {child} still runs")
    if left:
        os.kill(child, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=2000, help="random cases (default 2000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds before a case counts as a hang")
    parser.add_argument("--no-checks", action="store_true", help="random cases only")
    parser.add_argument("--quick", action="store_true",
                        help="leave out the checks that wait for a default timeout (what CI runs)")
    parser.add_argument("--budget", type=float, default=float("inf"), metavar="SECONDS",
                        help="stop the random cases after this long (the checks still run)")
    parser.add_argument("--show", type=int, default=0, help="print the first traceback of each new root cause")
    parser.add_argument("--json", metavar="FILE", help="write the report as JSON")
    parser.add_argument("--save", metavar="DIR", type=Path,
                        help="save each input that crashed or hung as DIR/<target>-<case> (a seed corpus)")
    args = parser.parse_args(argv)
    os.environ["KUBECONFIG"] = "/nonexistent/kubeconfig"  # no case may reach a real cluster by default
    sys.path.insert(0, str(ROOT))
    from topolabel.cli import parser as cli_parser

    cli_parser()  # load every command and source before forking
    from kubernetes import client

    client.CoreV1Api, client.CustomObjectsApi  # noqa: B018 - imported on first use, which takes seconds (2 CPU s:
    # pydantic models), and each served case would pay it
    from testkit.fuzz_hostile import HostileServer, add_fixtures

    rng = random.Random(args.seed)
    report = Report()
    with tempfile.TemporaryDirectory(prefix="topolabel-fuzz-") as tmp, HostileServer() as server:
        fx = make_fixtures(Path(tmp))
        add_fixtures(fx, server)
        started = time.monotonic()
        fuzz(report, fx, args.cases, rng, args.timeout, args.show, args.save, args.budget)
        if not args.no_checks:
            checks(report, fx, args.timeout, args.quick)
        seconds = time.monotonic() - started
    data = report.to_dict()
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")
    print(f"{data['cases']} cases in {seconds:.0f}s: {data['tracebacks']} tracebacks ({data['root_causes']} causes), "
          f"{data['hangs']} hangs, {data['bad_exits']} bad exits, {data['leaks']} leaks, "
          f"{data['wrong_results']} wrong results, {data['data_loss']} ways to lose data")
    for cause, count in report.causes.most_common():
        print(f"  {count:5d}  {cause}")
        print(f"         e.g. {report.examples.get(cause, '')[:220]}")
    for finding in report.findings:
        print(f"  {finding}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
