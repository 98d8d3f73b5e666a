"""One error hierarchy for all of topolabel, so the CLI and the operator catch one base class.

Every error's message is one line that names the input (file, key, node, source) and the problem; the
CLI prints it and exits 2. `InputError` is also a `ValueError`, so pydantic validators and callers that
expect a value error keep working.
"""

from __future__ import annotations


class TopolabelError(Exception):
    """Anything topolabel reports as one line instead of a traceback."""


class InputError(TopolabelError, ValueError):
    """Bad input: a file, a config key, a kubeconfig, an option; the message names it."""


class TopologyError(InputError):
    """Input that cannot form a valid topology (not a tree, bad label keys, clashing names)."""


class SourceError(TopolabelError):
    """A source could not answer at all (unreachable API, denied permission, unreadable file)."""


class OutputError(TopolabelError):
    """An output could not be written (full disk, file-size limit, permissions, a file topolabel did not
    generate in the way); nothing the user had was changed."""


class KubeUnreachable(TopolabelError):
    """The API server could not be reached, dropped the connection, did not answer within the timeout, or
    answered with something that is not the API's JSON. `dropped`: the connection broke mid-call, so a retry
    may well succeed (a timeout or a refusal is retried only by the patient operator)."""

    def __init__(self, message: str, dropped: bool = False) -> None:
        super().__init__(message)
        self.dropped = dropped
class StaleInput(SourceError):
    """The data a source reads is missing or older than allowed (a publisher stopped): the operator keeps
    the last good topology and says how old the data is."""


class PlanRefused(TopolabelError):
    """A label plan that would rewrite or remove too much at once; `--force` overrides it."""
