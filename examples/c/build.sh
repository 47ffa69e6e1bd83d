#!/bin/sh
# Builds the C counter Tick from counter.c, twice:
#   OUTDIR/counter.wasm  wasm32-wasip1 core module (clang + lld + wasi-libc)
#   OUTDIR/counter       native executable (cc)
#
#   usage: examples/c/build.sh [OUTDIR]      (default: examples/c/build)
#
# Debian/Ubuntu: apt-get install clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32
# (any clang with a wasm32-wasi sysroot works: set CLANG, and WASI_SYSROOT
# when the sysroot is not where clang looks by default, as with wasi-sdk).
# Outputs newer than the sources are kept, so repeated builds are free.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/build}
mkdir -p "$out"
src="$here/counter.c"

fresh() { [ -f "$1" ] && [ "$1" -nt "$src" ] && [ "$1" -nt "$here/build.sh" ]; }

if ! fresh "$out/counter.wasm"; then
    clang=${CLANG:-$(command -v clang-14 || command -v clang || true)}
    if [ -z "$clang" ]; then
        echo "build.sh: no clang found (Debian: apt-get install clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32)" >&2
        exit 1
    fi
    sysroot=${WASI_SYSROOT:+--sysroot=$WASI_SYSROOT}
    # shellcheck disable=SC2086
    "$clang" --target=wasm32-wasi $sysroot -O2 -Wall -Wextra -Werror -s \
        -o "$out/counter.wasm.tmp" "$src"
    mv "$out/counter.wasm.tmp" "$out/counter.wasm"
fi
if ! fresh "$out/counter"; then
    ${CC:-cc} -O2 -Wall -Wextra -Werror -o "$out/counter.tmp" "$src"
    mv "$out/counter.tmp" "$out/counter"
fi
