"""The hostile world for testkit/fuzz.py (issue 32): what topolabel reads that is not a file a user names, and the
ways out that are not a return value.

Random cases (`TARGETS`, mixed into the driver's): a kubeconfig; the API server's answer for nodes, pods or
Kueue objects (served by `HostileServer`, a raw-socket server in the driver process that the forked case
talks to); an exec credential plugin's and lldpcli's output (a script prints the case); nodes whose
`topolabel.dev/ib-node-guids` annotations claim HCAs.

Fixed checks (`hostile_checks`), each with a known right answer: headers and a TLS handshake dripped, a
Retry-After of a minute, a list that repeats its continue token, a body that never ends, a plugin and a tool
that flood, a plugin that never answers (not with `quick`), a closed and a full stdout, a FIFO or a device as
the SVG target, nodes claiming other nodes' HCAs and an LLDP host claiming a switch pair, another tool's
label key in a snapshot.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import socket
import stat
from pathlib import Path
from typing import Any, Callable

from testkit.fuzz import ALIAS_BOMB, Fixtures, Report, Target, node, run_case, snapshot_doc, write
from testkit.faultserver import NODE_LIST, EndlessPages, FaultServer, answering, flood, header_drip, tls_drip

TIMEOUT = 2.0  # --request-timeout/--connect-timeout of the hostile checks: a deadline missed shows in seconds
SLACK = 8.0  # start-up of a forked command under load
POD_LIST = {"kind": "PodList", "apiVersion": "v1", "metadata": {"continue": ""}, "items": [
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
     "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]},
     "status": {"phase": "Running"}}]}
KUEUE_LIST = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "TopologyList", "metadata": {}, "items": [
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "default"},
     "spec": {"levels": [{"nodeLabel": "topolabel.dev/block"}, {"nodeLabel": "kubernetes.io/hostname"}]}}]}
EXEC_CREDENTIAL = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                   "status": {"token": "t0ken", "expirationTimestamp": "2099-01-01T00:00:00Z"}}
JSON0 = {"lldp": [{"interface": [{"name": "eth0", "chassis": [{"id": [{"type": "mac", "value": "56:6c"}],
                                                                "name": [{"value": "leaf-r01"}]}],
                                   "port": [{"id": [{"type": "ifname", "value": "swp1"}]}]}]}]}


class HostileServer:
    """A raw-socket API server whose answer to paths holding `where` is the current case (`serve`), and to the
    rest a small healthy cluster's: one node, no pods, no Kueue objects."""

    def __init__(self) -> None:
        self.where, self.body = "\0", b""
        self.server = FaultServer(self._behave)

    def __enter__(self) -> "HostileServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.__exit__()

    def serve(self, where: str, body: bytes | None) -> str:
        self.where, self.body = where, body or b""
        return ""

    def _behave(self, conn: socket.socket) -> None:
        answering(self.body, where=self.where)(conn)

    def kubeconfig(self, directory: Path) -> str:
        return self.server.kubeconfig(directory)


def add_fixtures(fx: Fixtures, server: HostileServer) -> None:
    """The hostile targets' seeds and the server's kubeconfig."""
    fx.server = server
    config = json.loads(Path(server.kubeconfig(fx.dir)).read_text())
    shutil.copy(server.kubeconfig(fx.dir), fx.dir / "server.kubeconfig")
    nodes = [node(f"n{i}", annotations={"topolabel.dev/ib-node-guids": f"mlx5_0=0x2c9030000567{i}"})
             for i in range(2)]
    fx.docs.update({"kubeconfig": config, "api-nodes": NODE_LIST, "api-pods": POD_LIST, "api-kueue": KUEUE_LIST,
                    "exec": EXEC_CREDENTIAL, "json0-out": JSON0,
                    "ib-nodes": {"apiVersion": "v1", "kind": "List", "items": nodes}})


def tool(path: str) -> str:
    """A script next to the case's input that prints it (a host tool, a credential plugin)."""
    script = Path(path + ".sh")
    script.write_text(f"#!/bin/sh\ncat '{path}'\n")
    script.chmod(0o755)
    return str(script)


def exec_kubeconfig(fx: Fixtures, path: str) -> str:
    """The server's kubeconfig whose user's token comes from an exec plugin printing the case."""
    config = copy.deepcopy(fx.docs["kubeconfig"])
    config["users"] = [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                       "command": tool(path)}}}]
    out = Path(path + ".kubeconfig")
    out.write_text(json.dumps(config))
    return str(out)


def _cluster(fx: Fixtures) -> list[str]:
    return ["--kubeconfig", fx.path("server.kubeconfig"), "--request-timeout", str(TIMEOUT)]


JOB = "job.yaml"
TARGETS = [
    Target("kubeconfig/plan", "kubeconfig", lambda fx, p: ["plan", "--source", "labels", "--preset", "gke",
                                                           "--kubeconfig", p, "--request-timeout", str(TIMEOUT)]),
    Target("api-nodes/plan", "api-nodes", lambda fx, p: ["plan", "--source", "labels", "--preset", "gke",
                                                         *_cluster(fx), "-o", "json"], served="/api/v1/nodes"),
    Target("api-nodes/kueue", "api-nodes", lambda fx, p: ["kueue", "--source", "labels", "--preset", "gke",
                                                          *_cluster(fx), "-o", "yaml"], served="/api/v1/nodes"),
    Target("api-pods/fit", "api-pods", lambda fx, p: ["fit", fx.path(JOB), *_cluster(fx), "-o", "json"],
           served="/api/v1/pods"),
    Target("api-kueue/job-check", "api-kueue", lambda fx, p: ["job", "check", fx.path(JOB), *_cluster(fx)],
           served="/apis/kueue.x-k8s.io/"),
    Target("api-kueue/show", "api-kueue", lambda fx, p: ["show", *_cluster(fx), "-o", "json"],
           served="/apis/kueue.x-k8s.io/"),
    Target("exec/plan", "exec", lambda fx, p: ["plan", "--source", "labels", "--preset", "gke", "--kubeconfig",
                                               exec_kubeconfig(fx, p), "--request-timeout", str(TIMEOUT)]),
    Target("lldpcli/agent", "json0-out", lambda fx, p: ["agent", "--once", "--print", "--lldpcli", tool(p)]),
    Target("claims/infiniband", "ib-nodes", lambda fx, p: ["discover", "--source", "infiniband", "--ibnetdiscover",
                                                           fx.path("fabric.ibnet"), "--nodes", p, "-o", "json"]),
]


# --- fixed checks ------------------------------------------------------------------------------------------

def one_line(out: Any, fragment: str | tuple[str, ...] = "") -> bool:
    """Exit 2 with one line holding `fragment` (or one of several)."""
    err = out.err.strip()
    fragments = (fragment,) if isinstance(fragment, str) else fragment
    return out.code == 2 and not out.traceback and len(err.splitlines()) == 1 and any(f in err for f in fragments)


def hostile_checks(report: Report, fx: Fixtures, d: Path, quick: bool) -> None:
    _api_checks(report, d)
    _credential_and_tool_checks(report, fx, d, quick)
    _output_checks(report, fx, d)
    _claim_checks(report, d)


def _api_checks(report: Report, d: Path) -> None:
    plan = ["plan", "--source", "labels", "--preset", "gke", "-o", "json", "--request-timeout", str(TIMEOUT),
            "--connect-timeout", str(TIMEOUT), "--kubeconfig"]
    throttled = answering(b'{"kind": "Status", "message": "slow down"}', "429 Too Many Requests",
                          "Retry-After: 60\r\n")
    cases: list[tuple[str, Callable[[socket.socket], None], bool, str | tuple[str, ...]]] = [
        ("headers dripped a byte at a time", header_drip, False, f"no answer within {TIMEOUT:g}s"),
        ("a TLS handshake dripped", tls_drip, True, "127.0.0.1"),
        ("Retry-After 60 under a 2 s request timeout", throttled, False, "429 Too Many Requests"),
        ("a continue token sent twice", EndlessPages(same=True), False, "pages in a circle"),
        # the cap, or on a loaded machine the read deadline first: bounded either way
        ("a body that never ends", flood, False, ("an answer larger than 128 MiB", f"took longer than {TIMEOUT:g}s")),
        ("items that are a number", answering(b'{"items": 5}'), False, "the wrong shape"),
        ("a lone surrogate in a name", answering(b'{"items": [{"metadata": {"name": "\\ud800"}}]}'), False,
         "not JSON"),
    ]
    for name, behave, tls, fragment in cases:
        with FaultServer(behave) as server:
            out = run_case([*plan, server.kubeconfig(d, tls=tls)], TIMEOUT * 3 + SLACK + 30)
        report.check("hang", f"API: {name} ends within its timeout", out.code is not None
                     and out.seconds < TIMEOUT * 3 + SLACK, f"exit {out.code} after {out.seconds:.0f}s")
        report.check("traceback", f"API: {name} is one line, exit 2", one_line(out, fragment),
                     f"exit {out.code}: {out.err.strip()[-300:]}")


def _credential_and_tool_checks(report: Report, fx: Fixtures, d: Path, quick: bool) -> None:
    bomb = d / "bomb.kubeconfig"
    bomb.write_bytes(ALIAS_BOMB)
    out = run_case(["plan", "--source", "labels", "--preset", "gke", "--kubeconfig", str(bomb)], 60)
    report.check("traceback", "a billion-laughs kubeconfig is one line within seconds",
                 one_line(out, "aliases expand the document") and out.seconds < 20,
                 f"exit {out.code} after {out.seconds:.0f}s: {out.err.strip()[-300:]}")
    scripts = {"floods": "yes\n", "never answers": "sleep 600 &\nsleep 600\n"}
    for name, body in scripts.items():
        if quick and name == "never answers":
            continue  # waits the plugin's timeout, a minute
        script = d / f"plugin-{name.replace(' ', '-')}.sh"
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(0o755)
        config = copy.deepcopy(fx.docs["kubeconfig"])
        config["users"] = [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                           "command": str(script)}}}]
        path = write(d / f"plugin-{name.replace(' ', '-')}.kubeconfig", json.dumps(config))
        out = run_case(["plan", "--source", "labels", "--preset", "gke", "--kubeconfig", path], 120)
        report.check("hang", f"an exec plugin that {name} is stopped in one line",
                     one_line(out, "exec plugin") and out.seconds < 90, f"exit {out.code} after {out.seconds:.0f}s: "
                                                                        f"{out.err.strip()[-300:]}")
    chatty = d / "chatty-lldpcli.sh"
    chatty.write_text("#!/bin/sh\nyes\n")
    chatty.chmod(0o755)
    out = run_case(["agent", "--once", "--print", "--lldpcli", str(chatty)], 60)
    report.check("loss", "a host tool that floods is stopped at its bound", one_line(out, "printed more than 4 MiB"),
                 f"exit {out.code}: {out.err.strip()[-300:]}")


def _output_checks(report: Report, fx: Fixtures, d: Path) -> None:
    base = ["--config", fx.path("topolabel.yaml"), "--nodes", fx.path("nodes.yaml"), "--snapshot", fx.path("snap.json")]
    commands = {"fit": ["fit", fx.path(JOB), *base], "verify": ["verify", "--snapshot", fx.path("snap.json"),
                                                                "--against", fx.path("snap.json")],
                "discover": ["discover", "--config", fx.path("topolabel.yaml"), "--nodes", fx.path("nodes.yaml"),
                             "-o", "json"], "--version": ["--version"]}
    for name, argv in commands.items():
        read, written = os.pipe()
        os.close(read)
        out = run_case(argv, 60, stdout=written)
        os.close(written)
        report.check("wrong", f"{name} into a closed pipe ends quietly with 0", out.code == 0 and not out.err.strip(),
                     f"exit {out.code}: {out.err.strip()[-200:]}")
        with open("/dev/full", "wb") as full:
            out = run_case(argv, 60, stdout=full.fileno())
        report.check("wrong", f"{name} into a full disk is one line, exit 2",
                     one_line(out, "cannot write the output: No space left on device"),
                     f"exit {out.code}: {out.err.strip()[-200:]}")
    for kind in ("fifo", "device", "directory"):
        target = d / f"target-{kind}"
        if kind == "fifo":
            os.mkfifo(target)
        elif kind == "device":
            try:
                os.mknod(target, stat.S_IFCHR | 0o666, os.makedev(1, 3))
            except PermissionError:
                continue
        else:
            target.mkdir()
        before = os.lstat(target)
        out = run_case(["show", *base, "--svg", str(target)], 60)
        after = os.lstat(target)
        report.check("loss", f"show --svg onto a {kind} leaves it as it was",
                     (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
                     and not list(d.glob(f".{target.name}.*.tmp")), f"mode {after.st_mode:o}")
        report.check("wrong", f"show --svg onto a {kind} is one line, exit 2", one_line(out, "not a regular file"),
                     f"exit {out.code}: {out.err.strip()[-200:]}")


def _claim_checks(report: Report, d: Path) -> None:
    from hack.ibfabric import Spec, build

    fabric = build(Spec(sus=4, hosts=4, rails=2, default_hosts=16, naming="plain"))
    (d / "claims.ibnet").write_text(fabric.capture_text())
    hosts = sorted(fabric.truth.guids)

    def annotation(host: str, extra: list[int] = ()) -> str:  # type: ignore[assignment]
        return ",".join([f"{dev}={guid:#018x}" for dev, guid in fabric.truth.guids[host]]
                        + [f"mlx5_9={guid:#018x}" for guid in extra])

    def discover(nodes: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
        path = write(d / f"{name}.json", {"apiVersion": "v1", "kind": "List", "items": nodes})
        out = run_case(["discover", "--source", "infiniband", "--ibnetdiscover", str(d / "claims.ibnet"),
                        "--nodes", path, "-o", "json"], 60)
        return json.loads(out.out) if out.code == 0 else None

    honest = [node(h, annotations={"topolabel.dev/ib-node-guids": annotation(h)}) for h in hosts]
    before = discover(honest, "honest") or {"nodes": {}}
    bad, victims = hosts[4:8], hosts[0:4]
    claims = {a: [fabric.truth.guids[v][0][1]] for a, v in zip(bad, victims)}
    hostile = [node(h, annotations={"topolabel.dev/ib-node-guids": annotation(h, claims.get(h, []))}) for h in hosts]
    after = discover(hostile, "hostile") or {"nodes": {}}
    moved = sorted(h for h in hosts if h in after["nodes"] and after["nodes"][h] != before["nodes"].get(h))
    report.check("loss", "nodes claiming other nodes' HCAs move no node", before["nodes"] and not moved,
                 f"moved {moved}")
    labelled = [node(h, {"topolabel.dev/leafgroup": before["nodes"].get(h, {}).get("leafgroup", "x")},
                     {"topolabel.dev/ib-node-guids": annotation(h, claims.get(h, [])),
                      "topolabel.dev/managed-labels": "topolabel.dev/leafgroup"}) for h in hosts]
    nodes = write(d / "labelled.json", {"apiVersion": "v1", "kind": "List", "items": labelled})
    out = run_case(["plan", "--source", "infiniband", "--ibnetdiscover", str(d / "claims.ibnet"), "--nodes", nodes,
                    "-o", "json"], 60)
    report.check("loss", "eight nodes in contested claims of 16 stop the plan", one_line(out, "contested claims"),
                 f"exit {out.code}: {out.err.strip()[-200:]}")

    facts = d / "lldp"
    facts.mkdir()
    pair = [{"interface": f"eth{i}", "chassisName": s, "chassisId": f"id-{s}", "portId": "swp1"}
            for i, s in enumerate(("tor-a1", "tor-a2"))]
    for i in range(6):
        (facts / f"gpu-{i}.json").write_text(json.dumps({"version": 1, "neighbors": pair}))
    (facts / "evil.json").write_text(json.dumps({"version": 1, "neighbors": [
        pair[0], {"interface": "eth1", "chassisName": "tor-b", "chassisId": "id-tor-b", "portId": "swp1"}]}))
    out = run_case(["discover", "--source", "lldp", "--lldp-dir", str(facts), "-o", "json"], 60)
    placed = json.loads(out.out)["nodes"] if out.code == 0 else {}
    report.check("loss", "one LLDP host's claim leaves the pair's hosts placed",
                 all(f"gpu-{i}" in placed for i in range(6)) and "evil" not in placed, f"placed {sorted(placed)}")

    snap = write(d / "foreign-key.json", snapshot_doc("karpenter.sh/nodepool", {"n1": "a"}, "pool"))
    nodes = write(d / "foreign-nodes.json", {"apiVersion": "v1", "kind": "List", "items": [node("n1")]})
    out = run_case(["plan", "--snapshot", snap, "--nodes", nodes, "-o", "json"], 60)
    report.check("loss", "another tool's label key is never planned", one_line(out, "is not topolabel's to write"),
                 f"exit {out.code}: {out.out[:200]}{out.err.strip()[-200:]}")

