#!/usr/bin/env python3
"""The layer check of server/ (docs/SERVER.md, "Architecture"; DESIGN.md section 3a).

server/ is one folder per layer. A file may include, and name a function of, its own folder
and the folders below it, never one above: an upper layer reaches a lower one by calling it,
and the lower one reaches back only through callbacks or ops tables it was handed. Also no
include circle: no two files include each other, directly or around a longer circle, and no
two modules (x.c + x.h) include each other's headers. And no call circle: no two files of
different modules name functions of each other (one of the two must be reached through what
it was handed instead).

    check-layers.py [ROOT]      checks ROOT/server (ROOT: the checkout, default: this script's ..)
    check-layers.py --prune [ROOT]  deletes the exceptions that no longer occur, then checks
    check-layers.py --self-test builds small trees with one violation each and checks that
                                every one fails and a clean tree passes

What is checked, and how (name-based, no compiler):
- includes: every `#include "server/<folder>/..."` of a file in server/<folder>/.
- calls: the functions (and function-like macros) each folder defines are collected from its
  files; a file that names one defined in a folder above its own (a call, or taking its
  address) is a violation. Comments and string literals are ignored.
- circles: the include graph of server/'s files, and of its modules.
- call circles: two files that each name a function the other defines (directly; longer
  circles of calls are not looked for). A module's files are one: x.c, x.h and x_int.h; and a
  module split over several .c files is one too, by this explicit rule: a .c file that
  includes a private header <folder>/<name>_int.h of its own folder belongs to module
  <folder>/<name> (proto/h3.c, h3_quic.c and h3_stream.c share proto/h3_int.h; proto/h2.c,
  h2_mem.c and h2_response.c share proto/h2_int.h), so calls among them are not a circle.

server/main.c is the program (above every folder); server/tests/ and server/tools/ are not
checked. Exceptions that had to stay are in server/layers-allow.txt, one a line with its
reason; an exception that no longer occurs is an error too, so the list only shrinks.
Exit status: 0 clean, 1 violations (each printed as FILE: what), 2 usage or a broken tree.
"""
import os
import re
import sys
import tempfile

# Lowest first. Each folder may use itself and the ones before it.
LAYERS = ["base", "proto", "net", "exchange", "workers", "core", "session", "ops", "process"]
TOP = "main"  # server/main.c

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"server/([^"]+)"', re.M)
# A function definition at file level: a line starting in column 0, the name, a parameter
# list, then `{` (possibly after attributes). Prototypes end with `;` and do not match.
DEF_RE = re.compile(r"^[A-Za-z_][\w \t\*]*?\b(pp_\w+)\s*\(([^;{}]*?)\)\s*(?:__attribute__\s*\(\(.*?\)\)\s*)*\{",
                    re.M | re.S)
MACRO_RE = re.compile(r"^\s*#\s*define\s+(pp_\w+)\(", re.M)
NAME_RE = re.compile(r"\bpp_\w+\b")


def strip(text):
    """The text with comments and string/char literals blanked (line numbers kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            # keep an #include's path: it is read from the raw text anyway
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def layer_of(rel):
    """rel: a path under server/. The layer name, TOP, or None (not checked)."""
    parts = rel.split("/")
    if len(parts) == 1:
        return TOP if parts[0] == "main.c" else None
    return parts[0] if parts[0] in LAYERS else None


def rank(layer):
    return len(LAYERS) if layer == TOP else LAYERS.index(layer)


def scan(root):
    server = os.path.join(root, "server")
    if not os.path.isdir(server):
        raise SystemExit("check-layers: no server/ under %s" % root)
    files = {}
    for dirpath, dirs, names in os.walk(server):
        dirs[:] = sorted(d for d in dirs if d not in ("tests", "tools"))
        for name in sorted(names):
            if not name.endswith((".c", ".h")):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), server)
            layer = layer_of(rel)
            if layer is None:
                if "/" in rel and rel.split("/")[0] not in LAYERS:
                    raise SystemExit("check-layers: server/%s is in no layer folder (%s)" % (rel, ", ".join(LAYERS)))
                if "/" not in rel and rel != "main.c":
                    raise SystemExit("check-layers: server/%s: every file but main.c belongs in a layer folder" % rel)
                continue
            with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                raw = f.read()
            files[rel] = (layer, raw, strip(raw))
    return files


def load_allow(root):
    allow = {}
    path = os.path.join(root, "server", "layers-allow.txt")
    if not os.path.exists(path):
        return allow, path
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            body = line.split("#", 1)[0].strip()
            if not body:
                continue
            m = re.fullmatch(r"(\S+)\s+(include|call|circle)\s+(\S+)", body)
            if not m:
                raise SystemExit("check-layers: %s:%d: want `FILE include|call|circle WHAT  # reason`" % (path, lineno))
            if "#" not in line:
                raise SystemExit("check-layers: %s:%d: an exception needs its reason after #" % (path, lineno))
            allow[(m.group(1), m.group(2), m.group(3))] = lineno
    return allow, path


def check(root):
    files = scan(root)
    problems = []  # (file, kind, what, message)

    # where each function is defined
    owner = {}
    for rel, (layer, raw, text) in files.items():
        for m in DEF_RE.finditer(text):
            head = text[m.start():m.start(1)]
            if rel.endswith(".c") and re.search(r"\bstatic\b", head):
                continue  # file-local
            owner.setdefault(m.group(1), (layer, rel))
        for m in MACRO_RE.finditer(text):
            owner.setdefault(m.group(1), (layer, rel))

    graph = {}
    for rel, (layer, raw, text) in sorted(files.items()):
        # includes (from the raw text: the path is a string literal)
        graph[rel] = []
        for m in INCLUDE_RE.finditer(raw):
            target = m.group(1)
            graph[rel].append(target)
            tl = layer_of(target)
            if tl is None or target not in files:
                if not target.startswith("tests/"):
                    problems.append((rel, "include", target, "includes server/%s, which is in no layer folder" % target))
                continue
            if rank(tl) > rank(layer):
                problems.append((rel, "include", target,
                                 "includes server/%s: %s is above %s" % (target, tl, layer)))
        # names of functions defined above
        seen = set()
        for m in NAME_RE.finditer(text):
            name = m.group(0)
            if name in seen or name not in owner:
                continue
            seen.add(name)
            ol, orel = owner[name]
            if orel != rel and rank(ol) > rank(layer):
                line = text.count("\n", 0, m.start()) + 1
                problems.append((rel, "call", name, "line %d names %s (server/%s, %s is above %s)" %
                                 (line, name, orel, ol, layer)))

    # circles: files that include each other (directly or around a circle), and modules
    def cycles(g):
        found, state, stack = [], {}, []

        def visit(v):
            state[v] = 1
            stack.append(v)
            for w in g.get(v, ()):
                if w not in g:
                    continue
                if state.get(w) == 1:
                    found.append(stack[stack.index(w):] + [w])
                elif not state.get(w):
                    visit(w)
            stack.pop()
            state[v] = 2

        for v in sorted(g):
            if not state.get(v):
                visit(v)
        return found

    for cyc in cycles(graph):
        problems.append((cyc[0], "circle", cyc[1], "include circle: " + " -> ".join(cyc)))
    # modules: x.c, x.h and x_int.h (a module's private header) are one; two modules of one
    # folder must not include each other's headers (across folders one of the two includes
    # goes up, and is reported above)
    def mod(rel):
        m = rel.rsplit(".", 1)[0]
        return m[:-4] if m.endswith("_int") else m

    mgraph = {}
    for rel, targets in graph.items():
        for t in targets:
            if t in files and mod(t) != mod(rel):
                mgraph.setdefault(mod(rel), set()).add(mod(t))
    for a in sorted(mgraph):
        for b in sorted(mgraph[a]):
            if a < b and a in mgraph.get(b, ()) and a.split("/")[0] == b.split("/")[0]:
                problems.append((a, "circle", b, "modules %s and %s include each other's headers" % (a, b)))

    # call circles between files of different modules (a split module is one, by its private
    # header: see the docstring)
    def unit(rel):
        folder = rel.split("/")[0]
        own = {mod(t) for t in graph.get(rel, ()) if t in files and t.endswith("_int.h")
               and t.split("/")[0] == folder}
        if rel.endswith(".c") and len(own) == 1 and mod(rel) not in own:
            return own.pop()
        return mod(rel)

    names = {}  # (caller file, callee file) -> names
    for rel, (layer, raw, text) in files.items():
        for name in set(NAME_RE.findall(text)):
            if name in owner and owner[name][1] != rel:
                names.setdefault((rel, owner[name][1]), set()).add(name)
    for (a, b), ab in sorted(names.items()):
        if a < b and (b, a) in names and unit(a) != unit(b):
            problems.append((a, "circle", b, "call circle: %s names %s (server/%s) and server/%s names %s" %
                             (a, ", ".join(sorted(ab)), b, b, ", ".join(sorted(names[(b, a)])))))

    allow, allow_path = load_allow(root)
    used, errors = set(), []
    for rel, kind, what, msg in problems:
        key = (rel, kind, what)
        if key in allow:
            used.add(key)
        else:
            errors.append("server/%s: %s" % (rel, msg))
    for key, lineno in sorted(allow.items(), key=lambda kv: kv[1]):
        if key not in used:
            errors.append("%s:%d: `%s %s %s` no longer occurs: remove the exception" % (allow_path, lineno, *key))
    return files, problems, allow, errors


def run(root, quiet=False):
    files, problems, allow, errors = check(root)
    for e in errors:
        print(e)
    if not quiet:
        per = {}
        for rel, (layer, _, _) in files.items():
            per[layer] = per.get(layer, 0) + 1
        print("check-layers: %d files in %s; %d exceptions (server/layers-allow.txt); %s" %
              (len(files), ", ".join("%s %d" % (l, per.get(l, 0)) for l in LAYERS), len(allow),
               "%d violations" % len(errors) if errors else "clean"))
    return 1 if errors else 0


def self_test():
    """Each broken tree must fail and the clean one pass."""
    clean = {
        "server/main.c": '#include "server/process/p.h"\nint main(void) { return pp_p_run(); }\n',
        "server/process/p.h": "int pp_p_run(void);\n",
        "server/process/p.c": '#include "server/process/p.h"\n#include "server/base/b.h"\n'
                              "int pp_p_run(void) { return pp_b_get(); }\n",
        "server/base/b.h": "int pp_b_get(void);\n",
        "server/base/b.c": '#include "server/base/b.h"\n/* pp_p_run( in a comment is no call */\n'
                           'int pp_b_get(void) { const char *s = "pp_p_run("; return s[0] - 112; }\n',
    }
    cases = {
        "clean tree": ({}, 0),
        "upward include": ({"server/base/b.c": '#include "server/base/b.h"\n#include "server/process/p.h"\n'
                                               "int pp_b_get(void) { return 0; }\n"}, 1),
        "upward call": ({"server/base/b.c": '#include "server/base/b.h"\nint pp_p_run(void);\n'
                                            "int pp_b_get(void) { return pp_p_run(); }\n"}, 1),
        "upward address taken": ({"server/base/b.c": '#include "server/base/b.h"\nint pp_p_run(void);\n'
                                                     "int (*f)(void) = pp_p_run;\n"
                                                     "int pp_b_get(void) { return 0; }\n"}, 1),
        "two files include each other": ({"server/base/b.h": '#include "server/base/c.h"\nint pp_b_get(void);\n',
                                          "server/base/c.h": '#include "server/base/b.h"\n'}, 1),
        "two modules include each other's headers": (
            {"server/base/c.h": "int pp_c_get(void);\n",
             "server/base/c.c": '#include "server/base/c.h"\n#include "server/base/b.h"\n'
                                "int pp_c_get(void) { return pp_b_get(); }\n",
             "server/base/b.c": '#include "server/base/b.h"\n#include "server/base/c.h"\n'
                                "int pp_b_get(void) { return 0; }\n"}, 1),
        "two files call each other": (
            {"server/base/c.c": "int pp_b_get(void);\nint pp_c_get(void) { return pp_b_get(); }\n",
             "server/base/b.c": '#include "server/base/b.h"\nint pp_c_get(void);\n'
                                "int pp_b_get(void) { return pp_c_get(); }\n"}, 1),
        "two files call each other, one by address": (
            {"server/base/c.c": "int pp_b_get(void);\nint pp_c_get(void) { return pp_b_get(); }\n",
             "server/base/b.c": '#include "server/base/b.h"\nint pp_c_get(void);\n'
                                "int (*f)(void) = pp_c_get;\nint pp_b_get(void) { return 0; }\n"}, 1),
        "a call circle allowed with its reason": (
            {"server/base/c.c": "int pp_b_get(void);\nint pp_c_get(void) { return pp_b_get(); }\n",
             "server/base/b.c": '#include "server/base/b.h"\nint pp_c_get(void);\n'
                                "int pp_b_get(void) { return pp_c_get(); }\n",
             "server/layers-allow.txt": "base/b.c circle base/c.c  # why\n"}, 0),
        "one call each way inside a split module": (
            {"server/base/m_int.h": "int pp_m__a(void);\nint pp_m__b(void);\n",
             "server/base/m.c": '#include "server/base/m_int.h"\nint pp_m__a(void) { return pp_m__b(); }\n',
             "server/base/m_part.c": '#include "server/base/m_int.h"\n'
                                     "int pp_m__b(void) { return 0; }\nint pp_m_c(void) { return pp_m__a(); }\n"},
            0),
        "a call circle with a file that shares no private header": (
            {"server/base/m_int.h": "int pp_m__a(void);\n",
             "server/base/m.c": '#include "server/base/m_int.h"\nint pp_x_get(void);\n'
                                "int pp_m__a(void) { return pp_x_get(); }\n",
             "server/base/x.c": "int pp_m__a(void);\nint pp_x_get(void) { return pp_m__a(); }\n"}, 1),
        "a file in no layer folder": ({"server/misc/x.c": "int x;\n"}, 2),
        "a stale exception": ({"server/layers-allow.txt": "base/b.c include process/p.h  # gone\n"}, 1),
        "an allowed exception": ({"server/base/b.c": '#include "server/base/b.h"\n#include "server/process/p.h"\n'
                                                     "int pp_b_get(void) { return 0; }\n",
                                  "server/layers-allow.txt": "base/b.c include process/p.h  # why\n"}, 0),
    }
    failed = 0
    for name, (change, want) in cases.items():
        with tempfile.TemporaryDirectory(prefix="check-layers-") as root:
            tree = dict(clean)
            tree.update(change)
            for path, text in tree.items():
                os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
                with open(os.path.join(root, path), "w") as f:
                    f.write(text)
            try:
                got = run(root, quiet=True)
            except SystemExit as e:
                print(e)
                got = 2
            ok = got == want
            failed += not ok
            print("self-test: %-45s exit %d, want %d: %s" % (name, got, want, "ok" if ok else "FAILED"))
    return 1 if failed else 0


def prune(root):
    _, _, allow, errors = check(root)
    stale = {int(m.group(1)) for m in (re.search(r"layers-allow\.txt:(\d+): ", e) for e in errors) if m}
    path = os.path.join(root, "server", "layers-allow.txt")
    if stale:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(l for i, l in enumerate(lines, 1) if i not in stale)
        print("check-layers: %d stale exceptions deleted" % len(stale))
    return run(root)


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    if len(argv) > 1 and argv[1] == "--prune":
        return prune(argv[2] if len(argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if len(argv) > 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1] if len(argv) == 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    return run(root)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
