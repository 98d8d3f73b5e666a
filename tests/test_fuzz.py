"""testkit/fuzz.py in CI: a fixed seed, a bounded budget. Every target once (the files, and the hostile world's:
kubeconfigs, API answers, an exec plugin's and lldpcli's output, nodes' InfiniBand claims), then the fixed
checks that take seconds (`--quick`: not those waiting for a default timeout); nothing may crash, hang, leak,
answer wrongly or lose data. Longer runs with new seeds are in docs/testing.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testkit.fuzz import TARGETS
from testkit.fuzz_hostile import TARGETS as HOSTILE
from testkit.environment import ROOT

SEED = 32
CASES = len(TARGETS) + len(HOSTILE)  # each target once
BUDGET = 90  # seconds for the random cases; the driver says in its findings how many it ran


def test_a_fixed_seed_finds_nothing(tmp_path: Path) -> None:
    report = tmp_path / "fuzz.json"
    done = subprocess.run([sys.executable, "-m", "testkit.fuzz", "--cases", str(CASES), "--seed", str(SEED), "--quick",
                           "--budget", str(BUDGET), "--json", str(report)], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(report.read_text())
    found = {key: data[key] for key in ("tracebacks", "hangs", "bad_exits", "leaks", "wrong_results", "data_loss")}
    assert found == dict.fromkeys(found, 0), done.stdout[-4000:]
    assert set(data["by_target"]) >= {t.name for t in HOSTILE}, data["by_target"]  # the hostile world was run
    assert data["cases"] > CASES + 50  # and the fixed checks
