"""Regenerate examples/nodes.yaml: 64 GKE GPU nodes in two pools, plus one node not yet labelled by GKE."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synth import H100, gke_cluster, node_list, node_object  # noqa: E402


def main() -> None:
    items, _ = gke_cluster(blocks=4, subblocks=2, hosts=8)
    items.append(node_object("gke-a3-new-n000", {}, H100, "us-central1-b"))
    out = Path(__file__).resolve().parent.parent / "examples" / "nodes.yaml"
    out.write_text("# 64 GKE GPU nodes (a3-megagpu-8g H100 and a4-highgpu-8g B200) with GKE topology labels,\n"
                   "# plus one node that joined before GKE labelled it. Made by hack/make_example.py.\n"
                   + yaml.safe_dump(node_list(items), sort_keys=False))


if __name__ == "__main__":
    main()
