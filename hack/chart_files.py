"""Copy the manifests the chart shares with kustomize into the chart (charts/topolabel/crds and files/).

The chart carries copies, not links: Helm prints an INFO line for every link it follows and a packaged chart
must hold the files themselves. tests/test_chart.py fails when a copy differs from its manifest.

    python3 -m hack.chart_files    # from the repository root, after changing a manifest below
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "topolabel"
# chart file -> the manifest it copies
COPIES = {
    "crds/topologylabelers.topolabel.dev.yaml": "manifests/crd.yaml",
    "files/rbac.yaml": "manifests/rbac.yaml",
    "files/admission-policy.yaml": "manifests/admission-policy.yaml",
    "files/agent-rbac.yaml": "manifests/agent/rbac.yaml",
    "files/agent-admission-policy.yaml": "manifests/agent/admission-policy.yaml",
    "files/ib-collector-rbac.yaml": "manifests/ib-collector/rbac.yaml",
    "files/ib-collector-admission-policy.yaml": "manifests/ib-collector/admission-policy.yaml",
    "files/capacity-rbac.yaml": "manifests/capacity/rbac.yaml",
}


def main() -> None:
    for copy, manifest in COPIES.items():
        shutil.copyfile(ROOT / manifest, CHART / copy)


if __name__ == "__main__":
    main()
