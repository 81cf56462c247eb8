"""Arrays that stay on the device: pyopencl arrays as the calls take them (the extension reads their buffers,
devarrays.c), the outputs made beside them, and the order of work between the arrays' queues and the call's.

pyopencl is never imported here: an array is known by its attributes (as the extension knows it), and
pyopencl is taken from sys.modules, where whoever made the array has put it."""
import sys as _sys

from ._calls import ArgumentError

# The clattn.Context made for each pyopencl queue (clattn.pyopencl.context): its int_ptr → (the queue, the
# Context). The queue is held so that its address is not reused by another while the entry lives.
_contexts = {}


def is_device_array(x):
    """x is a pyopencl array (or shaped like one: base_data, offset and queue)."""
    return hasattr(x, "base_data") and hasattr(x, "offset") and hasattr(x, "queue")


def context_for(queue):
    """The clattn.Context on a pyopencl queue: made once per queue (the queue's own cl_context, device and
    queue, retained by the library), the same object afterwards."""
    cl = _sys.modules.get("pyopencl")
    if cl is None or not isinstance(queue, cl.CommandQueue):
        raise TypeError(f"queue must be a pyopencl.CommandQueue, not {type(queue).__name__}")
    entry = _contexts.get(queue.int_ptr)
    if entry is None:
        from ._clattn import Context  # (the extension's type: clattn.Context)

        props = queue.properties
        if props & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE:
            raise ArgumentError("the queue runs out of order: clattn orders its work by an in-order queue (make the "
                                "queue without OUT_OF_ORDER_EXEC_MODE_ENABLE)")
        entry = _contexts[queue.int_ptr] = (queue, Context(_cl_handles=(queue.context.int_ptr, queue.device.int_ptr,
                                                                        queue.int_ptr)))
    return entry[1]


def queue_of(context):
    """The pyopencl CommandQueue of a clattn.Context's own queue (pyopencl imported on first use)."""
    import pyopencl as cl

    return cl.CommandQueue.from_int_ptr(context._cl_handles[2], retain=True)


def call_context(context, array):
    """A call's Context: the one given, else the one of its first device array's queue."""
    if context is not None:
        return context
    queue = array.queue
    if queue is None:
        raise ArgumentError("a device array without a queue: give context= (a clattn.Context on its OpenCL context)")
    return context_for(queue)


def empty(like, shape, dtype=None):
    """A new device array on like's queue: like's dtype, or float32 (dtype "float32")."""
    array = _sys.modules["pyopencl.array"]
    return array.empty(like.queue, shape, dtype="float32" if dtype == "float32" else like.dtype)


def zeros(like, shape):
    return _sys.modules["pyopencl.array"].zeros(like.queue, shape, dtype=like.dtype)


def refuse_copy(name, what):
    """A broadcast or layout the call could only make as a copy: refused for a device array (it would pass
    through the host or cost a copy the caller did not ask for)."""
    raise ArgumentError(f"{name}: {what} would need an expanded copy; with pyopencl arrays give it in full "
                        "(clattn reads device arrays in place)")


def before(context, arrays):
    """Work queued on the arrays' own queues, when not on the context's, finished before the call: the call
    reads or writes them on the context's queue (one queue: its order suffices, nothing is waited for)."""
    own = context._cl_handles[2]
    for a in arrays:  # (a host array among them: the call refuses the mix)
        if is_device_array(a) and a.queue is not None and a.queue.int_ptr != own:
            a.queue.finish()  # (all of that queue's work: an array records the events of pyopencl's own
            #                     operations only, not those of the application's kernels)


def after(context, arrays):
    """An event of the call's end on each of its arrays kept on another queue — outputs it writes, inputs it
    may still be reading —, so that pyopencl's operations on them (which wait for an array's events) follow
    the call."""
    own = context._cl_handles[2]
    others = [a for a in arrays if is_device_array(a) and a.queue is not None and a.queue.int_ptr != own]
    if others:
        import pyopencl as cl

        marker = cl.enqueue_marker(queue_of(context))
        for a in others:
            a.add_event(marker)
