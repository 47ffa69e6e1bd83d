#!/usr/bin/env bash
# Fuzzes every parser of untrusted bytes in tickbox with libFuzzer.
#
#   fuzz/run.sh [SECONDS] [TARGET...]     # default: 60 s for each of the 8 targets
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`); on a stable toolchain the
# nightly-only flags are unlocked with RUSTC_BOOTSTRAP=1. Each target starts
# from a copy of its seed corpus in fuzz/corpus/<target>/ (built from the
# test fixtures by fuzz/make_seeds.py), so the committed seeds stay as they
# are; crashes land in fuzz/artifacts/<target>/. Limits, as the engine's
# issue asks: an input taking over 1 s is a failure (-timeout=1), so is
# using over 256 MiB (-rss_limit_mb=256). At the end it prints one line per
# target: executions, and whether it found anything. Exit status 1 if any
# target crashed, timed out or ran out of memory.
#
# .ci/run calls it with the default 60 s per target; targets run side by
# side, one per core (FUZZ_JOBS to change it). The fuzz crate builds
# tickbox-runtime without its `wasm` feature, so the instrumented build
# skips wasmtime and Cranelift (about 4.5 min of CPU instead of 25).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(framing descriptor state live_wire keys dispatch batched trim)
fi
export RUSTC_BOOTSTRAP=1
# No sanitizer: the code under test is safe Rust, and uninstrumented memory
# access runs several times faster; coverage guidance stays on.
flags=(--sanitizer none --release --debug-assertions)
cargo fuzz build "${flags[@]}"
# Targets run side by side, one per core (libFuzzer's own process is
# single-threaded): CI's 8 targets of 60 s take 4 minutes on 2 cores, not 8.
# FUZZ_JOBS overrides the count.
jobs=${FUZZ_JOBS:-$(nproc)}
triple=$(rustc -vV | sed -n 's/^host: //p')
bin="${CARGO_TARGET_DIR:-fuzz/target}/$triple/release"
[ -x "$bin/${targets[0]}" ] || bin="fuzz/target/$triple/release"
[ -x "$bin/${targets[0]}" ] || { echo "fuzz/run.sh: no fuzz binary for ${targets[0]} under $bin" >&2; exit 1; }
results=$(mktemp -d)
fuzz_one() {
  local t=$1 work log status=0 execs
  work=$(mktemp -d)
  cp fuzz/corpus/"$t"/* "$work"/ 2>/dev/null || true
  log="$results/$t.log"
  # The binary cargo fuzz built above, run as `cargo fuzz run` would (its
  # crashes go to fuzz/artifacts/<target>/), without cargo's lock, so
  # targets can run at once.
  mkdir -p fuzz/artifacts/"$t"
  "$bin/$t" -artifact_prefix=fuzz/artifacts/"$t"/ "$work" \
    -max_total_time="$secs" -timeout=1 -rss_limit_mb=256 -max_len=65536 \
    -print_final_stats=1 >"$log" 2>&1 || status=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  if [ "$status" -ne 0 ]; then
    echo "$t: FAILED after ${execs} executions (exit $status); see fuzz/artifacts/$t/" >"$results/$t.line"
  else
    echo "$t: ${execs} executions in ${secs}s, no crash, timeout or OOM" >"$results/$t.line"
  fi
  rm -rf "$work"
  return "$status"
}
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait || true
failed=0
for t in "${targets[@]}"; do
  line=$(cat "$results/$t.line" 2>/dev/null || echo "$t: did not run")
  case "$line" in
    *FAILED*|*"did not run"*) failed=1; tail -40 "$results/$t.log" 2>/dev/null || true ;;
  esac
done
for t in "${targets[@]}"; do cat "$results/$t.line" 2>/dev/null || echo "$t: did not run"; done
rm -rf "$results"
exit "$failed"
