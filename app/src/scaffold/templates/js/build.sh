#!/bin/sh
# Builds the JavaScript counter Tick (app.js, on the tickbox.js SDK) into a
# WASI 0.2 component with componentize-js, against the `tick` world (WASI
# command + tickbox:terminal); the component bundles the SDK:
#   OUTDIR/NAME.wasm
#
#   usage: ./build.sh [OUTDIR]      (default: ./build)
#
# Needs componentize-js: `npm ci` here installs the version package-lock.json
# pins into ./node_modules (a componentize-js on PATH is used otherwise).
# The WIT package is ./wit when the project carries one (`tickbox new --lang
# js` writes it), else the tickbox repository's wit/ two levels up
# (examples/js). The SDK is ./tickbox.js with ./component.js, the entry
# point componentized (in examples/js, links to sdks/js's).
#
# `-d http fetch-event`: by default componentize-js imports wasi:http and
# exports an HTTP handler; a Tick needs neither, and a component importing
# what tickbox does not grant is refused.
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

fresh=yes
[ -f "$out/$name.wasm" ] || fresh=no
for f in "$here/app.js" "$here/tickbox.js" "$here/component.js" "$here/build.sh" "$here/package-lock.json" "$wit"/*.wit "$wit"/deps/*/*.wit; do
    [ "$fresh" = no ] || [ "$out/$name.wasm" -nt "$f" ] || fresh=no
done
[ "$fresh" = yes ] && exit 0

cjs="$here/node_modules/.bin/componentize-js"
[ -x "$cjs" ] || cjs=$(command -v componentize-js || true)
if [ -z "$cjs" ]; then
    echo "build.sh: componentize-js not found (cd $here && npm ci)" >&2
    exit 1
fi
# componentize-js reads the entry's relative imports from the entry's
# directory: the three files go into one, in OUTDIR.
rm -rf "$out/src" && mkdir -p "$out/src"
cp "$here/app.js" "$here/tickbox.js" "$here/component.js" "$out/src/"
"$cjs" "$out/src/component.js" --wit "$wit" --world-name tick -d http fetch-event \
    -o "$out/$name.wasm.tmp" >&2
mv "$out/$name.wasm.tmp" "$out/$name.wasm"
