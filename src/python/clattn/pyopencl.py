"""clattn with pyopencl: arrays that stay on the device.

``import clattn.pyopencl`` (pyopencl installed: Debian's python3-pyopencl or PyPI's). clattn's calls take
``pyopencl.array.Array`` arguments as they take numpy arrays — scaled_dot_product_attention, KVCache.append
and KVCache.attend read and write the arrays' buffers where they are, with no copy through the host, and
return pyopencl arrays on the query's queue::

    import pyopencl as cl, pyopencl.array as cla, clattn, clattn.pyopencl
    queue = cl.CommandQueue(cl.create_some_context())
    q = cla.to_device(queue, numpy_query)            # (…, H, L, E) float32, float16 (or bfloat16 bits)
    out = clattn.scaled_dot_product_attention(q, k, v, is_causal=True)   # a pyopencl array

A call on device arrays runs on ``context(queue)`` of the query's queue unless given ``context=`` (a
clattn.Context on the same OpenCL context). Order between the two: work is ordered by the queue where the
arrays' queue is the context's (then nothing waits); arrays on another queue of the same OpenCL context have
that queue finished before the call, and get an event of the call's end (pyopencl's operations wait for an
array's events): its outputs, and its inputs, which the call may still be reading when it returns.
"""
from . import _device

__all__ = ["context", "queue", "cl_context"]


def context(queue):
    """The clattn.Context on a pyopencl CommandQueue (in-order): its OpenCL context, device and queue, which
    clattn retains; the same Context for the same queue every time. Calls on it are ordered with the
    application's own work on that queue by the queue alone."""
    return _device.context_for(queue)


def queue(context=None):
    """The reverse: a clattn.Context's own queue as a pyopencl CommandQueue (None: clattn's default
    context), for pyopencl work ordered with clattn's calls on it."""
    from ._calls import _context

    return _device.queue_of(_context(context))


def cl_context(context=None):
    """A clattn.Context's OpenCL context as a pyopencl Context (for allocating arrays beside it)."""
    import pyopencl as cl
    from ._calls import _context

    return cl.Context.from_int_ptr(_context(context)._cl_handles[0], retain=True)
