#!/usr/bin/env python3
"""The layout checks of issue 51, reproducible: `python3 tools/check_layout.py`.

- import circles: for each crate, the graph of its modules by the `crate::…` and `super::…`
  paths they use (tests and comments left out); prints every strongly connected component;
- long functions: every `fn` in actors, services and http over 80 lines (brace-matched by
  indentation, rustfmt's layout);
- `actors/src` line count.
Exits 1 when a circle or a long function is found. Not run by CI: a report for whoever plans
the next work (docs/architecture.md).
"""
import glob
import os
import re
import sys


def modules(root):
    mods = {}
    for dp, _, fn in os.walk(root):
        for f in fn:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dp, f), root)[:-3].split("/")
            if rel[-1] == "mod":
                rel = rel[:-1]
            if rel in (["lib"], ["main"]):
                continue
            txt = open(os.path.join(dp, f)).read().split("#[cfg(test)]")[0]
            txt = "\n".join(l for l in txt.splitlines() if not l.strip().startswith("//"))
            mods["::".join(rel)] = txt
    return mods


def circles(root):
    mods = modules(root)
    names = set(mods)

    def resolve(path):
        parts = path.split("::")
        for k in range(len(parts), 0, -1):
            c = "::".join(parts[:k])
            if c in names:
                return c
        return None

    graph = {}
    for m, s in mods.items():
        deps = set()
        for x in re.findall(r"crate::((?:[a-z_]+::)*[a-z_]+)", s):
            deps.add(resolve(x))
        for pre, grp in re.findall(r"use crate::((?:[a-z_]+::)*)\{([^}]*)\}", s, re.S):
            for x in re.findall(r"\b([a-z_]+(?:::[a-z_]+)*)\b", grp):
                deps.add(resolve(pre + x))
        parent = "::".join(m.split("::")[:-1])
        for x in re.findall(r"super::((?:[a-z_]+::)*[a-z_]+)", s):
            deps.add(resolve((parent + "::" if parent else "") + x))
        graph[m] = {
            d for d in deps
            if d and d != m and not m.startswith(d + "::") and not d.startswith(m + "::")
        }
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                connect(w)
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            connect(v)
    return out


def long_functions(roots, limit=80):
    found = []
    for root in roots:
        for f in glob.glob(root + "/**/*.rs", recursive=True):
            lines = open(f).read().split("\n")
            for i, line in enumerate(lines):
                m = re.match(r"^(\s*)(pub(\([a-z]+\))? )?(async )?(const )?fn (\w+)", line)
                if not m or line.rstrip().endswith(";"):
                    continue
                indent, name = m.group(1), m.group(6)
                j = i
                while j < len(lines) and not (
                    lines[j].startswith(indent + "}") and len(lines[j].rstrip()) == len(indent) + 1
                ):
                    j += 1
                if j - i + 1 > limit:
                    found.append((j - i + 1, f, name))
    return sorted(found, reverse=True)


def main():
    bad = False
    for crate in ["engine", "provider", "storage", "actors", "services", "http"]:
        for comp in circles(crate + "/src"):
            bad = True
            print(f"import circle in {crate}: {' -> '.join(comp)}")
    for n, f, name in long_functions(["actors/src", "services/src", "http/src"]):
        bad = True
        print(f"{n} lines: {f} {name}")
    total = sum(len(open(f).read().split("\n")) - 1 for f in glob.glob("actors/src/*.rs"))
    print(f"actors/src: {total} lines")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
