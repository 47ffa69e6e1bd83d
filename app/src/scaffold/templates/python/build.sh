#!/bin/sh
# Builds the Python counter Tick (app.py, on the tickbox_tick SDK) into a
# WASI 0.2 component with componentize-py, against the `tick` world (WASI
# command + tickbox:terminal); the component bundles the SDK:
#   OUTDIR/NAME.wasm
#
#   usage: ./build.sh [OUTDIR]      (default: ./build)
#
# Needs componentize-py (pip install -r requirements.txt). The WIT package is
# ./wit when the project carries one (`tickbox new --lang python` writes it),
# else the tickbox repository's wit/ two levels up (examples/python). The
# SDK is ./tickbox_tick (in examples/python, a link to sdks/python's).
# An output newer than every source is kept, so repeated builds are free.
set -eu
# The Tick's name, which names its output: `tickbox new` writes the
# project's name on this line.
name=counter
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/build}
mkdir -p "$out"
wit="$here/wit"
[ -d "$wit" ] || wit="$here/../../wit"
sdk="$here/tickbox_tick"

fresh=yes
[ -f "$out/$name.wasm" ] || fresh=no
for f in "$here/app.py" "$here/build.sh" "$here/requirements.txt" "$sdk"/*.py "$wit"/*.wit "$wit"/deps/*/*.wit; do
    [ "$fresh" = no ] || [ "$out/$name.wasm" -nt "$f" ] || fresh=no
done
[ "$fresh" = yes ] && exit 0

if ! command -v componentize-py >/dev/null; then
    echo "build.sh: componentize-py not found (pip install -r $here/requirements.txt)" >&2
    exit 1
fi
# componentize-py runs the app while building (leaving __pycache__ next to
# it), so it builds from a copy in OUTDIR and the sources stay clean.
rm -rf "$out/src" && mkdir -p "$out/src/tickbox_tick" && cp "$here/app.py" "$out/src/"
cp "$sdk"/*.py "$out/src/tickbox_tick/"
cd "$out/src"
componentize-py -d "$wit" -w tick componentize app -p "$out/src" -o "$out/$name.wasm.tmp" >&2
mv "$out/$name.wasm.tmp" "$out/$name.wasm"
