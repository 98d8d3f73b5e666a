"""UFM source: the InfiniBand fabric as NVIDIA UFM Enterprise sees it, placed as the infiniband source places it.

Two GETs of UFM's REST API (`providers.infiniband.ufmrest`) give the same fabric model `ibnetdiscover` output
gives, so leaf groups, blocks, names and problems are the infiniband source's, without a collector on the
hosts. Credentials come from a mounted Secret (or the environment); TLS is verified unless `--ufm-insecure`.
See docs/ufm.md.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path

from labeler.errors import InputError, SourceError
from labeler.gcpause import paused_gc
from labeler.topology.model import Discovery

from ..base import Source, SourceContext, parse_options
from .options import FabricOptions, add_fabric_arguments

NAME = "ufm"
ENV_USERNAME, ENV_PASSWORD, ENV_TOKEN = "UFM_USERNAME", "UFM_PASSWORD", "UFM_TOKEN"


@dataclass(frozen=True)
class UfmOptions(FabricOptions):
    ufm_url: str | None = None  # https://ufm.example.com
    ufm_credentials: str | None = None  # a directory: `username` and `password`, or `token` (a mounted Secret)
    ufm_ca: str | None = None
    ufm_insecure: bool = False
    ufm_timeout: float = field(default=60.0, metadata={"gt": 0})

    def check(self) -> None:
        if not self.ufm_url:
            raise ValueError("give --ufm-url https://<UFM server>")
        if not self.ufm_url.startswith("https://"):
            raise ValueError(f"--ufm-url {self.ufm_url!r}: UFM is reached over https:// only")
        if self.ufm_ca and self.ufm_insecure:
            raise ValueError("--ufm-ca verifies the server, --ufm-insecure does not: give one")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("ufm source")
    group.add_argument("--ufm-url", metavar="URL", help="the UFM Enterprise server, https://...")
    group.add_argument("--ufm-credentials", metavar="DIR",
                       help="a directory holding `username` and `password` (a basic-auth Secret mounted there), or "
                            f"`token`; default: ${ENV_USERNAME} and ${ENV_PASSWORD}, or ${ENV_TOKEN}")
    group.add_argument("--ufm-ca", metavar="FILE", help="CA bundle that signed UFM's certificate (default: the system's)")
    group.add_argument("--ufm-insecure", action="store_true", default=None,
                       help="do not verify UFM's TLS certificate (a test server; reported as a problem)")
    group.add_argument("--ufm-timeout", type=float, metavar="SECONDS", help="seconds to wait for each answer (default 60)")
    add_fabric_arguments(parser, NAME)


@paused_gc()  # the fabric's lifetime: read, placed, let go (see labeler.gcpause)
def discover(ctx: SourceContext) -> Discovery:
    opts = parse_options(UfmOptions, ctx)
    from .locate import locate  # the REST client, parser and placement load only when it runs
    from .ufmrest import Server, fabric_from, fetch

    assert opts.ufm_url is not None  # check() requires it
    origin = f"UFM {opts.ufm_url}"
    server = Server(opts.ufm_url, _credentials(opts.ufm_credentials), opts.ufm_ca, opts.ufm_insecure, opts.ufm_timeout)
    task = ctx.progress(f"reading the fabric from {origin}", None)
    try:
        systems, ports = fetch(server)
    finally:
        task.close()
    fabric, notices = fabric_from(systems, ports, origin)
    if opts.ufm_insecure:
        notices.append(f"{origin}: TLS certificate not verified (--ufm-insecure): anyone on the path could answer")
    return locate(fabric, opts, ctx, origin, NAME, notices)


def _credentials(directory: str | None):  # -> ufmrest.Credentials (loaded with it)
    """From the directory's files, else the environment; never echoed."""
    from .ufmrest import basic, token

    if directory:
        values = {name: _secret(Path(directory) / name) for name in ("username", "password", "token")}
        where = f"--ufm-credentials {directory}"
    else:
        values = {"username": os.environ.get(ENV_USERNAME), "password": os.environ.get(ENV_PASSWORD),
                  "token": os.environ.get(ENV_TOKEN)}
        where = f"${ENV_USERNAME}/${ENV_PASSWORD} or ${ENV_TOKEN}"
    if values["username"] and values["password"]:
        return basic(values["username"], values["password"])
    if values["token"]:
        return token(values["token"])
    raise SourceError(f"ufm: no credentials in {where}: give a UFM user's `username` and `password` "
                      "(a read-only Monitoring_Only user, docs/ufm.md), or an access `token`")


def _secret(path: Path) -> str | None:
    """A Secret key's file, stripped of the newline editors add; None when absent."""
    from labeler.io.files import read_text

    if not path.exists():
        return None
    try:
        return read_text(str(path)).strip() or None
    except InputError as exc:
        raise SourceError(str(exc)) from None


# The fabric is read whole from UFM: no cluster nodes needed, and no cheaper answer for a few joining nodes.
SOURCE = Source(NAME, UfmOptions, add_arguments, discover, needs_nodes=False, per_node=False)
