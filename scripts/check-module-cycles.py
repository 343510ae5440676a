#!/usr/bin/env python3
"""Two structure checks over every crate of the workspace (crates/*/src):

1. No import cycle among the modules of a crate. A module is a source file (`lib.rs`,
   `main.rs`, `foo.rs`, `foo/mod.rs`); module A depends on module B when A's code (tests
   aside) names an item of B through `use crate::…`, `use super::…`, `use self::…`, a path
   written inline (`crate::b::f()`, `super::f()`, `child::f()`), and B is not A itself.
   A re-export (`pub use` / `pub(crate) use`) is not a dependency of its own: a path that
   reaches an item through one is followed to the module that defines the item, so a
   crate root that only re-exports is no hub of false cycles. Dependencies between a parent
   and its child count like any other (a parent using its child while the child uses the
   parent is a cycle).
2. No source file (tests aside: `tests/`, `benches/`, `examples/` and files compiled only
   under `#[cfg(test)]`) over MAX_LINES lines.

Exit status 0 when both hold, 1 otherwise; the report names every cycle (one path per
strongly connected component) and every long file.

Usage: scripts/check-module-cycles.py [--max-lines N] [--crate DIR ...] [--self-test] [ROOT]

Written by hand: no maintained tool reads Rust module graphs at this granularity without
building the crates (cargo-modules needs rust-analyzer and a full build of each crate).
"""

import argparse
import os
import re
import sys

MAX_LINES = 800


def strip(src):
    """The source with comments, string and char literals blanked (newlines kept), so that
    paths inside docs or messages do not count."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        nxt = src[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and nxt == "*":
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:i + 20]) and not (
            i > 0 and (src[i - 1].isalnum() or src[i - 1] == "_")
        ):
            m = re.match(r'r(#*)"', src[i:])
            close = '"' + m.group(1)
            j = src.find(close, i + len(m.group(0)))
            j = n if j < 0 else j + len(close)
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "'":
            # A char literal ('a', '\n', '\u{..}'); otherwise a lifetime, kept.
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'\n])'", src[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(text, open_at):
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text) - 1


CFG_TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")
MOD_DECL = re.compile(r"(?:^|[;}\s])(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
INLINE_MOD = re.compile(r"(?:^|[;}\s])(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*\{")


def remove_test_code(text):
    """Blanks `#[cfg(test)] mod x { … }` blocks; returns the text and the names of
    `#[cfg(test)] mod x;` files (test-only modules)."""
    test_files = set()
    while True:
        m = CFG_TEST_MOD.search(text)
        if not m:
            break
        if m.group(2) == ";":
            test_files.add(m.group(1))
            end = m.end()
        else:
            end = matching_brace(text, m.end() - 1) + 1
        text = text[: m.start()] + re.sub(r"[^\n]", " ", text[m.start():end]) + text[end:]
    return text, test_files


def split_use_tree(tree):
    """`a::{b, c::{d, e as f}}` -> ["a::b", "a::c::d", "a::c::e as f"]."""
    tree = tree.strip()
    depth = 0
    for k, ch in enumerate(tree):
        if ch == "{":
            if depth == 0:
                prefix = tree[:k]
                inner = tree[k + 1: matching_brace(tree, k)]
                parts, d, start = [], 0, 0
                for q, c2 in enumerate(inner):
                    if c2 == "{":
                        d += 1
                    elif c2 == "}":
                        d -= 1
                    elif c2 == "," and d == 0:
                        parts.append(inner[start:q])
                        start = q + 1
                parts.append(inner[start:])
                res = []
                for p in parts:
                    if p.strip():
                        for sub in split_use_tree(p):
                            res.append(prefix + sub if sub != "self" else prefix.rstrip(":"))
                return res
            depth += 1
    return [tree]


class Crate:
    def __init__(self, root):
        self.root = root
        self.modules = {}  # module path tuple -> dict(file, code, lines, children)
        self.test_only = set()
        src = os.path.join(root, "src")
        for top in ("lib.rs", "main.rs"):
            f = os.path.join(src, top)
            if os.path.exists(f):
                self.load((), f, os.path.join(src))
        # Binaries under src/bin/ are crates of their own; each is its own root.
        bindir = os.path.join(src, "bin")
        if os.path.isdir(bindir):
            for f in sorted(os.listdir(bindir)):
                if f.endswith(".rs"):
                    self.load(("bin:" + f[:-3],), os.path.join(bindir, f), None, own_root=True)

    def load(self, path, file, dir_, test=False, own_root=False):
        with open(file, encoding="utf-8") as fh:
            raw = fh.read()
        text, test_files = remove_test_code(strip(raw))
        mod_dir = dir_ if dir_ is not None else os.path.dirname(file)
        if dir_ is None:
            base = os.path.basename(file)
            if base == "mod.rs" or own_root:
                mod_dir = os.path.dirname(file)
            else:
                mod_dir = os.path.join(os.path.dirname(file), base[:-3])
        info = {
            "file": file,
            "code": text,
            "lines": raw.count("\n") + (0 if raw.endswith("\n") or not raw else 1),
            "children": set(),
            "test": test,
        }
        self.modules[path] = info
        # Inline (non-test) modules are part of this file: their paths resolve to it.
        for m in INLINE_MOD.finditer(text):
            info["children"].add(m.group(1))
            self.modules.setdefault(path + (m.group(1),), {"alias_of": path})
        for m in MOD_DECL.finditer(text):
            name = m.group(1)
            info["children"].add(name)
            self.load_child(path, name, mod_dir, test)
        for name in test_files:
            info["children"].add(name)
            self.load_child(path, name, mod_dir, True)

    def load_child(self, path, name, mod_dir, test):
        for cand, d in (
            (os.path.join(mod_dir, name + ".rs"), None),
            (os.path.join(mod_dir, name, "mod.rs"), None),
        ):
            if os.path.exists(cand):
                self.load(path + (name,), cand, d, test)
                return

    def real(self, path):
        while path in self.modules and "alias_of" in self.modules[path]:
            path = self.modules[path]["alias_of"]
        return path

    def file_modules(self):
        return [p for p, i in self.modules.items() if "alias_of" not in i]

    def crate_root(self, mod):
        return mod[:1] if mod and mod[0].startswith("bin:") else ()

    def absolute(self, mod, segs):
        """Resolves a path written in module `mod` to absolute segments (None: external)."""
        if not segs:
            return None
        head = segs[0]
        if head == "crate":
            return self.crate_root(mod) + tuple(segs[1:])
        if head in ("super", "self"):
            cur = list(mod)
            k = 0
            while k < len(segs) and segs[k] in ("super", "self"):
                if segs[k] == "super" and cur:
                    cur.pop()
                k += 1
            return tuple(cur) + tuple(segs[k:])
        info = self.modules.get(mod, {})
        if head in info.get("children", ()):
            return tuple(mod) + tuple(segs)
        return None

    def reexports(self, mod):
        """name -> absolute path of what `pub use` in `mod` re-exports (globs under '*')."""
        cache = self.modules[mod].setdefault("_reexports", None)
        if cache is not None:
            return cache
        out = {}
        self.modules[mod]["_reexports"] = out
        code = self.modules[mod]["code"]
        for m in re.finditer(r"pub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
            for item in split_use_tree(m.group(1)):
                item = re.sub(r"\s+", " ", item).strip()
                alias = None
                am = re.match(r"(.*?)\s+as\s+(\w+)$", item)
                if am:
                    item, alias = am.group(1), am.group(2)
                segs = [s.strip() for s in item.split("::") if s.strip()]
                absp = self.absolute(mod, segs)
                if absp is None:
                    continue
                out[alias or segs[-1]] = absp
        return out

    def owner(self, absp, depth=0):
        """The file module that defines what absolute path `absp` names."""
        # Deepest prefix that is a module.
        k = len(absp)
        while k > 0 and absp[:k] not in self.modules:
            k -= 1
        mod = self.real(absp[:k])
        if depth < 8 and k < len(absp) and mod in self.modules:
            re_ = self.reexports(mod)
            target = re_.get(absp[k])
            if target is not None and target != absp[:k] + (absp[k],):
                return self.owner(target + absp[k + 1:], depth + 1)
        return mod

    def edges(self):
        deps = {}
        for mod in self.file_modules():
            info = self.modules[mod]
            if info["test"]:
                continue
            code = info["code"]
            # Re-exports are facades, not uses.
            body = re.sub(r"pub(?:\([^)]*\))?\s+use\s+[^;]+;", lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)
            paths = []
            for m in re.finditer(r"(?<![\w:])use\s+([^;]+);", body):
                for item in split_use_tree(m.group(1)):
                    item = re.sub(r"\s+as\s+\w+$", "", item.strip())
                    paths.append((re.sub(r"\s+", "", item), m.start()))
            body_no_use = re.sub(r"(?<![\w:])use\s+[^;]+;", lambda m: re.sub(r"[^\n]", " ", m.group(0)), body)
            children = "|".join(sorted(info["children"])) or r"(?!x)x"
            for m in re.finditer(r"(?<![\w:])((?:crate|super|self|" + children + r")(?:::\w+)+)", body_no_use):
                paths.append((m.group(1), m.start()))
            out = set()
            for p, at in paths:
                segs = [s for s in p.split("::") if s]
                absp = self.absolute(mod, segs)
                if absp is None:
                    continue
                target = self.owner(absp)
                if (
                    target != self.real(mod)
                    and target in self.modules
                    and not self.modules[target].get("test")
                ):
                    line = code.count("\n", 0, at) + 1
                    out.add((target, line))
            deps[mod] = out
        return deps


def tarjan(nodes, adj):
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        # Iterative: a deep module tree must not hit Python's recursion limit.
        work = [(v, iter(adj.get(v, ())))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(adj.get(w, ()))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    comps.append(comp)

    for v in nodes:
        if v not in index:
            visit(v)
    return comps


def cycle_in(comp, adj):
    """One cycle through the component, as a list of nodes (first repeated at the end)."""
    members = set(comp)
    start = min(comp)
    prev, queue, seen = {}, [start], {start}
    while queue:
        v = queue.pop(0)
        for w in sorted(adj.get(v, ())):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, v, start]
            if w in members and w not in seen:
                seen.add(w)
                prev[w] = v
                queue.append(w)
    return comp + [comp[0]]


def name(mod):
    return "crate" if not mod else "::".join(mod)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--max-lines", type=int, default=MAX_LINES)
    ap.add_argument("--crate", action="append", default=[], help="only these crate directories")
    ap.add_argument("--self-test", action="store_true", help="check the checker on small crates")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if args.max_lines < 1:
        sys.exit(f"--max-lines {args.max_lines}: give a whole number of lines, at least 1")
    root = os.path.abspath(args.root)
    crates_dir = os.path.join(root, "crates")
    if args.crate:
        dirs = [os.path.abspath(c) for c in args.crate]
    else:
        dirs = sorted(
            os.path.join(crates_dir, d)
            for d in os.listdir(crates_dir)
            if os.path.exists(os.path.join(crates_dir, d, "Cargo.toml"))
        )
    bad = False
    for d in dirs:
        if not os.path.isdir(os.path.join(d, "src")):
            sys.exit(f"--crate {d}: not a crate directory (no src/); give a directory holding Cargo.toml and src/")
        crate = Crate(d)
        rel = os.path.relpath(d, root)
        deps = crate.edges()
        adj = {m: {t for t, _ in e} for m, e in deps.items()}
        for comp in tarjan(sorted(adj), adj):
            bad = True
            cyc = cycle_in(comp, adj)
            print(f"cycle in {rel}: " + " -> ".join(name(m) for m in cyc))
            members = set(comp)
            print(f"    {len(comp)} module(s) in this knot; their imports of one another:")
            for a in sorted(comp):
                f = os.path.relpath(crate.modules[a]["file"], root)
                for b in sorted(adj[a] & members):
                    lines = sorted(l for t, l in deps[a] if t == b)
                    print(f"    {name(a)} -> {name(b)}: {f} line(s) {', '.join(map(str, lines))}")
        for m in crate.file_modules():
            info = crate.modules[m]
            if not info["test"] and info["lines"] > args.max_lines:
                bad = True
                f = os.path.relpath(info["file"], root)
                print(f"long file: {f}: {info['lines']} lines (limit {args.max_lines})")
    if not bad:
        print(f"no module cycle and no source file over {args.max_lines} lines in {len(dirs)} crate(s)")
    return 1 if bad else 0


def self_test():
    """Builds small crates in a temporary directory and checks what the report says of them:
    a sibling cycle and a parent/child knot are found; a path only in a comment or string,
    a re-export, a test module and a test-only file are not dependencies; a long file is
    named and a long test-only file is not."""
    import subprocess
    import tempfile

    def write(root, rel, text):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)

    def report(root):
        out = subprocess.run(
            [sys.executable, os.path.abspath(__file__), root],
            capture_output=True, text=True, check=False,
        )
        return out.returncode, out.stdout

    with tempfile.TemporaryDirectory() as root:
        write(root, "crates/knot/Cargo.toml", "")
        write(root, "crates/knot/src/lib.rs", "mod a;\nmod b;\nmod p;\npub use a::A;\n")
        write(root, "crates/knot/src/a.rs", "use crate::b::B;\npub struct A;\n")
        write(root, "crates/knot/src/b.rs", "pub struct B;\nfn f() { let _ = crate::a::A; }\n")
        write(root, "crates/knot/src/p/mod.rs", "mod c;\npub struct P;\nfn g() { c::h(); }\n")
        write(root, "crates/knot/src/p/c.rs", "use super::P;\npub fn h() {}\n")
        code, out = report(root)
        assert code == 1, out
        assert "cycle in crates/knot: a -> b -> a" in out, out
        assert "cycle in crates/knot: p -> p::c -> p" in out, out

        write(root, "crates/clean/Cargo.toml", "")
        write(
            root,
            "crates/clean/src/lib.rs",
            "mod a;\nmod b;\n#[cfg(test)]\nmod tests;\npub use b::B;\n"
            "// crate::a::A in a comment\n",
        )
        write(
            root,
            "crates/clean/src/a.rs",
            "use crate::B;\npub struct A;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n",
        )
        write(
            root,
            "crates/clean/src/b.rs",
            'pub struct B;\nconst S: &str = "crate::a::A";\n' + "// line\n" * 900,
        )
        write(root, "crates/clean/src/tests.rs", "use crate::a::A;\n" + "// line\n" * 900)
        code, out = report(root)
        assert "in crates/clean" not in out, out
        assert "long file: crates/clean/src/b.rs: 902 lines" in out, out
        assert "tests.rs" not in out, out
    print("self-test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
