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

from labeler.cluster.kube import connect
from labeler.errors import InputError
from providers import registry
from providers.labels import presets
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


PRESETS = sorted([*presets.PRESETS, *presets.TIERED])  # what --preset completes to
SOURCES = sorted(registry.SOURCES)  # what --source completes to
LEVELS = ["block", "subblock", "hostname", "example.com/block", "example.com/subblock", "kubernetes.io/hostname"]
ROOT = Path(__file__).resolve().parent.parent


def _topology(tmp_path: Path) -> Path:
    """A Topology file as `topolabel kueue` writes one: the levels completion offers."""
    path = tmp_path / "topology.yaml"
    path.write_text(json.dumps({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"},
                                "spec": {"levels": [{"nodeLabel": key} for key in LEVELS[3:]]}}))
    return path


def _console_scripts(bin_dir: Path) -> None:
    """The console scripts pyproject.toml declares, written as pip writes them (here running this tree)."""
    import tomllib

    bin_dir.mkdir(exist_ok=True)
    for name, target in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"].items():
        module, func = target.split(":")
        script = bin_dir / name
        script.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                          f"from {module} import {func}\nsys.exit({func}())\n")
        script.chmod(0o755)


def _with_topolabel(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has this tree's console scripts first."""
    _console_scripts(tmp_path / "bin")
    return {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "HOME": str(tmp_path)}


def test_bash_completes_commands_sources_files_presets_and_levels(tmp_path: Path) -> None:
    topology = _topology(tmp_path)
    script = tmp_path / "topolabel.bash"
    script.write_text(completion("bash"))
    (tmp_path / "nodes.yaml").write_text("items: []\n")
    probe = f"""source {script}
ask() {{ COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${{#COMP_LINE}};
        _shtab_topolabel topolabel "${{@: -1}}" "${{@: -2:1}}"; echo "${{COMPREPLY[*]}}"; }}
ask topolabel dis
ask topolabel discover --source ""
ask topolabel discover --nodes {tmp_path}/no
ask topolabel discover --source labels --preset ""
ask topolabel job annotate job.yaml --kueue-dir {topology} --within ""
ask topolabel show --kueue-dir {topology} --level sub
"""
    lines = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60,
                           env=_with_topolabel(tmp_path)).stdout.splitlines()
    assert lines[0] == "discover"
    assert lines[1].split() == SOURCES
    assert lines[2] == f"{tmp_path}/nodes.yaml"
    assert lines[3].split() == PRESETS
    assert lines[4].split() == LEVELS
    assert lines[5] == "subblock"


@shell("fish")
def test_fish_completes_commands_and_sources(tmp_path: Path) -> None:
    script = tmp_path / "topolabel.fish"
    script.write_text(completion("fish"))
    out = subprocess.run(["fish", "-c", f"source {script}; complete -C 'topolabel dis'; "
                          "complete -C 'topolabel discover --source '"], capture_output=True, text=True,
                         timeout=30).stdout
    names = [line.split("\t")[0] for line in out.splitlines()]
    assert names == ["discover", *SOURCES]


def _zsh_prompt(tmp_path: Path, script: Path, line: str, last: str, setup: str = "") -> str:
    """What an interactive zsh in a pseudo-terminal lists after `line` and a TAB (zsh completes only inside
    its line editor), once `last` shows up."""
    driver = tmp_path / "drive.zsh"
    driver.write_text(f"""zmodload zsh/zpty
zpty z 'zsh -f -i'
zpty -w z 'autoload -U compinit; compinit -u -D; {setup}'
zpty -w -n z $'{line}\\t'
out=""
for i in {{1..300}}; do  # up to 30 s: a loaded machine starts zsh's completion slowly
  while zpty -r -t z line; do out+="$line"; done
  [[ $out == *{last}* ]] && break
  sleep 0.1
done
sleep 0.5  # the rest of the list
while zpty -r -t z line; do out+="$line"; done
print -r -- "$out"
zpty -d z
""")
    out = subprocess.run(["zsh", "-f", str(driver)], capture_output=True, text=True, timeout=90,
                         env=_with_topolabel(tmp_path)).stdout
    return out.replace(line.strip(), "")  # the list, without the line as typed and redrawn


@shell("zsh")
def test_zsh_completes_sources_presets_and_levels_at_a_real_prompt(tmp_path: Path) -> None:
    script = tmp_path / "_topolabel"
    script.write_text(completion("zsh"))
    setup = f"source {script}; compdef _shtab_topolabel topolabel"
    after = _zsh_prompt(tmp_path, script, "topolabel discover --source ", SOURCES[-1], setup)
    for name in SOURCES:
        assert name in after
    after = _zsh_prompt(tmp_path, script, "topolabel discover --source labels --preset ", "topograph", setup)
    assert all(name in after for name in PRESETS), after
    topology = _topology(tmp_path)
    after = _zsh_prompt(tmp_path, script, f"topolabel job annotate j.yaml --kueue-dir {topology} --within ",
                        "kubernetes.io/hostname", setup)
    assert all(name in after for name in LEVELS), after


def kubectl() -> str:
    """kubectl as the tests' control plane has it, else the one on PATH (plugin completion needs >= 1.26)."""
    for path in (Path.home() / ".cache/topolabel/stack/kubectl", Path.home() / ".cache/topolabel/bin/kubectl"):
        if path.exists():
            return str(path)
    found = shutil.which("kubectl")
    if not found:
        if os.environ.get("CI"):
            pytest.fail("no kubectl: .ci/setup.d builds it")
        pytest.skip("no kubectl")
    return found


def test_kubectl_completes_the_plugin_through_kubectl_complete_topolabel(tmp_path: Path) -> None:
    """kubectl finds kubectl-topolabel and asks kubectl_complete-topolabel (both console scripts) for the words
    after the plugin's name: in its own __complete protocol, and at a bash prompt."""
    env = _with_topolabel(tmp_path)
    topology = _topology(tmp_path)
    asked = subprocess.run([kubectl(), "__complete", "topolabel", "discover", "--source", "labels", "--preset", "g"],
                           capture_output=True, text=True, timeout=60, env=env)
    assert asked.stdout.splitlines()[:2] == ["gke", ":4"], asked.stdout + asked.stderr
    bash_completion = Path("/usr/share/bash-completion/bash_completion")  # kubectl's script needs it
    if not bash_completion.exists():
        if os.environ.get("CI"):
            pytest.fail("bash-completion is in .ci/apt-packages")
        pytest.skip("bash-completion is not installed")
    probe = f"""source {bash_completion}
source <({kubectl()} completion bash)
ask() {{ COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${{#COMP_LINE}};
        __start_kubectl kubectl "${{@: -1}}" "${{@: -2:1}}"; echo "${{COMPREPLY[*]}}"; }}
ask kubectl topolabel pl
ask kubectl topolabel job annotate j.yaml --kueue-dir {topology} --within sub
"""
    lines = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60, env=env).stdout
    assert lines.splitlines()[-2:] == ["plan", "subblock"], lines


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
