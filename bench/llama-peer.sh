# Sourced by the bench scripts: `llama_bench KIND DIR` prints the path of llama-bench built from
# the peer's llama.cpp source (PEER/build-llama.sh KIND DIR, KIND cpu or cuda), building it
# first unless DIR already holds a build. PEER names the folder with the source tarball and
# build-llama.sh (default ../shared/peer, else shared/peer). The peer, what it is and how to
# make the folder: docs/benchmarks.md. `bench_models` fills `models` (NAME=FILE entries) with
# SmolLM2 when $SMOLLM2 names its file and each $SHAPES shape in each $QUANTS mix, writing the
# synthetic files into $MODELS with $CBTOP where they are not there yet.
llama_bench() {
    local kind=$1 dir=$2 peer=${PEER:-} bin="$2/llama.cpp/build/bin/llama-bench"
    if [ ! -x "$bin" ]; then
        if [ -z "$peer" ]; then
            for p in ../shared/peer shared/peer; do
                [ -f "$p/build-llama.sh" ] && peer=$p && break
            done
        fi
        [ -n "$peer" ] || { echo "no peer source: set PEER to the folder with build-llama.sh" >&2; return 2; }
        # cmake and ninja come from PyPI where the machine lacks them (docs/benchmarks.md).
        command -v cmake >/dev/null && command -v ninja >/dev/null ||
            python3 -m pip install --quiet cmake ninja >&2
        local t0
        t0=$(date +%s)
        bash "$peer/build-llama.sh" "$kind" "$dir" >/dev/null ||
            { echo "building llama.cpp ($kind) from $peer failed" >&2; return 2; }
        # The peer's CPU build asks for AVX-512; on a CPU without it llama-bench dies with
        # SIGILL, so rebuild without it there (still no native build: no AMX).
        if [ "$kind" = cpu ] && ! grep -qw avx512f /proc/cpuinfo; then
            (cd "$dir/llama.cpp" &&
                cmake -B build -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF \
                    -DGGML_AVX512_BF16=OFF >/dev/null &&
                cmake --build build -j"$(nproc)" --target llama-bench >/dev/null)
        fi
        [ -x "$bin" ] || { echo "no llama-bench at $bin after the build" >&2; return 2; }
        echo "built llama.cpp ($kind) in $(($(date +%s) - t0)) s" >&2
    fi
    echo "$bin"
}

bench_models() {
    local s q f
    models=()
    [ -n "${SMOLLM2:-}" ] && [ -f "$SMOLLM2" ] && models+=("smollm2-135m=$SMOLLM2")
    for s in $SHAPES; do
        for q in $QUANTS; do
            f=$MODELS/$s-$q.gguf
            [ -f "$f" ] || "$CBTOP" synth --shape "$s" --quant "$q" -o "$f" >/dev/null
            models+=("$s-$q=$f")
        done
    done
}
