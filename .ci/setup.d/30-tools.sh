#!/usr/bin/env bash
# helm (tests/test_chart.py) and krew (tests/test_packaging.py), built from their Go modules
# (hack/tools/*/go.mod pin the versions) into ~/.cache/topolabel: helm about 5 minutes cold on 2 cores,
# krew under a minute; a second each when cached. See hack/build-tool.
set -euo pipefail
cd "$(dirname "$0")/../.."
hack/build-tool helm krew
