/* `clattn devices --check`, storage types: the fused, decode and staged paths with Q, K, V and the output
 * stored as float16, bfloat16 and int8 (K/V) on the device under check — the part of the library that
 * leans on a driver's vload_half/vstore_half_rte and integer conversions, where drivers differ most.
 *
 * K and V go into their caches through clattn_kv_append from float rows (so the append's rounding and
 * int8 quantisation run on that device too), are read back, and the fp64 reference runs on those stored
 * values (int8: dequantised) and on the rounded Q; an output must be within the float32 tolerance plus
 * half a unit in the last place of its type. An int8 row must also hold its quantisation bound,
 * |q·scale − x| ≤ scale/2 with scale = max |x| / 127. */
#include "conformance.h"
#include "npy.h"
#include "reference.h"

#include <clattn/clattn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct type_combo {
    clattn_dtype q, k, v, out;
} type_combo;

/* Every type in every role it may take, roles of different types side by side: the first four rows of
 * the test suite's table (tests/test_dtypes.c). */
static const type_combo combos[] = {
    {CLATTN_FLOAT16, CLATTN_FLOAT16, CLATTN_FLOAT16, CLATTN_FLOAT16},
    {CLATTN_BFLOAT16, CLATTN_BFLOAT16, CLATTN_BFLOAT16, CLATTN_FLOAT16},
    {CLATTN_FLOAT32, CLATTN_INT8, CLATTN_INT8, CLATTN_FLOAT32},
    {CLATTN_FLOAT16, CLATTN_INT8, CLATTN_FLOAT16, CLATTN_BFLOAT16},
};

static const clattn_algorithm paths[] = {CLATTN_ALGORITHM_FUSED, CLATTN_ALGORITHM_DECODE, CLATTN_ALGORITHM_STAGED};

/* Head sizes as the suite's table (they are build options: the programs are the same); few heads and short
 * rows, because the oclgrind suite runs this check on a simulated device. */
enum { B = 2, H = 2, KVH = 1, D = 40, DV = 24 };

/* x rounded to `type` (nearest even) and widened back: the value a tensor of that type holds. */
static float stored_value(clattn_dtype type, float x)
{
    switch (type) {
    case CLATTN_FLOAT16: return npy_half_to_float(npy_float_to_half(x));
    case CLATTN_BFLOAT16: return npy_bf16_to_float_value(npy_float_to_bf16(x));
    default: return x;
    }
}

/* n floats as `type` (float32, float16, bfloat16) into bytes. */
static void narrow(clattn_dtype type, const float *x, size_t n, void *bytes)
{
    if (type == CLATTN_FLOAT32) {
        memcpy(bytes, x, n * sizeof *x);
        return;
    }
    uint16_t *u = bytes;
    for (size_t i = 0; i < n; i++)
        u[i] = type == CLATTN_FLOAT16 ? npy_float_to_half(x[i]) : npy_float_to_bf16(x[i]);
}

/* n values of `type` (not int8) widened into floats. */
static void widen(clattn_dtype type, const void *bytes, size_t n, float *x)
{
    if (type == CLATTN_FLOAT32) {
        memcpy(x, bytes, n * sizeof *x);
        return;
    }
    const uint16_t *u = bytes;
    for (size_t i = 0; i < n; i++)
        x[i] = type == CLATTN_FLOAT16 ? npy_half_to_float(u[i]) : npy_bf16_to_float_value(u[i]);
}

/* The device's buffers of one case, released together. */
enum { QB, KNEW, VNEW, KC, VC, KS, VS, OUT, LSE, NBUF };

typedef struct typed_case {
    clattn_context *ctx;
    cl_mem buf[NBUF];
    cl_int err;
} typed_case;

static cl_mem make_buffer(typed_case *t, const void *host, size_t bytes)
{
    if (t->err != CL_SUCCESS)
        return NULL;
    return clCreateBuffer(clattn_context_cl_context(t->ctx), CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0),
                          bytes, (void *)host, &t->err);
}

static clattn_status read_buffer(typed_case *t, cl_mem m, size_t bytes, void *host)
{
    return (clattn_status)clEnqueueReadBuffer(clattn_context_queue(t->ctx), m, CL_TRUE, 0, bytes, host, 0, NULL,
                                              NULL);
}

/* A cache read back as the floats it stands for: widened, or dequantised by its rows' scales (`rows` of
 * `dim` values). Each element must be the float row x's value rounded into the type; an int8 row must lie
 * within half a step of x. */
static bool stored_cache(typed_case *t, clattn_dtype type, cl_mem cache, cl_mem scales, const float *x, size_t rows,
                         size_t dim, float *out, const char *what, conformance_result *r)
{
    const size_t n = rows * dim;
    void *bytes = malloc(n * clattn_dtype_size(type));
    float *scale = malloc(rows * sizeof *scale);
    if (!bytes || !scale) {
        snprintf(r->message, sizeof r->message, "out of host memory");
        free(bytes);
        free(scale);
        return false;
    }
    clattn_status st = read_buffer(t, cache, n * clattn_dtype_size(type), bytes);
    if (st == CLATTN_SUCCESS && type == CLATTN_INT8)
        st = read_buffer(t, scales, rows * sizeof(float), scale);
    bool ok = st == CLATTN_SUCCESS;
    if (!ok)
        snprintf(r->message, sizeof r->message, "case %zu: reading %s back: %s", r->cases, what,
                 clattn_status_string(st));
    if (ok && type != CLATTN_INT8) {
        /* float32, float16, bfloat16: each element the float row's value rounded to nearest even */
        widen(type, bytes, n, out);
        for (size_t i = 0; ok && i < n; i++) {
            const float want = stored_value(type, x[i]);
            ok = out[i] == want || (isnan(out[i]) && isnan(want));
            if (!ok)
                snprintf(r->message, sizeof r->message, "case %zu: %s[%zu] appended as %s holds %g, not %g (%g "
                         "rounded to nearest even)", r->cases, what, i, clattn_dtype_name(type), (double)out[i],
                         (double)want, (double)x[i]);
        }
    }
    for (size_t row = 0; ok && type == CLATTN_INT8 && row < rows; row++) {
        float top = 0.0f;
        for (size_t i = 0; i < dim; i++)
            top = fmaxf(top, fabsf(x[row * dim + i]));
        /* The kernel divides by its own float scale; allow that scale a few float ulps of difference. */
        ok = fabsf(scale[row] - top / 127.0f) <= 4e-7f * top / 127.0f + 1e-30f;
        for (size_t i = 0; ok && i < dim; i++) {
            out[row * dim + i] = (float)((const int8_t *)bytes)[row * dim + i] * scale[row];
            ok = fabsf(out[row * dim + i] - x[row * dim + i]) <= 0.5f * scale[row] * (1.0f + 1e-4f);
        }
        if (!ok)
            snprintf(r->message, sizeof r->message, "case %zu: int8 %s row %zu: scale %g, max |x| %g: not within "
                     "half a step of its float row", r->cases, what, row, (double)scale[row], (double)top);
    }
    free(bytes);
    free(scale);
    return ok;
}

/* One combination on one path: false (and r->message) on the first failure. */
static bool run_typed(clattn_context *ctx, const type_combo *c, clattn_algorithm path, uint64_t *seed,
                      conformance_result *r)
{
    /* Keys enough for several of the fused kernel's key tiles (64 on CPUs) and for the decode kernel to
     * split them (at least 256 keys a split). */
    const size_t L = path == CLATTN_ALGORITHM_FUSED ? 13 : path == CLATTN_ALGORITHM_DECODE ? 2 : 7;
    const size_t S = path == CLATTN_ALGORITHM_DECODE ? 600 : path == CLATTN_ALGORITHM_FUSED ? 150 : 41;
    const size_t nq = (size_t)B * H * L * D, nk = (size_t)B * KVH * S * D, nv = (size_t)B * KVH * S * DV;
    const size_t no = (size_t)B * H * L * DV, nl = (size_t)B * H * L, rows = (size_t)B * KVH * S;
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = path == CLATTN_ALGORITHM_STAGED  ? CLATTN_CAUSAL_NONE
                   : path == CLATTN_ALGORITHM_DECODE ? CLATTN_CAUSAL_BOTTOM_RIGHT
                                                     : CLATTN_CAUSAL_TOP_LEFT;
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = B;
    d.heads = H;
    d.kv_heads = KVH;
    d.q_len = L;
    d.kv_len = S;
    d.qk_dim = D;
    d.v_dim = DV;
    d.masks = &masks;
    d.algorithm = path;
    d.q_dtype = c->q;
    d.k_dtype = c->k;
    d.v_dtype = c->v;
    d.out_dtype = c->out;

    /* floats: Q, K and V as drawn, then Q as stored, K and V as stored, the output, the lse; the bytes
     * of Q and of the output in their types; the reference. */
    float *f = malloc((2 * nq + 2 * (nk + nv) + no + nl) * sizeof *f);
    void *q_bytes = malloc(nq * sizeof(float)), *out_bytes = malloc(no * sizeof(float));
    size_t *zero = calloc(B, sizeof *zero);
    double *ref = malloc((no + nl) * sizeof *ref);
    if (!f || !q_bytes || !out_bytes || !zero || !ref) {
        snprintf(r->message, sizeof r->message, "out of host memory");
        free(f), free(q_bytes), free(out_bytes), free(zero), free(ref);
        return false;
    }
    float *q = f, *k = q + nq, *v = k + nk, *q_st = v + nv, *k_st = q_st + nq, *v_st = k_st + nk;
    float *out = v_st + nv, *lse = out + no;
    conformance_fill(q, nq + nk + nv, seed, false);
    for (size_t i = 0; i < nq; i++)
        q_st[i] = stored_value(c->q, q[i]);
    narrow(c->q, q, nq, q_bytes);

    typed_case t = {ctx, {0}, CL_SUCCESS};
    const size_t ksize = clattn_dtype_size(c->k), vsize = clattn_dtype_size(c->v);
    t.buf[QB] = make_buffer(&t, q_bytes, nq * clattn_dtype_size(c->q));
    t.buf[KNEW] = make_buffer(&t, k, nk * sizeof(float));
    t.buf[VNEW] = make_buffer(&t, v, nv * sizeof(float));
    t.buf[KC] = make_buffer(&t, NULL, nk * ksize);
    t.buf[VC] = make_buffer(&t, NULL, nv * vsize);
    if (c->k == CLATTN_INT8)
        t.buf[KS] = make_buffer(&t, NULL, rows * sizeof(float));
    if (c->v == CLATTN_INT8)
        t.buf[VS] = make_buffer(&t, NULL, rows * sizeof(float));
    t.buf[OUT] = make_buffer(&t, NULL, no * clattn_dtype_size(c->out));
    t.buf[LSE] = make_buffer(&t, NULL, nl * sizeof(float));
    clattn_status st = (clattn_status)t.err;
    /* what failed when it is not one of clattn's calls (which leave their detail in clattn_last_error) */
    const char *failed = st != CLATTN_SUCCESS ? "creating buffers" : NULL;
    d.k_scales = t.buf[KS];
    d.v_scales = t.buf[VS];
    clattn_sdpa_desc append = d;
    append.q_dtype = CLATTN_FLOAT32; /* the new rows are float */
    if (st == CLATTN_SUCCESS)
        st = clattn_kv_append(ctx, &append, zero, S, t.buf[KNEW], t.buf[VNEW], t.buf[KC], t.buf[VC]);
    if (st == CLATTN_SUCCESS)
        st = clattn_sdpa(ctx, &d, t.buf[QB], t.buf[KC], t.buf[VC], NULL, t.buf[OUT], NULL, t.buf[LSE]);
    if (st == CLATTN_SUCCESS) {
        st = read_buffer(&t, t.buf[OUT], no * clattn_dtype_size(c->out), out_bytes);
        if (st == CLATTN_SUCCESS)
            st = read_buffer(&t, t.buf[LSE], nl * sizeof(float), lse);
        failed = "reading the output back";
    }
    bool ok = st == CLATTN_SUCCESS;
    if (!ok)
        snprintf(r->message, sizeof r->message, "case %zu: %s: %s", r->cases, clattn_status_string(st),
                 failed ? failed : clattn_last_error(ctx));
    ok = ok && stored_cache(&t, c->k, t.buf[KC], t.buf[KS], k, rows, D, k_st, "K", r) &&
         stored_cache(&t, c->v, t.buf[VC], t.buf[VS], v, rows, DV, v_st, "V", r);
    if (ok) {
        widen(c->out, out_bytes, no, out);
        ref_sdpa(&d, q_st, k_st, v_st, NULL, ref, NULL, ref + no);
        ok = conformance_compare("typed out", out, ref, no, c->out, &r->typed_max_error, r) &&
             conformance_compare("typed lse", lse, ref + no, nl, CLATTN_FLOAT32, &r->typed_max_error, r);
    }
    for (int i = 0; i < NBUF; i++)
        if (t.buf[i])
            clReleaseMemObject(t.buf[i]);
    free(f), free(q_bytes), free(out_bytes), free(zero), free(ref);
    return ok;
}

bool conformance_run_types(clattn_context *ctx, uint64_t *seed, conformance_result *r)
{
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++)
        for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
            if (!run_typed(ctx, &combos[i], paths[p], seed, r))
                return false;
            r->cases++;
            r->typed_cases++;
        }
    return true;
}
