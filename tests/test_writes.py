"""Outputs are written all at once and never over what a user wrote.

A full disk or a file-size limit (RLIMIT_FSIZE, set in the child before it runs the CLI) must leave the
user's file byte-identical and end with one line and exit 2; an output directory shared by generators and
people keeps every file the running generator did not write.
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from testkit.environment import EXAMPLES, ROOT

CONFIG, NODES, JOB = EXAMPLES / "topolabel.yaml", EXAMPLES / "nodes.yaml", EXAMPLES / "jobs" / "pytorchjob.yaml"


def topolabel(*args: str, fsize: int | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI as a child process, optionally under a file-size limit (writes beyond it fail with EFBIG)."""
    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run([sys.executable, "-m", "topolabel.cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, preexec_fn=limit)


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    done = topolabel("discover", "--config", str(CONFIG), "--nodes", str(NODES), "-o", "json")
    path = tmp_path_factory.mktemp("snap") / "snap.json"
    path.write_text(done.stdout)
    return path


def one_error_line(done: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert done.returncode == 2, done.stderr
    assert fragment in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_job_annotate_in_place_under_a_file_size_limit_keeps_the_file(tmp_path: Path, snapshot: Path) -> None:
    job = tmp_path / "job.yaml"
    shutil.copy(JOB, job)
    before = job.read_bytes()
    done = topolabel("job", "annotate", str(job), "--queue", "gpu", "--within", "block", "--snapshot", str(snapshot),
                     "-i", fsize=len(before) // 2)
    one_error_line(done, f"{job}: cannot write: File too large; nothing was changed")
    assert job.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml"]  # no temporary file left behind
    done = topolabel("job", "annotate", str(job), "--queue", "gpu", "--within", "block", "--snapshot", str(snapshot), "-i")
    assert done.returncode == 0 and "kueue.x-k8s.io/podset-required-topology" in job.read_text()


def test_show_svg_under_a_file_size_limit_keeps_the_old_picture(tmp_path: Path, snapshot: Path) -> None:
    svg = tmp_path / "topo.svg"
    svg.write_text("<svg>the old picture</svg>\n")
    done = topolabel("show", "--config", str(CONFIG), "--nodes", str(NODES), "--snapshot", str(snapshot),
                     "--svg", str(svg), fsize=100)
    one_error_line(done, f"{svg}: cannot write: File too large")
    assert svg.read_text() == "<svg>the old picture</svg>\n"


def test_kueue_dir_under_a_file_size_limit_is_left_as_it_was(tmp_path: Path, snapshot: Path) -> None:
    out = tmp_path / "kueue"
    args = ["kueue", "--config", str(CONFIG), "--nodes", str(NODES), "--snapshot", str(snapshot), "--output-dir", str(out)]
    assert topolabel(*args).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    other = tmp_path / "other.yaml"
    other.write_text(CONFIG.read_text().replace("topologyName: gke", "topologyName: renamed"))
    done = topolabel(*args[:1], "--config", str(other), *args[3:], fsize=400)
    one_error_line(done, "cannot write: File too large; nothing was changed")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_an_export_under_a_file_size_limit_leaves_its_directory_as_it_was(tmp_path: Path, snapshot: Path) -> None:
    out = tmp_path / "kai"
    args = ["export", "kai", "--config", str(CONFIG), "--snapshot", str(snapshot), "--output-dir", str(out)]
    assert topolabel(*args).returncode == 0
    (out / "notes.md").write_text("a file people wrote\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    other = tmp_path / "other.yaml"
    other.write_text(CONFIG.read_text().replace("topologyName: gke", "topologyName: renamed"))
    done = topolabel(*args[:2], "--config", str(other), *args[4:], fsize=200)
    one_error_line(done, "cannot write: File too large; nothing was changed")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temporary file left either


def test_export_kai_into_a_kueue_dir_keeps_the_kueue_files(tmp_path: Path, snapshot: Path) -> None:
    out = tmp_path / "gitops"
    assert topolabel("kueue", "--config", str(CONFIG), "--nodes", str(NODES), "--snapshot", str(snapshot),
                     "--output-dir", str(out)).returncode == 0
    kueue_files = {p.name: p.read_bytes() for p in out.iterdir() if p.name != "kustomization.yaml"}
    for _ in range(2):
        done = topolabel("export", "kai", "--config", str(CONFIG), "--snapshot", str(snapshot), "--output-dir", str(out))
        assert done.returncode == 0, done.stderr
    assert all((out / name).read_bytes() == text for name, text in kueue_files.items())
    resources = yaml.safe_load((out / "kustomization.yaml").read_text())["resources"]
    kai = [p.name for p in out.glob("kai-topology-*.yaml")]
    assert len(kai) == 1 and sorted(resources) == sorted([*kueue_files, *kai])
    # and the Kueue files come back unchanged: `kueue --check` still agrees (the kai entry is kept)
    check = topolabel("kueue", "--config", str(CONFIG), "--nodes", str(NODES), "--snapshot", str(snapshot),
                      "--output-dir", str(out), "--check")
    assert check.returncode == 0, check.stdout


def test_an_output_dir_that_is_a_file_or_unreadable_is_one_line(tmp_path: Path, snapshot: Path) -> None:
    not_dir = tmp_path / "file"
    not_dir.write_text("x")
    done = topolabel("kueue", "--config", str(CONFIG), "--nodes", str(NODES), "--snapshot", str(snapshot),
                     "--output-dir", str(not_dir))
    one_error_line(done, f"{not_dir}: not a directory")
    (tmp_path / "kueue").mkdir()
    (tmp_path / "kueue" / "kustomization.yaml").write_bytes(b"resources: [\xff]\n")
    done = topolabel("kueue", "--config", str(CONFIG), "--nodes", str(NODES), "--snapshot", str(snapshot),
                     "--output-dir", str(tmp_path / "kueue"))
    one_error_line(done, "kustomization.yaml: not UTF-8 text; it was left as it is")


@pytest.mark.parametrize("kind", ["device", "fifo", "directory"])
def test_a_target_that_is_not_a_regular_file_is_refused_and_left_alone(tmp_path: Path, snapshot: Path, kind: str,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """`show --svg /dev/null` once renamed a regular file over the system's /dev/null (as root); a FIFO became a
    file, and a directory target left a temporary file behind."""
    from topolabel.cli import main

    target = tmp_path / kind
    if kind == "device":  # /dev/null's own numbers, in the test's directory (never the real one)
        try:
            os.mknod(target, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:  # no CAP_MKNOD: a socket is as special
            socket.socket(socket.AF_UNIX).bind(str(target))
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    before = os.lstat(target)
    code = main(["show", "--config", str(CONFIG), "--nodes", str(NODES), "--snapshot", str(snapshot), "--svg", str(target)])
    err = capsys.readouterr().err
    assert code == 2 and f"{target}: is a " in err and "not a regular file; refused" in err, err
    assert len(err.strip().splitlines()) == 1
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert not list(target.parent.glob(f".{target.name}.*.tmp"))


def test_a_rename_that_fails_leaves_no_temporary_file(tmp_path: Path) -> None:
    """A target that turns into a directory between the check and the rename: the temporary file goes too."""
    from labeler.errors import OutputError
    from labeler.io.files import write_files

    class Late(dict):
        def items(self):  # the check has run; now the second target becomes a directory
            (tmp_path / "b.yaml").mkdir()
            return super().items()

    with pytest.raises(OutputError, match="cannot finish writing"):
        write_files(tmp_path, Late({"a.yaml": "a\n", "b.yaml": "b\n"}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "b.yaml"]
