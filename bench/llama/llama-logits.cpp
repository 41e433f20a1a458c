// Teacher-forced logits from llama.cpp (the peer), for bench/teacher-forced.py and the
// conformance references (scripts/arch-fixtures.sh): every line of stdin is a sequence of
// token ids, evaluated from an empty cache in one batch with logits at every position; stdout
// gets, per line, the int32 count n and then n rows of n_vocab float32 logits. A measuring
// instrument only (built beside the peer); nothing of it goes into cbtop.
//
//   llama-logits MODEL.gguf NGL [step | gen=N | tail=N] < ids.txt > logits.bin
// NGL 99: all layers on the GPU; `step`: one token per decode call instead of one batch;
// `tail=N`: all but the last N ids in one batch, then those N one decode call each (a prompt
// and greedy steps given, as the conformance tests feed both engines);
// `gen=N`: the sequence in one batch, then N greedy tokens (first largest logit) one decode
// call each, as greedy generation runs: n + N rows, the last N the logits after each token.
// Environment: LLAMA_FA=1 flash attention on; LLAMA_NO_REPACK=1 no extra buffer types (the
// plain CPU path: Q4_0, Q4_K, IQ4_NL weights not repacked); LLAMA_THREADS=N threads.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL NGL [step] < ids.txt > logits.bin\n", argv[0]);
        return 2;
    }
    const bool step = argc > 3 && std::string(argv[3]) == "step";
    const int gen = argc > 3 && std::string(argv[3]).rfind("gen=", 0) == 0 ? atoi(argv[3] + 4) : 0;
    const int tail = argc > 3 && std::string(argv[3]).rfind("tail=", 0) == 0 ? atoi(argv[3] + 5) : 0;
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = atoi(argv[2]);
    const char* no_repack = getenv("LLAMA_NO_REPACK");
    if (no_repack && no_repack[0] == '1') mp.use_extra_bufts = false;
    llama_model* model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 2048;
    cp.n_batch = 2048;
    cp.n_ubatch = 2048;
    const char* threads = getenv("LLAMA_THREADS");
    if (threads) cp.n_threads = cp.n_threads_batch = atoi(threads);
    // Flash attention off unless LLAMA_FA=1: llama.cpp's CPU reference runs (the fixtures)
    // evaluate attention without it.
    const char* fa = getenv("LLAMA_FA");
    cp.flash_attn_type = fa && fa[0] == '1' ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context\n");
        return 1;
    }
    const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    std::string line;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        std::vector<llama_token> ids;
        for (long v; in >> v;) ids.push_back((llama_token)v);
        if (ids.empty()) continue;
        llama_memory_clear(llama_get_memory(ctx), true);
        // One batch of the whole sequence, or (`step`) one decode call per token, as greedy
        // generation runs, or (`tail`) the head in one batch and the tail a token a call;
        // every position's logits are kept.
        std::vector<float> rows;
        const size_t head = tail > 0 && (size_t)tail < ids.size() ? ids.size() - tail : ids.size();
        for (size_t at = 0; at < ids.size();) {
            const size_t per = step || at >= head ? 1 : head - at;
            llama_batch b = llama_batch_init((int32_t)per, 0, 1);
            for (size_t i = 0; i < per; i++) {
                b.token[i] = ids[at + i];
                b.pos[i] = (llama_pos)(at + i);
                b.n_seq_id[i] = 1;
                b.seq_id[i][0] = 0;
                b.logits[i] = 1;
            }
            b.n_tokens = (int32_t)per;
            if (llama_decode(ctx, b) != 0) {
                fprintf(stderr, "llama_decode failed\n");
                return 1;
            }
            for (size_t i = 0; i < per; i++) {
                const float* l = llama_get_logits_ith(ctx, (int32_t)i);
                rows.insert(rows.end(), l, l + vocab);
            }
            llama_batch_free(b);
            at += per;
        }
        // Greedy steps: feed the first largest logit of the last row, one token per call.
        for (int g = 0; g < gen; g++) {
            const float* last = rows.data() + rows.size() - vocab;
            llama_token best = 0;
            for (int v = 1; v < vocab; v++) {
                if (last[v] > last[best]) best = v;
            }
            llama_batch b = llama_batch_init(1, 0, 1);
            b.token[0] = best;
            b.pos[0] = (llama_pos)(ids.size() + g);
            b.n_seq_id[0] = 1;
            b.seq_id[0][0] = 0;
            b.logits[0] = 1;
            b.n_tokens = 1;
            if (llama_decode(ctx, b) != 0) {
                fprintf(stderr, "llama_decode failed\n");
                return 1;
            }
            const float* l = llama_get_logits_ith(ctx, 0);
            rows.insert(rows.end(), l, l + vocab);
            llama_batch_free(b);
        }
        int32_t n = (int32_t)(ids.size() + gen);
        fwrite(&n, sizeof n, 1, stdout);
        fwrite(rows.data(), sizeof(float), rows.size(), stdout);
    }
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
