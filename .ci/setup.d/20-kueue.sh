#!/usr/bin/env bash
# The Kueue manager v0.19.2 and JobSet's controller for the test cluster, built from their Go modules by
# hack/build-test-stack, and links to Kueue's and JobSet's modules (their config/ holds the CRDs and webhooks
# the cluster installs).
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v go >/dev/null || { echo "20-kueue.sh: Go (1.26 or newer) is needed to build the Kueue manager" >&2; exit 1; }
started=$SECONDS
echo "kueue: $(hack/build-test-stack kueue) ($((SECONDS - started)) s)"
