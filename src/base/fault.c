/* Test-only failure injection and object counting, compiled only with -Dfault_injection=true (never in
 * a release).
 *
 * Failures: every OpenCL allocation, enqueue and CLBlast call of the library is a numbered point, and
 * the point armed by clattn__fault_arm(N) fails as a device out of memory or resources would (or with
 * the code given to clattn__fault_arm_code). Tests walk N over every point of a call to prove that each
 * failure is reported, leaks nothing and leaves the context usable.
 *
 * Objects: the library is linked with `-Wl,--wrap=` for every OpenCL call that creates, retains or
 * releases an object (meson.build lists them), so its calls land here and are counted per kind before
 * reaching the runtime. A leaked cl_mem, cl_program or cl_kernel then shows as a count that does not
 * return to its baseline — which LeakSanitizer cannot see, since the runtime owns that memory. */
#include "fault.h"

#include "clattn/clattn.h"

#include <stdatomic.h>

static atomic_ulong armed_point, points_passed;
static atomic_int armed_code;

/* Arm point n (counting from 1 after this call); 0 disarms. Resets the count. */
CLATTN_API void clattn__fault_arm(unsigned long n);
/* The same, failing with `code` (an OpenCL error) instead of the point's own. */
CLATTN_API void clattn__fault_arm_code(unsigned long n, int code);
/* How many points have been passed since the last clattn__fault_arm. */
CLATTN_API unsigned long clattn__fault_points(void);

void clattn__fault_arm_code(unsigned long n, int code)
{
    atomic_store(&points_passed, 0);
    atomic_store(&armed_code, code);
    atomic_store(&armed_point, n);
}

void clattn__fault_arm(unsigned long n) { clattn__fault_arm_code(n, CL_SUCCESS); }

unsigned long clattn__fault_points(void) { return atomic_load(&points_passed); }

int fault_point_result(int code)
{
    unsigned long n = atomic_fetch_add(&points_passed, 1) + 1;
    if (n != atomic_load(&armed_point))
        return CL_SUCCESS;
    const int chosen = atomic_load(&armed_code);
    return chosen != CL_SUCCESS ? chosen : code;
}

/* ---- a device without double precision ---------------------------------------------------------- */

static atomic_int hide_fp64;

/* Non-zero: contexts created from now on take their device for one without cl_khr_fp64. */
CLATTN_API void clattn__fault_hide_fp64(int hide);

void clattn__fault_hide_fp64(int hide) { atomic_store(&hide_fp64, hide != 0); }

bool fault_hides_fp64(void) { return atomic_load(&hide_fp64) != 0; }

/* ---- live OpenCL objects made by the library ---------------------------------------------------- */

/* Kinds, in the order of clattn__fault_live_objects' result. */
enum { OBJ_MEM, OBJ_PROGRAM, OBJ_KERNEL, OBJ_CONTEXT, OBJ_QUEUE, OBJ_KINDS };
static atomic_long live[OBJ_KINDS];

/* References the library holds now, of one kind (0 mem objects, 1 programs, 2 kernels, 3 contexts,
 * 4 command queues): creations and retains minus releases, counted only when they succeed. */
CLATTN_API long clattn__fault_live_objects(int kind);

long clattn__fault_live_objects(int kind) { return kind >= 0 && kind < OBJ_KINDS ? atomic_load(&live[kind]) : -1; }

static void *counted(int kind, void *object)
{
    if (object)
        atomic_fetch_add(&live[kind], 1);
    return object;
}

static cl_int counted_change(int kind, cl_int err, long by)
{
    if (err == CL_SUCCESS)
        atomic_fetch_add(&live[kind], by);
    return err;
}

/* The wrapped entry points: __real_X is the runtime's X, __wrap_X what the library's calls reach. */
#define WRAP_CREATE(kind, type, name, params, args)                                                              \
    type __real_##name params;                                                                                  \
    type __wrap_##name params;                                                                                  \
    type __wrap_##name params { return (type)counted(kind, __real_##name args); }
#define WRAP_CHANGE(kind, by, name, type)                                                                       \
    cl_int __real_##name(type object);                                                                          \
    cl_int __wrap_##name(type object);                                                                          \
    cl_int __wrap_##name(type object) { return counted_change(kind, __real_##name(object), by); }

WRAP_CREATE(OBJ_MEM, cl_mem, clCreateBuffer,
            (cl_context c, cl_mem_flags f, size_t size, void *host, cl_int *err), (c, f, size, host, err))
WRAP_CREATE(OBJ_PROGRAM, cl_program, clCreateProgramWithSource,
            (cl_context c, cl_uint n, const char **src, const size_t *len, cl_int *err), (c, n, src, len, err))
WRAP_CREATE(OBJ_PROGRAM, cl_program, clCreateProgramWithBinary,
            (cl_context c, cl_uint n, const cl_device_id *dev, const size_t *len, const unsigned char **bin,
             cl_int *status, cl_int *err),
            (c, n, dev, len, bin, status, err))
WRAP_CREATE(OBJ_KERNEL, cl_kernel, clCreateKernel, (cl_program p, const char *name, cl_int *err), (p, name, err))
WRAP_CREATE(OBJ_CONTEXT, cl_context, clCreateContext,
            (const cl_context_properties *props, cl_uint n, const cl_device_id *dev,
             void(CL_CALLBACK *notify)(const char *, const void *, size_t, void *), void *user, cl_int *err),
            (props, n, dev, notify, user, err))
WRAP_CREATE(OBJ_QUEUE, cl_command_queue, clCreateCommandQueue,
            (cl_context c, cl_device_id d, cl_command_queue_properties props, cl_int *err), (c, d, props, err))

WRAP_CHANGE(OBJ_MEM, -1, clReleaseMemObject, cl_mem)
WRAP_CHANGE(OBJ_PROGRAM, -1, clReleaseProgram, cl_program)
WRAP_CHANGE(OBJ_KERNEL, -1, clReleaseKernel, cl_kernel)
WRAP_CHANGE(OBJ_CONTEXT, 1, clRetainContext, cl_context)
WRAP_CHANGE(OBJ_CONTEXT, -1, clReleaseContext, cl_context)
WRAP_CHANGE(OBJ_QUEUE, 1, clRetainCommandQueue, cl_command_queue)
WRAP_CHANGE(OBJ_QUEUE, -1, clReleaseCommandQueue, cl_command_queue)
