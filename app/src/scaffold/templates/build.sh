#!/bin/sh
# Builds the C Tick NAME.c (NAME is set below: `counter` here, the
# project's name in a `tickbox new --lang c` project), twice:
#   OUTDIR/NAME.wasm  wasm32-wasip1 core module (clang + lld + wasi-libc)
#   OUTDIR/NAME       native executable (cc)
#
#   usage: examples/c/build.sh [OUTDIR]      (default: examples/c/build)
#
# Debian/Ubuntu: apt-get install clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32
# (any clang with a wasm32-wasi sysroot works: set CLANG, and WASI_SYSROOT
# when the sysroot is not where clang looks by default, as with wasi-sdk).
# Outputs newer than the sources are kept, so repeated builds are free.
set -eu
# `tickbox new` writes the project's name on this line.
name=counter
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/build}
mkdir -p "$out"
src="$here/$name.c"

fresh() { [ -f "$1" ] && [ "$1" -nt "$src" ] && [ "$1" -nt "$here/build.sh" ]; }

if ! fresh "$out/$name.wasm"; then
    clang=${CLANG:-$(command -v clang-14 || command -v clang || true)}
    if [ -z "$clang" ]; then
        echo "build.sh: no clang found (Debian: apt-get install clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32)" >&2
        exit 1
    fi
    sysroot=${WASI_SYSROOT:+--sysroot=$WASI_SYSROOT}
    # shellcheck disable=SC2086
    "$clang" --target=wasm32-wasi $sysroot -O2 -Wall -Wextra -Werror -s \
        -o "$out/$name.wasm.tmp" "$src"
    mv "$out/$name.wasm.tmp" "$out/$name.wasm"
fi
if ! fresh "$out/$name"; then
    ${CC:-cc} -O2 -Wall -Wextra -Werror -o "$out/$name.tmp" "$src"
    mv "$out/$name.tmp" "$out/$name"
fi
