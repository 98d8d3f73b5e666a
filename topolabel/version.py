"""The installed version, for `--version`, the operator's build-info metric and its logs."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def current() -> str:
    """The version of the installed distribution; a source tree run without installing says so."""
    try:
        return version("topolabel")
    except PackageNotFoundError:
        return "0+unknown (not installed)"
