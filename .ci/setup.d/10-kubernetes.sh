#!/usr/bin/env bash
# The test cluster's control plane (testkit/kubecluster.py, hack/test-cluster): kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl 1.36 and etcd 3.6, built from Go modules by
# hack/build-test-stack and cached in ~/.cache/topolabel. See docs/testing.md for the times.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v go >/dev/null || { echo "10-kubernetes.sh: Go (1.26 or newer) is needed to build the test cluster" >&2; exit 1; }
started=$SECONDS
echo "kubernetes: $(hack/build-test-stack kubernetes) ($((SECONDS - started)) s)"
