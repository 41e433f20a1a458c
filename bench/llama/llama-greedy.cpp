// Conformance references from llama.cpp (the peer): a prompt of token ids evaluated in one
// batch with logits at every position, then greedy decoding one token per decode call, the
// way llama.cpp generates. Prints one JSON line in tests/fixtures/README.md's layout
// (prompt_ids, prompt_logits, steps with top-5, full logits, token and piece, generated_ids,
// generated_text). A measuring instrument only (scripts/gemma3-fixtures.sh builds it beside
// the peer's CPU build); nothing of it goes into cbtop.
//
//   llama-greedy MODEL.gguf N_STEPS "ID ID ID ..." > ref.jsonl
//
// Weights stay in their plain layout (use_extra_bufts = false: no repacking), the reference
// cbtop's exact CPU path reproduces; flash attention as llama.cpp's default picks it on the
// CPU (enabled) unless LLAMA_FA=0.
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

static void put_floats(const float* v, int n) {
    putchar('[');
    for (int i = 0; i < n; i++) printf(i ? ",%.9g" : "%.9g", v[i]);
    putchar(']');
}

static void put_string(const std::string& s) {
    putchar('"');
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c >= 0x7f) printf("\\u%04x", c);  // bytes as code points; piece_hex is exact
        else putchar(c);
    }
    putchar('"');
}

static std::string piece(const llama_vocab* vocab, llama_token t) {
    char buf[256];
    int n = llama_token_to_piece(vocab, t, buf, sizeof buf, 0, true);
    return n > 0 ? std::string(buf, n) : std::string();
}

int main(int argc, char** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL N_STEPS \"IDS\" > ref.jsonl\n", argv[0]);
        return 2;
    }
    const int n_steps = atoi(argv[2]);
    std::vector<llama_token> ids;
    {
        std::istringstream in(argv[3]);
        for (long v; in >> v;) ids.push_back((llama_token)v);
    }
    if (ids.empty()) {
        fprintf(stderr, "no prompt ids\n");
        return 2;
    }
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = false;
    llama_model* model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 256;
    cp.n_ubatch = 256;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    const char* fa = getenv("LLAMA_FA");
    cp.flash_attn_type = fa && fa[0] == '0' ? LLAMA_FLASH_ATTN_TYPE_DISABLED : LLAMA_FLASH_ATTN_TYPE_ENABLED;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context\n");
        return 1;
    }
    const llama_vocab* vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    // The prompt in one batch, logits everywhere.
    llama_batch b = llama_batch_init((int32_t)ids.size(), 0, 1);
    for (size_t i = 0; i < ids.size(); i++) {
        b.token[i] = ids[i];
        b.pos[i] = (llama_pos)i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = (int32_t)ids.size();
    if (llama_decode(ctx, b) != 0) {
        fprintf(stderr, "llama_decode failed on the prompt\n");
        return 1;
    }
    llama_batch_free(b);
    printf("{\"prompt\":null,\"prompt_ids\":[");
    for (size_t i = 0; i < ids.size(); i++) printf(i ? ",%d" : "%d", ids[i]);
    printf("],\"prompt_logits\":[");
    for (size_t i = 0; i < ids.size(); i++) {
        if (i) putchar(',');
        put_floats(llama_get_logits_ith(ctx, (int32_t)i), n_vocab);
    }
    printf("],\"steps\":[");
    std::vector<float> logits(llama_get_logits_ith(ctx, -1), llama_get_logits_ith(ctx, -1) + n_vocab);
    std::vector<llama_token> generated;
    std::string text;
    for (int s = 0; s < n_steps; s++) {
        // Greedy: the first largest logit; the top five for the record.
        std::vector<int> top;
        for (int k = 0; k < 5 && k < n_vocab; k++) {
            int best = -1;
            for (int i = 0; i < n_vocab; i++) {
                bool taken = false;
                for (int t : top) taken |= t == i;
                if (!taken && (best < 0 || logits[i] > logits[best])) best = i;
            }
            top.push_back(best);
        }
        const llama_token tok = top[0];
        const std::string p = piece(vocab, tok);
        if (s) putchar(',');
        printf("{\"top\":[");
        for (size_t k = 0; k < top.size(); k++) printf(k ? ",[%d,%.9g]" : "[%d,%.9g]", top[k], logits[top[k]]);
        printf("],\"logits\":");
        put_floats(logits.data(), n_vocab);
        printf(",\"token\":%d,\"piece_hex\":\"", tok);
        for (unsigned char c : p) printf("%02x", c);
        printf("\",\"piece\":");
        put_string(p);
        putchar('}');
        generated.push_back(tok);
        text += p;
        // The next step's logits: this token alone, at the next position.
        llama_batch one = llama_batch_init(1, 0, 1);
        one.token[0] = tok;
        one.pos[0] = (llama_pos)(ids.size() + s);
        one.n_seq_id[0] = 1;
        one.seq_id[0][0] = 0;
        one.logits[0] = 1;
        one.n_tokens = 1;
        if (s + 1 < n_steps) {
            if (llama_decode(ctx, one) != 0) {
                fprintf(stderr, "llama_decode failed at step %d\n", s);
                return 1;
            }
            const float* l = llama_get_logits_ith(ctx, 0);
            logits.assign(l, l + n_vocab);
        }
        llama_batch_free(one);
    }
    printf("],\"generated_ids\":[");
    for (size_t i = 0; i < generated.size(); i++) printf(i ? ",%d" : "%d", generated[i]);
    printf("],\"generated_text\":");
    put_string(text);
    printf("}\n");
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
