"""The installed version, for `--version`, the operator's build-info metric and its logs."""

from __future__ import annotations



def current() -> str:
    """The version of the installed distribution; a source tree run without installing says so.
    (importlib.metadata is imported here: it costs a tenth of `--help`'s start-up.)"""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("topolabel")
    except PackageNotFoundError:
        return "0+unknown (not installed)"
