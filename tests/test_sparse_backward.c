/*
 * The gradients of top-k sparse attention (clattn_sdpa_sparse_backward) on every device, against the fp64
 * reference backward (ref_sdpa_backward) given the same selection as an additive mask — log(count) where a row
 * selected a key count times (a key selected twice weighs twice), −inf where it did not:
 *  1. odd shapes (L 37, S 150, D 40 below its padding, Dv 24), GQA 6/2 (dK, dV summed over a group), key
 *     lengths, −1 padding, positions past a sequence's keys, keys selected twice in a row, a key every row
 *     selects (the longest list), a row that selects nothing (zero gradient): plain; sinks (their gradients),
 *     soft-capping and a scale; float16 Q, K, V; bfloat16 K and V — the forward run first (out, lse);
 *  2. twice: the same bits;
 *  3. refusals naming the argument, nothing written: no lse, a mask, top_k 0, an int8 K, a gradient sharing
 *     memory with q or with the indices, indices too small.
 */
#include "test_util.h"

#include <math.h>
#include <string.h>

enum { B = 2, H = 6, KVH = 2, L = 37, S = 150, D = 40, DV = 24, TOP = 48 };
static const size_t lengths[B] = {150, 97};

typedef struct {
    int indices[B * L * TOP];
    float q[B * H * L * D], k[B * KVH * S * D], v[B * KVH * S * DV], dout[B * H * L * DV];
    float mask[B * H * L * S]; /* the selection as the reference takes it: log(count) or −inf */
} sparse_grad_data;

/* Each row's keys: random positions, some given twice, −1 padding, some past the length, key 3 in every row
 * (the hot key); row (1, L − 1) selects nothing it can see. */
static void make(sparse_grad_data *x, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    tu_fill_uniform(x->q, sizeof x->q / sizeof x->q[0], 1.0f, seed + 1);
    tu_fill_uniform(x->k, sizeof x->k / sizeof x->k[0], 1.0f, seed + 2);
    tu_fill_uniform(x->v, sizeof x->v / sizeof x->v[0], 1.0f, seed + 3);
    tu_fill_uniform(x->dout, sizeof x->dout / sizeof x->dout[0], 1.0f, seed + 4);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < L; i++) {
            int *row = x->indices + (b * L + i) * TOP;
            unsigned count[S] = {0};
            for (size_t t = 0; t < TOP; t++) {
                row[t] = t == 0 ? 3 : t % 13 == 5 ? row[t - 1] : t % 9 == 4 ? -1 : t % 11 == 7 ? (int)lengths[b] + (int)t
                                                                                             : (int)(tu_rng_unit(&r) * lengths[b]);
                if (b == 1 && i == L - 1)
                    row[t] = t % 2 ? -1 : (int)lengths[1] + (int)t;
                if (row[t] >= 0 && (size_t)row[t] < lengths[b])
                    count[row[t]]++;
            }
            for (size_t h = 0; h < H; h++)
                for (size_t j = 0; j < S; j++)
                    x->mask[((b * H + h) * L + i) * S + j] = count[j] ? (float)log((double)count[j]) : -INFINITY;
        }
}

/* Half a unit in the last place of a 16-bit type at |r| (0 for float32). */
static double half_ulp(double r, clattn_dtype type)
{
    if (type != CLATTN_FLOAT16 && type != CLATTN_BFLOAT16)
        return 0.0;
    int e;
    frexp(fabs(r), &e);
    const int bits = type == CLATTN_FLOAT16 ? 10 : 7, min_exp = type == CLATTN_FLOAT16 ? -14 : -126;
    if (e - 1 < min_exp || r == 0.0)
        e = min_exp + 1;
    return 0.5 * ldexp(1.0, e - 1 - bits);
}

/* test_backward's tolerance: a few units of float32's last place of the largest entry, plus half a unit of the
 * gradient's storage type. */
static void check_gradient(const char *what, const float *got, const double *ref, size_t n, clattn_dtype type)
{
    double largest = 0.0;
    for (size_t i = 0; i < n; i++)
        largest = fmax(largest, fabs(ref[i]));
    for (size_t i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - ref[i]),
                     bound = 16 * 0x1p-23 * (largest + fabs(ref[i])) + half_ulp(ref[i], type);
        ck_assert_msg(isfinite(got[i]) && err <= bound, "%s: %s[%zu] = %.9g, fp64 reference %.12g (|err| %.3g > %.3g)",
                      tu_label(), what, i, (double)got[i], ref[i], err, bound);
        if (err / bound > tu_max_ratio)
            tu_max_ratio = err / bound;
        if (err > tu_max_abs_err)
            tu_max_abs_err = err;
    }
}

static const char *const variants[4] = {"plain", "sinks, softcap and scale 0.3", "float16 Q, K, V",
                                        "bfloat16 K and V"};
static const float sinks[H] = {0.5f, -1.0f, 1.5f, 0.0f, 0.25f, -0.5f};

/* The tensors of a call on the device, in the descriptor's types. */
typedef struct {
    cl_mem idx, q, k, v, out, lse, dout, dq, dk, dv;
} call_mems;

static call_mems upload(clattn_context *ctx, const clattn_sdpa_desc *d, sparse_grad_data *x)
{
    const size_t nq = B * H * L * D, nk = B * KVH * S * D, nv = B * KVH * S * DV, no = B * H * L * DV;
    const tu_typed q = tu_typed_make(d->q_dtype, x->q, nq, D), k = tu_typed_make(d->k_dtype, x->k, nk, D),
                   v = tu_typed_make(d->v_dtype, x->v, nv, DV);
    memcpy(x->q, q.values, sizeof x->q); /* (the reference's inputs: the values the types hold) */
    memcpy(x->k, k.values, sizeof x->k);
    memcpy(x->v, v.values, sizeof x->v);
    call_mems m = {tu_dev_alloc(ctx, B * L * TOP, (const float *)x->indices), tu_typed_upload(ctx, &q),
                   tu_typed_upload(ctx, &k), tu_typed_upload(ctx, &v), tu_dev_alloc(ctx, no, NULL),
                   tu_dev_alloc(ctx, B * H * L, NULL), tu_dev_alloc(ctx, no, x->dout), tu_dev_alloc(ctx, nq, NULL),
                   tu_dev_alloc(ctx, nk, NULL), tu_dev_alloc(ctx, nv, NULL)}; /* (the gradients: sentinels) */
    return m;
}

static clattn_status backward(clattn_context *ctx, const clattn_sdpa_desc *d, const call_mems *m, float *dsinks)
{
    return clattn_sdpa_sparse_backward(ctx, d, TOP, m->idx, lengths, m->q, m->k, m->v, m->out, m->lse, m->dout, m->dq,
                                       m->dk, m->dv, dsinks);
}

START_TEST(test_gradients)
{
    const size_t variant = TU_CASE(_i), dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("sparse backward, %s, on %s", variants[variant], tu_dev_spec[dev]);
    sparse_grad_data *x = tu_track_malloc(sizeof *x);
    make(x, 300 + variant);
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, DV);
    d.kv_heads = KVH;
    if (variant == 1)
        d.sinks = sinks, d.softcap = 1.5f, d.scale = 0.3f;
    if (variant == 2)
        d.q_dtype = d.k_dtype = d.v_dtype = CLATTN_FLOAT16;
    if (variant == 3)
        d.k_dtype = d.v_dtype = CLATTN_BFLOAT16;
    const call_mems m = upload(ctx, &d, x);
    TU_ASSERT_OK(clattn_sdpa_sparse(ctx, &d, TOP, m.idx, m.q, m.k, m.v, NULL, lengths, m.out, m.lse), ctx,
                 "clattn_sdpa_sparse");
    float dsinks[H];
    TU_ASSERT_OK(backward(ctx, &d, &m, dsinks), ctx, "clattn_sdpa_sparse_backward");
    const size_t nq = B * H * L * D, nk = B * KVH * S * D, nv = B * KVH * S * DV;
    double *rq = tu_dalloc(nq), *rk = tu_dalloc(nk), *rv = tu_dalloc(nv), rs[H];
    clattn_masks rm = CLATTN_MASKS_INIT;
    rm.additive = CLATTN_MASK_B_H_L_S;
    clattn_sdpa_desc rd = d;
    rd.masks = &rm;
    ref_sdpa_backward(&rd, NULL, NULL, x->q, x->k, x->v, x->mask, x->dout, rq, rk, rv, rs);
    const float *gq = tu_typed_read(ctx, m.dq, d.q_dtype, nq), *gk = tu_typed_read(ctx, m.dk, d.k_dtype, nk),
                *gv = tu_typed_read(ctx, m.dv, d.v_dtype, nv);
    check_gradient("dq", gq, rq, nq, d.q_dtype);
    check_gradient("dk", gk, rk, nk, d.k_dtype);
    check_gradient("dv", gv, rv, nv, d.v_dtype);
    if (variant == 1)
        check_gradient("dsinks", dsinks, rs, H, CLATTN_FLOAT32);
    /* The row that selects nothing: no gradient; keys past a sequence's length: none either. */
    for (size_t h = 0; h < H; h++)
        for (size_t t = 0; t < D; t++)
            ck_assert_msg(gq[((1 * H + h) * L + L - 1) * D + t] == 0.0f, "%s: dq of a row without keys", tu_label());
    for (size_t j = lengths[1]; j < S; j++)
        ck_assert_msg(gk[((1 * KVH + 1) * S + j) * D] == 0.0f, "%s: dk[key %zu] past the length", tu_label(), j);
    /* 2. Again: the same bits. */
    const call_mems again = {m.idx, m.q, m.k, m.v, m.out, m.lse, m.dout, tu_dev_alloc(ctx, nq, NULL),
                             tu_dev_alloc(ctx, nk, NULL), tu_dev_alloc(ctx, nv, NULL)};
    TU_ASSERT_OK(backward(ctx, &d, &again, NULL), ctx, "clattn_sdpa_sparse_backward, again");
    ck_assert_msg(memcmp(gk, tu_typed_read(ctx, again.dk, d.k_dtype, nk), nk * sizeof(float)) == 0 &&
                      memcmp(gq, tu_typed_read(ctx, again.dq, d.q_dtype, nq), nq * sizeof(float)) == 0 &&
                      memcmp(gv, tu_typed_read(ctx, again.dv, d.v_dtype, nv), nv * sizeof(float)) == 0,
                  "%s: a second run differs", tu_label());
}
END_TEST

START_TEST(test_bad)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("sparse backward misuse on %s", tu_dev_spec[dev]);
    sparse_grad_data *x = tu_track_malloc(sizeof *x);
    make(x, 390);
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, DV);
    d.kv_heads = KVH;
    call_mems m = upload(ctx, &d, x);
    TU_ASSERT_OK(clattn_sdpa_sparse(ctx, &d, TOP, m.idx, m.q, m.k, m.v, NULL, lengths, m.out, m.lse), ctx,
                 "clattn_sdpa_sparse");
    const size_t nk = B * KVH * S * D;
    const cl_mem lse = m.lse;
    m.lse = NULL;
    tu_refused(ctx, backward(ctx, &d, &m, NULL), CLATTN_ERROR_NULL_ARGUMENT, "lse", m.dk, nk);
    m.lse = lse;
    clattn_masks masks = CLATTN_MASKS_INIT;
    d.masks = &masks;
    tu_refused(ctx, backward(ctx, &d, &m, NULL), CLATTN_ERROR_INVALID_VALUE, "desc.masks", m.dk, nk);
    d.masks = NULL;
    tu_refused(ctx, clattn_sdpa_sparse_backward(ctx, &d, 0, m.idx, lengths, m.q, m.k, m.v, m.out, m.lse, m.dout, m.dq,
                                                m.dk, m.dv, NULL),
               CLATTN_ERROR_ZERO_SIZE, "top_k is 0", m.dk, nk);
    tu_refused(ctx, clattn_sdpa_sparse_backward(ctx, &d, 2 * TOP, m.idx, lengths, m.q, m.k, m.v, m.out, m.lse, m.dout,
                                                m.dq, m.dk, m.dv, NULL),
               CLATTN_ERROR_BUFFER_TOO_SMALL, "indices", m.dk, nk);
    d.k_dtype = CLATTN_INT8;
    tu_refused(ctx, backward(ctx, &d, &m, NULL), CLATTN_ERROR_INVALID_VALUE, "k_dtype", m.dk, nk);
    d.k_dtype = CLATTN_FLOAT32;
    const cl_mem dq = m.dq;
    m.dq = m.q;
    tu_refused(ctx, backward(ctx, &d, &m, NULL), CLATTN_ERROR_INVALID_VALUE, "dq", m.dk, nk);
    m.dq = dq;
    tu_refused(ctx, clattn_sdpa_sparse_backward(ctx, &d, TOP, m.dq, lengths, m.q, m.k, m.v, m.out, m.lse, m.dout, m.dq,
                                                m.dk, m.dv, NULL),
               CLATTN_ERROR_INVALID_VALUE, "indices", m.dk, nk);
    TU_ASSERT_OK(backward(ctx, &d, &m, NULL), ctx, "the same call, well formed");
}
END_TEST

static Suite *sparse_backward_suite(void)
{
    Suite *s = suite_create("sparse_backward");
    tu_add_loop(s, "gradients", test_gradients, 4 * tu_ndev);
    tu_add_loop(s, "bad", test_bad, tu_ndev);
    return s;
}

int main(void) { return tu_main(sparse_backward_suite); }
