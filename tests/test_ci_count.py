#!/usr/bin/env python3
"""tools/scripts/ci_count.py (.ci/run's count of meson's testlog.json files) on made-up logs, and the tail of
.ci/run that prints its verdict: good logs are counted; a test meson failed never has its checks counted
as passed (a clean "Checks:" line, then an oclgrind report, a sanitizer's exit or a hang at teardown); a
summary that counts failures fails the run even when meson said OK (the Python suite's skipped cases);
a truncated, damaged, empty, missing or unreadable log fails the run with a reason, however its tests
would have counted (a SKIP cut short must never read as 0 skipped); and in every case the last line
"tests: N passed, N failed, N skipped" and the exit status agree: non-zero exactly when N failed or N
skipped is not 0.

Usage: test_ci_count.py PATH/TO/ci_count.py   (.ci/run is found beside it, at ../../.ci/run)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

failures = 0
LINE = re.compile(r"tests: (\d+) passed, (\d+) failed, (\d+) skipped")


def check(condition, what):
    global failures
    if not condition:
        failures += 1
    print(f"{'ok  ' if condition else 'FAIL'} {what}")


def record(name, result, stdout="", stderr=None):
    r = {"name": name, "result": result, "stdout": stdout, "returncode": 0}
    if stderr is not None:
        r["stderr"] = stderr
    return json.dumps(r)


def run(script, *args):
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout.strip(), p.stderr


def verdict(result, want, what):
    """result (exit status, stdout, stderr): the count's line is `want` ("P F S"), and its exit status
    agrees with it. Returns the exit status."""
    rc, out, _ = result
    m = LINE.fullmatch(out.splitlines()[-1] if out else "")
    got = " ".join(m.groups()) if m else None
    check(got == want, f"{what}: '{want}' (got '{out}')")
    agrees = m is not None and (rc != 0) == (int(m.group(2)) + int(m.group(3)) > 0)
    check(agrees, f"{what}: the exit status ({rc}) agrees with the line")
    return rc


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    script = os.path.abspath(sys.argv[1])
    ci_run = os.path.join(os.path.dirname(script), "..", "..", ".ci", "run")
    with tempfile.TemporaryDirectory(prefix="test_ci_count-") as tmp:
        def write(name, text):
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            return path

        summary = "Running suite(s): x\n100%: Checks: 4, Failures: 0, Errors: 0\n"
        clean = write("clean.json", "\n".join([
            record("clattn / sdpa", "OK", summary),       # 4 passed
            record("clattn / layering", "OK"),            # a script: one pass
            record("clattn / api-no-device-fails", "EXPECTEDFAIL",
                   "0%: Checks: 1, Failures: 1, Errors: 0\n"),  # one pass: failing is what it must do
        ]) + "\n")
        rc = verdict(run(script, clean), "6 0 0", "a clean log")
        check(rc == 0, f"... exit 0 (got {rc})")

        good = write("good.json", "\n".join([
            record("clattn / sdpa", "OK", summary),       # 4 passed
            record("clattn / layering", "OK"),            # 1 passed
            record("clattn / tiling", "SKIP", "SKIP: no OpenCL device\n"),  # 1 skipped
            record("clattn / cli", "TIMEOUT"),            # no summary: 1 failed
            record("clattn / mha", "FAIL", "66%: Checks: 3, Failures: 1, Errors: 0\n"),  # all 3 failed
        ]) + "\n")
        rc, out, err = run(script, good)
        verdict((rc, out, err), "5 4 1", "a log with a skip, a timeout and a failure")
        check("SKIPPED: clattn / tiling" in err and "TIMEOUT: clattn / cli" in err and "FAIL: clattn / mha" in err,
              "the skipped and the failed tests are named")
        other = write("other.json", record("clattn / npy", "SKIP") + "\n")
        verdict(run(script, good, other), "5 4 2", "two logs add up")

        # pytest exits 0 on a skipped case (meson: OK); the suite's summary counts it as a failure.
        pytest = write("pytest.json", record("clattn / python", "OK",
                                             "..s.\n75%: Checks: 4, Failures: 1, Errors: 0\n") + "\n")
        rc, out, err = run(script, clean, pytest)
        verdict((rc, out, err), "9 1 0", "a skipped pytest case under meson's OK")
        check(rc == 1 and "clattn / python" in err, f"... fails the run, naming the test (got {rc})")

        # A clean summary, then the test failed: its checks are not passes.
        for result, what in (("FAIL", "an oclgrind report or a sanitizer's exit after it"),
                             ("TIMEOUT", "a hang at teardown"), ("ERROR", "a crash at exit")):
            late = write(f"late-{result}.json", record("clattn / oclgrind", result, summary) + "\n")
            rc, out, err = run(script, clean, late)
            verdict((rc, out, err), "6 4 0", f"a clean summary, then {result} ({what})")
            check(f"{result}: clattn / oclgrind" in err and "4 check(s) count as failed" in err,
                  f"... named, its checks counted as failed")
        # Summaries on stderr count, and a test that ran several binaries sums their summaries.
        several = write("several.json", record("clattn / oclgrind", "OK", summary,
                                               "50%: Checks: 2, Failures: 1, Errors: 0\n") + "\n")
        verdict(run(script, several), "5 1 0", "two summaries, one on stderr")
        unexpected = write("unexpected.json", record("clattn / api-no-checks-fails", "UNEXPECTEDPASS") + "\n")
        verdict(run(script, clean, unexpected), "6 1 0", "an expected failure that passed")

        # An earlier step's failure (--status): a failure even when every test passed.
        verdict(run(script, "--status", "1", clean), "6 1 0", "a clean log after a failed step")
        verdict(run(script, "--status", "1", pytest), "3 1 0", "a failed step and a counted failure")
        verdict(run(script, "--status", "0", clean), "6 0 0", "--status 0")

        # The last test's line cut short, as a run killed while writing leaves it: its SKIP is unreadable.
        whole = record("clattn / ok", "OK") + "\n" + record("clattn / decode", "SKIP")
        truncated = write("truncated.json", whole[:-25])
        rc, out, err = run(script, clean, truncated)
        verdict((rc, out, err), "7 1 0", "a truncated log (the tests before its damage counted)")
        check("truncated.json" in err and "line 2 is not JSON" in err, "... saying which log and line")

        damaged = write("damaged.json", record("clattn / ok", "OK") + "\n[1, 2]\n")
        rc, out, err = run(script, damaged)
        verdict((rc, out, err), "1 1 0", "a line that is not a test record")
        check("not a test record" in err, "... saying so")
        no_result = write("no_result.json", json.dumps({"name": "clattn / x"}) + "\n")
        rc, out, err = run(script, no_result)
        verdict((rc, out, err), "0 1 0", "a record without a result")
        check("not a test record" in err, "... saying so")
        bad_stdout = write("bad_stdout.json", json.dumps({"name": "clattn / x", "result": "OK", "stdout": 3}) + "\n")
        rc, out, err = run(script, bad_stdout)
        verdict((rc, out, err), "0 1 0", "a record whose stdout is not text")

        empty = write("empty.json", "")
        rc, out, err = run(script, clean, empty)
        verdict((rc, out, err), "6 1 0", "an empty log")
        check("holds no test" in err, "... saying so")

        missing = os.path.join(tmp, "testlog-smallwg3.json")
        rc, out, err = run(script, good, missing)
        verdict((rc, out, err), "5 4 1", "a missing log (the logs it could read still counted)")
        check("testlog-smallwg3.json" in err and "cannot read" in err, "... named")
        rc, out, err = run(script, clean, missing)
        verdict((rc, out, err), "6 1 0", "a missing log beside a clean one")

        folder = os.path.join(tmp, "a-folder.json")
        os.mkdir(folder)
        rc, out, err = run(script, folder)
        verdict((rc, out, err), "0 1 0", "an unreadable log (a folder)")
        check("cannot read" in err, "... saying so")
        binary = os.path.join(tmp, "binary.json")
        with open(binary, "wb") as f:
            f.write(b"\xff\xfe\x00garbage")
        rc, out, err = run(script, binary)
        verdict((rc, out, err), "0 1 0", "a log that is not UTF-8 text")
        check("binary.json" in err, "... named")

        rc, _, _ = run(script)
        check(rc == 2, f"no log named: usage, exit 2 (got {rc})")
        rc, _, _ = run(script, "--status", "x", clean)
        check(rc == 2, f"--status without a number: usage, exit 2 (got {rc})")

        # .ci/run's own tail (from its json_logs line to the end), run over made-up logs in a tree of
        # its own: the line it prints and its exit status agree, whatever the count says or does.
        with open(ci_run, encoding="utf-8") as f:
            text = f.read()
        start = text.find("\njson_logs=(")
        check(start >= 0, ".ci/run has its json_logs line")
        tail = text[start:]
        tree = os.path.join(tmp, "tree")
        os.makedirs(os.path.join(tree, "tools", "scripts"))
        shutil.copy(script, os.path.join(tree, "tools", "scripts", "ci_count.py"))
        # The logs .ci/run counts, as its own json_logs line names them (one per meson run: the README's
        # command, suite slow, each work-group setup, the sanitizer build).
        p = subprocess.run(["bash", "-c", 'eval "$1"; printf "%s\\n" "${json_logs[@]}"', "-",
                            tail[:tail.find("\nline=")]], capture_output=True, text=True, timeout=60)
        names = p.stdout.split()
        check(p.returncode == 0 and len(names) >= 5 and "build/meson-logs/testlog.json" in names and
              "build/meson-logs/testlog-slow.json" in names, f".ci/run counts every run's log (got {names})")
        for name in names:
            os.makedirs(os.path.join(tree, os.path.dirname(name)), exist_ok=True)
        others = 6 * (len(names) - 1)  # the clean logs before the last

        def ci_tail(status, last_log, count_script=None):
            for i, name in enumerate(names):
                shutil.copy(last_log if i == len(names) - 1 else clean, os.path.join(tree, name))
            if count_script is not None:
                with open(os.path.join(tree, "tools", "scripts", "ci_count.py"), "w", encoding="utf-8") as f:
                    f.write(count_script)
            p = subprocess.run(["bash", "-c", f"set -uo pipefail\nstatus={status}\n{tail}"], cwd=tree,
                               capture_output=True, text=True, timeout=60)
            return p.returncode, p.stdout.strip(), p.stderr

        verdict(ci_tail(0, clean), f"{others + 6} 0 0", ".ci/run: clean logs")
        verdict(ci_tail(0, pytest), f"{others + 3} 1 0", ".ci/run: a skipped pytest case under meson's OK")
        verdict(ci_tail(0, write("late.json", record("clattn / oclgrind", "FAIL", summary) + "\n")),
                f"{others} 4 0", ".ci/run: a clean summary, then FAIL")
        verdict(ci_tail(0, other), f"{others} 0 1", ".ci/run: a skip")
        verdict(ci_tail(1, clean), f"{others + 6} 1 0", ".ci/run: an earlier step failed")
        rc, out, err = ci_tail(0, clean, "import sys\nsys.exit(3)\n")
        verdict((rc, out, err), "0 1 0", ".ci/run: the count crashed without a line")
        check("without a count" in err, "... saying so")
        verdict(ci_tail(0, clean, "print('tests: 3 passed, 0 failed, 0 skipped')\nraise SystemExit(1)\n"),
                "3 1 0", ".ci/run: a count that exits 1 on a clean line")
        verdict(ci_tail(0, clean, "print('tests: 3 passed, 2 failed, 0 skipped')\n"), "3 2 0",
                ".ci/run: a count that exits 0 on failures")
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
