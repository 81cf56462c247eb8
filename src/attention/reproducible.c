/* Reproducible attention: which calls take it, and what it covers; the fused kernel in its exact build
 * (cl/flash_attention.cl, -DCLATTN_EXACT=1) computes it, whatever the device's tuning. */
#include "reproducible.h"

#include "context.h"
#include "error.h"
#include "fused.h"

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
                     "CLATTN_REPRODUCIBLE) does not cover %s yet: it covers the attention calls (dense, ragged, paged, "
                     "device groups, cascades of whole-block prefixes), clattn_sdpa_backward and the layer with its "
                     "backward pass", what);
}

clattn_status reproducible_run(clattn_context *ctx, const sdpa_shape *s, const kv_layout *lay, tensor_view q,
                               tensor_view k, tensor_view v, cl_mem mask, tensor_view out, cl_mem lse)
{
    if (dtype_is_token(s->types.k) || dtype_is_token(s->types.v))
        return reproducible_refused(ctx, "K/V in a token format (KIVI)");
    if (s->qk_dim > FUSED_MAX_HEAD || s->v_dim > FUSED_MAX_HEAD)
        return reproducible_refused(ctx, "head sizes above 256");
    /* Mesa's llvmpipe (rusticl) ends a work-item's loops after 65535 iterations in all, and the row's result is
     * then wrong: the exact build's row passes that at about keys × (2.3·d + 10) for Dqk = Dv = d (measured, d 16
     * to 128). Refused there, with a margin, rather than wrong. */
    const double iterations = (double)s->kv_len * (1.5 * (double)(s->qk_dim + s->v_dim) + 16.0);
    if (strstr(ctx->caps.platform, "rusticl") && iterations > 60000.0)
        return set_error(ctx, CLATTN_ERROR_UNSUPPORTED_DEVICE, "reproducible arithmetic on %s: a row of %zu keys "
                         "of head sizes %zu and %zu passes Mesa llvmpipe's limit of 65535 loop iterations a "
                         "work-item (keys × (1.5·(Dqk + Dv) + 16) at most 60000 there)", ctx->caps.name, s->kv_len,
                         s->qk_dim, s->v_dim);
    return fused_run_exact(ctx, s, lay, q, k, v, mask, out, lse);
}
