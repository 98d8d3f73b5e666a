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

# Unless directory $2 exists, run function $3 with a scratch directory as its argument (it builds into it),
# then move the scratch directory to $2. $1 names the build in the log.
build_once() {  # $1: name, $2: destination, $3: build function
  local name=$1 dest=$2 compile=$3 started
  [ ! -d "$dest" ] || return 0
  mkdir -p "$CACHE"
  gobuild_work=$(mktemp -d "$CACHE/.$name-build.XXXXXX")
  echo "${0##*/}: building $name ($(go env GOVERSION)) into $dest" >&2
  started=$SECONDS
  "$compile" "$gobuild_work"
  echo "${0##*/}: built $name in $((SECONDS - started)) s" >&2
  mv -T "$gobuild_work" "$dest" 2>/dev/null || rm -rf "$gobuild_work"  # a concurrent build got there first
  gobuild_work=""
}
