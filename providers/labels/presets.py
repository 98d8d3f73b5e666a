"""The label sets clouds and tools write, as presets: levels coarsest first, and where each preset comes from.

A level may be read from more than one key, newest first: the first key that any node carries is the one read
for the whole cluster (values of an older key are often in another form, so nodes are never mixed across keys
within one level). A preset may name values that are placeholders, not domains.

Every preset names the page its keys come from and the day that page was last checked (docs/labels.md).
"""

from __future__ import annotations

from dataclasses import dataclass

CHECKED = "2026-11-30"


@dataclass(frozen=True)
class PresetLevel:
    name: str
    keys: tuple[str, ...]  # newest first


@dataclass(frozen=True)
class Preset:
    levels: tuple[PresetLevel, ...]  # coarsest first
    source: str  # the documentation page the keys come from
    placeholders: frozenset[str] = frozenset()  # values that mean "no topology known", never a domain


def _level(name: str, *keys: str) -> PresetLevel:
    return PresetLevel(name, keys)


OCI_PLACEHOLDER = "no-imds-data"
TOPOGRAPH_DOC = "https://docs.nvidia.com/topograph/reference/node-labels-and-annotations"

PRESETS: dict[str, Preset] = {
    "gke": Preset((_level("block", "cloud.google.com/gce-topology-block"),
                   _level("subblock", "cloud.google.com/gce-topology-subblock"),
                   _level("host", "cloud.google.com/gce-topology-host")),
                  "https://cloud.google.com/ai-hypercomputer/docs/workloads/schedule-gke-workloads-tas"),
    # EKS: layer 1 is furthest from the instance; the depth varies by instance type (3, or 4 on p6-b200).
    "eks": Preset(tuple(_level(f"layer-{i}", f"topology.k8s.aws/network-node-layer-{i}") for i in range(1, 5)),
                  "https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html"),
    # OCI's RDMA network, coarsest first: HPC island (tier 2), network block (tier 1), local block (tier 0),
    # then the rack. The rdma.* keys come from Oracle's OKE labeler, which writes `no-imds-data` when the
    # instance metadata has no topology; clusters set up before it carry host.network_block_id (kept as
    # the older key of the block level) and host.rack_id.
    "oci": Preset((_level("island", "oci.oraclecloud.com/rdma.hpc_island_id"),
                   _level("block", "oci.oraclecloud.com/rdma.network_block_id",
                          "oci.oraclecloud.com/host.network_block_id"),
                   _level("local-block", "oci.oraclecloud.com/rdma.local_block_id"),
                   _level("rack", "oci.oraclecloud.com/host.rack_id")),
                  "https://github.com/oracle-quickstart/oci-hpc-oke/blob/main/docs/"
                  "using-rdma-network-locality-when-running-workloads-on-oke.md",
                  frozenset({OCI_PLACEHOLDER})),
    "coreweave": Preset((_level("fabric", "backend.coreweave.cloud/fabric"),
                         _level("leafgroup", "backend.coreweave.cloud/leafgroup")),
                        "https://docs.coreweave.com/products/networking/hpc-interconnect/infiniband-roce-labels"),
    # The GPU Operator's NVLink domain (`<ClusterUUID>.<CliqueID>`), set only on multi-node NVLink systems
    # (GB200/GB300 NVL72) once the fabric is up; usually combined with a network source.
    "nvlink": Preset((_level("nvlink", "nvidia.com/gpu.clique"),),
                     TOPOGRAPH_DOC),
}
