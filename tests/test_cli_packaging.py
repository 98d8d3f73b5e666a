"""What an installed CLI offers besides its commands: --version, the kubectl plugin, shell completion, and
kubeconfig resolution in kubectl's order. Completion is checked in the real shells."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from labeler.errors import InputError
from labeler.kube import connect
from topolabel import version
from topolabel.cli import main


def test_version_names_the_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"topolabel {version.current()}"
    assert version.current()[0].isdigit()


def test_the_kubectl_plugin_is_the_same_cli_under_kubectl_s_name() -> None:
    plugin = shutil.which("kubectl-topolabel")
    assert plugin, "pip install -e . installs the kubectl-topolabel entry point"
    result = subprocess.run([plugin, "plan", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("usage: kubectl topolabel plan")


def shell(name: str) -> pytest.MarkDecorator:
    """Skip where the shell is missing, but never in CI, which installs it (.ci/apt-packages)."""
    return pytest.mark.skipif(not shutil.which(name) and not os.environ.get("CI"), reason=f"{name} is not installed")


def completion(shell: str) -> str:
    result = subprocess.run([sys.executable, "-m", "topolabel.cli", "completion", shell], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_bash_completes_commands_sources_and_files(tmp_path: Path) -> None:
    script = tmp_path / "topolabel.bash"
    script.write_text(completion("bash"))
    (tmp_path / "nodes.yaml").write_text("items: []\n")
    probe = f"""source {script}
ask() {{ COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${{#COMP_LINE}};
        _shtab_topolabel topolabel "${{@: -1}}" "${{@: -2:1}}"; echo "${{COMPREPLY[*]}}"; }}
ask topolabel dis
ask topolabel discover --source ""
ask topolabel discover --nodes {tmp_path}/no
"""
    lines = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30).stdout.splitlines()
    assert lines[0] == "discover"
    assert lines[1].split() == ["aws", "combined", "gcp", "infiniband", "inventory", "labels", "lldp"]
    assert lines[2] == f"{tmp_path}/nodes.yaml"


@shell("fish")
def test_fish_completes_commands_and_sources(tmp_path: Path) -> None:
    script = tmp_path / "topolabel.fish"
    script.write_text(completion("fish"))
    out = subprocess.run(["fish", "-c", f"source {script}; complete -C 'topolabel dis'; "
                          "complete -C 'topolabel discover --source '"], capture_output=True, text=True,
                         timeout=30).stdout
    names = [line.split("\t")[0] for line in out.splitlines()]
    assert names == ["discover", "aws", "combined", "gcp", "infiniband", "inventory", "labels", "lldp"]


@shell("zsh")
def test_zsh_completes_sources_at_a_real_prompt(tmp_path: Path) -> None:
    """zsh completes only inside its line editor, so an interactive zsh in a pseudo-terminal is asked."""
    script = tmp_path / "_topolabel"
    script.write_text(completion("zsh"))
    driver = tmp_path / "drive.zsh"
    driver.write_text(f"""zmodload zsh/zpty
zpty z 'zsh -f -i'
zpty -w z 'autoload -U compinit; compinit -u -D; source {script}; compdef _shtab_topolabel topolabel'
zpty -w -n z $'topolabel discover --source \\t'
out=""
for i in {{1..300}}; do  # up to 30 s: a loaded machine starts zsh's completion slowly
  while zpty -r -t z line; do out+="$line"; done
  [[ $out == *lldp* ]] && break
  sleep 0.1
done
print -r -- "$out"
zpty -d z
""")
    out = subprocess.run(["zsh", "-f", str(driver)], capture_output=True, text=True, timeout=60).stdout
    after = out.split("topolabel discover --source", 1)[-1]  # the list, before zsh redraws the line
    for name in ("aws", "combined", "gcp", "infiniband", "inventory", "labels", "lldp"):
        assert name in after


def kubeconfig(path: Path, server: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path


def test_kubeconfig_is_found_in_kubectl_s_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")  # as inside a pod
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(InputError, match="^the in-cluster service account: cannot connect"):
        connect()  # nothing else exists: in-cluster is the last resort (and there is no token here)
    kubeconfig(home / ".kube" / "config", "https://home.example:6443")
    assert connect().configuration.host == "https://home.example:6443"
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "env.yaml", "https://env.example:6443")))
    assert connect().configuration.host == "https://env.example:6443"
    flag = kubeconfig(tmp_path / "flag.yaml", "https://flag.example:6443")
    assert connect(str(flag)).configuration.host == "https://flag.example:6443"
