#!/usr/bin/env bash
# hack/tas-oracle: Kueue v0.19.2's flavor assignment and TAS placement code, built from its Go module, for the
# fit-equals-Kueue tests (tests/test_tas_oracle.py). About a minute when Kueue's packages are not yet compiled.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "tas-oracle: $(hack/build-tas-oracle)"
