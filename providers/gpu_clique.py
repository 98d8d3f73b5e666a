"""The NVLink domain a node's GPUs belong to, as `nvidia-smi` reports it, for the agent to publish.

On multi-node NVLink systems (GB200/GB300 NVL72) every GPU reports the NVLink fabric's cluster UUID and
clique id once the fabric is up; the GPU Operator labels such nodes `nvidia.com/gpu.clique=<uuid>.<clique>`.
The agent publishes the same value as an annotation where the GPU Operator does not run.
"""

from __future__ import annotations

from labeler.errors import SourceError
from labeler.io.hosttools import run_tool
from labeler.topology.labelvalues import is_valid_value

ANNOTATION = "topolabel.dev/gpu-clique"
QUERY = ["--query-gpu=fabric.clusterUuid,fabric.cliqueId", "--format=csv,noheader"]
_UNSET = {"", "n/a", "[n/a]", "not supported", "[not supported]", "00000000-0000-0000-0000-000000000000"}


def parse_cliques(text: str, origin: str = "nvidia-smi") -> str | None:
    """`<ClusterUUID>.<CliqueID>` shared by all GPUs, None on systems without multi-node NVLink.

    GPUs that disagree mean a half-initialised fabric: an error, never a guess.
    """
    values: set[str | None] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2:
            raise SourceError(f"{origin}: line {number}: expected 'clusterUuid, cliqueId', got {line.strip()!r}")
        uuid, clique = parts
        if uuid.lower() in _UNSET or clique.lower() in _UNSET:
            values.add(None)
        elif not is_valid_value(f"{uuid}.{clique}"):
            raise SourceError(f"{origin}: line {number}: the NVLink domain is not a label value (at most 63 "
                              "characters, alphanumeric at both ends)")
        else:
            values.add(f"{uuid}.{clique}")
    if len(values) > 1:
        shown = ", ".join(sorted(str(v) for v in values))
        raise SourceError(f"{origin}: GPUs report different NVLink domains ({shown}); is the fabric manager up?")
    return next(iter(values), None)


def read_clique(nvidia_smi: str = "nvidia-smi", timeout: float = 30.0) -> str | None:
    out = run_tool([nvidia_smi, *QUERY], timeout, max_bytes=1 << 20,  # a line per GPU
                   missing="run the agent where the NVIDIA driver is, or drop --nvlink")
    return parse_cliques(out)
