"""The krew plugin (plugins/krew/): its archive, built byte for byte the same from the same files, and the
manifest's version, download URL and sha256 kept in step with it and with pyproject.toml.

    python3 hack/krew.py archive DIR    # write DIR/kubectl-topolabel-vVERSION.tar.gz, print its path
    python3 hack/krew.py manifest       # rewrite version, uri and sha256 in plugins/krew/topolabel.yaml

Publishing: upload the archive as a release asset at the manifest's uri, then submit the manifest to
krew-index. The archive holds one sh script that runs the `topolabel` command pip installs, and the licence.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import sys
import tarfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "plugins" / "krew"
MANIFEST = PLUGIN / "topolabel.yaml"
FILES = {"kubectl-topolabel": PLUGIN / "kubectl-topolabel", "LICENSE": ROOT / "LICENSE"}  # name in the archive -> file


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def archive_name() -> str:
    return f"kubectl-topolabel-v{project()['version']}.tar.gz"


def archive_bytes() -> bytes:
    """A .tar.gz of FILES with fixed owners, modes and times, so the sha256 depends on their contents only."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, path in FILES.items():
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            mode = 0o755 if name == "kubectl-topolabel" else 0o644
            info.size, info.mode, info.mtime, info.uname, info.gname = len(data), mode, 0, "root", "root"
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def expected() -> dict[str, str]:
    """The manifest fields that follow from pyproject.toml and the archive."""
    meta = project()
    return {"version": f"v{meta['version']}",
            "uri": f"{meta['urls']['Source']}/releases/download/v{meta['version']}/{archive_name()}",
            "sha256": hashlib.sha256(archive_bytes()).hexdigest()}


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "archive":
        path = Path(argv[1]) / archive_name()
        path.write_bytes(archive_bytes())
        print(path)
        return 0
    if argv == ["manifest"]:
        text = MANIFEST.read_text()
        for key, value in expected().items():
            text = re.sub(rf"(?m)^(\s*{key}: ).*$", lambda m: f'{m.group(1)}"{value}"', text)
        MANIFEST.write_text(text)
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
