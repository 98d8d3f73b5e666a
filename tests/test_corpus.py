"""Past crashes, kept as regression tests: each input in tests/corpus/ made a command crash or hang on main
at 7e5405e (found by testkit/fuzz.py, one or two per reader and root cause). Each now ends in an answer or in
one line with exit 2, never an internal error.

A file's name says which command reads it (testkit/fuzz.py's TARGETS, `/` written as `--`): `nodes--plan-57` is
case 57 for the target `nodes/plan`. Add a file here for every crash found later.
"""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from testkit.fuzz import TARGETS, Fixtures, Outcome, make_fixtures, place_input
from topolabel.cli import main

CORPUS = Path(__file__).parent / "corpus"
BY_NAME = {t.name.replace("/", "--"): t for t in TARGETS}


def run_here(argv: list[str], _: float) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return Outcome(code, out.getvalue(), err.getvalue(), 0.0)


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> Fixtures:
    return make_fixtures(tmp_path_factory.mktemp("fixtures"), run_here)


@pytest.mark.parametrize("case", sorted(p.name for p in CORPUS.iterdir()))
def test_a_past_crash_now_ends_in_an_answer_or_one_line(case: str, fixtures: Fixtures, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    target = BY_NAME[case.rsplit("-", 1)[0]]
    argv = target.argv(fixtures, place_input(target, tmp_path, (CORPUS / case).read_bytes()))
    code = main(argv)
    err = capsys.readouterr().err
    assert code in (0, 1, 2) and "internal error" not in err, err
    assert code != 2 or len(err.strip().splitlines()) == 1, err
