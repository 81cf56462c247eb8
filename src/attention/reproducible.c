/* Reproducible attention: a work-item a query row (cl/reproducible.cl), launched the same way whatever the
 * device's tuning, so that nothing but the inputs decides a row's bits. */
#include "reproducible.h"

#include "context.h"
#include "error.h"
#include "fused.h"
#include "masks.h"
#include "program.h"

#include <stdio.h>
#include <string.h>

bool reproducible_call(const clattn_context *ctx, const sdpa_shape *s)
{
    return reproducible_desc(ctx, &s->desc);
}

bool reproducible_desc(const clattn_context *ctx, const clattn_sdpa_desc *d)
{
    return d->arithmetic == CLATTN_ARITHMETIC_REPRODUCIBLE || ctx->options.reproducible;
}

clattn_status reproducible_refused(clattn_context *ctx, const char *what)
{
    return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "reproducible arithmetic (desc.arithmetic or "
                     "CLATTN_REPRODUCIBLE) does not cover %s yet: it covers the forward calls", what);
}

clattn_status reproducible_run(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q,
                               tensor_view k, tensor_view v, cl_mem mask, tensor_view out, cl_mem lse)
{
    static const kv_layout dense = {NULL, NULL, NULL, 0, 0, NULL, 0, 0};
    if (!lay)
        lay = &dense;
    if (dtype_kv_only(s->types.k) && s->types.k != CLATTN_INT8)
        return reproducible_refused(ctx, "K/V in a block or FP8 format");
    if (dtype_kv_only(s->types.v) && s->types.v != CLATTN_INT8)
        return reproducible_refused(ctx, "K/V in a block or FP8 format");
    /* Mesa's llvmpipe (rusticl) ends a work-item's loops after 65535 iterations in all, and the row's result
     * is then wrong (measured: rows of keys × (Dqk + Dv) past it); refused there rather than wrong. */
    const double iterations = (double)s->kv_len * (double)(s->qk_dim + 2 * s->v_dim + 1);
    if (strstr(ctx->caps.platform, "rusticl") && iterations > 60000.0)
        return set_error(ctx, CLATTN_ERROR_UNSUPPORTED_DEVICE, "reproducible arithmetic on %s: a row of %zu keys "
                         "of head sizes %zu and %zu passes Mesa llvmpipe's limit of 65535 loop iterations a "
                         "work-item (keys × (Dqk + 2·Dv + 1) at most 60000 there)", ctx->caps.name, s->kv_len,
                         s->qk_dim, s->v_dim);
    device_masks masks;
    clattn_status st = masks_upload(ctx, s, mask, &masks);
    if (st != CLATTN_SUCCESS)
        return st;
    char options[TYPES_OPTIONS_MAX + 64], types[TYPES_OPTIONS_MAX];
    tensor_types_options(s->types, types, sizeof types);
    snprintf(options, sizeof options, "-DDK=%zu -DDV=%zu%s", s->qk_dim, s->v_dim, types); /* (no relaxed math) */
    const family_build *fb;
    if ((st = program_get(ctx, &family_reproducible, options, 0, call_features(s) | layout_features(lay),
                          call_mods(s), &fb)) != CLATTN_SUCCESS)
        return st;
    flash_params p = fused_params(s, lay, q, k, v, out, lse, masks.sinks); /* (tiles NULL: a row a work-item) */
    PARAMS_SET_MASKS(flash_params, &p, &masks);
    kernel_args a = kernel_args_begin(fb->kernels[0]);
    params_bind(&a, &params_reproducible, &p, fb->features);
    /* Dim 0 the packed rows of a (batch, K/V head), in groups of up to 64 work-items (the kernel's limit
     * permitting); dim 1 the pairs, one a group row. The group size changes no row's arithmetic. */
    size_t limit = 64;
    const cl_int err = clGetKernelWorkGroupInfo(fb->kernels[0], ctx->device, CL_KERNEL_WORK_GROUP_SIZE,
                                                sizeof limit, &limit, NULL);
    if (err != CL_SUCCESS)
        return cl_error(ctx, err, "querying the reproducible kernel's work-group limit");
    size_t local0 = 64;
    while (local0 > 1 && local0 > limit)
        local0 /= 2;
    const size_t rows = s->q_len * s->group;
    const size_t local[2] = {local0, 1}, global[2] = {(rows + local0 - 1) / local0 * local0, s->batch * s->kv_heads};
    return kernel_launch(ctx, &a, "reproducible attention", 2, global, local);
}
