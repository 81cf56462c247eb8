"""Calls that do not end (issue 36, item 13): a mods function that spins holds its call until its kernel
ends — OpenCL cannot stop a kernel —, so a call takes timeout= and, on the main thread, KeyboardInterrupt
abandons it; later calls on its context are refused at once (ContextBusyError) until it ends, other contexts
go on. The spinning calls run in a process of their own (hang_child.py), bounded in time and killed if it
overruns, so that a stuck kernel neither hangs the suite nor keeps a core busy after its test."""
import json
import math
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import clattn

HERE = os.path.dirname(os.path.abspath(__file__))
# The child's whole life: a mods compile on a cold cache (20 s on a busy machine), calibration, the checks.
CHILD_LIMIT = 240


def run_child(mode):
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "hang_child.py"), mode], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=CHILD_LIMIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"hang_child.py {mode} ran past {CHILD_LIMIT} s (killed); stderr:\n{err[-3000:]}")
    finally:
        if proc.poll() is None:  # (an exception while waiting: never leave the child behind)
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and out.strip(), \
        f"hang_child.py {mode} exited {proc.returncode}; stderr:\n{err[-3000:]}"
    report = json.loads(out.strip().splitlines()[-1])
    assert report.get("plain"), report
    return report


def test_timeout_abandons_a_call_that_spins():
    r = run_child("timeout")
    # A 20 s kernel, timeout=0.5: raised after the timeout and well before the kernel ends.
    assert "error" not in r, r
    assert 0.5 <= r["took"] < 5.0, r
    assert r["is_error"] and r["is_timeout"] and r["status_name"] == "CLATTN_ERROR_TIMEOUT", r
    assert "timeout of 0.5 s" in r["text"] and "abandoned" in r["text"], r
    # The context is refused at once, with what happened and what to do, and so is a cache on it.
    assert r["busy_took"] < 0.5 and r["busy_is_error"] and r["cache_busy"] < 0.5, r
    assert "abandoned" in r["busy_text"] and "wait_abandoned" in r["busy_text"], r
    # Another context runs meanwhile, on this thread and another one.
    assert r["other_ok"] and r["other_took"] < 30, r


def test_keyboard_interrupt_reaches_a_waiting_call():
    r = run_child("interrupt")
    # _thread.interrupt_main() after 0.5 s, during a 20 s kernel: KeyboardInterrupt within a few seconds.
    assert "took" in r and 0.4 <= r["took"] < 5.0, r
    assert "error" not in r, r
    assert r["busy_took"] < 0.5 and r["wait_while_running"] is False, r


def test_an_abandoned_call_ends_and_its_context_works_again():
    r = run_child("recover")
    assert "error" not in r, r
    assert 0.2 <= r["took"] < 1.4, r  # (the kernel takes about 1.5 s)
    assert r["busy_took"] < 0.5, r
    assert r["waited"] is True and r["wait_took"] < 60, r
    assert r["after"], r
    assert r["threads_after"] <= r["threads"] + 1, r  # (one worker, reused)


@pytest.mark.parametrize("timeout,exc", [(0, ValueError), (-1.0, ValueError), (math.nan, ValueError),
                                         ("1", TypeError), (True, TypeError)])
def test_bad_timeouts_are_refused(ctx, timeout, exc):
    q = np.ones((1, 1, 2, 4), np.float32)
    with pytest.raises(exc, match="timeout must be"):
        clattn.scaled_dot_product_attention(q, q, q, timeout=timeout, context=ctx)
    with pytest.raises(exc, match="timeout must be"):
        clattn.merge([q], [q[..., 0]], timeout=timeout, context=ctx)


def test_calls_with_a_timeout_give_what_calls_without_give(ctx, rng):
    """The worker's path returns the call's results and raises its errors as the inline path does, on the
    main thread and another one; its threads are reused."""
    q = rng.uniform(-1, 1, size=(2, 3, 17, 8)).astype(np.float32)
    mods = "float score_mod(float s, int b, int h, long q, long k) { return s * 0.5f; }\n"
    want = clattn.scaled_dot_product_attention(q, q, q, is_causal=True, return_lse=True, mods=mods, context=ctx)
    got = {}

    def calls(where):
        got[where] = [clattn.scaled_dot_product_attention(q, q, q, is_causal=True, return_lse=True, mods=mods,
                                                          timeout=t, context=ctx) for t in (60, math.inf, None)]

    calls("main")
    threads = threading.active_count()
    for _ in range(10):
        calls("main")
    assert threading.active_count() == threads
    worker = threading.Thread(target=calls, args=("other",))
    worker.start()
    worker.join()
    for where, results in got.items():
        for out, lse in results:
            assert np.array_equal(out, want[0]) and np.array_equal(lse, want[1]), where
    with pytest.raises(clattn.Error, match="BUFFER_TOO_SMALL|doc") as info:  # (the library's error comes back)
        clattn.scaled_dot_product_attention(q, q, q, mods="bool mask_mod(int b, int h, long q, long k, "
                                            "__global const int *doc) { return doc[q] == doc[k]; }\n",
                                            aux={"doc": (np.zeros(3, np.int32), "position")}, timeout=60,
                                            context=ctx)
    assert info.value.status_name == "CLATTN_ERROR_BUFFER_TOO_SMALL"
    layer = clattn.multi_head_attention(q[0, 0], np.eye(8, dtype=np.float32), np.eye(8, dtype=np.float32),
                                        np.eye(8, dtype=np.float32), heads=1, timeout=60, context=ctx)
    assert np.array_equal(layer, clattn.multi_head_attention(q[0, 0], np.eye(8, dtype=np.float32),
                                                             np.eye(8, dtype=np.float32),
                                                             np.eye(8, dtype=np.float32), heads=1, context=ctx))
