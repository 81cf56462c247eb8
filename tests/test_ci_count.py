#!/usr/bin/env python3
"""tools/scripts/ci_count.py (.ci/run's count of meson's testlog.json files) on made-up logs: good logs
are counted, and a truncated, damaged, empty, missing or unreadable log fails the run with a reason,
however its tests would have counted (a SKIP cut short must never read as 0 skipped).

Usage: test_ci_count.py PATH/TO/ci_count.py
"""
import json
import os
import subprocess
import sys
import tempfile

failures = 0


def check(condition, what):
    global failures
    if not condition:
        failures += 1
    print(f"{'ok  ' if condition else 'FAIL'} {what}")


def record(name, result, stdout=""):
    return json.dumps({"name": name, "result": result, "stdout": stdout, "returncode": 0})


def run(script, *paths):
    p = subprocess.run([sys.executable, script, *paths], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout.strip(), p.stderr


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    script = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="test_ci_count-") as tmp:
        def write(name, text):
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            return path

        summary = "Running suite(s): x\n100%: Checks: 4, Failures: 0, Errors: 0\n"
        good = write("good.json", "\n".join([
            record("clattn / sdpa", "OK", summary),       # counted from its Checks line: not here
            record("clattn / layering", "OK"),            # a script: one plain pass
            record("clattn / api-no-device-fails", "EXPECTEDFAIL"),  # a plain pass
            record("clattn / tiling", "SKIP", "SKIP: no OpenCL device\n"),
            record("clattn / cli", "TIMEOUT"),            # no Checks line: one bad
            record("clattn / mha", "FAIL", "100%: Checks: 3, Failures: 1, Errors: 0\n"),  # counted there
        ]) + "\n")
        rc, out, err = run(script, good)
        check(rc == 0 and out == "1 1 2", f"a good log: exit 0 and '1 1 2' (got {rc}, '{out}')")
        check("SKIPPED: clattn / tiling" in err and "TIMEOUT: clattn / cli" in err,
              "the skipped and the timed-out test are named")
        other = write("other.json", record("clattn / npy", "SKIP") + "\n")
        rc, out, _ = run(script, good, other)
        check(rc == 0 and out == "2 1 2", f"two logs add up: '2 1 2' (got {rc}, '{out}')")

        # The last test's line cut short, as a run killed while writing leaves it: its SKIP is unreadable.
        whole = record("clattn / ok", "OK") + "\n" + record("clattn / decode", "SKIP")
        truncated = write("truncated.json", whole[:-25])
        rc, out, err = run(script, good, truncated)
        check(rc == 1, f"a truncated log: exit 1 (got {rc})")
        check("truncated.json" in err and "line 2 is not JSON" in err, "... saying which log and line")

        damaged = write("damaged.json", record("clattn / ok", "OK") + "\n[1, 2]\n")
        rc, _, err = run(script, damaged)
        check(rc == 1 and "not a test record" in err, f"a line that is not a test record: exit 1 (got {rc})")
        no_result = write("no_result.json", json.dumps({"name": "clattn / x"}) + "\n")
        rc, _, err = run(script, no_result)
        check(rc == 1 and "not a test record" in err, f"a record without a result: exit 1 (got {rc})")

        empty = write("empty.json", "")
        rc, _, err = run(script, good, empty)
        check(rc == 1 and "holds no test" in err, f"an empty log: exit 1 (got {rc})")

        missing = os.path.join(tmp, "testlog-smallwg3.json")
        rc, out, err = run(script, good, missing)
        check(rc == 1 and "testlog-smallwg3.json" in err and "cannot read" in err,
              f"a missing log: exit 1, named (got {rc})")
        check(out == "1 1 2", f"... the logs it could read still counted (got '{out}')")

        folder = os.path.join(tmp, "a-folder.json")
        os.mkdir(folder)
        rc, _, err = run(script, folder)
        check(rc == 1 and "cannot read" in err, f"an unreadable log (a folder): exit 1 (got {rc})")
        binary = os.path.join(tmp, "binary.json")
        with open(binary, "wb") as f:
            f.write(b"\xff\xfe\x00garbage")
        rc, _, err = run(script, binary)
        check(rc == 1 and "binary.json" in err, f"a log that is not UTF-8 text: exit 1 (got {rc})")

        rc, _, _ = run(script)
        check(rc == 2, f"no log named: usage, exit 2 (got {rc})")
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
