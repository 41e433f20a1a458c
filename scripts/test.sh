#!/usr/bin/env bash
# The whole test suite on a fresh machine: fetch the test model, check formatting and lints,
# then run every test (the test profile is optimised, see Cargo.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
export CBTOP_SMOLLM2=$(bash scripts/fetch-test-model.sh)
# tests/metrics.rs runs a real Prometheus server against cbtop and promtool on its output:
# Debian's package, installed when missing where apt-get can (CI runs as root on Debian); a
# failed install fails here rather than leaving those tests to skip. Elsewhere they skip, saying why.
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  else
    echo "scripts/test.sh: prometheus/promtool not installed (apt-get install prometheus); tests/metrics.rs will skip them" >&2
  fi
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true
cargo fmt --all --check
# The import graph: no cycles between files, no import up a layer (docs/ARCHITECTURE.md).
python3 scripts/layers.py --check
cargo clippy --all-targets --workspace -- -D warnings
cargo test --workspace --all-targets
