/* clattn_merge: combine partial results (outputs and log-sum-exps over disjoint key sets) into the result
 * over their union, by a chain of two-way merges on the device (cl/merge.cl), the sinks in the last. */

#include "context.h"
#include "dtype.h"
#include "error.h"
#include "fault.h"
#include "launch.h"
#include "program.h"
#include "scratch.h"
#include "validate.h"

#include <stdio.h>
#include <stdlib.h>


/* One program per storage-type triple (params.c: family_merge): part a's, part b's and the output's (a
 * chain of merges keeps its running result in float, so that only the last pass rounds). */
static clattn_status merge_kernel(clattn_context *ctx, clattn_dtype a, clattn_dtype b, clattn_dtype o,
                                  const family_build **out)
{
    char options[TYPES_OPTIONS_MAX];
    tensor_types_options((tensor_types){.q = a, .k = b, .v = CLATTN_FLOAT32, .o = o}, options, sizeof options);
    return program_get(ctx, &family_merge, options, 0, 0, NULL, out);
}

/* One part's output buffer and storage type. */
typedef struct typed_mem {
    cl_mem mem;
    clattn_dtype type;
} typed_mem;

static clattn_status merge_launch(clattn_context *ctx, const sdpa_shape *s, typed_mem out_a, cl_mem lse_a,
                                  typed_mem out_b, cl_mem lse_b, cl_mem sinks, typed_mem out, cl_mem lse)
{
    const family_build *fb;
    clattn_status st = merge_kernel(ctx, out_a.type, out_b.type, out.type, &fb);
    if (st != CLATTN_SUCCESS)
        return st;
    const merge_params p = {out_a.mem, lse_a, out_b.mem, lse_b, sinks, s->heads, s->q_len, s->lse_elems, s->v_dim,
                            out.mem,   lse};
    kernel_args a = kernel_args_begin(fb->kernels[0]);
    params_bind(&a, &params_merge, &p, fb->features);
    const size_t global[1] = {s->lse_elems};
    return kernel_launch_auto(ctx, &a, "merge", 1, global);
}

/* The sinks, uploaded to a temporary buffer of this call (a few bytes; released when the call's work is
 * done by the runtime's reference counting). */
static clattn_status upload_sinks(clattn_context *ctx, const sdpa_shape *s, cl_mem *out)
{
    *out = NULL;
    if (!s->desc.sinks)
        return CLATTN_SUCCESS;
    cl_int err = INJECT_FAULT(CL_MEM_OBJECT_ALLOCATION_FAILURE);
    if (err == CL_SUCCESS)
        *out = clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, s->heads * sizeof(float),
                              (void *)s->desc.sinks, &err);
    if (err == CL_SUCCESS)
        return CLATTN_SUCCESS;
    *out = NULL;
    return cl_error(ctx, err, "clCreateBuffer(sinks)");
}

clattn_status clattn_merge(clattn_context *ctx, const clattn_sdpa_desc *desc, size_t parts, const cl_mem *outs,
                           const cl_mem *lses, cl_mem out, cl_mem lse)
{
    clattn_status st = check_context(ctx);
    clattn_sdpa_desc d;
    sdpa_shape s;
    if (st != CLATTN_SUCCESS || (st = sdpa_desc_read(ctx, desc, &d)) != CLATTN_SUCCESS)
        return st;
    /* Only the shape of the outputs matters: no Q or K here, so v_dim stands in for an unset qk_dim. */
    if (d.qk_dim == 0)
        d.qk_dim = d.v_dim;
    if (d.kv_len == 0)
        d.kv_len = 1;
    if ((st = sdpa_shape_resolve(ctx, &d, &s)) != CLATTN_SUCCESS)
        return st;
    if (parts == 0)
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "clattn_merge: parts is 0");
    if (!outs || !lses)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_merge: %s is NULL", !outs ? "outs" : "lses");
    for (size_t p = 0; p < parts; p++) {
        char name[2][32];
        snprintf(name[0], sizeof name[0], "outs[%zu]", p);
        snprintf(name[1], sizeof name[1], "lses[%zu]", p);
        if ((st = check_tensor(ctx, outs[p], s.out_elems, s.types.o, name[0])) != CLATTN_SUCCESS ||
            (st = check_buffer(ctx, lses[p], s.lse_elems, sizeof(float), name[1])) != CLATTN_SUCCESS)
            return st;
        /* Later parts are read after the first pass has written out and lse. */
        if (p > 0 && (outs[p] == out || lses[p] == lse || lses[p] == out || outs[p] == lse))
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                             "clattn_merge: out and lse may be the buffers of part 0 only, not of part %zu", p);
    }
    if ((st = check_tensor(ctx, out, s.out_elems, s.types.o, "out")) != CLATTN_SUCCESS ||
        (st = check_buffer(ctx, lse, s.lse_elems, sizeof(float), "lse")) != CLATTN_SUCCESS)
        return st;
    if (out == lse)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "clattn_merge: out and lse are the same buffer");
    /* The running result: `out` itself for float outputs; else a float temporary until the last pass. */
    const clattn_dtype t = s.types.o;
    const typed_mem final = {out, t};
    typed_mem running = final;
    if (t != CLATTN_FLOAT32 && parts > 2) {
        running.type = CLATTN_FLOAT32;
        if ((st = scratch_get(ctx, SCRATCH_WIDE_O, s.out_elems * sizeof(float), &running.mem)) != CLATTN_SUCCESS)
            return st;
    }
    cl_mem sinks;
    if ((st = upload_sinks(ctx, &s, &sinks)) != CLATTN_SUCCESS)
        return st;
    /* out, lse = part 0 ⊕ part 1; then out, lse ⊕= part p; the sinks join the last pass only. */
    for (size_t p = 1; p <= parts - 1 || p == 1; p++) {
        const bool first = p == 1, last = p >= parts - 1;
        const typed_mem a = first ? (typed_mem){outs[0], t} : running, b = {p < parts ? outs[p] : NULL, t};
        st = merge_launch(ctx, &s, a, first ? lses[0] : lse, b, p < parts ? lses[p] : NULL, last ? sinks : NULL,
                          last ? final : running, lse);
        if (st != CLATTN_SUCCESS)
            break;
    }
    if (sinks)
        clReleaseMemObject(sinks);
    return st;
}
