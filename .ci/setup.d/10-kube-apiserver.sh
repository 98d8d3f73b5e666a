#!/usr/bin/env bash
# The kube-apiserver for tests/kubecluster.py: built once from Debian's kubernetes source package (about
# 6 minutes on 2 cores), then found in ~/.cache/topolabel in about a second. See docs/testing.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "kube-apiserver: $(hack/build-kube-apiserver)"
