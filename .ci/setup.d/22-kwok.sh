#!/usr/bin/env bash
# The KWOK controller v0.8.0 (kubelet simulator: Node heartbeats and pod lifecycles for `hack/test-cluster up
# DIR --with-kwok`), built from its Go module by hack/build-test-stack. See docs/testing.md for the time.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v go >/dev/null || { echo "22-kwok.sh: Go (1.26 or newer) is needed to build KWOK" >&2; exit 1; }
started=$SECONDS
echo "kwok: $(hack/build-test-stack kwok) ($((SECONDS - started)) s)"
