#!/usr/bin/env python3
"""Counts .ci/run's tests from meson's testlog.json files (one JSON object per line, one line per meson test)
and prints its last line, "tests: N passed, N failed, N skipped", whose verdict the exit status always
matches: 0 exactly when nothing failed and nothing was skipped.

Usage: ci_count.py [--status N] LOG.json...

Each meson test counts by its own record, its result first:
  SKIP                  one skipped (an OpenCL suite that skipped ran nothing: CI fails on it);
  OK                    its check summaries ("NN%: Checks: C, Failures: F, Errors: E", one per test
                        binary it ran, on its stdout or stderr) give C − F − E passed and F + E failed (the
                        Python suite reports a skipped case as a failure there while pytest exits 0); a test
                        without a summary (a script) is one passed;
  EXPECTEDFAIL          one passed (a test that must fail: its summary, if any, is what it was meant to
                        get wrong);
  anything else         (FAIL, TIMEOUT, ERROR, UNEXPECTEDPASS, ...) the test failed, and a summary it
                        printed before (a clean "Checks:" line, then an oclgrind report, a sanitizer's exit
                        or a hang at teardown) vouches for none of its checks: all C count as failed, at
                        least one.
Fails closed: a log that is missing, unreadable, empty or not JSON from end to end (a run cut short writes
half a line) is named on stderr with the reason and fails the run, never "0 skipped" (the logs that could
be read are counted all the same). --status N is .ci/run's status from its earlier steps (a setup or a
build that failed): non-zero fails the run too. A run that fails with no test counted as failed counts one
failure, so that the line never reads "0 failed, 0 skipped" with a non-zero exit. Names every skipped or
failed test on stderr. Exit status 0 or 1; 2 for a usage error.
"""
import json
import re
import sys

SUMMARY = re.compile(r"\d+%: Checks: (\d+), Failures: (\d+), Errors: (\d+)")


def summaries(test):
    """(checks, failures, errors) summed over the test's check summaries, or None when it printed none."""
    found = [tuple(map(int, m.groups())) for stream in ("stdout", "stderr")
             for m in SUMMARY.finditer(test.get(stream) or "")]
    if not found:
        return None
    return tuple(sum(column) for column in zip(*found))


def count_test(test, path, totals):
    name, result = test["name"], test["result"]
    summary = summaries(test)
    if result == "SKIP":
        totals["skipped"] += 1
        print(f"ci: SKIPPED: {name} ({path})", file=sys.stderr)
    elif result == "EXPECTEDFAIL":
        totals["passed"] += 1
    elif result == "OK":
        if summary is None:
            totals["passed"] += 1
            return
        checks, failures, errors = summary
        totals["passed"] += max(checks - failures - errors, 0)
        totals["failed"] += failures + errors
        if failures + errors:
            print(f"ci: OK but its summary counts {failures + errors} failed or skipped: {name} ({path})",
                  file=sys.stderr)
    else:
        checks = summary[0] if summary else 0
        totals["failed"] += max(checks, 1)
        print(f"ci: {result}: {name} ({path})" + (f": its {checks} check(s) count as failed" if checks else ""),
              file=sys.stderr)


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
                not isinstance(test.get("result"), str) or \
                not all(isinstance(test.get(s) or "", str) for s in ("stdout", "stderr")):
            return f"line {number} is not a test record with a name and a result"
        count_test(test, path, totals)
    return None


def main(argv):
    args = argv[1:]
    status = 0
    if args[:1] == ["--status"]:
        if len(args) < 2 or not re.fullmatch(r"-?\d+", args[1]):
            print("usage: ci_count.py [--status N] LOG.json...", file=sys.stderr)
            return 2
        status, args = int(args[1]), args[2:]
    if not args:
        print("usage: ci_count.py [--status N] LOG.json...", file=sys.stderr)
        return 2
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    unusable = 0
    for path in args:
        why = count_log(path, totals)
        if why:
            unusable += 1
            print(f"ci: test log {path}: {why}", file=sys.stderr)
    if unusable:
        print(f"ci: {unusable} test log(s) could not be counted: the run fails (tests may have gone uncounted)",
              file=sys.stderr)
    if status:
        print(f"ci: an earlier step failed (status {status}): the run fails", file=sys.stderr)
    if totals["skipped"]:
        print(f"ci: {totals['skipped']} test(s) skipped: a skipped suite ran nothing", file=sys.stderr)
    failing = bool(unusable or status or totals["failed"] or totals["skipped"])
    if failing and not totals["failed"] and not totals["skipped"]:
        totals["failed"] = 1  # (the run failed outside any counted test: the line must say so)
    print(f"tests: {totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
