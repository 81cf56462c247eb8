#!/usr/bin/env python3
"""Counts .ci/run's meson tests from meson's testlog.json files (one JSON object per line, one line per
test) and fails closed: a log that is missing, unreadable, empty or not JSON from end to end (a run cut
short writes half a line) is an error, never "0 skipped".

Usage: ci_count.py LOG.json...

Prints one line "SKIPPED BAD PLAIN_OK" on stdout, counted over every log it could read:
  SKIPPED   tests meson marked SKIP (an OpenCL suite that skipped ran nothing);
  BAD       failed, crashed or timed-out tests without check's summary line ("Checks: N, ...": those are
            counted from the text logs; a crash or timeout has none, so it counts one here);
  PLAIN_OK  passing tests without that line (the script checks), one each.
Names each skipped or failed test on stderr. Exit status 0, or 1 when any log could not be used (each
named with the reason on stderr, the counts printed all the same).
"""
import json
import sys

# Results meson writes that count as a pass; every other one (FAIL, TIMEOUT, UNEXPECTEDPASS, ERROR, ...)
# is a failure.
PASSED = ("OK", "EXPECTEDFAIL")


def count_log(path, totals):
    """Adds one log's tests to totals (those before a damaged line too); returns the reason it cannot be
    used, or None."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        return f"cannot read it: {e}"
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return "it holds no test (an empty log: the run wrote nothing)"
    for number, line in enumerate(lines, 1):
        try:
            test = json.loads(line)
        except ValueError as e:
            return f"line {number} is not JSON ({e}): the log is truncated or damaged"
        if not isinstance(test, dict) or not isinstance(test.get("name"), str) or \
                not isinstance(test.get("result"), str):
            return f"line {number} is not a test record with a name and a result"
        has_summary = "Checks: " in (test.get("stdout") or "")
        if test["result"] == "SKIP":
            totals["skipped"] += 1
            print(f"ci: SKIPPED: {test['name']} ({path})", file=sys.stderr)
        elif test["result"] in PASSED:
            totals["plain_ok"] += not has_summary
        else:
            totals["bad"] += not has_summary
            print(f"ci: {test['result']}: {test['name']} ({path})", file=sys.stderr)
    return None


def main(argv):
    if len(argv) < 2:
        print("usage: ci_count.py LOG.json...", file=sys.stderr)
        return 2
    totals = {"skipped": 0, "bad": 0, "plain_ok": 0}
    unusable = 0
    for path in argv[1:]:
        why = count_log(path, totals)
        if why:
            unusable += 1
            print(f"ci: test log {path}: {why}", file=sys.stderr)
    print(totals["skipped"], totals["bad"], totals["plain_ok"])
    if unusable:
        print(f"ci: {unusable} test log(s) could not be counted: the run fails (tests may have gone uncounted)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
