#!/usr/bin/env python3
"""The library exports exactly what its public header declares, and the header documents each of them.

Usage: check_exports.py HEADER LIBRARY [--allow PREFIX]...
  HEADER   include/clattn/clattn.h; every `CLATTN_API ... name(` is a declared entry point
  LIBRARY  the built libclattn.so; its exported symbols come from `nm -D --defined-only`
  --allow  symbols starting with PREFIX may be exported without a declaration (the test-only
           failure-injection hooks of a -Dfault_injection=true build)
Exit 1, naming each symbol, when one is exported but not declared, declared but not exported, or
declared without a comment just above its declaration (or the group of declarations it belongs to).
"""
import re
import subprocess
import sys

DECL = re.compile(r"^CLATTN(?:_MPI)?_API\b[^(]*?\b(\w+)\s*\(")  # clattn.h, clattn_mpi.h


def declarations(header_text):
    """{name: documented?} for every CLATTN_API declaration."""
    lines = header_text.splitlines()
    found = {}
    for i, line in enumerate(lines):
        m = DECL.match(line)
        if not m:
            continue
        # Walk up over the lines of earlier declarations of the same group (no blank line between):
        # the comment must end right above the group.
        j = i - 1
        while j >= 0 and (DECL.match(lines[j]) or
                          (lines[j].startswith(" ") and not lines[j].strip().startswith("*"))):
            j -= 1
        found[m.group(1)] = j >= 0 and lines[j].rstrip().endswith("*/")
    return found


def exported(library):
    out = subprocess.run(["nm", "-D", "--defined-only", library], check=True, capture_output=True, text=True).stdout
    return {parts[2] for parts in (l.split() for l in out.splitlines()) if len(parts) == 3 and parts[1] in "TDBRVW"}


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    header, library, allow = argv[1], argv[2], []
    rest = argv[3:]
    while rest:
        if rest[0] != "--allow" or len(rest) < 2:
            print(__doc__)
            return 2
        allow.append(rest[1])
        rest = rest[2:]
    with open(header, encoding="utf-8") as f:
        declared = declarations(f.read())
    symbols = exported(library)
    problems = []
    if len(declared) < 5:  # clattn.h declares dozens, clattn_mpi.h eight
        problems.append(f"only {len(declared)} declarations found in {header}: the pattern no longer matches")
    for name in sorted(symbols - set(declared)):
        if not any(name.startswith(p) for p in allow):
            problems.append(f"{name}: exported but not declared in the public header")
    for name in sorted(set(declared) - symbols):
        problems.append(f"{name}: declared but not exported")
    for name, documented in sorted(declared.items()):
        if not documented:
            problems.append(f"{name}: no comment documents it in the header")
    for p in problems:
        print("exports:", p)
    print(f"exports: {len(declared)} declared, {len(symbols)} exported, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
