"""Bad input gets one line naming the input and the problem, exit 2, never a traceback, for every reader.

Each reader is fed what testkit/fuzz.py found crashing or hanging them: non-UTF-8 and binary bytes, nesting far
deeper than any real document, alias bombs, YAML tags for binary data and sets, numbers longer than Python
reads, directories where files belong, and wrong types in every field the commands read.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from labeler.errors import InputError
from labeler.io.documents import MAX_DEPTH, load, read_document
from labeler.io.files import _bounded_read, read_bytes, read_text, text_slices
from labeler.io.jsonlist import MAX_NESTING
from testkit.environment import EXAMPLES, ROOT
from topolabel.cli import main

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi")) + "items: *i\n"

BAD = {
    "non-UTF-8": b"items: [\xff\xfe]\n",
    "binary": bytes(range(256)),
    "deep JSON": b"[" * 100_000 + b"]" * 100_000,
    "deep JSON objects": b'{"a":' * 5000 + b"1" + b"}" * 5000,
    "deep JSON node list": b'{"items": [' + b'{"a":' * 30_000 + b"1" + b"}" * 30_000 + b"]}",
    "deep YAML flow": b"[" * 100_000,
    "deep YAML block": b"".join(b"  " * i + b"- a:\n" for i in range(2000)),
    "alias bomb": ALIAS_BOMB.encode(),
    "long number": b"levels: " + b"9" * 5000 + b"\n",
    "long JSON number": b'{"levels": ' + b"9" * 5000 + b"}",
    "binary tag": b"items: !!binary aGVsbG8=\n",
    "set tag": b"items: !!set {a, b}\n",
    "NaN": b'{"levels": NaN}',
    "two documents": b"a: 1\n---\nb: 2\n",
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_every_document_reader_refuses_in_one_line(name: str, tmp_path: Path) -> None:
    path = tmp_path / "input"
    path.write_bytes(BAD[name])
    start = time.monotonic()
    with pytest.raises(InputError) as err:
        read_document(path)
    assert time.monotonic() - start < 5
    message = str(err.value)
    assert message.startswith(f"{path}: ") and "\n" not in message and len(message) < 300


@pytest.mark.parametrize("document", [
    b'{"items": [' + b'{"a":' * 200_000 + b"1" + b"}" * 200_000 + b"]}",  # inside the list
    b'{"a":' * 200_000 + b"1" + b"}" * 200_000,  # no list at all
    b'{"items": [' + b"[" * 200_000 + b"]" * 200_000 + b"]}",
], ids=["objects in the list", "objects, no list", "arrays in the list"])
def test_the_streamed_node_reader_refuses_deep_nesting_in_bounded_memory(document: bytes, tmp_path: Path) -> None:
    """A streaming parser that keeps one path string per open container (ijson, before) would need tens of GB
    for 200,000 levels; under a 1 GiB address-space limit the reader must stop with one line, not a
    MemoryError or a RecursionError."""
    path = tmp_path / "nodes.json"
    path.write_bytes(document)
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
            "from labeler.io.nodes import load_nodes_file; from labeler.errors import InputError\n"
            "try:\n    load_nodes_file(sys.argv[1])\nexcept InputError as exc:\n    print(exc); sys.exit(2)")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (2, f"{path}: nested deeper than {MAX_NESTING} levels", "")


def test_limits_and_types() -> None:
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert load(deep, "ok") is not None
    with pytest.raises(InputError, match=f"nested deeper than {MAX_DEPTH} levels"):
        load("[" + deep + "]", "x")
    assert load("day: 2024-01-01\ncount: 8\nflag: yes\n", "x") == {"day": "2024-01-01", "count": 8, "flag": True}
    # the inventory's reading: YAML 1.2's plain scalars, so racks keep their names
    assert load("r: [012, 1:30, 0x1F, 1_000, 0, yes, true, ~]\n", "x", strings=True) == {
        "r": ["012", "1:30", "0x1F", "1_000", "0", "yes", True, None]}


def test_a_directory_where_a_file_belongs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=f"{tmp_path}: cannot read: Is a directory"):
        read_document(tmp_path)


def commands(snap: str, bad: str) -> dict[str, list[str]]:
    """One command per reader, with `bad` where that reader's input goes."""
    cfg, nodes, job = str(EXAMPLES / "topolabel.yaml"), str(EXAMPLES / "nodes.yaml"), str(EXAMPLES / "jobs" / "pytorchjob.yaml")
    return {
        "config": ["discover", "--config", bad, "--nodes", nodes],
        "nodes": ["discover", "--source", "labels", "--preset", "gke", "--nodes", bad],
        "snapshot": ["plan", "--snapshot", bad, "--nodes", nodes],
        "against": ["verify", "--snapshot", snap, "--against", bad],
        "inventory": ["discover", "--source", "inventory", "--inventory", bad],
        "ibnetdiscover": ["discover", "--source", "infiniband", "--ibnetdiscover", bad],
        "switch map": ["discover", "--source", "lldp", "--lldp-dir", str(EXAMPLES), "--switch-map", bad],
        "job": ["job", "check", bad, "--snapshot", snap],
        "job for fit": ["fit", bad, "--snapshot", snap, "--nodes", nodes, "--config", cfg],
        "pods": ["fit", job, "--snapshot", snap, "--nodes", nodes, "--config", cfg, "--pods", bad],
        "kueue dir": ["show", "--kueue-dir", bad, "--nodes", nodes],
    }


@pytest.mark.parametrize("reader", ["config", "nodes", "snapshot", "against", "inventory", "ibnetdiscover", "switch map",
                                    "job", "job for fit", "pods", "kueue dir"])
def test_every_command_reading_a_file_says_one_line_and_exits_2(reader: str, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    snap = tmp_path / "snap.json"
    main(["discover", "--config", str(EXAMPLES / "topolabel.yaml"), "--nodes", str(EXAMPLES / "nodes.yaml"), "-o", "json"])
    snap.write_text(capsys.readouterr().out)
    for i, (name, content) in enumerate([*BAD.items(), ("directory", None)]):
        bad = tmp_path / f"bad-{i}"
        if content is None:
            bad.mkdir()
        else:
            bad.write_bytes(content)
        code = main(commands(str(snap), str(bad))[reader])
        err = capsys.readouterr().err
        assert code == 2, f"{reader} / {name}: exit {code}: {err}"
        assert len(err.strip().splitlines()) == 1 and "internal error" not in err, f"{reader} / {name}: {err}"


WRONG_TYPES = [
    ("nodes", {"items": [{"kind": "Node", "metadata": {"name": "n", "labels": ["a"]}}]}, "metadata.labels must be a mapping"),
    ("nodes", {"items": [{"kind": "Node", "metadata": {"name": "n"}, "spec": {"taints": "x"}}]}, "spec.taints must be a list"),
    ("nodes", {"items": [{"kind": "Node", "metadata": "n"}]}, "metadata must be a mapping"),
    ("nodes", {"items": [{"kind": "Node", "metadata": {"name": "n"}, "status": {"conditions": [1]}}]},
     "status.conditions[] must be a mapping"),
    ("pods", {"items": [{"kind": "Pod", "metadata": {"name": "p"}, "spec": {"nodeName": "n", "containers": [
        {"resources": {"requests": ["1"]}}]}}]}, "containers[0].resources.requests must be a mapping"),
    ("pods", {"items": [{"kind": "Pod", "spec": "x"}]}, "item 0 spec must be a mapping"),
    ("job", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {
        "spec": {"tolerations": {"key": "x"}}}}}, "spec.template.spec.tolerations must be a list"),
    ("job", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "labels": "x"}}, "metadata.labels must be"),
    ("job", {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "j"},
             "spec": {"replicatedJobs": {"a": 1}}}, "spec.replicatedJobs must be a list"),
    ("job", {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j"},
             "spec": {"pytorchReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [{}, "x"]}}}}}},
     "containers[1] must be a mapping"),
    ("job", {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j"},
             "spec": {"pytorchReplicaSpecs": {"Worker": {"template": {"spec": {"tolerations": [None]}}}}}},
     "tolerations[0] must be a mapping, not null"),
    ("kueue dir", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"},
                   "spec": {"levels": "x"}}, "Topology t: spec.levels must be a list"),
    ("kueue dir", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"},
                   "spec": {"nodeLabels": ["x"]}}, "ResourceFlavor f: spec.nodeLabels must be a mapping"),
]


@pytest.mark.parametrize("reader, data, fragment", WRONG_TYPES)
def test_wrong_types_anywhere_are_named(reader: str, data: dict, fragment: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    snap = tmp_path / "snap.json"
    main(["discover", "--config", str(EXAMPLES / "topolabel.yaml"), "--nodes", str(EXAMPLES / "nodes.yaml"), "-o", "json"])
    snap.write_text(capsys.readouterr().out)
    bad = tmp_path / "bad"
    if reader == "kueue dir":
        bad.mkdir()
        (bad / "t.yaml").write_text(yaml.safe_dump(data))
    else:
        bad.write_text(json.dumps(data))
    assert main(commands(str(snap), str(bad))[reader]) == 2
    err = capsys.readouterr().err
    assert fragment in err and len(err.strip().splitlines()) == 1 and "internal error" not in err, err


def test_a_message_stays_one_line_when_a_name_holds_a_newline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"items": [{"kind": "Node", "metadata": {"name": "a\nb", "labels": "x"}}]}))
    assert main(["discover", "--source", "labels", "--preset", "gke", "--nodes", str(nodes)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "node a\\nb: metadata.labels must be a mapping" in err


def test_unicode_digits_never_crash_and_sort_as_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = {"levels": [{"name": "block", "label": "topolabel.dev/block"}], "problems": [],
            "nodes": {name: {"block": "b1"} for name in ("gpu²", "gpu٣", "gpu10", "gpu2")}}
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    assert main(["export", "slurm", "--snapshot", str(path)]) == 0
    assert "SwitchName=b1 Nodes=gpu[2,10],gpu²,gpu٣\n" in capsys.readouterr().out  # only ASCII digits count
    job = tmp_path / "job.yaml"
    job.write_text("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, labels: {kueue.x-k8s.io/queue-name: q}}\n"
                   "spec:\n  parallelism: 4\n  template:\n    metadata:\n      annotations:\n"
                   "        kueue.x-k8s.io/podset-slice-required-topology: kubernetes.io/hostname\n"
                   "        kueue.x-k8s.io/podset-slice-size: \"²\"\n"
                   "        kueue.x-k8s.io/podset-required-topology: kubernetes.io/hostname\n")
    assert main(["job", "check", str(job), "-o", "json"]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert any("slice size '²' must be a numeric value" in f["message"] for f in findings)


def test_a_published_fabric_that_unpacks_beyond_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node running a hostile collector could publish a compression bomb: unpacking stops at the limit."""
    from labeler.errors import SourceError
    from providers.infiniband import published

    monkeypatch.setattr(published, "MAX_UNPACKED", 1000)
    with pytest.raises(SourceError, match=r"^f: cannot read the published fabric: unpacks to more than"):
        published.unpack(published.pack(b"[" + b" " * 5000 + b"]"), "f")
    assert published.unpack(published.pack(b"[1]"), "f") == [1]


@pytest.mark.parametrize("quantity", ["NaN", "Infinity", "1e99999999"])
def test_a_quantity_the_client_reads_but_the_api_server_refuses_is_one_line(quantity: str, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """kubernetes' parse_quantity (and so labeler.settings.quantities.parse) reads these; sums and ceilings cannot."""
    nodes = yaml.safe_load((EXAMPLES / "nodes.yaml").read_text())
    for item in nodes["items"]:
        item.setdefault("status", {}).setdefault("allocatable", {})["nvidia.com/gpu"] = quantity
    path = tmp_path / "nodes.yaml"
    path.write_text(yaml.safe_dump(nodes))
    assert main(["kueue", "--config", str(EXAMPLES / "topolabel.yaml"), "--nodes", str(path), "--output-dir", "-"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{quantity!r} is not a quantity the API server accepts" in err


def test_files_are_read_within_a_memory_limit(tmp_path: Path) -> None:
    """A container's memory limit is far below the 1 GiB input bound: reading must not reserve the bound up
    front (a small file read whole), and a file over the bound is refused by its size, unread."""
    small, huge = tmp_path / "small.yaml", tmp_path / "huge.json"
    small.write_text("levels: [block]\n")
    with open(huge, "wb") as f:
        f.truncate((1 << 30) + 1)  # sparse: no disk used
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (600 << 20, 600 << 20)); "
            "from labeler.io.documents import read_document; from labeler.errors import InputError\n"
            "print(read_document(sys.argv[1]))\n"
            "try:\n    read_document(sys.argv[2])\nexcept InputError as exc:\n    print(exc)")
    done = subprocess.run([sys.executable, "-c", code, str(small), str(huge)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == ["{'levels': ['block']}", f"{huge}: larger than 1024 MiB"]


def test_a_file_is_read_whole_whatever_size_it_states(tmp_path: Path) -> None:
    """A regular file is read at the size it states, in one buffer; one that grew since its size was taken, a
    stream with no size and a FIFO (size 0) are read whole too, byte for byte, past the MiB chunks."""
    data = bytes(range(256)) * 12_000
    assert _bounded_read(io.BytesIO(data), len(data)) == data
    assert _bounded_read(io.BytesIO(data), 1000) == data
    assert _bounded_read(io.BytesIO(data)) == data
    (tmp_path / "file").write_bytes(data)
    assert read_bytes(tmp_path / "file") == data
    os.mkfifo(tmp_path / "fifo")
    writer = threading.Thread(target=(tmp_path / "fifo").write_bytes, args=(data,), daemon=True)
    writer.start()
    assert read_bytes(tmp_path / "fifo") == data
    writer.join(10)


@pytest.mark.parametrize("size", [1, 7, 4096])
@pytest.mark.parametrize("data", [b"", b"\n", b"a", b"ab\ncd\n", b"x" * 10_000 + b"\n\n" + b"y\n" * 3000 + b"z",
                                  "\u00e9t\u00e9\n\u2028\r\n".encode() * 500],
                         ids=["empty", "a line end", "no line end", "two lines", "a long line", "multi-byte"])
def test_a_file_in_slices_is_the_file_line_by_line(tmp_path: Path, data: bytes, size: int) -> None:
    """Each slice of `text_slices` starts and ends at a line end (the first and last are added), the next one
    starts where it ended, and together they are the whole text whatever the read size: a line longer than a
    read, a multi-byte character across a read, an empty file."""
    (tmp_path / "f").write_bytes(data)
    slices = list(text_slices(tmp_path / "f", size))
    assert all(s[0] == "\n" and s[-1] == "\n" and len(s) >= 2 for s in slices)
    assert "".join(s[1:] for s in slices) == data.decode() + "\n"
    if size == 1 and data.count(b"\n") > 2:
        assert len(slices) > 2  # read a slice at a time, not whole


@pytest.mark.parametrize("at", [0, 5, 4095, 4096, 70_001])
def test_a_byte_that_is_not_utf8_is_named_where_it_is_in_the_file_read_in_slices(tmp_path: Path, at: int) -> None:
    data = bytearray(b"line\n" * 20_000)
    data[at] = 0xE9
    (tmp_path / "f").write_bytes(data)
    with pytest.raises(InputError) as whole:
        read_text(tmp_path / "f")
    with pytest.raises(InputError) as sliced:
        list(text_slices(tmp_path / "f", 4096))
    assert str(sliced.value) == str(whole.value) == f"{tmp_path / 'f'}: not UTF-8 text (byte {at} is 0xe9)"
