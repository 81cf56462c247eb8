#!/usr/bin/env python3
"""The house's size limits (issue 37), so that they hold after the issue that set them:

  the library (src/, cl/)            at most 600 lines a file
  the tests (tests/, its subfolders) at most 800 lines a file
  README.md                          at most 400 lines (the rest is docs/, one page per topic)

Usage: check_sizes.py ROOT            exit 1 naming every file over its limit
       check_sizes.py --self-test     prove that a file one line over a limit is named
"""
import os
import sys
import tempfile

LIMITS = [("src", 600), ("cl", 600), ("tests", 800)]
SOURCE = (".c", ".h", ".cl", ".def", ".py", ".sh")


def lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return sum(1 for _ in f)


def check(root):
    problems = []
    for top, limit in LIMITS:
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                path = os.path.join(folder, name)
                if name.endswith(SOURCE) and lines(path) > limit:
                    problems.append(f"{os.path.relpath(path, root)}: {lines(path)} lines, over {limit}")
    readme = os.path.join(root, "README.md")
    if os.path.exists(readme) and lines(readme) > 400:
        problems.append(f"README.md: {lines(readme)} lines, over 400 (move the rest into docs/)")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "src", "base"))
        os.makedirs(os.path.join(root, "tests"))
        with open(os.path.join(root, "src", "base", "ok.c"), "w") as f:
            f.write("x\n" * 600)
        with open(os.path.join(root, "tests", "ok.c"), "w") as f:
            f.write("x\n" * 800)
        if check(root):
            print("self-test FAILED: files at their limits were named:", check(root))
            return 1
        with open(os.path.join(root, "src", "base", "big.c"), "w") as f:
            f.write("x\n" * 601)
        with open(os.path.join(root, "README.md"), "w") as f:
            f.write("x\n" * 401)
        found = check(root)
        if len(found) != 2 or "big.c: 601" not in found[0] or "README.md: 401" not in found[1]:
            print("self-test FAILED: expected big.c and README.md named, got", found)
            return 1
    print("self-test: passed (a library file and the README one line over their limits named)")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__)
        return 2
    problems = check(argv[1])
    for p in problems:
        print("sizes:", p)
    print(f"sizes: {len(problems)} file(s) over their limits")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
