#!/usr/bin/env bash
# The image (Dockerfile) for tests/test_image.py, with no registry: a Debian base made with debootstrap
# (a tarball under ~/.cache/topolabel/image, remade weekly), then the Dockerfile built by buildah (vfs
# storage, chroot isolation), skipped when an image of the same inputs is cached. See hack/image.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS
ref=$(python3 hack/image.py build)
echo "image: $ref ($((SECONDS - started)) s)"
