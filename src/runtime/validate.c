/* Argument and size checks shared by every entry point. Each failure records which argument and
 * which size was wrong, so that the caller can tell without a debugger. */
#include "validate.h"

#include "context.h"
#include "error.h"
#include "versioned.h"
#include "versioned_rule.h" /* SDPA_DESC_SIZE_0_2 */

#include <stdarg.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

bool size_mul(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return false;
    *out = a * b;
    return true;
}

bool size_product(size_t *out, size_t n, ...)
{
    va_list ap;
    va_start(ap, n);
    size_t acc = 1;
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        size_t factor = va_arg(ap, size_t);
        if (ok && !size_mul(acc, factor, &acc))
            ok = false;
    }
    va_end(ap);
    if (ok)
        *out = acc;
    return ok;
}

clattn_status check_context(clattn_context *ctx)
{
    if (!ctx)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "the context is NULL");
    /* A call's error and warning are its own: nothing of an earlier call is read as this one's. */
    clear_error(ctx);
    clear_warning(ctx);
    return CLATTN_SUCCESS;
}

clattn_status check_buffer(clattn_context *ctx, cl_mem buf, size_t elems, size_t elem_size, const char *name)
{
    if (!buf)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "buffer %s is NULL", name);
    size_t need;
    if (!size_mul(elems, elem_size, &need))
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "%s: %zu elements overflow size_t bytes", name, elems);
    size_t have = 0;
    cl_int err = clGetMemObjectInfo(buf, CL_MEM_SIZE, sizeof have, &have, NULL);
    if (err != CL_SUCCESS)
        return set_error(ctx, (clattn_status)err, "clGetMemObjectInfo(%s) failed: %s", name,
                         clattn_status_string((clattn_status)err));
    if (have < need)
        return set_error(ctx, CLATTN_ERROR_BUFFER_TOO_SMALL, "buffer %s holds %zu bytes but its shape needs %zu",
                         name, have, need);
    return CLATTN_SUCCESS;
}

clattn_status check_tensor(clattn_context *ctx, cl_mem buf, size_t elems, clattn_dtype dtype, const char *name)
{
    size_t bytes;
    if (dtype_is_token(dtype))
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "%s is %s, a token format (groups along a head's rows), which only dense K/V tensors and "
                         "caches and paged pools hold: this call takes none", name, clattn_dtype_name(dtype));
    if (!dtype_span_bytes(dtype, elems, &bytes))
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "%s: %zu values of %s overflow size_t bytes", name, elems,
                         clattn_dtype_name(dtype));
    return check_buffer(ctx, buf, bytes, 1, name);
}

clattn_status check_kv_tensor(clattn_context *ctx, cl_mem buf, clattn_dtype dtype, size_t heads, size_t rows,
                              size_t dim, const char *name)
{
    size_t bytes;
    if (!dtype_tensor_bytes(dtype, heads, rows, dim, &bytes))
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "%s: %zu heads of %zu rows of %zu values of %s overflow size_t bytes",
                         name, heads, rows, dim, clattn_dtype_name(dtype));
    return check_buffer(ctx, buf, bytes, 1, name);
}

clattn_status check_scales(clattn_context *ctx, const sdpa_shape *s, size_t k_rows, size_t v_rows)
{
    clattn_status st = CLATTN_SUCCESS;
    if (s->k_scales)
        st = check_buffer(ctx, s->k_scales, k_rows, sizeof(float), "desc.k_scales");
    if (st == CLATTN_SUCCESS && s->v_scales)
        st = check_buffer(ctx, s->v_scales, v_rows, sizeof(float), "desc.v_scales");
    return st;
}

clattn_status latent_resolve(clattn_context *ctx, sdpa_shape *s, const char *who)
{
    /* (v_dim below qk_dim, never equal: a V forgotten in a call of equal head sizes stays an error) */
    if (s->v_dim >= s->qk_dim)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT,
                         "%s: v is NULL, which is MLA's latent form (the values the first v_dim columns of the keys): "
                         "it needs v_dim below qk_dim, not v_dim = %zu and qk_dim = %zu; give v otherwise", who,
                         s->v_dim, s->qk_dim);
    const clattn_dtype k = s->types.k;
    if (s->types.v != k)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "%s: without v (MLA's latent form) one cache holds keys and values: desc.v_dtype (%s) must be "
                         "desc.k_dtype (%s)", who, clattn_dtype_name(s->types.v), clattn_dtype_name(k));
    if (k != CLATTN_FLOAT32 && k != CLATTN_FLOAT16 && k != CLATTN_BFLOAT16 && k != CLATTN_INT8)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "%s: MLA's latent form takes a float32, float16, bfloat16 or int8 cache, not %s", who,
                         clattn_dtype_name(k));
    if (s->v_scales != s->k_scales) /* (int8: both given, sdpa_shape_resolve checked) */
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "%s: without v (MLA's latent form) the values are scaled by desc.k_scales: desc.v_scales "
                         "must be the same buffer", who);
    s->v_in_k = true;
    return CLATTN_SUCCESS;
}

/* Where a buffer's bytes lie: its root allocation and the range within it (a sub-buffer's origin). */
typedef struct mem_extent {
    cl_mem root;
    size_t begin, end;
} mem_extent;

static clattn_status mem_extent_of(clattn_context *ctx, const named_mem *m, mem_extent *e)
{
    cl_mem parent = NULL;
    size_t offset = 0, size = 0;
    cl_int err = clGetMemObjectInfo(m->mem, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL);
    if (err == CL_SUCCESS && parent)
        err = clGetMemObjectInfo(m->mem, CL_MEM_OFFSET, sizeof offset, &offset, NULL);
    if (err == CL_SUCCESS)
        err = clGetMemObjectInfo(m->mem, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err != CL_SUCCESS)
        return set_error(ctx, (clattn_status)err, "clGetMemObjectInfo(%s) failed: %s", m->name,
                         clattn_status_string((clattn_status)err));
    *e = (mem_extent){parent ? parent : m->mem, offset, offset + size};
    return CLATTN_SUCCESS;
}

static bool mem_extents_overlap(const mem_extent *a, const mem_extent *b)
{
    return a->root == b->root && a->begin < b->end && b->begin < a->end;
}

clattn_status check_no_overlap(clattn_context *ctx, const char *fn, const named_mem *outputs, size_t n_outputs,
                               const named_mem *inputs, size_t n_inputs)
{
    for (size_t o = 0; o < n_outputs; o++) {
        mem_extent out = {0};
        clattn_status st = outputs[o].mem ? mem_extent_of(ctx, &outputs[o], &out) : CLATTN_SUCCESS;
        if (st != CLATTN_SUCCESS)
            return st;
        /* Against the later outputs, then every input. */
        for (size_t j = o + 1; outputs[o].mem && j < n_outputs + n_inputs; j++) {
            const named_mem *other = j < n_outputs ? &outputs[j] : &inputs[j - n_outputs];
            mem_extent e = {0};
            if (!other->mem)
                continue;
            if ((st = mem_extent_of(ctx, other, &e)) != CLATTN_SUCCESS)
                return st;
            if (mem_extents_overlap(&out, &e))
                return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                                 "%s: %s and %s share memory (an output may not alias another output or an input)",
                                 fn, outputs[o].name, other->name);
        }
    }
    return CLATTN_SUCCESS;
}

clattn_status check_alloc(clattn_context *ctx, size_t elems, const char *name)
{
    size_t bytes;
    if (!size_mul(elems, sizeof(float), &bytes))
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "%s: %zu floats overflow size_t bytes", name, elems);
    if (bytes > ctx->caps.max_alloc)
        return set_error(ctx, CLATTN_ERROR_EXCEEDS_DEVICE_LIMIT,
                         "%s needs %zu bytes, more than the device's maximum allocation of %llu bytes", name,
                         bytes, (unsigned long long)ctx->caps.max_alloc);
    return CLATTN_SUCCESS;
}

clattn_status sdpa_desc_read(clattn_context *ctx, const clattn_sdpa_desc *desc, clattn_sdpa_desc *out)
{
    if (!desc)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "the descriptor is NULL");
    return versioned_copy(ctx, desc, sizeof *out, sizeof *out, SDPA_DESC_SIZE_0_2, "clattn_sdpa_desc",
                          "CLATTN_SDPA_DESC_INIT", out);
}

/* The generic checks of the descriptor's options, one per kind of call_options.def; each names the field
 * (`name`) and returns its status, or CLATTN_SUCCESS. */
#define POSITION_LIMIT ((long long)1 << 61)

static clattn_status check_OPT_DIM(clattn_context *ctx, size_t v, const char *name)
{
    return v == 0 ? set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "desc.%s is 0", name) : CLATTN_SUCCESS;
}

static clattn_status check_OPT_SCALE(clattn_context *ctx, float v, const char *name)
{
    return isinf(v) ? set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                                "desc.%s is infinite (CLATTN_SCALE_DEFAULT, a NaN, asks for 1/sqrt(qk_dim))", name)
                    : CLATTN_SUCCESS;
}

static clattn_status check_OPT_CAP(clattn_context *ctx, float v, const char *name)
{
    return !(v >= 0.0f) || isinf(v) || (v > 0.0f && v < FLT_MIN)
               ? set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.%s = %g must be 0 (off) or a finite value >= FLT_MIN",
                           name, (double)v)
               : CLATTN_SUCCESS;
}

static clattn_status check_OPT_KV_HEADS(clattn_context *ctx, size_t v, size_t heads, const char *name)
{
    const size_t kv_heads = v ? v : heads;
    return kv_heads > heads || heads % kv_heads != 0
               ? set_error(ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                           "desc.%s = %zu must divide desc.heads = %zu (each K/V head serves a group of query heads)",
                           name, kv_heads, heads)
               : CLATTN_SUCCESS;
}

/* `heads` finite values of a per-head host array (sinks, ALiBi slopes, logit scales), when given. */
static clattn_status check_OPT_PER_HEAD(clattn_context *ctx, const float *values, size_t heads, const char *name)
{
    for (size_t h = 0; values && h < heads; h++)
        if (!isfinite(values[h]))
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.%s[%zu] = %g is not finite", name, h,
                             (double)values[h]);
    return CLATTN_SUCCESS;
}

static clattn_status check_OPT_ENUM(clattn_context *ctx, unsigned v, unsigned limit, const char *name)
{
    return v > limit ? set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.%s has the unknown value %u", name, v)
                     : CLATTN_SUCCESS;
}

static clattn_status check_OPT_RESERVED(clattn_context *ctx, unsigned v, const char *name)
{
    return v != 0 ? set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.%s has the unknown value %u (must be 0)", name, v)
                  : CLATTN_SUCCESS;
}

static clattn_status check_OPT_DTYPE(clattn_context *ctx, clattn_dtype v, const char *name)
{
    return !dtype_valid(v) ? set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.%s has the unknown value %d", name, (int)v)
                           : CLATTN_SUCCESS;
}

/* (A negative value, cast to unsigned, is too big too.) */
static clattn_status check_OPT_ORIGIN(clattn_context *ctx, long long v, bool too_big, const char *name)
{
    return too_big
               ? set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.%s = %lld: an origin lies in 0..2^61", name, v)
               : CLATTN_SUCCESS;
}

/* How each kind is checked here: the masks by masks_resolve, the mods and the block mask by their binders
 * (they need the call's context and positions), the scales' buffers by check_types and check_scales. */
#define OPTION_CHECK_OPT_DIM(d, name, limit) check_OPT_DIM(ctx, (d)->name, #name)
#define OPTION_CHECK_OPT_DIM0(d, name, limit) CLATTN_SUCCESS
#define OPTION_CHECK_OPT_SIZE(d, name, limit) CLATTN_SUCCESS
#define OPTION_CHECK_OPT_KV_HEADS(d, name, limit) check_OPT_KV_HEADS(ctx, (d)->name, (d)->heads, #name)
#define OPTION_CHECK_OPT_SCALE(d, name, limit) check_OPT_SCALE(ctx, (d)->name, #name)
#define OPTION_CHECK_OPT_CAP(d, name, limit) check_OPT_CAP(ctx, (d)->name, #name)
#define OPTION_CHECK_OPT_PER_HEAD(d, name, limit) check_OPT_PER_HEAD(ctx, (d)->name, (d)->heads, #name)
#define OPTION_CHECK_OPT_ENUM(d, name, limit) check_OPT_ENUM(ctx, (unsigned)(d)->name, (unsigned)(limit), #name)
#define OPTION_CHECK_OPT_RESERVED(d, name, limit) check_OPT_RESERVED(ctx, (d)->name, #name)
#define OPTION_CHECK_OPT_DTYPE(d, name, limit) check_OPT_DTYPE(ctx, (d)->name, #name)
#define OPTION_CHECK_OPT_BUFFER(d, name, limit) CLATTN_SUCCESS
#define OPTION_CHECK_OPT_MASKS(d, name, limit) CLATTN_SUCCESS
#define OPTION_CHECK_OPT_MODS(d, name, limit) CLATTN_SUCCESS
#define OPTION_CHECK_OPT_BLOCK_MASK(d, name, limit) CLATTN_SUCCESS
#define OPTION_CHECK_OPT_ORIGIN(d, name, limit)                                                                      \
    check_OPT_ORIGIN(ctx, (long long)(d)->name, (unsigned long long)(d)->name > (unsigned long long)POSITION_LIMIT, #name)

/* Every option of the descriptor (call_options.def's CLATTN_OPTION and CLATTN_SDPA_OPTION rows), in the
 * table's order: the first failure. */
static clattn_status check_options(clattn_context *ctx, const clattn_sdpa_desc *desc)
{
    clattn_status st = CLATTN_SUCCESS;
#define CLATTN_OPTION(name, kind, type, def, limit, ...)                                                             \
    if (st == CLATTN_SUCCESS)                                                                                        \
        st = OPTION_CHECK_##kind(desc, name, limit);
#define CLATTN_SDPA_OPTION CLATTN_OPTION
#include "call_options.def"
#undef CLATTN_OPTION
#undef CLATTN_SDPA_OPTION
    return st;
}

/* Known storage formats (formats.def), the quantised ones only for K and V, each K and V of a block
 * format whole blocks per row, and row scales given exactly where the format asks for them (int8) or
 * allows them (FP8). */
static clattn_status check_types(clattn_context *ctx, const clattn_sdpa_desc *desc)
{
    const size_t v_dim = desc->v_dim ? desc->v_dim : desc->qk_dim;
    const struct {
        clattn_dtype type;
        const char *name;
        bool kv;
        cl_mem scales;
        const char *scales_name;
        size_t dim;
    } t[] = {
        {desc->q_dtype, "q_dtype", false, NULL, NULL, 0},
        {desc->k_dtype, "k_dtype", true, desc->k_scales, "k_scales", desc->qk_dim},
        {desc->v_dtype, "v_dtype", true, desc->v_scales, "v_scales", v_dim},
        {desc->out_dtype, "out_dtype", false, NULL, NULL, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const dtype_format *f = dtype_format_of(t[i].type);
        if (!f)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.%s has the unknown value %d", t[i].name,
                             (int)t[i].type);
        if (f->kv_only && !t[i].kv)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                             "desc.%s is %s, a quantised format, which only K and V (the caches) may have", t[i].name,
                             f->name);
        if (t[i].kv && f->tokens && t[i].dim % 4 != 0)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                             "desc.%s is %s, whose rows pack 4 channels together, but its rows hold %zu values (a "
                             "multiple of 4 is needed)", t[i].name, f->name, t[i].dim);
        if (t[i].kv && t[i].dim % f->block != 0)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                             "desc.%s is %s, whose blocks hold %u values, but its rows hold %zu (a multiple of %u is "
                             "needed)", t[i].name, f->name, f->block, t[i].dim, f->block);
        if (f->scales == ROW_SCALES_REQUIRED && !t[i].scales)
            return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "desc.%s is %s but desc.%s is NULL", t[i].name, f->name,
                             t[i].scales_name);
        if (f->scales == ROW_SCALES_NONE && t[i].scales_name && t[i].scales)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                             "desc.%s is given but desc.%s is %s, which has no row scales (int8 and FP8 have)",
                             t[i].scales_name, t[i].name, f->name);
    }
    return CLATTN_SUCCESS;
}

const char *quantised_kv_field(const clattn_sdpa_desc *desc)
{
    return dtype_kv_only(desc->k_dtype) ? "k_dtype" : dtype_kv_only(desc->v_dtype) ? "v_dtype" : NULL;
}

static bool reads_row_scales(clattn_dtype dtype, cl_mem scales)
{
    const dtype_format *f = dtype_format_of(dtype);
    return f && (f->scales == ROW_SCALES_REQUIRED || (f->scales == ROW_SCALES_OPTIONAL && scales));
}

const char *row_scaled_kv_field(const clattn_sdpa_desc *desc)
{
    return reads_row_scales(desc->k_dtype, desc->k_scales)   ? "k_dtype"
           : reads_row_scales(desc->v_dtype, desc->v_scales) ? "v_dtype"
                                                             : NULL;
}

clattn_status check_host_kv_types(clattn_context *ctx, const clattn_sdpa_desc *desc, bool no_quantised,
                                  const char *call)
{
    if (no_quantised && (dtype_is_token(desc->k_dtype) || dtype_is_token(desc->v_dtype)))
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "desc.%s is %s, a token format (groups along a head's rows): %s takes no such K/V (the "
                         "cl_mem calls over dense caches and paged pools read them)",
                         dtype_is_token(desc->k_dtype) ? "k_dtype" : "v_dtype",
                         clattn_dtype_name(dtype_is_token(desc->k_dtype) ? desc->k_dtype : desc->v_dtype), call);
    const char *field = no_quantised ? quantised_kv_field(desc) : row_scaled_kv_field(desc);
    if (!field)
        return CLATTN_SUCCESS;
    const char *type = clattn_dtype_name(strcmp(field, "k_dtype") == 0 ? desc->k_dtype : desc->v_dtype);
    return no_quantised ? set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                                    "desc.%s is %s: %s takes no quantised K/V (the cl_mem calls read them)", field,
                                    type, call)
                        : set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                                    "desc.%s is %s with row scales, which are a device buffer: %s takes K and V as "
                                    "host arrays in any other format", field, type, call);
}

/* Every SDPA dimension must be ≥ 1 and every tensor's element count must fit in size_t. */
clattn_status sdpa_shape_resolve(clattn_context *ctx, const clattn_sdpa_desc *desc, sdpa_shape *s)
{
    if (!desc)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "the descriptor is NULL");
    clattn_status st = check_options(ctx, desc);
    if (st == CLATTN_SUCCESS)
        st = check_types(ctx, desc);
    if (st != CLATTN_SUCCESS)
        return st;

    const size_t kv_heads = desc->kv_heads ? desc->kv_heads : desc->heads;
    s->batch = desc->batch;
    s->heads = desc->heads;
    s->q_starts = NULL; /* (a ragged call sets its own) */
    s->q_len = desc->q_len;
    s->kv_len = desc->kv_len;
    s->qk_dim = desc->qk_dim;
    s->v_dim = desc->v_dim ? desc->v_dim : desc->qk_dim;
    s->kv_heads = kv_heads;
    s->group = desc->heads / kv_heads;
    s->scale = isnan(desc->scale) ? (float)(1.0 / sqrt((double)desc->qk_dim)) : desc->scale;
    s->weights_output = desc->weights_output;
    s->softmax_double = desc->softmax_precision == CLATTN_SOFTMAX_DOUBLE;
    s->algorithm = desc->algorithm;
    s->types = (tensor_types){.q = desc->q_dtype, .k = desc->k_dtype, .v = desc->v_dtype, .o = desc->out_dtype};
    /* A dense K/V in a token format: a chunk per head of its kv_len rows (paged calls: the block's). */
    s->types.k_chunk = (chunk_shape){desc->kv_len, desc->qk_dim};
    s->types.v_chunk = (chunk_shape){desc->kv_len, desc->v_dim ? desc->v_dim : desc->qk_dim};
    s->k_scales = desc->k_scales;
    s->v_scales = desc->v_scales;
    s->v_in_k = false; /* (latent_resolve's) */
    s->desc = *desc;
    s->masks = (clattn_masks){0};
    s->mask_elems = 0;
    s->mask_elem_size = sizeof(float);
    s->mask_cols = s->kv_len;

    size_t bh, bkv;
    bool ok = size_mul(s->batch, s->heads, &bh) && size_mul(s->batch, s->kv_heads, &bkv) &&
              size_product(&s->q_elems, 3, bh, s->q_len, s->qk_dim) &&
              size_product(&s->k_elems, 3, bkv, s->kv_len, s->qk_dim) &&
              size_product(&s->v_elems, 3, bkv, s->kv_len, s->v_dim) &&
              size_product(&s->out_elems, 3, bh, s->q_len, s->v_dim) &&
              size_product(&s->weight_elems, 3, bh, s->q_len, s->kv_len) &&
              size_mul(bh, s->q_len, &s->lse_elems);
    /* Byte counts of the largest tensors must fit too; the rest are smaller than one of these. */
    size_t bytes;
    ok = ok && size_mul(s->weight_elems, sizeof(float), &bytes) && size_mul(s->q_elems, sizeof(float), &bytes) &&
         size_mul(s->k_elems, sizeof(float), &bytes) && size_mul(s->v_elems, sizeof(float), &bytes) &&
         size_mul(s->out_elems, sizeof(float), &bytes);
    if (!ok)
        return set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW,
                         "shape B=%zu H=%zu L=%zu S=%zu Dqk=%zu Dv=%zu: a tensor size overflows size_t",
                         s->batch, s->heads, s->q_len, s->kv_len, s->qk_dim, s->v_dim);
    return CLATTN_SUCCESS;
}

long long sdpa_query_position(const sdpa_shape *s, size_t b, size_t i)
{
    if (s->masks.query_offsets)
        return s->masks.query_offsets[b] + (long long)i;
    if (s->masks.causal == CLATTN_CAUSAL_BOTTOM_RIGHT)
        return (long long)i + (long long)s->kv_len - (long long)s->q_len;
    return (long long)i;
}
