"""A process of its own for test_interrupt.py: calls whose mods spin for a long time (a kernel cannot be
stopped: this process ends with os._exit, which frees the core the kernel spins on), abandoned by a timeout
or by KeyboardInterrupt. Prints one JSON line of what it measured, then exits.

python hang_child.py timeout|interrupt|recover"""
import _thread
import json
import math
import os
import sys
import threading
import time

import numpy as np

import clattn

# score_mod spins spin[0] × spin[1] times on volatile reads of its aux tensor (the compiler cannot fold them),
# adding spin[2] = 0: the scores, and so the output, are those of plain attention.
SPIN = ("float score_mod(float s, int b, int h, long q, long k, __global const int *aux) {\n"
        "    volatile __global const int *spin = aux;\n"
        "    for (int i = 0; i < spin[0]; i++)\n"
        "        for (int j = 0; j < spin[1]; j++)\n"
        "            s += spin[2];\n"
        "    return s;\n"
        "}\n")
INNER = 1000000


def call(ctx, outer, **kw):
    q = np.ones((1, 1, 1, 4), np.float32)
    return clattn.scaled_dot_product_attention(q, q, q, mods=SPIN, aux={"spin": np.array([outer, INNER, 0], np.int32)},
                                               context=ctx, **kw)


def outer_for(ctx, seconds):
    """The outer count that spins about `seconds` on this machine (measured; at least 1)."""
    outer = 10
    while True:
        t0 = time.monotonic()
        call(ctx, outer)
        took = time.monotonic() - t0
        if took > 0.1 or outer >= 1 << 20:
            return max(1, min((1 << 31) - 1, math.ceil(seconds * outer / took)))
        outer *= 4


def expect(exc_type, fn):
    """(seconds fn took to raise exc_type, its message); anything else raises."""
    t0 = time.monotonic()
    try:
        fn()
    except exc_type as e:
        return time.monotonic() - t0, str(e), e
    raise AssertionError(f"{fn} returned without raising {exc_type.__name__}")


def main(mode, report):
    device = os.environ.get("CLATTN_TEST_DEVICE")
    ctx = clattn.Context(device)
    ones = np.ones((1, 1, 1, 4), np.float32)
    report["plain"] = bool(np.array_equal(call(ctx, 0), ones))  # (compiled: the compile is not what is timed)
    long_outer = outer_for(ctx, 20.0)
    if mode == "timeout":
        took, text, e = expect(clattn.CallTimeoutError, lambda: call(ctx, long_outer, timeout=0.5))
        report.update(took=took, text=text, is_error=isinstance(e, clattn.Error),
                      is_timeout=isinstance(e, TimeoutError), status_name=e.status_name)
        took, text, e = expect(clattn.ContextBusyError, lambda: call(ctx, 0))
        report.update(busy_took=took, busy_text=text, busy_is_error=isinstance(e, clattn.Error))
        # (a cache on the busy context is refused too, not left waiting for the lock)
        cache = clattn.KVCache(1, 1, 8, 4, context=ctx)
        report["cache_busy"] = expect(clattn.ContextBusyError, lambda: cache.append(ones, ones))[0]
        # Another context is not held up: plain calls and the same mods, from this thread and another one.
        other = clattn.Context(device)
        t0 = time.monotonic()
        results = [np.array_equal(clattn.scaled_dot_product_attention(ones, ones, ones, context=other), ones),
                   np.array_equal(call(other, 0), ones)]
        worker = threading.Thread(target=lambda: results.append(np.array_equal(call(other, 0, timeout=60), ones)))
        worker.start()
        worker.join(60)
        report.update(other_ok=all(results) and len(results) == 3, other_took=time.monotonic() - t0)
    elif mode == "interrupt":
        threading.Timer(0.5, _thread.interrupt_main).start()
        took, text, e = expect(KeyboardInterrupt, lambda: call(ctx, long_outer))
        report["took"] = took
        report["busy_took"] = expect(clattn.ContextBusyError, lambda: call(ctx, 0))[0]
        report["wait_while_running"] = clattn.wait_abandoned(ctx, timeout=0.2)
    elif mode == "recover":
        short_outer = max(1, long_outer * 3 // 40)  # (about 1.5 s)
        took, text, e = expect(clattn.CallTimeoutError, lambda: call(ctx, short_outer, timeout=0.2))
        report["took"] = took
        report["busy_took"] = expect(clattn.ContextBusyError, lambda: call(ctx, 0))[0]
        t0 = time.monotonic()
        report["waited"] = clattn.wait_abandoned(ctx, timeout=120)
        report["wait_took"] = time.monotonic() - t0
        report["after"] = bool(np.array_equal(call(ctx, 0), ones) and np.array_equal(call(ctx, 0, timeout=60), ones))
        report["threads"] = threading.active_count()
        for _ in range(20):  # (the worker is reused: no new thread per call)
            call(ctx, 0)
            call(ctx, 0, timeout=60)
        report["threads_after"] = threading.active_count()


if __name__ == "__main__":
    # The report, whatever happened (what was measured before a failure, and the failure), then out at once:
    # a spinning kernel must not keep this process.
    report = {"mode": sys.argv[1]}
    try:
        main(sys.argv[1], report)
    except BaseException as e:
        report["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(report), flush=True)
    os._exit(0)
