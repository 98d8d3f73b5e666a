#!/usr/bin/env bash
# helm for tests/test_chart.py, built from its Go module (hack/helm/go.mod pins the version) into
# ~/.cache/topolabel: about 5 minutes cold on 2 cores, a second when cached. See hack/build-helm.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "helm: $(hack/build-helm)"
