# Sourced by hack/build-test-stack, hack/build-tool and hack/build-tas-oracle: the one way they build a Go
# program from a pinned wrapper module, once per version, into ~/.cache/topolabel (or $TOPOLABEL_CACHE).
# A build writes into a scratch directory beside its destination and is moved into place whole, so a
# destination that exists is complete, and a failed or interrupted build leaves nothing behind.
CACHE=${TOPOLABEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/topolabel}
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"

gobuild_work=""
trap '[ -z "$gobuild_work" ] || rm -rf "$gobuild_work"' EXIT

# A short hash of what decides the build: the build flags ($1), the Go version and the files given (go.mod,
# go.sum, sources).
cache_key() {  # $1: build flags, $2...: files
  local flags=$1
  shift
  cat "$@" <(go env GOVERSION) <(echo "$flags") | sha256sum | cut -c1-12
}

# Unless directory $2 exists, run function $3 with a scratch directory and then $4... as its arguments (it
# builds into the scratch directory), then move the scratch directory to $2. $1 names the build in the log.
# The build function gets everything as arguments: bash's dynamic scoping would otherwise hand it this
# function's locals under the caller's names (a `name` here once renamed every binary built).
build_once() {  # $1: label, $2: destination, $3: build function, $4...: its arguments
  local gobuild_label=$1 gobuild_dest=$2 gobuild_compile=$3 gobuild_started
  shift 3
  [ ! -d "$gobuild_dest" ] || return 0
  mkdir -p "$CACHE"
  gobuild_work=$(mktemp -d "$CACHE/.$gobuild_label-build.XXXXXX")
  echo "${0##*/}: building $gobuild_label ($(go env GOVERSION)) into $gobuild_dest" >&2
  gobuild_started=$SECONDS
  "$gobuild_compile" "$gobuild_work" "$@"
  echo "${0##*/}: built $gobuild_label in $((SECONDS - gobuild_started)) s" >&2
  mv -T "$gobuild_work" "$gobuild_dest" 2>/dev/null || rm -rf "$gobuild_work"  # a concurrent build got there first
  gobuild_work=""
}
