// Token ids from llama.cpp's tokenizer (the peer), for the synthesized vocabularies' tokenizer
// fixtures (scripts/arch-fixtures.sh): every line of stdin is a text in hex (its UTF-8 bytes),
// tokenized with BOS as the vocabulary asks (add_special) and special tokens parsed; stdout
// gets the ids of each line, space-separated. A measuring instrument only; nothing of it goes
// into cbtop.
//
//   llama-tokens MODEL.gguf < texts.hex > ids.txt
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL < texts.hex > ids.txt\n", argv[0]);
        return 2;
    }
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model* model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    const llama_vocab* vocab = llama_model_get_vocab(model);
    std::string line;
    while (std::getline(std::cin, line)) {
        std::string text;
        for (size_t i = 0; i + 1 < line.size(); i += 2) {
            text.push_back((char)std::stoi(line.substr(i, 2), nullptr, 16));
        }
        std::vector<llama_token> ids(text.size() + 8);
        int n = llama_tokenize(vocab, text.data(), (int32_t)text.size(), ids.data(),
                               (int32_t)ids.size(), true, true);
        if (n < 0) {
            fprintf(stderr, "llama_tokenize failed\n");
            return 1;
        }
        for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
    }
    llama_model_free(model);
    return 0;
}
