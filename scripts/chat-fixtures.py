"""Expected chat-template renderings for tests/chat.rs, made with Jinja2 (the reference Jinja
implementation, as Hugging Face's tokenizers render these templates) from the template a GGUF
file carries (`tokenizer.chat_template`).

    pip install jinja2
    python3 scripts/chat-fixtures.py ~/.cache/cbtop/SmolLM2-135M-Instruct.Q4_1.gguf \
        > tests/fixtures/chat/smollm2.json
"""
import json
import struct
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

# GGUF metadata value types: sizes of the fixed-width ones; 8 is a string, 9 an array.
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def metadata(path):
    """The file's string metadata (other values skipped)."""
    f = open(path, "rb")
    magic, version, n_tensors, n_kv = struct.unpack("<4sIQQ", f.read(24))
    assert magic == b"GGUF", path

    def string():
        (n,) = struct.unpack("<Q", f.read(8))
        return f.read(n).decode("utf-8")

    def skip(t):
        if t == 8:
            string()
        elif t == 9:
            et, n = struct.unpack("<IQ", f.read(12))
            for _ in range(n):
                skip(et)
        else:
            f.read(FIXED[t])

    out = {}
    for _ in range(n_kv):
        key = string()
        (t,) = struct.unpack("<I", f.read(4))
        if t == 8:
            out[key] = string()
        else:
            skip(t)
    return out


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


CASES = [
    ("a user's turn", [{"role": "user", "content": "Write a haiku about GPUs."}], True),
    ("a system turn first", [
        {"role": "system", "content": "You answer in one line."},
        {"role": "user", "content": "What is a GGUF file?"},
    ], True),
    ("three turns, no generation prompt", [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Name a prime."},
    ], False),
]


def main(path):
    meta = metadata(path)
    source = meta["tokenizer.chat_template"]
    env = ImmutableSandboxedEnvironment(trim_blocks=False, lstrip_blocks=False)
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(source)
    cases = [
        {
            "name": name,
            "messages": messages,
            "add_generation_prompt": gen,
            "text": template.render(messages=messages, add_generation_prompt=gen,
                                    bos_token="", eos_token=""),
        }
        for name, messages, gen in CASES
    ]
    json.dump({"model": meta.get("general.name"), "renderer": f"jinja2 {jinja2.__version__}",
               "template": source, "cases": cases}, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
