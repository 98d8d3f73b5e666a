#!/usr/bin/env bash
# NFD's and slurm-operator's Go modules (hack/exporters/go.mod pins them), linked in ~/.cache/topolabel/stack for
# the nfd and slinky export tests, which check the objects against the CRDs the modules ship. Nothing is built.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v go >/dev/null || { echo "25-exporters.sh: Go (1.26 or newer) is needed to fetch the modules" >&2; exit 1; }
hack/build-test-stack exporters
