#!/usr/bin/env bash
# The whole test suite on a fresh machine: fetch the test model, check formatting and lints,
# then run every test (the test profile is optimised, see Cargo.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
export CBTOP_SMOLLM2=$(bash scripts/fetch-test-model.sh)
rustup component add rustfmt clippy >/dev/null 2>&1 || true
cargo fmt --all --check
# The import graph: no cycles between files, no import up a layer (docs/ARCHITECTURE.md).
python3 scripts/layers.py --check
cargo clippy --all-targets --workspace -- -D warnings
cargo test --workspace --all-targets
