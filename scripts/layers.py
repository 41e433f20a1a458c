#!/usr/bin/env python3
"""The import graph of src/: which file uses which, the cycles between files, the imports that
run up a layer, and the largest file and longest function.

    python3 scripts/layers.py            # the numbers and every offending edge
    python3 scripts/layers.py --check    # the same; exit 1 on a cycle or an upward import
    python3 scripts/layers.py --edges    # also every file-to-file edge

A path (`use crate::a::b::C`, `super::x`, or an inline `crate::a::f()`) resolves to the file
that defines its item, following `pub use` re-exports, so `use crate::engine::Backend` is an edge
to `engine/backend.rs`, not to `engine/mod.rs`. The layer order is `LAYERS` below, lowest
first; docs/ARCHITECTURE.md draws it. Inside one directory a child file must not import from
its own `mod.rs` (the face sits above what it re-exports).
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SRC = os.path.join(ROOT, "src")

# Lowest first. A file may import from its own layer's files (without cycles) and from lower
# layers; the top level lists crate modules, `SUBLAYERS` orders files inside a module.
LAYERS = [
    ["rng", "scratch"],
    ["gguf", "quant"],
    ["model", "brick", "profile"],
    ["engine", "synth", "telemetry"],
    ["profiler"],
    ["report"],
    ["metrics", "history"],
    ["tui"],
    ["cli"],
    ["lib", "main"],
]
SUBLAYERS = {
    "engine": [
        ["error", "options", "logits", "sampler", "gpu_pci", "kv_cache"],
        ["batched"],
        ["cpu"],
        ["cuda"],
        ["backend"],
        ["generate"],
    ],
}

ITEM_RE = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+|async\s+|const\s+|extern\s+\"C\"\s+)*"
    r"(?:struct|enum|fn|const|static|type|trait|union|mod|macro_rules!)\s+(\w+)",
    re.M,
)
MACRO_EXPORT_RE = re.compile(r"macro_rules!\s+(\w+)")


def strip(text):
    """Code without comments, strings and char literals (same length per line)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'|'\\[xu][^']*'", text[i:i + 12]):
            m = re.match(r"'(\\.|[^\\'])'|'\\[xu][^']*'", text[i:])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


class File:
    def __init__(self, rel, modpath):
        self.rel = rel
        self.mod = modpath  # tuple of segments from the crate root
        self.text = open(os.path.join(SRC, rel), encoding="utf-8").read()
        self.code = strip(self.text)
        self.defs = set(ITEM_RE.findall(self.code))
        self.reexports = []  # (name or '*', full path tuple)


def module_of(rel):
    parts = rel[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        if parts[-1] in ("lib", "main") and len(parts) == 1:
            return ()
        parts = parts[:-1]
    return tuple(parts)


def load():
    files = {}
    for d, _, names in os.walk(SRC):
        for nm in names:
            if nm.endswith(".rs"):
                rel = os.path.relpath(os.path.join(d, nm), SRC)
                files[rel] = File(rel, module_of(rel))
    return files


def split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def expand_use(tree, prefix=()):
    """`a::{b, c::d as e, f::*}` -> [(path, alias)]."""
    tree = tree.strip()
    if not tree:
        return []
    m = re.match(r"^(.*?)::\{(.*)\}$", tree, re.S)
    if tree.startswith("{") and tree.endswith("}"):
        out = []
        for p in split_top(tree[1:-1]):
            out += expand_use(p, prefix)
        return out
    if m:
        head = tuple(x.strip() for x in m.group(1).split("::") if x.strip())
        out = []
        for p in split_top(m.group(2)):
            out += expand_use(p, prefix + head)
        return out
    alias = None
    am = re.match(r"^(.*)\s+as\s+(\w+)$", tree, re.S)
    if am:
        tree, alias = am.group(1), am.group(2)
    segs = tuple(x.strip() for x in tree.split("::") if x.strip())
    path = prefix + segs
    if path and path[-1] == "self":
        path = path[:-1]
    return [(path, alias or (path[-1] if path else None))]


class Graph:
    def __init__(self, files):
        self.files = files
        self.by_mod = {f.mod: f for f in files.values() if f.rel not in ("main.rs",)}
        self.edges = {}  # (from rel, to rel) -> example path
        for f in files.values():
            for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", f.code):
                for path, alias in expand_use(m.group(1)):
                    full = self.absolute(f, f.mod, path)
                    if full is not None:
                        f.reexports.append(("*" if alias == "*" else alias, full))

    def absolute(self, f, scope, path):
        """A use-path as seen from module `scope` of file f, made absolute (crate-rooted)."""
        if not path:
            return None
        if path[0] == "crate":
            return tuple(path[1:])
        if path[0] in ("self", "super"):
            cur = list(scope)
            p = list(path)
            while p and p[0] in ("self", "super"):
                if p.pop(0) == "super":
                    if not cur:
                        return None
                    cur.pop()
            return tuple(cur) + tuple(p)
        if path[0] == "cbtop" and f.rel == "main.rs":
            return tuple(path[1:])
        # 2018 paths: a child module of the current scope.
        if tuple(scope) + (path[0],) in self.by_mod:
            return tuple(scope) + tuple(path)
        return None

    def resolve(self, full, seen=None):
        """The file defining the item at `full`."""
        seen = seen or set()
        if full in seen:
            return None
        seen.add(full)
        mod, i = (), 0
        while i < len(full) and mod + (full[i],) in self.by_mod:
            mod += (full[i],)
            i += 1
        f = self.by_mod.get(mod)
        if f is None:
            return None
        rest = full[i:]
        if not rest or rest[0] == "*":
            return f
        name = rest[0]
        if name in f.defs:
            return f
        for alias, target in f.reexports:
            if alias == name:
                r = self.resolve(target + rest[1:], seen)
                if r:
                    return r
        for alias, target in f.reexports:
            if alias == "*":
                r = self.resolve(target[:-1] + rest, seen)
                if r:
                    return r
        return f

    def scan(self):
        for f in self.files.values():
            code = f.code
            # Inline modules (`mod tests { ... }`) change what super/self mean.
            scopes = []
            for m in re.finditer(r"\bmod\s+(\w+)\s*\{", code):
                depth, j = 1, m.end()
                while j < len(code) and depth:
                    depth += {"{": 1, "}": -1}.get(code[j], 0)
                    j += 1
                scopes.append((m.start(), j, m.group(1)))

            def scope_at(pos):
                s = f.mod
                for a, b, name in scopes:
                    if a <= pos < b:
                        s = s + (name,)
                return s

            # A file's own child modules are paths in its scope without a `use`.
            aliases = {
                name: f.mod + (name,)
                for name in re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code, re.M)
                if f.mod + (name,) in self.by_mod
            }
            for m in re.finditer(r"(?<![\w:])use\s+([^;]+);", code):
                scope = scope_at(m.start())
                for path, alias in expand_use(m.group(1)):
                    full = self.absolute(f, scope, path)
                    if full is None:
                        continue
                    if alias and alias != "*" and full in self.by_mod:
                        aliases[alias] = full
                    if path and path[-1] == "*":
                        full = full[:-1]
                        tgt = self.by_mod.get(full) or self.resolve(full)
                        # A glob takes what the module defines and what it re-exports.
                        self.add(f, tgt, "::".join(path))
                        for alias2, t in tgt.reexports if tgt else []:
                            self.add(f, self.resolve(t if alias2 != "*" else t[:-1]), "::".join(path))
                        continue
                    self.add(f, self.resolve(full), "::".join(path))
            for m in re.finditer(r"(?<![\w:])((?:crate|super|self)(?:::\w+)+)", code):
                if re.match(r"(?:pub(?:\([^)]*\))?\s+)?use\s", code[max(0, code.rfind("\n", 0, m.start()) + 1):m.start()].lstrip()):
                    continue
                path = tuple(m.group(1).split("::"))
                full = self.absolute(f, scope_at(m.start()), path)
                if full is not None:
                    self.add(f, self.resolve(full), m.group(1))
            for alias, target in aliases.items():
                for m in re.finditer(r"(?<![\w:])" + re.escape(alias) + r"((?:::\w+)+)", code):
                    full = target + tuple(m.group(1).split("::")[1:])
                    self.add(f, self.resolve(full), alias + m.group(1))

    def add(self, a, b, why):
        if b is None or b is a:
            return
        self.edges.setdefault((a.rel, b.rel), why)


def layer_key(rel):
    """(top layer index, sublayer index) for a file, or None when unlisted."""
    mod = module_of(rel)
    top = mod[0] if mod else rel[:-3]
    key = None
    for i, names in enumerate(LAYERS):
        if top in names:
            key = [i]
    if key is None:
        return None
    sub = SUBLAYERS.get(top)
    if sub and len(mod) > 1:
        for j, names in enumerate(sub):
            if mod[1] in names:
                key.append(j)
    return tuple(key)


def upward(a, b):
    """Does an import from file a to file b run up a layer?"""
    ma, mb = module_of(a), module_of(b)
    # A child importing from its own ancestor's mod.rs (the face above it); a `tests.rs` child
    # is the parent's own unit tests.
    if b.endswith("mod.rs") and len(mb) < len(ma) and ma[: len(mb)] == mb and not a.endswith("/tests.rs"):
        return True
    ka, kb = layer_key(a), layer_key(b)
    if ka is None or kb is None:
        return False
    n = min(len(ka), len(kb))
    if ma[:1] != mb[:1]:
        return kb[0] > ka[0]
    if n >= 2:
        return kb[1] > ka[1]
    return False


def sccs(nodes, adj):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def functions(rel, code):
    """(lines, name) for every fn with a body in a file's stripped code."""
    out = []
    for m in re.finditer(r"\bfn\s+(\w+)", code):
        j, n = m.end(), len(code)
        depth = 0
        # Skip the signature to its body's brace (or a ';' for a declaration).
        while j < n and code[j] not in "{;":
            depth += {"(": 1, ")": -1, "<": 0}.get(code[j], 0)
            j += 1
        if j >= n or code[j] == ";":
            continue
        start_line = code.count("\n", 0, m.start())
        d, k = 1, j + 1
        while k < n and d:
            d += {"{": 1, "}": -1}.get(code[k], 0)
            k += 1
        out.append((code.count("\n", m.start(), k) + 1, f"{rel}:{start_line + 1} {m.group(1)}"))
    return out


def main():
    files = load()
    g = Graph(files)
    g.scan()
    adj = {}
    for a, b in g.edges:
        adj.setdefault(a, set()).add(b)
    cycles = [sorted(c) for c in sccs(files.keys(), adj) if len(c) > 1]
    ups = sorted((a, b, why) for (a, b), why in g.edges.items() if upward(a, b))
    biggest = max((f.text.count("\n"), f.rel) for f in files.values())
    longest = max(fn for f in files.values() for fn in functions(f.rel, f.code))
    print(f"files {len(files)}, file-to-file imports {len(g.edges)}")
    print(f"import cycles between files: {len(cycles)}")
    for c in cycles:
        inner = [f"    {a} -> {b} ({g.edges[(a, b)]})" for a in c for b in c if (a, b) in g.edges]
        print(f"  cycle of {len(c)}: {', '.join(c)}")
        print("\n".join(inner))
    print(f"imports running up a layer: {len(ups)}")
    for a, b, why in ups:
        print(f"  {a} -> {b} ({why})")
    print(f"largest source file: src/{biggest[1]} ({biggest[0]} lines)")
    print(f"longest function: src/{longest[1]} ({longest[0]} lines)")
    if "--edges" in sys.argv:
        for (a, b), why in sorted(g.edges.items()):
            print(f"{a} -> {b} ({why})")
    if "--check" in sys.argv and (cycles or ups):
        sys.exit(1)


if __name__ == "__main__":
    main()
