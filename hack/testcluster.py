"""A real Kubernetes API server for tests: Debian's etcd plus kube-apiserver 1.20, all on 127.0.0.1.

`up(dir)` starts both in the background and returns once `/readyz` answers; `down(dir)` stops them by the
PIDs recorded in `dir`. Everything a cluster needs lives in `dir` (certificates, tokens, etcd data, logs,
kubeconfigs, an audit log of every request), and the ports are picked free, so clusters started in
different directories run side by side. Only the standard library is used: `hack/test-cluster` runs this
file without the project installed.

No controller-manager or scheduler runs: objects are stored and served, nothing reconciles them, and no
ServiceAccount token is ever minted. Access is by static tokens instead: `admin` (group system:masters,
in `kubeconfig`) and `topolabel-operator` (no groups, in `operator.kubeconfig`; RBAC grants it nothing
until a binding does).
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
from dataclasses import asdict, dataclass
from pathlib import Path

CACHE = Path(os.environ.get("TOPOLABEL_CACHE") or
             Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "topolabel")
ADMIN = "admin"
OPERATOR = "topolabel-operator"
STATE = "cluster.json"
START_ATTEMPTS = 3  # a picked port can be taken by someone else before the server binds it
READY_TIMEOUT = 90.0

# One audit event per request, when its response is complete; the server's own loopback traffic is left
# out. Tests count writes from this log (e.g. "a second apply sends no PATCH").
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:apiserver"]
- level: Metadata
"""


class ClusterError(RuntimeError):
    """The test cluster could not be started or reached; the message says what and where to look."""


@dataclass
class Binaries:
    kube_apiserver: str
    etcd: str
    kubectl: str | None


def find_binary(name: str, env: str) -> str | None:
    """$ENV, then what hack/build-kube-apiserver cached, then PATH."""
    if os.environ.get(env):
        return os.environ[env]
    cached = CACHE / "bin" / name
    if cached.exists() and os.access(cached, os.X_OK):
        return str(cached)
    return shutil.which(name)


def find_binaries() -> Binaries | None:
    """The programs a cluster needs, or None when kube-apiserver or etcd is missing."""
    apiserver = find_binary("kube-apiserver", "TOPOLABEL_KUBE_APISERVER")
    etcd = find_binary("etcd", "TOPOLABEL_ETCD")
    if not apiserver or not etcd:
        return None
    return Binaries(apiserver, etcd, find_binary("kubectl", "TOPOLABEL_KUBECTL"))


@dataclass
class State:
    """What `up` records in DIR/cluster.json and `down` reads back."""

    server: str
    etcd: str
    pids: dict[str, int]
    tokens: dict[str, str]
    kubectl: str | None


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


def openssl(*args: str) -> None:
    result = subprocess.run(["openssl", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise ClusterError(f"openssl {args[0]} failed: {result.stderr.strip()}")


def make_certs(pki: Path) -> None:
    """A CA, a serving certificate for 127.0.0.1/localhost signed by it, and the service-account key."""
    pki.mkdir(parents=True, exist_ok=True)
    days = "3650"
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(pki / "ca.key"), "-out", str(pki / "ca.crt"), "-days", days,
            "-subj", "/CN=topolabel-test-ca")
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(pki / "apiserver.key"), "-out", str(pki / "apiserver.csr"), "-subj", "/CN=kube-apiserver")
    (pki / "apiserver.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc\n"
        "extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n")
    openssl("x509", "-req", "-in", str(pki / "apiserver.csr"), "-CA", str(pki / "ca.crt"),
            "-CAkey", str(pki / "ca.key"), "-CAcreateserial", "-days", days,
            "-extfile", str(pki / "apiserver.ext"), "-out", str(pki / "apiserver.crt"))
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(pki / "sa.key"))
    openssl("pkey", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub"))


def write_tokens(path: Path) -> dict[str, str]:
    """The static token file: token,user,uid[,"groups"]. The operator user has no groups at all."""
    tokens = {ADMIN: secrets.token_hex(16), OPERATOR: secrets.token_hex(16)}
    path.write_text(f'{tokens[ADMIN]},{ADMIN},{ADMIN},"system:masters"\n'
                    f"{tokens[OPERATOR]},{OPERATOR},{OPERATOR}\n")
    path.chmod(0o600)
    return tokens


def kubeconfig(server: str, ca: Path, user: str, token: str) -> str:
    """A one-context kubeconfig; JSON is valid YAML, and the CA is inlined so the file stands alone."""
    ca_data = base64.b64encode(ca.read_bytes()).decode()
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": server, "certificate-authority-data": ca_data}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}],
    }, indent=2) + "\n"


def etcd_command(etcd: str, root: Path, client: int, peer: int) -> list[str]:
    return [etcd, "--name", "test", "--data-dir", str(root / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{client}",
            "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"test=http://127.0.0.1:{peer}",
            "--logger", "zap", "--log-level", "warn"]


def apiserver_command(apiserver: str, root: Path, etcd_url: str, port: int) -> list[str]:
    pki = root / "pki"
    return [apiserver,
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={port}", "--insecure-port=0",
            f"--cert-dir={pki}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--token-auth-file={root / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.96.0.0/24",
            "--endpoint-reconciler-type=none",  # it would publish 127.0.0.1, which Endpoints refuse
            f"--audit-policy-file={root / 'audit-policy.yaml'}",
            f"--audit-log-path={root / 'audit.log'}", "--audit-log-format=json",
            "--profiling=false", "--logtostderr=true", "--v=0"]


def spawn(command: list[str], log: Path) -> subprocess.Popen:
    """A daemon in its own session (so a Ctrl-C in the caller's terminal does not reach it)."""
    with open(log, "ab") as out:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)


def request(server: str, path: str, ca: Path, token: str, timeout: float = 2.0) -> tuple[int, str]:
    ctx = ssl.create_default_context(cafile=str(ca))
    req = urllib.request.Request(server + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def wait_ready(state: State, root: Path, procs: dict[str, subprocess.Popen]) -> None:
    """Until /readyz says ok and the `default` namespace exists, or a process died, or time ran out."""
    deadline = time.monotonic() + READY_TIMEOUT
    ca, token = root / "pki" / "ca.crt", state.tokens[ADMIN]
    last = "no answer yet"
    while time.monotonic() < deadline:
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise ClusterError(f"{name} exited with {proc.returncode} while starting; "
                                   f"last lines of {root / (name + '.log')}:\n{tail(root / (name + '.log'))}")
        try:
            status, body = request(state.server, "/readyz", ca, token)
            if status == 200 and request(state.server, "/api/v1/namespaces/default", ca, token)[0] == 200:
                return
            last = f"/readyz: {status} {body.strip()[-300:]}"
        except (OSError, ssl.SSLError) as exc:
            last = str(exc)
        time.sleep(0.2)
    raise ClusterError(f"kube-apiserver not ready after {READY_TIMEOUT:.0f} s ({last}); "
                       f"see {root / 'kube-apiserver.log'}")


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


def alive(pid: int, root: Path) -> bool:
    """Whether `pid` is still one of this cluster's processes (its command line names files in `root`),
    so a recycled PID is never signalled."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return f"{root}/" in cmdline


def up(root: Path | str, binaries: Binaries | None = None) -> State:
    """Start etcd and kube-apiserver for `root` (created if needed) and return once they serve."""
    root = Path(root).resolve()
    state = read_state(root)
    if state and all(alive(pid, root) for pid in state.pids.values()):
        return state
    binaries = binaries or find_binaries()
    if binaries is None:
        raise ClusterError("kube-apiserver or etcd not found: run hack/build-kube-apiserver and install "
                           "etcd-server (or set TOPOLABEL_KUBE_APISERVER / TOPOLABEL_ETCD)")
    root.mkdir(parents=True, exist_ok=True)
    make_certs(root / "pki")
    tokens = write_tokens(root / "tokens.csv")
    (root / "audit-policy.yaml").write_text(AUDIT_POLICY)
    attempt = 1
    while True:
        try:
            return start(root, binaries, tokens)
        except ClusterError as exc:
            down(root)
            if attempt == START_ATTEMPTS or "address already in use" not in str(exc):
                raise
            attempt += 1


def start(root: Path, binaries: Binaries, tokens: dict[str, str]) -> State:
    client, peer, secure = free_ports(3)
    shutil.rmtree(root / "etcd", ignore_errors=True)
    procs = {"etcd": spawn(etcd_command(binaries.etcd, root, client, peer), root / "etcd.log")}
    etcd_url = f"http://127.0.0.1:{client}"
    procs["kube-apiserver"] = spawn(apiserver_command(binaries.kube_apiserver, root, etcd_url, secure),
                                    root / "kube-apiserver.log")
    state = State(server=f"https://127.0.0.1:{secure}", etcd=etcd_url,
                  pids={name: p.pid for name, p in procs.items()}, tokens=tokens, kubectl=binaries.kubectl)
    (root / STATE).write_text(json.dumps(asdict(state), indent=2) + "\n")
    for name, proc in procs.items():
        (root / f"{name}.pid").write_text(f"{proc.pid}\n")
    ca = root / "pki" / "ca.crt"
    (root / "kubeconfig").write_text(kubeconfig(state.server, ca, ADMIN, tokens[ADMIN]))
    (root / "operator.kubeconfig").write_text(kubeconfig(state.server, ca, OPERATOR, tokens[OPERATOR]))
    wait_ready(state, root, procs)
    return state


def down(root: Path | str, grace: float = 10.0) -> None:
    """Stop the cluster in `root`: the API server first, then etcd; SIGKILL after `grace` seconds."""
    root = Path(root).resolve()
    state = read_state(root)
    if state is None:
        return
    for name in ("kube-apiserver", "etcd"):
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
    for name in ("kube-apiserver", "etcd"):
        (root / f"{name}.pid").unlink(missing_ok=True)
    (root / STATE).unlink(missing_ok=True)


def reap(pid: int) -> None:
    """Collect a child's exit status (when `up` ran in this process) so it does not linger as a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


USAGE = """usage: hack/test-cluster up DIR     start etcd + kube-apiserver; writes DIR/kubeconfig (admin)
                                  and DIR/operator.kubeconfig (user topolabel-operator, no rights until bound)
       hack/test-cluster down DIR   stop them"""


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("up", "down"):
        print(USAGE, file=sys.stderr)
        return 2
    command, root = argv[0], Path(argv[1])
    try:
        if command == "down":
            down(root)
            return 0
        state = up(root)
    except ClusterError as exc:
        print(f"test-cluster: {exc}", file=sys.stderr)
        return 1
    root = root.resolve()
    print(f"API server {state.server} (etcd {state.etcd}); pids {state.pids}")
    print(f"export KUBECONFIG={root / 'kubeconfig'}")
    if state.kubectl:
        print(f"kubectl: {state.kubectl}")
    print(f"stop with: hack/test-cluster down {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
