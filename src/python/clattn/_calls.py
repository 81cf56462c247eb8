"""clattn's calls on a worker thread (timeouts, Ctrl-C), its exceptions and its default context."""
import _thread
import os as _os
import threading as _threading
import time as _time

from . import _clattn
from ._clattn import Context, Error


class ArgumentError(ValueError, RuntimeError):
    """An argument the package refuses before the library runs (a shape, a mask with is_causal, mixed
    types): a ValueError, and a RuntimeError as PyTorch's scaled_dot_product_attention raises for the same
    arguments, so that the drop-in function raises what PyTorch raises."""



class CallTimeoutError(Error, TimeoutError):
    """A call ran past its ``timeout=`` and was abandoned (a clattn.Error and a TimeoutError; .status is
    CLATTN_ERROR_TIMEOUT). OpenCL cannot stop a running kernel: the call goes on until its kernel ends, its
    context stays locked until then (later calls on it raise ContextBusyError) and its results are dropped."""


class ContextBusyError(Error):
    """A call on a Context that still runs a call abandoned earlier (by its timeout= or by a
    KeyboardInterrupt): the context stays locked until that call's kernel ends, so the call is refused at once
    rather than left waiting. Other contexts are unaffected; wait_abandoned(context) waits for the end."""


# ---- Calls on a worker thread ------------------------------------------------------------------------------
#
# The C calls release the GIL but block their thread until the device is done, and a kernel cannot be stopped:
# a mods function that never returns would hold the calling thread for ever, and the main thread would not
# see Ctrl-C (Python runs its signal handlers between bytecodes, never inside a C call). So a call with a
# timeout, and on the main thread (where KeyboardInterrupt is raised) a call that may not end (one with mods,
# or compiling them), runs on a worker thread (kept and reused) while the caller waits on a lock in slices
# of _SLICE seconds — a wait Python interrupts to run signal handlers. Other calls run inline: the library's
# own kernels end, and the hand-over costs thread wake-ups (measured on a busy 2-core machine: 12 µs for the
# hand-over alone, a tiny SDPA call's best time 92 → 138 µs), against the 30 µs the package's whole layer
# takes. On a timeout or an exception while it waits (KeyboardInterrupt), the caller abandons the call: the
# worker keeps the call's arrays alive until it ends, the call's context is marked (ContextBusyError for
# later calls until it ends), and the caller's exception propagates.

_SLICE = 0.05
_MAIN_THREAD = _threading.main_thread().ident
_idle_workers = []      # workers waiting for a call (a list: append and pop are atomic under the GIL)
_abandoned_calls = {}   # Context → its abandoned _Job list, while one of them runs
_get_ident, _allocate_lock, _monotonic = _thread.get_ident, _thread.allocate_lock, _time.monotonic


class _Job:
    __slots__ = ("fn", "args", "context", "done", "result", "error", "finished", "abandoned", "abandoned_at",
                 "why")

    def __init__(self, context, fn, args):
        self.fn, self.args, self.context = fn, args, context
        self.done = _allocate_lock()
        self.done.acquire()
        self.result = self.error = None
        self.finished = self.abandoned = False


class _Worker:
    """A daemon thread that runs one call at a time (_call hands it over with .job and .go)."""
    __slots__ = ("go", "job")

    def __init__(self):
        self.go = _allocate_lock()
        self.go.acquire()
        self.job = None
        _threading.Thread(target=self._loop, name="clattn call", daemon=True).start()

    def _loop(self):
        go = self.go
        while True:
            go.acquire()
            job, self.job = self.job, None
            try:
                job.result = job.fn(*job.args)
            except BaseException as e:  # (handed to the caller, without this thread's frames)
                job.error = e.with_traceback(None)
            job.fn = job.args = None
            job.finished = True  # (before done: whoever holds done sees the job finished)
            job.done.release()
            if job.abandoned:
                job.result = job.error = None
                _forget(job.context)
            job = None
            _idle_workers.append(self)


def _forget(context):
    """Drop a context's entry in _abandoned_calls once each of its abandoned calls has finished."""
    jobs = _abandoned_calls.get(context)
    if jobs is not None and all(j.finished for j in jobs):
        _abandoned_calls.pop(context, None)


def _refuse_if_busy(context):
    jobs = _abandoned_calls.get(context)
    if jobs is None:
        return
    running = [j for j in jobs if not j.finished]
    if not running:
        _forget(context)
        return
    j = running[0]
    ago = _monotonic() - j.abandoned_at
    e = ContextBusyError(f"this context still runs a call abandoned {ago:.1f} s ago ({j.why}): "
                         "OpenCL cannot stop a running kernel, so the context stays locked until that call ends. "
                         "Use another clattn.Context, or clattn.wait_abandoned(context) to wait for the end")
    e.status = e.status_name = None
    raise e


def _abandon(job, why):
    job.why = why
    job.abandoned_at = _monotonic()
    job.abandoned = True  # (before the check: the worker, finishing now, sees one or the other)
    if not job.finished:
        _abandoned_calls.setdefault(job.context, []).append(job)


def _deadline(timeout):
    """timeout= (seconds, None: none) as a deadline on the monotonic clock, or None."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number of seconds or None, not {type(timeout).__name__}")
    if not timeout > 0:  # (NaN too)
        raise ArgumentError(f"timeout must be positive (seconds) or None, not {timeout!r}")
    return _monotonic() + timeout  # (math.inf: no limit, but a call Ctrl-C can abandon)


def _call(context, fn, args, deadline=None, timeout=None, may_hang=False):
    """fn(*args): a C call on `context`. With a deadline, or on the main thread when it may not end
    (may_hang: mods), on a worker while this thread waits interruptibly up to the deadline (timeout: the
    seconds it was made from, for the message); else inline."""
    if _abandoned_calls:
        _refuse_if_busy(context)
    if deadline is None and not (may_hang and _get_ident() == _MAIN_THREAD):
        return fn(*args)
    try:
        worker = _idle_workers.pop()
    except IndexError:
        worker = _Worker()
    job = _Job(context, fn, args)
    done = job.done
    worker.job = job
    worker.go.release()
    try:
        if deadline is None:
            while not done.acquire(True, _SLICE):
                pass
        else:
            while not done.acquire(True, max(0.0, min(_SLICE, deadline - _monotonic()))):
                if _monotonic() >= deadline:
                    if done.acquire(False):  # (it ended just now: its results, not a timeout)
                        break
                    e = CallTimeoutError(f"the call ran past its timeout of {timeout:g} s and was abandoned: it runs "
                                         "on until its kernel ends (OpenCL cannot stop a kernel), its results are "
                                         "dropped, and its context stays locked until then (later calls on it "
                                         "raise clattn.ContextBusyError; other contexts are unaffected)")
                    e.status, e.status_name = -3017, "CLATTN_ERROR_TIMEOUT"
                    raise e
    except BaseException as e:  # (the timeout, or KeyboardInterrupt while it waited)
        if not job.finished:
            _abandon(job, f"timeout={timeout:g} s" if isinstance(e, CallTimeoutError) else type(e).__name__)
        raise
    error, job.error = job.error, None
    if error is not None:
        raise error
    return job.result


def wait_abandoned(context=None, timeout=None):
    """Wait until every call abandoned on `context` (the default context when None) has ended — by its
    timeout= or by a KeyboardInterrupt while it waited — and the context takes calls again. timeout: seconds
    at most (None: no limit). Returns True when none runs, False when the timeout came first. The wait can
    be interrupted (Ctrl-C)."""
    context = _context(context)
    deadline = _deadline(timeout)
    while True:
        jobs = _abandoned_calls.get(context)
        if jobs is None or all(j.finished for j in jobs):
            _forget(context)
            return True
        if deadline is not None and _monotonic() >= deadline:
            return False
        _time.sleep(0.01)


def _after_fork_in_child():
    _idle_workers.clear()  # (their threads did not come along; the abandoned calls' contexts stay marked)


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_after_fork_in_child)

_default_context = None


def default_context():
    """The Context the calls use when given none: made on first use, on the device that
    ``Context()`` picks (CLATTN_DEVICE, else the first GPU, else the first device)."""
    global _default_context
    if _default_context is None:
        _default_context = Context()
    return _default_context


def set_default_context(context):
    """Make `context` (a clattn.Context) the one every call uses when given none; None: back to the one
    made on first use."""
    global _default_context
    if context is not None and not isinstance(context, Context):
        raise TypeError(f"context must be a clattn.Context, not {type(context).__name__}")
    _default_context = context


def _context(context):
    if context is None:
        return _default_context if _default_context is not None else default_context()
    if not isinstance(context, Context):
        raise TypeError(f"context must be a clattn.Context, not {type(context).__name__}")
    return context


def devices():
    """Every OpenCL device, as ``clattn devices`` lists them: dicts of spec ("P:D", what ``Context(device=)``
    takes), name, vendor, platform and type."""
    return _clattn.devices()
