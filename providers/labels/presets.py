"""The label sets clouds and tools write, as presets: levels coarsest first, and where each preset comes from.

A level may be read from more than one key, newest first: the first key that any node carries is the one read
for the whole cluster (values of an older key are often in another form, so nodes are never mixed across keys
within one level). A preset may name values that are placeholders, not domains, a middle level some nodes
lack (optional: they take the coarser level's domain there), and an accelerator (NVLink) domain, which goes
where it nests in the levels (`labeler.topology.placement.insert_level`). Writers that label a switch chain tier by
tier, closest first and of any depth (Topograph, Nebius), are families read by `tiers`.

Every preset names the page its keys come from and the day that page was last checked (docs/labels.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from .tiers import Family, Generation

CHECKED = "2026-12-01"


@dataclass(frozen=True)
class PresetLevel:
    name: str
    keys: tuple[str, ...]  # newest first
    optional: bool = False  # a node without it takes the coarser level's domain, with a notice


@dataclass(frozen=True)
class Preset:
    levels: tuple[PresetLevel, ...]  # coarsest first
    source: str  # the documentation page the keys come from
    placeholders: frozenset[str] = frozenset()  # values that mean "no topology known", never a domain
    accelerator: PresetLevel | None = None  # the NVLink domain, put at the finest level where it nests
    accelerator_in_parent: bool = False  # a node outside one shares its finest domain's (as the aws source pads)
    local_names: bool = False  # values are numbers within their parent (CoreWeave's superpod 1 in every fabric)


def _level(name: str, *keys: str, optional: bool = False) -> PresetLevel:
    return PresetLevel(name, keys, optional)


OCI_PLACEHOLDER = "no-imds-data"
TOPOGRAPH_DOC = "https://docs.nvidia.com/topograph/reference/node-labels-and-annotations"
OKE_UTILS_DOC = "https://github.com/oracle-quickstart/oci-hpc-oke/blob/main/docs/oci-hpc-oke-utils.md"

PRESETS: dict[str, Preset] = {
    "gke": Preset((_level("block", "cloud.google.com/gce-topology-block"),
                   _level("subblock", "cloud.google.com/gce-topology-subblock"),
                   _level("host", "cloud.google.com/gce-topology-host")),
                  "https://cloud.google.com/ai-hypercomputer/docs/workloads/schedule-gke-workloads-tas"),
    # EKS: layer 1 is furthest from the instance; the depth varies by instance type (3, or 4 on p6-b200). The
    # capacity block (UltraServer) is the finest level, as the aws source's --capacity-block-level makes it.
    "eks": Preset(tuple(_level(f"layer-{i}", f"topology.k8s.aws/network-node-layer-{i}") for i in range(1, 5)),
                  "https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html",
                  accelerator=_level("capacity-block", "topology.k8s.aws/capacity-block-id"),
                  accelerator_in_parent=True),
    # OCI's RDMA network, coarsest first: HPC island (tier 2), network block (tier 1), local block (tier 0),
    # then the rack. The rdma.* keys come from Oracle's OKE labeler, which writes `no-imds-data` when the
    # instance metadata has no topology; clusters set up before it carry host.network_block_id (kept as
    # the older key of the block level) and host.rack_id. GB200/GB300 hosts carry their GPU memory fabric
    # (the NVLink domain) from the same labeler.
    "oci": Preset((_level("island", "oci.oraclecloud.com/rdma.hpc_island_id"),
                   _level("block", "oci.oraclecloud.com/rdma.network_block_id",
                          "oci.oraclecloud.com/host.network_block_id"),
                   _level("local-block", "oci.oraclecloud.com/rdma.local_block_id"),
                   _level("rack", "oci.oraclecloud.com/host.rack_id")),
                  "https://github.com/oracle-quickstart/oci-hpc-oke/blob/main/docs/"
                  "using-rdma-network-locality-when-running-workloads-on-oke.md",
                  frozenset({OCI_PLACEHOLDER}),
                  accelerator=_level("nvlink", "oci.oraclecloud.com/host.gpu_memory_fabric_id")),
    # CoreWeave's fabric-agnostic backend.* keys, else the InfiniBand-only ib.* keys; the superpod only in the
    # latter (RoCE nodes lack it: they take their fabric there). Superpods and leaf groups are numbers
    # within the fabric. GB200/GB300 racks carry their NVLink domain.
    "coreweave": Preset((_level("fabric", "backend.coreweave.cloud/fabric", "ib.coreweave.cloud/fabric"),
                         _level("superpod", "ib.coreweave.cloud/superpod", optional=True),
                         _level("leafgroup", "backend.coreweave.cloud/leafgroup", "ib.coreweave.cloud/leafgroup")),
                        "https://docs.coreweave.com/products/networking/hpc-interconnect/infiniband-roce-labels",
                        accelerator=_level("nvlink", "ds.coreweave.com/nvlink.domain"), local_names=True),
    # Crusoe's control plane labels each VM with its InfiniBand partition and, inside it, its rail-optimized
    # pod (up to 32 VMs on one set of leaf switches).
    "crusoe": Preset((_level("partition", "crusoe.ai/ib.partition.id"), _level("pod", "crusoe.ai/pod.id")),
                     "https://docs.nvidia.com/topograph/providers/crusoe"),
    # The GPU Operator's NVLink domain (`<ClusterUUID>.<CliqueID>`), set only on multi-node NVLink systems
    # (GB200/GB300 NVL72) once the fabric is up; usually combined with a network source.
    "nvlink": Preset((_level("nvlink", "nvidia.com/gpu.clique"),),
                     TOPOGRAPH_DOC),
}

# Writers of closest-first tier chains of any depth, read by `tiers`.
TIERED: dict[str, Family] = {
    # Newest first. v1.0: fabric.topograph.run; v1.0 release candidates: network.topology.nvidia.com/tier-N;
    # v0.4-v0.6: leaf, spine, core; v0.1-v0.3: block (the leaf), spine, datacenter. Topograph leaves its own
    # accelerator key off a node whose GPU Operator clique label it was told to defer to
    # (acceleratorDomainSourceLabel), so that label comes last.
    "topograph": Family(
        "Topograph",
        (Generation("v1.0", prefix="fabric.topograph.run/tier-"),
         Generation("v1.0-rc", prefix="network.topology.nvidia.com/tier-"),
         Generation("v0.4", fixed=tuple(f"network.topology.nvidia.com/{k}" for k in ("leaf", "spine", "core"))),
         Generation("v0.1", fixed=tuple(f"network.topology.nvidia.com/{k}" for k in ("block", "spine", "datacenter")))),
        ("accelerator.topograph.run/domain", "xclr.topology.nvidia.com/domain",
         "network.topology.nvidia.com/accelerator", "nvidia.com/gpu.clique"),
        subdomain_keys=("accelerator.topograph.run/sub-domain", "xclr.topology.nvidia.com/sub-domain"),
        source=TOPOGRAPH_DOC),
    # Nebius (Soperator's topology labels): tier-1 is the leaf, tier-2 the one above it, and so on; tier-0 is
    # the rack's NVLink domain on GB200/GB300. topology.nebius.com is the current prefix, topologyconf.slurm.
    # nebius.ai the earlier one.
    "nebius": Family(
        "Nebius",
        (Generation("topology.nebius.com", prefix="topology.nebius.com/tier-", first=1),
         Generation("topologyconf.slurm.nebius.ai", prefix="topologyconf.slurm.nebius.ai/tier-", first=1)),
        ("topology.nebius.com/tier-0", "topologyconf.slurm.nebius.ai/tier-0"),
        accelerator="nvlink",
        source="https://github.com/nebius/soperator/blob/main/docs/topology.md"),
}
