#!/usr/bin/env bash
# Build the libFuzzer targets on stable Rust: the same coverage instrumentation cargo-fuzz asks
# for (SanitizerCoverage: 8-bit counters, PC table, comparison tracing), without a sanitizer,
# so no nightly toolchain is needed. Binaries land in fuzz/target/x86_64-unknown-linux-gnu/release/.
set -euo pipefail
cd "$(dirname "$0")"
TARGET=${TARGET:-x86_64-unknown-linux-gnu}
export RUSTFLAGS="-Cpasses=sancov-module \
 -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
 -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares \
 --cfg fuzzing -Cdebug-assertions -Coverflow-checks ${RUSTFLAGS:-}"
cargo build --release --target "$TARGET" --bins "$@"
