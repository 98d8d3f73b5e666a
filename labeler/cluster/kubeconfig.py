"""Kubeconfig files, read like every other document a user gives: bounded, plain data, each field's type
checked, errors on one line naming the file and the field.

The Kubernetes client's own loader parses with PyYAML unbounded (a 380-byte alias bomb took 3.6 GB) and runs
exec credential plugins with no timeout. Here each file goes through `labeler.io.documents`, the files of
$KUBECONFIG are merged in kubectl's order (the first file naming a cluster, user or context wins; so does the
first current-context), relative paths are resolved against the file that holds them, and the context's
exec plugin is run by `labeler.io.hosttools` (a timeout that kills its process group, a bound on what it prints);
the client then loads the result with `load_kube_config_from_dict`. A token the plugin says expires is asked
for again when it has.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import InputError, SourceError
from ..io.documents import load_json, mapping, read_document, sequence
from ..io.hosttools import run_tool

EXEC_SECONDS = 60.0  # a credential plugin's answer (it usually calls a cloud API)
INTERACTIVE_SECONDS = 300.0  # one that may ask a person to log in
EXEC_MAX_BYTES = 1 << 20
SECTIONS = {"clusters": "cluster", "users": "user", "contexts": "context"}
# Known fields and the type each must have (others are kept as they are, as kubectl ignores them).
FIELDS: dict[str, dict[str, type]] = {
    "cluster": {"server": str, "certificate-authority": str, "certificate-authority-data": str,
                "insecure-skip-tls-verify": bool, "tls-server-name": str, "proxy-url": str},
    "user": {"token": str, "tokenFile": str, "client-certificate": str, "client-certificate-data": str,
             "client-key": str, "client-key-data": str, "username": str, "password": str, "exec": dict,
             "auth-provider": dict},
    "context": {"cluster": str, "user": str, "namespace": str},
    "exec": {"command": str, "args": list, "env": list, "apiVersion": str, "provideClusterInfo": bool,
             "interactiveMode": str},
}
PATHS = {"cluster": ("certificate-authority",), "user": ("client-certificate", "client-key", "tokenFile")}
TYPE_NAMES = {str: "a string", bool: "a boolean", dict: "a mapping", list: "a list"}


def read_kubeconfig(files: str) -> dict[str, Any]:
    """The kubeconfig files of `files` (separated by ':' as in $KUBECONFIG; missing ones skipped, as kubectl
    does) merged into one plain mapping; an `InputError` naming the file and field when one is malformed."""
    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": []}
    seen = False
    for name in (p for p in files.split(os.pathsep) if p):
        path = Path(name).expanduser()
        if not path.exists():
            continue
        seen = True
        _merge(merged, _checked(read_document(path), str(path), path.parent.resolve()))
    if not seen:
        raise InputError(f"{files}: no such kubeconfig file")
    return merged


def _checked(data: Any, origin: str, base: Path) -> dict[str, Any]:
    """One file's content, each known field's type checked, relative paths made absolute."""
    top = mapping(data, origin)
    current = top.get("current-context")
    if current is not None and not isinstance(current, str):
        raise InputError(f"{origin}: current-context must be a string")
    out: dict[str, Any] = {"current-context": current}
    for section, kind in SECTIONS.items():
        entries = []
        for i, item in enumerate(sequence(top.get(section), f"{origin}: {section}")):
            where = f"{origin}: {section}[{i}]"
            item = mapping(item, where)
            name = item.get("name")
            if not isinstance(name, str) or not name:
                raise InputError(f"{where}: needs a name")
            body = _fields(mapping(item.get(kind), f"{where}.{kind}"), kind, f"{origin}: {section}[{name}].{kind}")
            entries.append({"name": name, kind: _absolute(body, kind, base)})
        out[section] = entries
    return out


def _fields(body: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    for key, wanted in FIELDS[kind].items():
        value = body.get(key)
        if value is not None and not isinstance(value, wanted):
            raise InputError(f"{where}.{key} must be {TYPE_NAMES[wanted]}")
    if kind == "user" and body.get("exec") is not None:
        plugin = _fields(body["exec"], "exec", f"{where}.exec")
        if not plugin.get("command"):
            raise InputError(f"{where}.exec needs a command")
        if not all(isinstance(a, str) for a in plugin.get("args") or []):
            raise InputError(f"{where}.exec.args must be a list of strings")
        for i, item in enumerate(plugin.get("env") or []):
            if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in ("name", "value")):
                raise InputError(f"{where}.exec.env[{i}] must be a mapping with a name and a value (strings)")
    if kind == "user" and isinstance(body.get("auth-provider"), dict):
        config = mapping(body["auth-provider"].get("config"), f"{where}.auth-provider.config")
        if "cmd-path" in config:  # the gcp provider's command, which the client runs with no timeout
            raise InputError(f"{where}.auth-provider: cmd-path is not supported (kubectl dropped the gcp provider in "
                             "1.26); use its exec plugin, gke-gcloud-auth-plugin")
    return body


def _absolute(body: dict[str, Any], kind: str, base: Path) -> dict[str, Any]:
    """Paths resolved against the file's directory, as kubectl does (an exec command only when it names a
    path, `./plugin`, not a program looked up in $PATH)."""
    body = dict(body)
    for key in PATHS.get(kind, ()):
        if body.get(key):
            body[key] = str(base / Path(body[key]).expanduser())
    plugin = body.get("exec")
    if plugin:
        command = plugin["command"]
        body["exec"] = {**plugin, "command": str(base / command) if "/" in command else command, "cwd": str(base)}
    return body


def _merge(merged: dict[str, Any], found: dict[str, Any]) -> None:
    for section in SECTIONS:
        names = {item["name"] for item in merged[section]}
        merged[section] += [item for item in found[section] if item["name"] not in names]
    if not merged.get("current-context") and found.get("current-context"):
        merged["current-context"] = found["current-context"]


@dataclass
class Credentials:
    """What the chosen context's exec plugin answered, and how to ask it again."""

    token: str | None = None
    certificate: str = ""  # PEM, when the plugin answers with a client certificate instead of a token
    key: str = ""
    expires: datetime.datetime | None = None
    ask: Callable[[], "Credentials"] | None = field(default=None, repr=False)

    def expired(self) -> bool:
        return self.expires is not None and datetime.datetime.now(datetime.timezone.utc) >= self.expires

    def keep_fresh(self, configuration: Any) -> None:
        """Before each request the client calls `refresh_api_key_hook`: an expired token is asked for again
        (one thread asks; the others wait for its answer)."""
        if self.token is None or self.expires is None or self.ask is None:
            return
        lock = threading.Lock()

        def refresh(conf: Any) -> None:
            with lock:
                if self.expired():
                    fresh = self.ask()  # type: ignore[misc]
                    self.token, self.expires = fresh.token, fresh.expires
                conf.api_key["BearerToken"] = f"Bearer {self.token}"

        configuration.refresh_api_key_hook = refresh


def resolve_exec(config: dict[str, Any], context: str | None, origin: str) -> Credentials | None:
    """Run the exec plugin of the context's user (when it has one) and put its answer in the user's place,
    so the client runs nothing itself; None when the user has no plugin."""
    name = context or config.get("current-context")
    ctx = next((c["context"] for c in config["contexts"] if c["name"] == name), None)
    user = next((u for u in config["users"] if ctx is not None and u["name"] == ctx.get("user")), None)
    if user is None or not user["user"].get("exec"):
        return None
    cluster: dict[str, Any] = next((c["cluster"] for c in config["clusters"] if ctx is not None and c["name"] == ctx.get("cluster")), {})
    plugin = user["user"].pop("exec")
    where = f"{origin}: user {user['name']}: exec plugin {plugin['command']}"

    def ask() -> Credentials:
        return _run_plugin(plugin, cluster, where, ask)

    found = ask()
    if found.token is not None:
        user["user"]["token"] = found.token
    else:
        user["user"].update({"client-certificate-data": _base64(found.certificate),
                             "client-key-data": _base64(found.key)})
    return found


def _run_plugin(plugin: Mapping[str, Any], cluster: Mapping[str, Any], where: str,
                ask: Callable[[], Credentials]) -> Credentials:
    """One run of a credential plugin (client.authentication.k8s.io ExecCredential), under a timeout."""
    interactive = plugin.get("interactiveMode") != "Never" and sys.stdin.isatty() and sys.stderr.isatty()
    info: dict[str, Any] = {"apiVersion": plugin.get("apiVersion"), "kind": "ExecCredential",
                            "spec": {"interactive": interactive}}
    if plugin.get("provideClusterInfo"):
        info["spec"]["cluster"] = dict(cluster)
    env = {**os.environ, **{e["name"]: e["value"] for e in plugin.get("env") or []},
           "KUBERNETES_EXEC_INFO": json.dumps(info)}
    try:
        out = run_tool([plugin["command"], *(plugin.get("args") or [])],
                       INTERACTIVE_SECONDS if interactive else EXEC_SECONDS, env=env, cwd=plugin.get("cwd"),
                       max_bytes=EXEC_MAX_BYTES, interactive=interactive,
                       missing="install the credential plugin the kubeconfig names, or use another context")
    except SourceError as exc:
        raise InputError(f"{where}: {exc}") from None
    answer = mapping(load_json(out, f"{where}: its answer"), f"{where}: its answer")
    if answer.get("apiVersion") != plugin.get("apiVersion"):
        raise InputError(f"{where}: answered apiVersion {str(answer.get('apiVersion'))[:60]!r}, not the "
                         f"kubeconfig's {str(plugin.get('apiVersion'))[:60]!r}")
    status = mapping(answer.get("status"), f"{where}: its answer's status")
    expires = _expiry(status.get("expirationTimestamp"), where)
    token, cert, key = (status.get(k) for k in ("token", "clientCertificateData", "clientKeyData"))
    if isinstance(token, str) and token:
        return Credentials(token=token, expires=expires, ask=ask)
    if isinstance(cert, str) and cert and isinstance(key, str) and key:
        return Credentials(certificate=cert, key=key, expires=expires, ask=ask)
    raise InputError(f"{where}: its answer holds neither status.token nor status.clientCertificateData and "
                     "clientKeyData")


def _expiry(value: Any, where: str) -> datetime.datetime | None:
    if value is None:
        return None
    try:
        return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{where}: expirationTimestamp {str(value)[:40]!r} is not a time") from None


def _base64(pem: str) -> str:
    """PEM text as a kubeconfig's *-data field holds it."""
    return base64.b64encode(pem.encode()).decode()
