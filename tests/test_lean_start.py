"""A discovery given only flags starts lean: the command line is read with the named source's flags only, and
plain options skip pydantic. Both must give what the whole parser and the pydantic model give, errors included."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from labeler.errors import SourceError
from providers.base import SourceContext, _validated, parse_options
from providers.infiniband import InfinibandOptions as Model, options
from providers.options import model_of
from testkit.environment import ROOT, SHARED
from topolabel.cli import parse, parser

NDR = SHARED / "fabrics" / "ndr-582ca.ibnetdiscover"


def whole(argv: list[str]) -> dict[str, object]:
    """What the whole parser makes of `argv`, or the exit it asks for."""
    try:
        args = parser("topolabel", argv[0]).parse_args(argv)
    except SystemExit as exc:
        return {"exit": exc.code}
    return {k: v for k, v in vars(args).items() if k != "top_parser"}


def lean(argv: list[str]) -> dict[str, object]:
    """What `parse` makes of `argv`, less its record that no source flag was read (a snapshot command line)."""
    try:
        args = parse(argv, "topolabel")
    except SystemExit as exc:
        return {"exit": exc.code}
    return {k: v for k, v in vars(args).items() if k not in ("top_parser", "source_flags_read")}


@pytest.mark.parametrize("argv", [
    ["discover", "--source", "infiniband", "--ibnetdiscover", "f", "-o", "json"],
    ["discover", "--source=infiniband", "--run", "--ib-timeout", "5", "--hca-pattern", "mlx5_[0-3]"],
    ["discover", "--ibnetdiscover", "f", "--source", "infiniband", "--nodes", "n.yaml", "--context", "c"],
    ["plan", "--source", "labels", "--preset", "gke", "--nodes", "n.yaml"],
    ["discover", "--source", "lldp", "--source", "infiniband", "--ibnetdiscover", "f"],
    ["plan", "--snapshot", "s.json", "--nodes", "n.yaml", "-o", "json"],
    ["kueue", "--snapshot=s.json", "--nodes", "n.yaml", "--output-dir", "out"],
])
def test_the_lean_parser_reads_what_the_whole_one_reads(argv: list[str]) -> None:
    got, want = lean(argv), whole(argv)
    assert got.items() <= want.items()  # the whole parser adds only the other sources' flags, all unset
    assert all(want[k] is None for k in want.keys() - got.keys())


@pytest.mark.parametrize("argv", [
    ["discover", "--source", "infiniband", "--preset", "gke"],  # another source's flag
    ["discover", "--source", "infiniband", "--ibnet", "f"],  # an abbreviation
    ["discover", "--source", "infiniband", "--ib-timeout", "soon"],  # a bad value
    ["discover", "--source", "infiniband", "--bogus"],
    ["discover", "--source", "nowhere", "--ibnetdiscover", "f"],
    ["plan", "--snapshot", "s.json", "--preset", "gke"],  # a source flag beside a snapshot: refused later
    ["plan", "--snapshot", "s.json", "--source", "nowhere"],
])
def test_what_the_lean_parser_does_not_know_goes_to_the_whole_one(argv: list[str], capsys) -> None:
    want = whole(argv)
    want_err = capsys.readouterr().err
    assert lean(argv) == want
    assert capsys.readouterr().err == want_err


def test_help_lists_every_source(capsys) -> None:
    assert lean(["discover", "--source", "infiniband", "--help"]) == {"exit": 0}
    assert "labels source" in capsys.readouterr().out


def ctx(**given: object) -> SourceContext:
    return SourceContext(options=given, origin="--source infiniband")


@pytest.mark.parametrize("given", [
    {"ibnetdiscover": "f"},
    {"run_ibnetdiscover": True, "ib_timeout": 5.0, "ib_ca": "mlx5_0", "hca_pattern": "mlx5_[0-3]"},
    {"ib_fabric": "*", "ib_max_age": 60.0, "ib_namespace": "ib"},
    {"ibnetdiscover": "f", "ib_timeout": 5},  # an int for a float: pydantic converts it
    {"ibnetdiscover": "f", "ib_timeout": "5"},
    {"ibnetdiscover": "f", "ib_timeout": 0.0},
    {"ibnetdiscover": "f", "ib_max_age": -1.0},
    {"ibnetdiscover": "f", "ib_max_age": float("nan")},
    {"ibnetdiscover": "f", "hca_pattern": "mlx5_["},
    {"ibnetdiscover": "f", "run_ibnetdiscover": True},
    {},
    {"ibnetdiscover": "f", "ibnetdiscovr": "g"},
    {"ibnetdiscover": 3},
])
def test_plain_options_are_what_the_model_makes_of_them(given: dict[str, object]) -> None:
    def answer(read):
        try:
            return {key: (type(value), value) for key, value in read(ctx(**given)).items()}
        except SourceError as exc:
            return str(exc)

    by_model = answer(lambda c: dict(_validated(model_of(options.InfinibandOptions), c)))
    assert answer(lambda c: dataclasses.asdict(parse_options(options.InfinibandOptions, c))) == by_model


@dataclasses.dataclass(frozen=True)
class Listed:
    """Plain options with what only pydantic checks: a generic type and a constraint that is not a bound."""

    names: list[str] = dataclasses.field(default_factory=list)
    short: str = dataclasses.field(default="", metadata={"max_length": 3})

    def check(self) -> None:
        """Nothing to check across fields."""


@pytest.mark.parametrize("given, want", [
    ({"names": ["a"]}, Listed(names=["a"])),
    ({"names": "a"}, "--source infiniband: names: must be a list"),
    ({"short": "ab"}, Listed(short="ab")),
    ({"short": "abcd"}, "--source infiniband: short: must be at most 3 characters long"),
])
def test_what_plain_options_cannot_check_goes_to_the_model(given: dict[str, object], want: object) -> None:
    try:
        got: object = parse_options(Listed, ctx(**given))
    except SourceError as exc:
        got = str(exc)
    assert got == want


def test_the_model_keeps_its_name_fields_and_defaults() -> None:
    assert Model is model_of(options.InfinibandOptions) and Model.__name__ == "InfinibandOptions"
    assert {name: f.default for name, f in Model.model_fields.items()} == \
        {f.name: f.default for f in dataclasses.fields(options.InfinibandOptions)}


def test_a_plan_from_a_snapshot_imports_no_source(tmp_path) -> None:
    """No source runs beside a snapshot, so none is imported; a source flag given anyway is still refused."""
    snapshot, nodes = tmp_path / "snap.json", tmp_path / "nodes.json"
    snapshot.write_text('{"levels": [{"name": "rack", "label": "topolabel.dev/rack"}], "nodes": {"n1": {"rack": "r1"}}, '
                        '"problems": []}')
    nodes.write_text('{"items": [{"metadata": {"name": "n1"}}]}')
    code = ("import sys; from topolabel.cli import main; "
            f"code = main(['plan', '--snapshot', {str(snapshot)!r}, '--nodes', {str(nodes)!r}, '-o', 'json']); "
            "print(code, sorted(m for m in sys.modules if m.startswith(('pydantic', 'providers.')) "
            "and m not in ('providers.base', 'providers.registry')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.splitlines()[-1] == "0 []"
    refused = subprocess.run([sys.executable, "-m", "topolabel.cli", "plan", "--snapshot", str(snapshot), "--nodes",
                              str(nodes), "--preset", "gke"], capture_output=True, text=True, timeout=120)
    assert (refused.returncode, refused.stderr.splitlines()[-1]) == (
        2, "topolabel plan: error: --preset: a source's flags have no effect with --snapshot (the snapshot is the "
           "topology); drop them, or drop --snapshot to discover")


def test_a_discovery_from_flags_imports_no_pydantic_nor_shutil() -> None:
    """Neither is needed to discover into a pipe; shutil, which argparse imports to ask the terminal's width,
    brings bz2, lzma and zlib (an interpreter's start-up may have imported it: it is forgotten first)."""
    code = ("import sys; sys.modules.pop('shutil', None); from topolabel.cli import main; "
            f"main(['discover', '--source', 'infiniband', '--ibnetdiscover', {str(NDR)!r}, '-o', 'json']); "
            "print(sorted(m for m in ('pydantic', 'labeler.settings.config', 'providers.labels', 'shutil') "
            "if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.splitlines()[-1] == "[]"


def test_a_config_imports_only_the_exporters_its_export_section_names(tmp_path) -> None:
    """The config's `export` section is checked against each named format's model; the other exporters'
    modules are not imported to read a config (every command reads one)."""
    (tmp_path / "topolabel.yaml").write_text("export:\n  kai: {}\n")
    code = ("import sys; from topolabel.pipeline import read_config; read_config(sys.argv[1]); "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('exporters.'))))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "topolabel.yaml")], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["exporters.base", "exporters.kai", "exporters.registry"]
