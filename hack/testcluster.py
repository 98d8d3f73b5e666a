"""A real Kubernetes control plane for tests, all on 127.0.0.1, and optionally the real Kueue manager.

`up(dir)` starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler (v1.36, built by
hack/build-test-stack) in the background and returns once each answers; `up(dir, kueue=True)` also installs
Kueue's and JobSet's CRDs and Kueue's RBAC and webhooks from their Go modules and runs the Kueue manager;
`up(dir, kwok=True)` runs the KWOK controller in place of kubelets (Node heartbeats, pods that run and
finish) and, as in a cluster with kubelets, the node lifecycle controller.
`down(dir)` stops them by the PIDs recorded in `dir`. Everything a cluster needs lives in `dir` (certificates,
tokens, etcd data, logs, kubeconfigs, an audit log of every request), and the ports are picked free, so
clusters started in different directories run side by side. Only the standard library is used:
`hack/test-cluster` runs this file without the project installed (YAML is read by kubectl).

Without KWOK there is no kubelet: Nodes are API objects whose status the tests write. Pods that kube-scheduler
binds to them stay Pending with their nodeName set. Access is by static tokens: `admin` (group system:masters, in
`kubeconfig`) and `topolabel-operator` (no groups, in `operator.kubeconfig`; RBAC grants it nothing until a
binding does); the controller-manager and scheduler have their own users, Kueue runs as its ServiceAccount.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("TOPOLABEL_CACHE") or
             Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "topolabel")
STACK = CACHE / "stack"  # links made by hack/build-test-stack
ADMIN = "admin"
OPERATOR = "topolabel-operator"
CONTROLLER_MANAGER = "system:kube-controller-manager"  # bound to its role by the server's bootstrap RBAC
SCHEDULER = "system:kube-scheduler"
STATE = "cluster.json"
START_ATTEMPTS = 3  # a picked port can be taken by someone else before the server binds it
READY_TIMEOUT = 180.0  # per stage; generous because a shared 2-core machine can be very loaded
TOKEN_SECONDS = 366 * 24 * 3600  # of the ServiceAccount tokens Kueue and KWOK run with
# Stopped in the reverse order.
PROCESSES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kueue", "jobset", "kwok")
# What a cluster without kubelets must not run: node lifecycle would mark every Node NotReady and taint it
# (no kubelet posts heartbeats); the TTL controller annotates every Node, which tests would see as writes.
CONTROLLERS = "*,-node-lifecycle-controller,-ttl-controller"
# With KWOK posting heartbeats the node lifecycle controller runs, as in any cluster.
KWOK_CONTROLLERS = "*,-ttl-controller"
# KWOK's Node Leases last this long and are renewed every quarter of it (a kubelet's default is 40 s); the node
# lifecycle controller marks a Node whose Lease was not renewed for as long NotReady (its default is 50 s).
KWOK_LEASE_SECONDS = 20
# KWOK manages every Node without this label; a test adds it to stop a node's "kubelet" (Lease renewals,
# status, its pods), as when a machine dies.
KWOK_STOPPED_LABEL = "test-cluster.topolabel.dev/kubelet-stopped"
KWOK_CONFIG = Path(__file__).resolve().parent / "kwok" / "kwok.yaml"  # its parallelism and stages
KWOK_ACCOUNT = ("kube-system", "kwok-controller")  # the ServiceAccount of KWOK's released RBAC (kustomize/rbac)
KWOK_POD_CIDR = "10.64.0.0/10"  # pod IPs KWOK hands out (its default /24 runs out at 254 running pods)
# What of Kueue's, JobSet's and KWOK's released manifests (config/default, kustomize/rbac) is installed; the
# Deployment, Services, APIService (Kueue's visibility, off here), ConfigMap and Secret are replaced by the
# process and the configuration this file writes. (Only KWOK's have a FlowSchema.)
RELEASE_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                 "CustomResourceDefinition", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
                 "FlowSchema")
KUEUE_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset")

# One audit event per request, when its response is complete. Left out: the server's own loopback traffic
# and what the controllers only read. Tests count writes from this log ("a second apply sends no PATCH").
AUDIT_POLICY = f"""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:apiserver"]
- level: None
  users: ["{CONTROLLER_MANAGER}", "{SCHEDULER}"]
  verbs: [get, list, watch]
- level: None
  userGroups: ["system:serviceaccounts:kube-system", "system:serviceaccounts:kueue-system"]
  verbs: [get, list, watch]
- level: Metadata
"""
# With KWOK: its Lease renewals (every node, every few seconds) are left out of the audit log.
KWOK_AUDIT_RULE = f"""- level: None
  users: ["system:serviceaccount:{KWOK_ACCOUNT[0]}:{KWOK_ACCOUNT[1]}"]
  verbs: [update, patch]
  resources: [{{group: coordination.k8s.io, resources: [leases]}}]
"""


def audit_policy(kwok: bool) -> str:
    """The audit policy; with KWOK its rule goes before the catch-all last rule."""
    if not kwok:
        return AUDIT_POLICY
    head, last = AUDIT_POLICY.rsplit("- level: Metadata", 1)
    return head + KWOK_AUDIT_RULE + "- level: Metadata" + last


class ClusterError(RuntimeError):
    """The test cluster could not be started or reached; the message says what and where to look."""


@dataclass
class Binaries:
    etcd: str
    kube_apiserver: str
    kube_controller_manager: str
    kube_scheduler: str
    kubectl: str
    kueue: str | None = None
    kueue_module: str | None = None  # Kueue's module directory: config/ holds its CRDs and webhooks
    jobset: str | None = None  # JobSet's controller, run where pods run (with KWOK)
    jobset_module: str | None = None
    kwok: str | None = None
    kwok_module: str | None = None  # KWOK's module directory: kustomize/rbac holds its RBAC

    @property
    def has_kueue(self) -> bool:
        return bool(self.kueue and self.kueue_module and self.jobset and self.jobset_module)

    @property
    def has_kwok(self) -> bool:
        return bool(self.kwok and self.kwok_module)


def stack_path(name: str) -> str | None:
    """$TOPOLABEL_<NAME> (dashes as underscores), else what hack/build-test-stack linked in the cache."""
    env = "TOPOLABEL_" + name.upper().replace("-", "_")
    if os.environ.get(env):
        return os.environ[env]
    linked = STACK / name
    return str(linked.resolve()) if linked.exists() else None


def find_binaries() -> Binaries | None:
    """The programs a cluster needs, or None when one is missing; the Kueue and KWOK parts may be None."""
    core = {name: stack_path(name) for name in
            ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")}
    if not all(core.values()):
        return None
    return Binaries(**{k.replace("-", "_"): v for k, v in core.items()}, kueue=stack_path("kueue"),
                    kueue_module=stack_path("kueue-module"), jobset=stack_path("jobset"),
                    jobset_module=stack_path("jobset-module"),
                    kwok=stack_path("kwok"), kwok_module=stack_path("kwok-module"))


def kueue_crd_dir() -> Path | None:
    """Kueue's CRDs (config/components/crd/bases) in the Go module cache, when hack/build-test-stack ran."""
    module = stack_path("kueue-module")
    return Path(module) / "config" / "components" / "crd" / "bases" if module else None


@dataclass
class State:
    """What `up` records in DIR/cluster.json and `down` reads back."""

    server: str
    etcd: str
    pids: dict[str, int]
    tokens: dict[str, str]
    kubectl: str
    ports: dict[str, int] = field(default_factory=dict)
    kueue: bool = False
    kwok: bool = False


def free_ports(count: int) -> list[int]:
    """Ports free right now on 127.0.0.1 (held open together so they are distinct)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def run(command: list[str], what: str, input: str | None = None, timeout: float = 120) -> str:
    """A short command's stdout; ClusterError with its stderr when it fails."""
    result = subprocess.run(command, input=input, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise ClusterError(f"{what} failed: {result.stderr.strip()[-2000:]}")
    return result.stdout


def openssl(*args: str) -> None:
    run(["openssl", *args], f"openssl {args[0]}")


def ec_key_and_csr(pki: Path, name: str, subject: str) -> None:
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(pki / f"{name}.key"), "-out", str(pki / f"{name}.csr"), "-subj", subject)


def sign_server_cert(pki: Path, name: str, alt_names: str) -> None:
    """`name`.crt for `name`.key, a serving certificate for `alt_names` signed by the cluster's CA."""
    ec_key_and_csr(pki, name, f"/CN={name}")
    (pki / f"{name}.ext").write_text(f"subjectAltName={alt_names}\nextendedKeyUsage=serverAuth\n"
                                     "keyUsage=critical,digitalSignature,keyEncipherment\n")
    openssl("x509", "-req", "-in", str(pki / f"{name}.csr"), "-CA", str(pki / "ca.crt"),
            "-CAkey", str(pki / "ca.key"), "-CAcreateserial", "-days", "3650",
            "-extfile", str(pki / f"{name}.ext"), "-out", str(pki / f"{name}.crt"))


def make_certs(pki: Path) -> None:
    """A CA; serving certificates for the API server and Kueue's webhooks signed by it; the service-account key."""
    pki.mkdir(parents=True, exist_ok=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(pki / "ca.key"), "-out", str(pki / "ca.crt"), "-days", "3650",
            "-subj", "/CN=topolabel-test-ca")
    sign_server_cert(pki, "apiserver", "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc")
    sign_server_cert(pki, "kueue-webhook", "IP:127.0.0.1,DNS:localhost")
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(pki / "sa.key"))
    openssl("pkey", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub"))


TOKEN_USERS = {ADMIN: "system:masters", OPERATOR: None, CONTROLLER_MANAGER: None, SCHEDULER: None}


def write_tokens(path: Path) -> dict[str, str]:
    """The static token file: token,user,uid[,"groups"]. The operator user has no groups at all."""
    tokens = {user: secrets.token_hex(16) for user in TOKEN_USERS}
    path.write_text("".join(f"{tokens[user]},{user},{user}" + (f',"{group}"' if group else "") + "\n"
                            for user, group in TOKEN_USERS.items()))
    path.chmod(0o600)
    return tokens


def kubeconfig(server: str, ca: Path, user: str, token: str) -> str:
    """A one-context kubeconfig; JSON is valid YAML, and the CA is inlined so the file stands alone."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": server, "certificate-authority-data": b64(ca)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}],
    }, indent=2) + "\n"


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def etcd_command(etcd: str, root: Path, client: int, peer: int) -> list[str]:
    return [etcd, "--name", "test", "--data-dir", str(root / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{client}",
            "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"test=http://127.0.0.1:{peer}",
            "--listen-metrics-urls", "",
            "--logger", "zap", "--log-level", "warn"]


def apiserver_command(apiserver: str, root: Path, etcd_url: str, port: int, kwok: bool = False) -> list[str]:
    pki = root / "pki"
    # Without kubelets, TaintNodesByCondition would taint every new Node not-ready until a kubelet reports,
    # so nothing would ever be scheduled; with KWOK it runs as in any cluster (the node lifecycle controller
    # lifts the taint once the Node is Ready).
    plugins = [] if kwok else ["--disable-admission-plugins=TaintNodesByCondition"]
    return [apiserver,
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
            f"--cert-dir={pki}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--token-auth-file={root / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.96.0.0/24",
            "--endpoint-reconciler-type=none",  # it would publish 127.0.0.1, which Endpoints refuse
            *plugins,
            # as kubeadm, kind and the clouds run it: privileged containers (the InfiniBand collector without a
            # device plugin) are judged as on a real cluster, not refused by this server alone
            "--allow-privileged=true",
            f"--audit-policy-file={root / 'audit-policy.yaml'}",
            f"--audit-log-path={root / 'audit.log'}", "--audit-log-format=json",
            "--profiling=false", "--v=0"]


def component_flags(root: Path, name: str, port: int) -> list[str]:
    """What kube-controller-manager and kube-scheduler share: a kubeconfig, their own HTTPS port."""
    config = root / f"{name}.kubeconfig"
    return [f"--kubeconfig={config}", f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}",
            "--bind-address=127.0.0.1", f"--secure-port={port}", f"--cert-dir={root / name}",
            "--leader-elect=false", "--profiling=false", "--v=0"]


def controller_manager_command(binary: str, root: Path, port: int, lease_seconds: int | None = None) -> list[str]:
    """With `lease_seconds` (KWOK runs) the node lifecycle controller too, with that grace period (and as long
    for a new Node's first report, at least the default minute: KWOK registers thousands of Nodes in minutes)."""
    pki = root / "pki"
    lifecycle = [f"--controllers={CONTROLLERS}"] if lease_seconds is None else [
        f"--controllers={KWOK_CONTROLLERS}", f"--node-monitor-grace-period={lease_seconds}s",
        f"--node-startup-grace-period={max(60, lease_seconds)}s"]
    return [binary, *component_flags(root, "kube-controller-manager", port), *lifecycle,
            f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
            # each controller as its own ServiceAccount with the server's bootstrap roles, as in a real cluster
            "--use-service-account-credentials=true", "--cluster-name=topolabel-test"]


def scheduler_command(binary: str, root: Path, port: int) -> list[str]:
    return [binary, *component_flags(root, "kube-scheduler", port)]


def spawn(command: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """A daemon in its own session (so a Ctrl-C in the caller's terminal does not reach it)."""
    with open(log, "ab") as out:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, env=env)


def request(url: str, ca: Path | None, token: str | None = None, timeout: float = 2.0, method: str = "GET",
            body: Any = None) -> tuple[int, str]:
    """One HTTPS call: (status, body). With `ca` None the server's certificate is not checked (the
    controller-manager and scheduler serve health checks with self-signed certificates)."""
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def http_status(url: str, timeout: float = 2.0) -> int:
    """The status of a plain HTTP GET (health endpoints on 127.0.0.1)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


class Starting:
    """The processes being started for one cluster, and waiting for each to answer."""

    def __init__(self, root: Path, state: State, procs: dict[str, subprocess.Popen]) -> None:
        self.root, self.state, self.procs = root, state, procs
        self.ca = root / "pki" / "ca.crt"
        self.deadline = time.monotonic() + READY_TIMEOUT

    def api(self, path: str, method: str = "GET", body: Any = None) -> tuple[int, str]:
        return request(self.state.server + path, self.ca, self.state.tokens[ADMIN], method=method, body=body)

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                log = self.root / f"{name}.log"
                raise ClusterError(f"{name} exited with {proc.returncode} while starting; "
                                   f"last lines of {log}:\n{tail(log)}")

    def wait(self, what: str, check: Any) -> None:
        """Until `check()` returns None (ready), or a process died, or time ran out; `check` returns what
        it saw otherwise, for the error message."""
        last = "no answer yet"
        while time.monotonic() < self.deadline:
            self.check_alive()
            try:
                seen = check()
            except (OSError, ssl.SSLError) as exc:
                seen = str(exc)
            if seen is None:
                return
            last = seen
            time.sleep(0.2)
        raise ClusterError(f"{what} not ready after {READY_TIMEOUT:.0f} s ({last}); see the logs in {self.root}")

    def apiserver_ready(self) -> str | None:
        status, body = self.api("/readyz")
        if status == 200 and self.api("/api/v1/namespaces/default")[0] == 200:
            return None
        return f"/readyz: {status} {body.strip()[-300:]}"

    def healthz(self, name: str) -> Any:
        def check() -> str | None:
            status, body = request(f"https://127.0.0.1:{self.state.ports[name]}/healthz", None)
            return None if status == 200 else f"/healthz: {status} {body.strip()[-300:]}"
        return check


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def read_state(root: Path) -> State | None:
    try:
        return State(**json.loads((root / STATE).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def write_state(root: Path, state: State) -> None:
    (root / STATE).write_text(json.dumps(asdict(state), indent=2) + "\n")
    for name, pid in state.pids.items():
        (root / f"{name}.pid").write_text(f"{pid}\n")


def alive(pid: int, root: Path) -> bool:
    """Whether `pid` is still one of this cluster's processes (its command line names files in `root`),
    so a recycled PID is never signalled."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return f"{root}/" in cmdline


def up(root: Path | str, binaries: Binaries | None = None, kueue: bool = False, kwok: bool = False,
       lease_seconds: int = KWOK_LEASE_SECONDS) -> State:
    """Start the control plane for `root` (created if needed), KWOK and Kueue when asked; return once all
    answer. On a cluster already running, only Kueue is started, if asked and not running yet; KWOK changes
    how the control plane runs, so it is chosen when the cluster starts. `lease_seconds`: KWOK's Node Lease
    duration, also the node lifecycle controller's grace period."""
    root = Path(root).resolve()
    binaries = binaries or find_binaries()
    if binaries is None:
        raise ClusterError("kube-apiserver, kube-controller-manager, kube-scheduler, kubectl or etcd not found: "
                           "run hack/build-test-stack (or set TOPOLABEL_KUBE_APISERVER etc.)")
    if kueue and not binaries.has_kueue:
        raise ClusterError("the Kueue manager, or Kueue's or JobSet's module, not found: "
                           "run hack/build-test-stack kueue")
    if kwok and not binaries.has_kwok:
        raise ClusterError("the KWOK controller, or KWOK's module, not found: run hack/build-test-stack kwok")
    state = read_state(root)
    if state and all(alive(pid, root) for pid in state.pids.values()):
        if kwok and not state.kwok:
            raise ClusterError(f"the cluster in {root} runs without KWOK: stop it (hack/test-cluster down {root}) "
                               "and start it again with --with-kwok")
        if kueue and not state.kueue:
            return start_kueue(root, binaries, state)
        return state
    root.mkdir(parents=True, exist_ok=True)
    make_certs(root / "pki")
    tokens = write_tokens(root / "tokens.csv")
    (root / "audit-policy.yaml").write_text(audit_policy(kwok))
    attempt = 1
    while True:
        try:
            state = start(root, binaries, tokens, lease_seconds if kwok else None)
            if kwok:
                start_kwok(root, binaries, state, lease_seconds)
            return start_kueue(root, binaries, state) if kueue else state
        except ClusterError as exc:
            down(root)
            if attempt == START_ATTEMPTS or "address already in use" not in str(exc):
                raise
            attempt += 1


def start(root: Path, binaries: Binaries, tokens: dict[str, str], lease_seconds: int | None = None) -> State:
    """etcd and the API server, then the controller-manager and the scheduler; back when all four answer.
    With `lease_seconds` they are set up for KWOK (see `up`)."""
    client, peer, secure, kcm, scheduler = free_ports(5)
    shutil.rmtree(root / "etcd", ignore_errors=True)  # a fresh store on every start
    procs = {"etcd": spawn(etcd_command(binaries.etcd, root, client, peer), root / "etcd.log")}
    etcd_url = f"http://127.0.0.1:{client}"
    procs["kube-apiserver"] = spawn(apiserver_command(binaries.kube_apiserver, root, etcd_url, secure,
                                                      kwok=lease_seconds is not None), root / "kube-apiserver.log")
    state = State(server=f"https://127.0.0.1:{secure}", etcd=etcd_url, pids={}, tokens=tokens,
                  kubectl=binaries.kubectl,
                  ports={"kube-apiserver": secure, "kube-controller-manager": kcm, "kube-scheduler": scheduler})
    ca = root / "pki" / "ca.crt"
    for user, name in ((ADMIN, "kubeconfig"), (OPERATOR, "operator.kubeconfig"),
                       (CONTROLLER_MANAGER, "kube-controller-manager.kubeconfig"),
                       (SCHEDULER, "kube-scheduler.kubeconfig")):
        (root / name).write_text(kubeconfig(state.server, ca, user, tokens[user]))
    state.pids = {name: p.pid for name, p in procs.items()}
    write_state(root, state)
    starting = Starting(root, state, procs)
    starting.wait("kube-apiserver", starting.apiserver_ready)
    procs["kube-controller-manager"] = spawn(
        controller_manager_command(binaries.kube_controller_manager, root, kcm, lease_seconds),
        root / "kube-controller-manager.log")
    procs["kube-scheduler"] = spawn(scheduler_command(binaries.kube_scheduler, root, scheduler),
                                    root / "kube-scheduler.log")
    state.pids = {name: p.pid for name, p in procs.items()}
    write_state(root, state)
    for name in ("kube-controller-manager", "kube-scheduler"):
        starting.wait(name, starting.healthz(name))
    return state


def kubectl(state: State, root: Path, *args: str, input: str | None = None) -> str:
    return run([state.kubectl, f"--kubeconfig={root / 'kubeconfig'}", *args], f"kubectl {' '.join(args[:3])}",
               input=input)


def wait_established(state: State, root: Path, crds: list[str], timeout: float = 60.0) -> None:
    """Until every CRD of `crds` is Established. Not `kubectl wait --for=condition=Established`: a CRD just
    created has `status.conditions: null` until the API server's controller writes them, and kubectl wait
    fails on that null instead of waiting (seen on the loaded machine)."""
    deadline = time.monotonic() + timeout
    while True:
        found = json.loads(kubectl(state, root, "get", "-o", "json", *(f"crd/{c}" for c in crds)))
        waiting = [o["metadata"]["name"] for o in found.get("items", [found]) if not established(o)]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"CRD(s) not Established after {timeout:.0f}s: {', '.join(waiting)}")
        time.sleep(0.5)


def established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def released_manifests(state: State, root: Path, kustomization: Path) -> list[dict[str, Any]]:
    """A release's manifests (a kustomization in its module directory, rendered by kubectl's kustomize), as JSON."""
    rendered = run([state.kubectl, "kustomize", str(kustomization)], "kubectl kustomize")
    return json_documents(kubectl(state, root, "create", "--dry-run=client", "-o", "json", "-f", "-",
                                  input=rendered))


def json_documents(text: str) -> list[dict[str, Any]]:
    """The objects of kubectl's `-o json` output for several objects: JSON documents one after another."""
    decoder, docs, at = json.JSONDecoder(), [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return docs
        doc, at = decoder.raw_decode(text, at)
        docs.append(doc)


def by_url(config: dict[str, Any], port: int, ca_bundle: str) -> dict[str, Any]:
    """A webhook clientConfig that names a Service, pointed at the same path on 127.0.0.1:`port` instead."""
    path = config["service"].get("path", "/")
    return {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}


def rewrite_for_local_webhooks(obj: dict[str, Any], port: int, ca_bundle: str) -> dict[str, Any]:
    """Webhook configurations and CRD conversion webhooks call the controller (Kueue, JobSet) on 127.0.0.1
    rather than its Service."""
    if obj["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in obj.get("webhooks", []):
            hook["clientConfig"] = by_url(hook["clientConfig"], port, ca_bundle)
    elif obj["kind"] == "CustomResourceDefinition":
        webhook = (obj["spec"].get("conversion") or {}).get("webhook")
        if webhook:
            webhook["clientConfig"] = by_url(webhook["clientConfig"], port, ca_bundle)
    return obj


def install_serving_cert(root: Path, dest: Path) -> None:
    """Kueue's serving certificate (for 127.0.0.1, signed by the cluster's CA) as tls.crt/tls.key in `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    for ext in ("crt", "key"):
        (dest / f"tls.{ext}").write_bytes((root / "pki" / f"kueue-webhook.{ext}").read_bytes())


def in_etc_overlay(root: Path, command: list[str]) -> list[str]:
    """`command` in its own mount namespace, where /etc is overlaid by DIR/kueue/etc.

    With internal certificate management off, Kueue v0.19.2 reads its metrics server's certificate from the
    fixed path /etc/kueue/metrics/certs. Rather than write to the machine's /etc (root only, shared by every
    cluster), the manager sees an /etc with that directory added; it execs in place, so its PID is the one
    recorded. A user who is not root gets the mount namespace inside a user namespace of their own."""
    upper, work = root / "kueue" / "etc", root / "kueue" / "etc-work"
    install_serving_cert(root, upper / "kueue" / "metrics" / "certs")
    work.mkdir(parents=True, exist_ok=True)
    script = 'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc && shift 2 && exec "$@"'
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return ["unshare", "--mount", "--propagation", "private", *user, "sh", "-c", script, "kueue-etc",
            str(upper), str(work), *command]


def kueue_config(root: Path, ports: dict[str, int]) -> dict[str, Any]:
    """The manager's Configuration: webhooks on 127.0.0.1 with our certificate, TAS on, no leader election."""
    certs = root / "kueue" / "certs"
    install_serving_cert(root, certs)
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "namespace": "kueue-system",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['kueue-health']}"},
        "metrics": {"bindAddress": f"127.0.0.1:{ports['kueue-metrics']}"},
        "webhook": {"host": "127.0.0.1", "port": ports["kueue-webhook"], "certDir": str(certs)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
        # The visibility API would need an APIService pointing at a Service; nothing here uses it.
        "featureGates": {"TopologyAwareScheduling": True, "VisibilityOnDemand": False},
    }


def service_account_token(starting: Starting, namespace: str, name: str) -> str:
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
    status, body = starting.api(path, "POST", {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                               "spec": {"expirationSeconds": TOKEN_SECONDS}})
    if status != 201:
        raise ClusterError(f"could not get a token for {namespace}/{name}: {status} {body[:300]}")
    return json.loads(body)["status"]["token"]


def install_release(state: State, root: Path, manifests: list[dict[str, Any]],
                    webhook_port: int | None = None) -> None:
    """The RELEASE_KINDS of a release's manifests, server-side applied, their webhooks (and CRD conversion)
    pointed at 127.0.0.1:`webhook_port`; back once the CRDs are established."""
    ca_bundle = b64(root / "pki" / "ca.crt")
    wanted = [rewrite_for_local_webhooks(o, webhook_port, ca_bundle) if webhook_port else o
              for o in manifests if o["kind"] in RELEASE_KINDS]
    kubectl(state, root, "apply", "--server-side", "--field-manager=test-cluster", "-f", "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": wanted}))
    crds = [o["metadata"]["name"] for o in wanted if o["kind"] == "CustomResourceDefinition"]
    if crds:
        wait_established(state, root, crds)


def release_account(manifests: list[dict[str, Any]]) -> tuple[str, str]:
    """The namespace and ServiceAccount the release's one Deployment runs as: the process runs as it."""
    (deployment,) = [o for o in manifests if o["kind"] == "Deployment"]
    return deployment["metadata"]["namespace"], deployment["spec"]["template"]["spec"]["serviceAccountName"]


def account_kubeconfig(starting: Starting, name: str, namespace: str, account: str) -> Path:
    """DIR/`name`.kubeconfig: ServiceAccount `namespace`/`account`, with a token from a TokenRequest."""
    path = starting.root / f"{name}.kubeconfig"
    token = service_account_token(starting, namespace, account)
    path.write_text(kubeconfig(starting.state.server, starting.ca, f"{namespace}/{account}", token))
    return path


def start_process(starting: Starting, name: str, command: list[str], env: dict[str, str]) -> subprocess.Popen:
    """A cluster process, recorded in DIR/cluster.json before it is waited for (so `down` finds it)."""
    proc = spawn(command, starting.root / f"{name}.log", env)
    starting.state.pids[name] = proc.pid
    write_state(starting.root, starting.state)
    starting.procs = {name: proc}
    return proc


def start_kueue(root: Path, binaries: Binaries, state: State) -> State:
    """Kueue's and JobSet's CRDs, Kueue's RBAC and webhooks; then the manager, as its ServiceAccount. Where
    KWOK runs pods, JobSet's controller too (`start_jobset`)."""
    assert binaries.kueue and binaries.kueue_module and binaries.jobset_module  # has_kueue, for the type checker
    health, metrics, webhook = free_ports(3)
    state.ports.update({"kueue-health": health, "kueue-metrics": metrics, "kueue-webhook": webhook})
    manifests = released_manifests(state, root, Path(binaries.kueue_module) / "config" / "default")
    install_release(state, root, manifests, webhook)
    kubectl(state, root, "apply", "--server-side", "--field-manager=test-cluster",
            "-f", str(Path(binaries.jobset_module) / "config" / "components" / "crd" / "bases"))
    starting = Starting(root, state, {})
    config = account_kubeconfig(starting, "kueue", *release_account(manifests))
    (root / "kueue" / "config.json").write_text(json.dumps(kueue_config(root, state.ports), indent=2) + "\n")
    state.kueue = True
    command = [binaries.kueue, f"--config={root / 'kueue' / 'config.json'}"]
    start_process(starting, "kueue", in_etc_overlay(root, command), {**os.environ, "KUBECONFIG": str(config)})
    starting.wait("kueue", lambda: kueue_ready(starting, health))
    if state.kwok:
        start_jobset(root, binaries, state)
    return state


def start_jobset(root: Path, binaries: Binaries, state: State) -> None:
    """JobSet's controller as released (config/default of its module: RBAC, webhooks, its CRD with the
    conversion webhook), as its ServiceAccount, with webhooks and metrics on 127.0.0.1; back once its
    /readyz answers and a server-side dry run of a JobSet passes through its webhooks."""
    assert binaries.jobset and binaries.jobset_module  # has_kueue, for the type checker
    health, metrics, webhook = free_ports(3)
    state.ports.update({"jobset-health": health, "jobset-metrics": metrics, "jobset-webhook": webhook})
    manifests = released_manifests(state, root, Path(binaries.jobset_module) / "config" / "default")
    install_release(state, root, manifests, webhook)
    starting = Starting(root, state, {})
    config = account_kubeconfig(starting, "jobset", *release_account(manifests))
    certs = root / "jobset" / "certs"
    install_serving_cert(root, certs)
    (root / "jobset" / "config.json").write_text(json.dumps({
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics}", "certDir": str(certs)},
        "webhook": {"host": "127.0.0.1", "port": webhook, "certDir": str(certs)},
        "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False}}, indent=2) + "\n")
    start_process(starting, "jobset", [binaries.jobset, f"--config={root / 'jobset' / 'config.json'}"],
                  {**os.environ, "KUBECONFIG": str(config)})
    starting.wait("jobset", lambda: jobset_ready(starting, health))


def jobset_ready(starting: Starting, health_port: int) -> str | None:
    """JobSet's /readyz, then its webhooks: a server-side dry run of a JobSet goes through them."""
    status = http_status(f"http://127.0.0.1:{health_port}/readyz")
    if status != 200:
        return f"/readyz: {status}"
    probe = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
             "metadata": {"name": "test-cluster-webhook-probe", "namespace": "default"},
             "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {
                 "restartPolicy": "Never", "containers": [{"name": "c", "image": "probe"}]}}}}}]}}
    status, body = starting.api("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets?dryRun=All", "POST", probe)
    return None if status == 201 else f"webhook probe: {status} {body.strip()[-300:]}"


def start_kwok(root: Path, binaries: Binaries, state: State, lease_seconds: int) -> None:
    """KWOK's released RBAC (its ServiceAccount, ClusterRole, binding and an exempt FlowSchema, from its
    module's kustomize/rbac); then the controller, as that ServiceAccount, with the stages of KWOK_CONFIG for
    every Node without KWOK_STOPPED_LABEL. Back once its /healthz answers."""
    assert binaries.kwok and binaries.kwok_module  # has_kwok, for the type checker
    (port,) = free_ports(1)
    state.ports["kwok"] = port
    install_release(state, root, released_manifests(state, root, Path(binaries.kwok_module) / "kustomize" / "rbac"))
    starting = Starting(root, state, {})
    config = account_kubeconfig(starting, "kwok", *KWOK_ACCOUNT)
    (root / "kwok").mkdir(exist_ok=True)
    state.kwok = True
    # KWOK_WORKDIR: KWOK would otherwise also read ~/.kwok/kwok.yaml
    start_process(starting, "kwok", [
        binaries.kwok, f"--kubeconfig={config}", f"--config={KWOK_CONFIG}",
        f"--manage-nodes-with-label-selector=!{KWOK_STOPPED_LABEL}", f"--node-lease-duration-seconds={lease_seconds}",
        f"--cidr={KWOK_POD_CIDR}",
        # every Node's address (a pod's hostIP): where KWOK, the nodes' "kubelet", listens
        "--node-ip=127.0.0.1", f"--server-address=127.0.0.1:{port}"],
        {**os.environ, "KWOK_WORKDIR": str(root / "kwok")})
    starting.wait("kwok", lambda: None if (status := http_status(f"http://127.0.0.1:{port}/healthz")) == 200
                  else f"/healthz: {status}")


def kueue_ready(starting: Starting, health_port: int) -> str | None:
    """Kueue's /readyz, then its webhooks: a server-side dry run of a ClusterQueue goes through them."""
    status = http_status(f"http://127.0.0.1:{health_port}/readyz")
    if status != 200:
        return f"/readyz: {status}"
    probe = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
             "metadata": {"name": "test-cluster-webhook-probe"}, "spec": {}}
    status, body = starting.api("/apis/kueue.x-k8s.io/v1beta2/clusterqueues?dryRun=All", "POST", probe)
    return None if status == 201 else f"webhook probe: {status} {body.strip()[-300:]}"


def down(root: Path | str, grace: float = 10.0) -> None:
    """Stop the cluster in `root`, Kueue first and etcd last; SIGKILL after `grace` seconds."""
    root = Path(root).resolve()
    state = read_state(root)
    if state is None:
        return
    for name in reversed(PROCESSES):
        pid = state.pids.get(name)
        if pid is None or not alive(pid, root):
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while alive(pid, root) and time.monotonic() < deadline:
            reap(pid)
            time.sleep(0.05)
        if alive(pid, root):
            os.kill(pid, signal.SIGKILL)
        reap(pid)
    for name in PROCESSES:
        (root / f"{name}.pid").unlink(missing_ok=True)
    (root / STATE).unlink(missing_ok=True)


def reap(pid: int) -> None:
    """Collect a child's exit status (when `up` ran in this process) so it does not linger as a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


USAGE = """usage: hack/test-cluster up DIR [--with-kueue] [--with-kwok]
           start etcd, kube-apiserver, kube-controller-manager, kube-scheduler (and the Kueue manager, with
           Kueue's and JobSet's CRDs and Kueue's webhooks; and the KWOK controller, running every Node's
           heartbeats and pods, with the node lifecycle controller on); writes DIR/kubeconfig (admin) and
           DIR/operator.kubeconfig (user topolabel-operator, no rights until bound)
       hack/test-cluster down DIR
           stop them"""
OPTIONS = ("--with-kueue", "--with-kwok")


def main(argv: list[str]) -> int:
    given = {a for a in argv if a in OPTIONS}
    args = [a for a in argv if a not in OPTIONS]
    if len(args) != 2 or args[0] not in ("up", "down") or (given and args[0] != "up"):
        print(USAGE, file=sys.stderr)
        return 2
    command, root = args[0], Path(args[1])
    try:
        if command == "down":
            down(root)
            return 0
        started = time.monotonic()
        state = up(root, kueue="--with-kueue" in given, kwok="--with-kwok" in given)
    except ClusterError as exc:
        print(f"test-cluster: {exc}", file=sys.stderr)
        return 1
    root = root.resolve()
    print(f"API server {state.server} (etcd {state.etcd}), up in {time.monotonic() - started:.1f} s")
    print(f"pids {state.pids}")
    print(f"export KUBECONFIG={root / 'kubeconfig'}")
    print(f"kubectl: {state.kubectl}")
    print(f"stop with: hack/test-cluster down {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
