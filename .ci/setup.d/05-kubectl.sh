#!/usr/bin/env bash
# kubectl for the test API server (tests/kubecluster.py). Machines of this kind ship one; Debian's
# kubernetes-client (1.20, matching the test server) is the fallback, installed only when none is found,
# since it would clash with a kubectl from another package.
set -euo pipefail
if ! command -v kubectl >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null
fi
echo "kubectl: $(command -v kubectl)"
