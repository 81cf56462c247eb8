#!/usr/bin/env python3
"""meson test docs: every code block of README.md and docs/*.md is run (or compiled), every link checked.

Code blocks, by the first word of their info string (```c, ```sh, ...):

  c        C11 against include/ and the build's libclattn.
           - a block that contains `int main(` is a whole program: compiled, linked with libclattn
             (and libclattn_mpi + MPI when it includes clattn_mpi.h) and run in the page's scratch
             folder; it must exit 0.
           - any other block is a fragment: its #include lines go to the top, the rest becomes the body
             of a function `static int fragment(int argc, char **argv)` that first declares the names
             fragments use without declaring them (the hidden preamble, PREAMBLE below: ctx, st, desc,
             layer, weights, mask, q, k, v, out, lse, ...). The fragment sits in a block of its own, so
             it may declare those names again. Fragments are compiled (-c), never run.
  opencl   OpenCL C (score_mod / mask_mod sources): compiled as C after a preamble that maps OpenCL
           C's address-space qualifiers away (a syntax and type check; the device compiler sees them in
           the suites that run them).
  sh, bash run by bash (-e -o pipefail) in the page's scratch folder, one folder per page shared by its
           blocks in order (a block may use the files an earlier one wrote), with build/tools and
           the .venv-test interpreter's folder first on PATH, and `build` in the folder a link to the
           build folder (so `build/tools/clattn` works as written).
  python   run by the .venv-test interpreter (--python) with the build's package (build/src/python) on
           PYTHONPATH, in the page's scratch folder.
  text     output, transcripts and listings: not run. So are json, toml and cmake listings.

A block without an info string is an error: say what it is. A block is skipped only when the line
before its fence is the visible marker `<!-- not run: REASON -->` (its fence line may also say
```sh skip-ci: REASON); the report counts the skipped blocks with their reasons.

Links, [label](target) and images, outside code: a relative path must exist (a file or a folder inside
the source tree); `#anchor` (alone, or after a .md path) must be the GitHub slug of a heading of the
target page (lower case, punctuation but - and _ removed, spaces to -, a repeated heading gets -1, -2);
http(s) links are checked for form only (scheme and host): the test has no network and stays
deterministic.

Without an interpreter that imports numpy (--python) the check fails when CI=true and skips (exit 77)
elsewhere, as reference-onnx does.

Usage: check_docs.py --source SRC --build BUILD [--python PY] [--only FILE...] [-v]
       check_docs.py --self-test --source SRC --build BUILD [--python PY]
--self-test proves the check fails on a broken C block, a broken sh block, a broken Python block, a
broken link and a broken anchor, and passes a good page.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

RUN_TIMEOUT = 300

PREAMBLE = r"""
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <clattn/clattn.h>
#define B 2
#define CAPACITY 4096
static int fragment(int argc, char **argv)
{
    (void)argc; (void)argv;
    clattn_status st = CLATTN_SUCCESS;
    clattn_context *ctx = NULL;
    clattn_sdpa_desc desc = CLATTN_SDPA_DESC_INIT, d = CLATTN_SDPA_DESC_INIT;
    clattn_mha_desc layer = CLATTN_MHA_DESC_INIT;
    clattn_mha_host_weights weights = CLATTN_MHA_HOST_WEIGHTS_INIT;
    clattn_mods *mods = NULL;
    clattn_group *g = NULL;
    /* tensors: cl_mem or host arrays alike (void * converts to either) */
    void *q = NULL, *k = NULL, *v = NULL, *out = NULL, *lse = NULL, *mask = NULL, *x = NULL, *y = NULL;
    void *dout = NULL, *dq = NULL, *dk = NULL, *dv = NULL, *dsinks = NULL;
    void *k_cache = NULL, *v_cache = NULL, *k_new = NULL, *v_new = NULL, *doc_ids = NULL;
    void *past_k = NULL, *past_v = NULL, *present_k = NULL, *present_v = NULL;
    void *k_pool = NULL, *v_pool = NULL, *table = NULL;
    void *k_first_half = NULL, *v_first_half = NULL, *k_second_half = NULL, *v_second_half = NULL;
    size_t blocks = 512, P = 16;
    size_t len[B] = {0};
    float sink_logits[32] = {0}, slopes[32] = {0};
"""
PREAMBLE_END = "\n    return 0;\n}\n"

OPENCL_PREAMBLE = r"""
#include <math.h>
#include <stdbool.h>
#define __global
#define __local
#define __constant const
#define __private
#define global
#define local
#define constant const
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
"""

NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")
LISTING = {"text", "json", "toml", "cmake"}


class Block:
    def __init__(self, path, line, info, text, skip):
        self.path, self.line, self.info, self.text, self.skip = path, line, info, text, skip
        self.lang = info.split()[0].lower() if info.split() else ""

    def where(self):
        return f"{self.path}:{self.line}"


def parse(path, text):
    """The fenced blocks of a Markdown file, and its lines outside them (for links and headings)."""
    blocks, prose = [], []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            prose.append((i + 1, lines[i]))
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
        start = i
        body = []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(fence) and lines[i].strip().strip(fence[0]) == ""):
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            i += 1
        if i >= len(lines):
            raise SystemExit(f"{path}:{start + 1}: a code block that never ends")
        i += 1
        skip = None
        prev = lines[start - 1].strip() if start > 0 else ""
        mm = NOT_RUN.match(prev)
        if mm:
            skip = mm.group(1) or "(no reason given)"
        sm = re.search(r"\bskip-ci(?::\s*(.*))?$", info)
        if sm:
            skip = (sm.group(1) or "").strip() or "(no reason given)"
            info = info[: sm.start()].strip()
        blocks.append(Block(path, start + 1, info, "\n".join(body) + "\n", skip))
    return blocks, prose


def slugify(heading):
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    t = re.sub(r"<[^>]+>", "", t)
    t = t.strip().lower()
    t = re.sub(r"[^\w\- ]", "", t)
    return t.replace(" ", "-")


def anchors(prose):
    seen, out = {}, set()
    for _, line in prose:
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        s = slugify(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def links(prose):
    for no, line in prose:
        line = re.sub(r"`[^`]*`", "", line)  # not inside inline code
        for m in LINK.finditer(line):
            yield no, m.group(2)


class Checker:
    def __init__(self, args):
        self.src = os.path.abspath(args.source)
        self.build = os.path.abspath(args.build)
        self.python = os.path.abspath(args.python) if args.python else None
        self.verbose = args.verbose
        self.failures = []
        self.counts = {}
        self.skips = []
        self.link_counts = {"relative": 0, "anchor": 0, "external": 0}
        self.cc = os.environ.get("CC", "cc")
        self.work = tempfile.mkdtemp(prefix="clattn-docs-")
        self.pages = {}
        self.serial = 0
        self.times = []

    def next_name(self):
        self.serial += 1
        return os.path.join(self.work, f"block{self.serial}")

    def count(self, lang, how):
        key = (lang, how)
        self.counts[key] = self.counts.get(key, 0) + 1

    def fail(self, where, what, output=""):
        tail = output[-3000:]
        self.failures.append(f"{where}: {what}" + (f"\n{tail}" if tail else ""))

    def page(self, path):
        full = os.path.join(self.src, path)
        if full not in self.pages:
            text = open(full, encoding="utf-8").read()
            self.pages[full] = parse(path, text)
        return self.pages[full]

    # -- code -------------------------------------------------------------------------------------------
    def scratch(self, block):
        d = os.path.join(self.work, re.sub(r"[^\w.-]", "_", block.path))
        if not os.path.isdir(d):
            os.makedirs(d)
            os.symlink(self.build, os.path.join(d, "build"))
        return d

    def env(self):
        env = dict(os.environ)
        path = [os.path.join(self.build, "tools")]
        if self.python:
            path.append(os.path.dirname(os.path.abspath(self.python)))
        env["PATH"] = os.pathsep.join(path + [env.get("PATH", "")])
        pkg = os.path.join(self.build, "src", "python")
        env["PYTHONPATH"] = pkg + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["CLATTN_SOURCE_DIR"] = self.src
        return env

    def run(self, block, cmd, cwd, what):
        t0 = time.monotonic()
        try:
            return self._run(block, cmd, cwd, what)
        finally:
            self.times.append((time.monotonic() - t0, block.where(), what))

    def _run(self, block, cmd, cwd, what):
        try:
            r = subprocess.run(cmd, cwd=cwd, env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=RUN_TIMEOUT)
        except OSError as e:
            self.fail(block.where(), f"{what}: {e}")
            return False
        except subprocess.TimeoutExpired as e:
            self.fail(block.where(), f"{what}: no end after {RUN_TIMEOUT} s",
                      (e.output or b"").decode("utf-8", "replace"))
            return False
        out = r.stdout.decode("utf-8", "replace")
        if self.verbose:
            print(f"--- {block.where()} ({what})\n{out}", end="")
        if r.returncode != 0:
            self.fail(block.where(), f"{what}: exit status {r.returncode}", out)
            return False
        return True

    def mpi_flags(self):
        for cmd in (["mpicc", "--showme:compile"], ["pkg-config", "--cflags", "ompi-c"], ["pkg-config", "--cflags", "mpich"]):
            try:
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if r.returncode == 0:
                return r.stdout.decode().split()
        return None

    def c_block(self, block, opencl=False):
        base = self.next_name()
        cflags = ["-std=c11", "-Wall", "-Werror", "-Wno-unused-variable", "-Wno-unused-but-set-variable",
                  "-Wno-unused-function", "-Wno-unused-value", "-Wno-uninitialized", "-Wno-maybe-uninitialized", "-DCL_TARGET_OPENCL_VERSION=120",
                  "-I" + os.path.join(self.src, "include")]
        text = block.text
        uses_mpi = "clattn_mpi.h" in text
        if uses_mpi:
            mpi = self.mpi_flags()
            if mpi is None:
                self.skips.append((block.where(), "c", "MPI's headers not found (mpicc, pkg-config)"))
                self.count("c", "skipped")
                return
            cflags += mpi
        if opencl:
            source = OPENCL_PREAMBLE + "#line %d \"%s\"\n" % (block.line + 1, block.path) + text
            how = "compiled"
        elif re.search(r"\bint\s+main\s*\(", text):
            source = "#line %d \"%s\"\n" % (block.line + 1, block.path) + text
            how = "run"
        else:
            includes = [ln for ln in text.split("\n") if ln.startswith("#include")]
            body = "\n".join("" if ln.startswith("#include") else ln for ln in text.split("\n"))
            source = ("\n".join(includes) + "\n" + PREAMBLE + "    {\n#line %d \"%s\"\n" % (block.line + 1, block.path)
                      + body + "\n    }" + PREAMBLE_END)
            how = "compiled"
        with open(base + ".c", "w", encoding="utf-8") as f:
            f.write(source)
        if how == "compiled":
            if self.run(block, [self.cc] + cflags + ["-c", base + ".c", "-o", base + ".o"], self.work, "compiling"):
                self.count(block.lang, how)
            return
        libs = ["-L" + self.build, "-Wl,-rpath," + self.build, "-lclattn"]
        if uses_mpi:
            libs = ["-lclattn_mpi"] + libs + ["-lmpi"]
        if not self.run(block, [self.cc] + cflags + [base + ".c", "-o", base] + libs + ["-lOpenCL", "-lm"],
                        self.work, "compiling and linking"):
            return
        if self.run(block, [base], self.scratch(block), "running"):
            self.count("c", "run")

    def sh_block(self, block):
        script = self.next_name() + ".sh"
        with open(script, "w", encoding="utf-8") as f:
            f.write(block.text)
        if self.run(block, ["bash", "-e", "-o", "pipefail", script], self.scratch(block), "running"):
            self.count(block.lang, "run")

    def python_block(self, block):
        if not self.python or not os.access(self.python, os.X_OK):
            self.fail(block.where(), f"python: no interpreter at {self.python} (run tools/setup.sh)")
            return
        script = self.next_name() + ".py"
        with open(script, "w", encoding="utf-8") as f:
            f.write(block.text)
        if self.run(block, [self.python, script], self.scratch(block), "running"):
            self.count("python", "run")

    def code(self, path):
        blocks, _ = self.page(path)
        for b in blocks:
            if b.skip is not None:
                self.skips.append((b.where(), b.lang or "?", b.skip))
                self.count(b.lang or "?", "skipped")
            elif not b.lang:
                self.fail(b.where(), "a code block without an info string: say what it is (```c, ```sh, ```python, ```text …)")
            elif b.lang in LISTING:
                self.count(b.lang, "listed")
            elif b.lang == "c":
                self.c_block(b)
            elif b.lang == "opencl":
                self.c_block(b, opencl=True)
            elif b.lang in ("sh", "bash"):
                self.sh_block(b)
            elif b.lang == "python":
                self.python_block(b)
            else:
                self.fail(b.where(), f"a code block in '{b.lang}', which this check does not know (see its header)")

    # -- links ------------------------------------------------------------------------------------------
    def links(self, path):
        _, prose = self.page(path)
        here = os.path.dirname(os.path.join(self.src, path))
        for no, target in links(prose):
            where = f"{path}:{no}"
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                u = urllib.parse.urlparse(target)
                if u.scheme in ("http", "https"):
                    self.link_counts["external"] += 1
                    if not u.netloc or "." not in u.netloc or " " in target:
                        self.fail(where, f"link {target}: not a well-formed URL")
                elif u.scheme == "mailto":
                    self.link_counts["external"] += 1
                else:
                    self.fail(where, f"link {target}: scheme '{u.scheme}' not checked here")
                continue
            file_part, _, anchor = target.partition("#")
            if file_part:
                full = os.path.normpath(os.path.join(here, urllib.parse.unquote(file_part)))
                self.link_counts["relative"] += 1
                if not (full + os.sep).startswith(self.src + os.sep) and full != self.src:
                    self.fail(where, f"link {target}: outside the source tree")
                    continue
                if not os.path.exists(full):
                    self.fail(where, f"link {target}: {os.path.relpath(full, self.src)} does not exist")
                    continue
            else:
                full = os.path.join(self.src, path)
            if anchor:
                self.link_counts["anchor"] += 1
                if not full.endswith(".md") or not os.path.isfile(full):
                    self.fail(where, f"link {target}: an anchor into something that is not a Markdown page")
                    continue
                _, tprose = self.page(os.path.relpath(full, self.src))
                if anchor not in anchors(tprose):
                    self.fail(where, f"link {target}: no heading of {os.path.relpath(full, self.src)} has the anchor #{anchor}")

    def report(self, files):
        by_lang = {}
        for (lang, how), n in sorted(self.counts.items()):
            by_lang.setdefault(lang, []).append(f"{n} {how}")
        print(f"docs: {len(files)} pages: " + "; ".join(f"{lang}: {', '.join(v)}" for lang, v in by_lang.items()))
        lc = self.link_counts
        print(f"docs: links: {lc['relative']} relative (each exists), {lc['anchor']} anchors (each a heading), "
              f"{lc['external']} external (form only, no network)")
        slow = sorted(self.times, reverse=True)[:5]
        if slow:
            print("docs: slowest: " + ", ".join(f"{w} {what} {t:.1f} s" for t, w, what in slow)
                  + f"; all blocks {sum(t for t, _, _ in self.times):.1f} s")
        for where, lang, why in self.skips:
            print(f"docs: skipped {lang} block at {where}: {why}")
        for f in self.failures:
            print(f"FAIL {f}", file=sys.stderr)
        if self.failures:
            print(f"docs: {len(self.failures)} failure(s)", file=sys.stderr)
        return 1 if self.failures else 0


def doc_files(src):
    files = ["README.md"]
    docs = os.path.join(src, "docs")
    for root, _, names in os.walk(docs):
        for n in sorted(names):
            if n.endswith(".md"):
                files.append(os.path.relpath(os.path.join(root, n), src))
    return sorted(files, key=lambda f: (f != "README.md", f))


def check(args, files):
    c = Checker(args)
    try:
        for f in files:
            c.links(f)
        for f in files:
            c.code(f)
        return c.report(files), c
    finally:
        shutil.rmtree(c.work, ignore_errors=True)


GOOD_PAGE = """# A page

## Its section

See [the section](#its-section), [the other page](other.md#a-heading) and [the web](https://example.org/x).

```c
st = clattn_context_create(&ctx, NULL);
```

```sh
echo hello > hello.txt
```

```python
print(open("hello.txt").read().strip())
```

```text
hello
```

<!-- not run: shows a command that never ends -->
```sh
sleep infinity
```
"""

BREAKAGES = {
    "a broken C block": ("st = clattn_context_create(&ctx, NULL);", "st = clattn_context_create(&ctx, NULL, 7);"),
    "a broken sh block": ("echo hello > hello.txt", "echo hello > hello.txt; false"),
    "a broken Python block": ('print(open("hello.txt").read().strip())', "import no_such_module_here"),
    "a broken link": ("[the other page](other.md#a-heading)", "[the other page](no-such-page.md#a-heading)"),
    "a broken anchor": ("[the section](#its-section)", "[the section](#no-such-section)"),
    "a broken anchor in another page": ("(other.md#a-heading)", "(other.md#a-headin)"),
    "a block without an info string": ("```text\nhello", "```\nhello"),
}


def self_test(args):
    ok = True
    for name, (old, new) in [("a good page", ("", ""))] + list(BREAKAGES.items()):
        with tempfile.TemporaryDirectory(prefix="clattn-docs-self-") as tree:
            os.makedirs(os.path.join(tree, "include"))
            os.symlink(os.path.join(os.path.abspath(args.source), "include", "clattn"), os.path.join(tree, "include", "clattn"))
            page = GOOD_PAGE.replace(old, new) if old else GOOD_PAGE
            assert page != GOOD_PAGE or not old, name
            with open(os.path.join(tree, "README.md"), "w", encoding="utf-8") as f:
                f.write(page)
            with open(os.path.join(tree, "other.md"), "w", encoding="utf-8") as f:
                f.write("# Other\n\n## A heading\n")
            sub = argparse.Namespace(**vars(args))
            sub.source = tree
            sub.verbose = False
            status, c = check(sub, ["README.md"])
            want = 0 if not old else 1
            if status != want:
                print(f"self-test: {name}: the check returned {status}, expected {want}", file=sys.stderr)
                ok = False
            elif old and len(c.failures) != 1:
                print(f"self-test: {name}: {len(c.failures)} failures, expected exactly 1", file=sys.stderr)
                ok = False
            elif not old and (c.counts.get(("sh", "skipped")) != 1 or c.counts.get(("c", "compiled")) != 1):
                print(f"self-test: {name}: counts {c.counts}", file=sys.stderr)
                ok = False
            else:
                print(f"self-test: {name}: {'passes' if not old else 'fails'}, as it should")
    print("self-test: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True, help="the source tree (README.md, docs/, include/)")
    ap.add_argument("--build", required=True, help="the build folder (libclattn, tools/clattn, src/python)")
    ap.add_argument("--python", help="the interpreter for python blocks (numpy installed)")
    ap.add_argument("--only", nargs="*", help="these pages only (paths relative to the source tree)")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every block's output")
    args = ap.parse_args()
    if args.self_test:
        return self_test(args)
    files = args.only or doc_files(os.path.abspath(args.source))
    # The shell and Python blocks need numpy (tools/setup.sh puts it into .venv-test): without it the
    # check fails in CI and skips elsewhere (exit 77), as the reference-onnx test does.
    try:
        ok = args.python and subprocess.run([args.python, "-c", "import numpy"], stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        print(f"docs: {args.python} cannot import numpy (run tools/setup.sh)", file=sys.stderr)
        return 1 if os.environ.get("CI") == "true" or os.environ.get("CLATTN_REQUIRE_DEVICE") == "1" else 77
    status, _ = check(args, files)
    return status


if __name__ == "__main__":
    sys.exit(main())
