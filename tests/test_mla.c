/*
 * Multi-head latent attention (MLA, DeepSeek-V2/V3) on every device: the latent form — no V, each value row
 * the first v_dim columns of its key row (clattn_sdpa with v NULL, a paged pool without v_pool) — against an fp64
 * reference of the model's own equations, per head, in the expanded form:
 *     k_h,j = [W_UK,h c_j ; k_R,j]   v_h,j = W_UV,h c_j   q_h = [q_C,h ; q_R,h]   scale 1/√(d_nope + d_rope)
 *     o_h = softmax(q_h·k_h,j · scale) · v_h,j
 * The caller absorbs W_UK into the query (q' = [W_UK,hᵀ q_C,h ; q_R,h]: D_qk = r + d_rope against one latent
 * head [c ; k_R]) and W_UV into what follows (o_h = W_UV,h o'_h, D_v = r); RoPE is applied to q_R and k_R
 * before, so the reference takes them as given.
 *  1. the model: decode (L 1) and multi-token prediction (L 2, causal) over dense and paged latent caches of
 *     different lengths per sequence, in float32, bfloat16 and int8 (the reference on the stored values), a
 *     paged cache filled by clattn_kv_append_paged, the absorbed form of a prefill (L = S, the staged path),
 *     and the expanded form of a prefill through the ordinary path (K and V per head, D_qk 192, D_v 128);
 *     DeepSeek's sizes (r 512, d_rope 64, 16 heads) and small ones;
 *  2. the latent form on every path (fused, staged, decode) and storage type bit for bit the same as the call
 *     given V copied out of the keys;
 *  3. refusals naming the argument, nothing written (equal head sizes without V: a V forgotten).
 * CLATTN_TEST_MLA_SMALL=1 (the oclgrind run) keeps the small sizes only.
 */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, BLOCK = 16 };

typedef struct {
    const char *name;
    size_t H, r, dr, dn, dv; /* query heads, latent rank, rotary part, per-head no-rope and value sizes */
} mla_size;
static const mla_size sizes[] = {{"DeepSeek's sizes (r 512 + 64, 16 heads)", 16, 512, 64, 128, 128},
                                 {"small (r 48 + 16, 4 heads)", 4, 48, 16, 24, 20}};

typedef enum { DENSE, PAGED, PAGED_APPEND, EXPANDED } mla_cache;
typedef struct {
    const char *name;
    mla_cache cache;
    size_t L, S;
    size_t lengths[B]; /* keys per sequence (0: S) */
    clattn_causal causal;
    clattn_dtype type; /* the latent cache's storage */
} mla_form;
static const mla_form forms[] = {
    {"decode, dense", DENSE, 1, 150, {150, 97}, CLATTN_CAUSAL_NONE, CLATTN_FLOAT32},
    {"multi-token prediction (L 2), dense bfloat16", DENSE, 2, 150, {150, 97}, CLATTN_CAUSAL_BOTTOM_RIGHT, CLATTN_BFLOAT16},
    {"decode, paged int8", PAGED, 1, 150, {150, 97}, CLATTN_CAUSAL_NONE, CLATTN_INT8},
    {"multi-token prediction (L 2), paged, appended", PAGED_APPEND, 2, 150, {133, 150}, CLATTN_CAUSAL_BOTTOM_RIGHT,
     CLATTN_FLOAT32},
    {"prefill, absorbed (the staged path)", DENSE, 67, 67, {0, 0}, CLATTN_CAUSAL_TOP_LEFT, CLATTN_FLOAT32},
    {"prefill, expanded (K and V per head)", EXPANDED, 67, 67, {0, 0}, CLATTN_CAUSAL_TOP_LEFT, CLATTN_FLOAT32},
};

/* One model's tensors: the latent rows [c ; k_R] (B, S, r + dr), the queries' parts, the up-projections. */
typedef struct {
    size_t H, r, dr, dn, dv, L, S, dqk;
    float *latent, *q_c, *q_r, *w_uk, *w_uv; /* (B,S,dqk) (B,H,L,dn) (B,H,L,dr) (H,dn,r) (H,dv,r) */
} mla_model;

static mla_model model_make(const mla_size *z, size_t L, size_t S, uint64_t seed)
{
    mla_model m = {z->H, z->r, z->dr, z->dn, z->dv, L, S, z->r + z->dr, NULL, NULL, NULL, NULL, NULL};
    m.latent = tu_falloc(B * S * m.dqk);
    m.q_c = tu_falloc(B * m.H * L * m.dn);
    m.q_r = tu_falloc(B * m.H * L * m.dr);
    m.w_uk = tu_falloc(m.H * m.dn * m.r);
    m.w_uv = tu_falloc(m.H * m.dv * m.r);
    tu_fill_uniform(m.latent, B * S * m.dqk, 1.0f, seed);
    tu_fill_uniform(m.q_c, B * m.H * L * m.dn, 1.0f, seed + 1);
    tu_fill_uniform(m.q_r, B * m.H * L * m.dr, 1.0f, seed + 2);
    /* (unit-variance up-projected rows: sqrt(3 / r)) */
    tu_fill_uniform(m.w_uk, m.H * m.dn * m.r, (float)sqrt(3.0 / (double)m.r), seed + 3);
    tu_fill_uniform(m.w_uv, m.H * m.dv * m.r, (float)sqrt(3.0 / (double)m.r), seed + 4);
    return m;
}

/* Σ a[x]·b[x] over n, in fp64: a row of an up-projection (W_UK, W_UV) against a latent vector. */
static double dot(const float *a, const float *b, size_t n)
{
    double t = 0;
    for (size_t x = 0; x < n; x++)
        t += (double)a[x] * b[x];
    return t;
}

/* Key j of sequence b visible to query i (of L) under the form's lengths and causal mask: bottom-right, the last
 * query sits at the last key of the cache (a paged call's length; a dense call's S, its key lengths a padding). */
static int visible(const mla_form *f, size_t b, size_t i, size_t j)
{
    const size_t len = f->lengths[b] ? f->lengths[b] : f->S, end = f->cache == DENSE ? f->S : len;
    if (j >= len)
        return 0;
    if (f->causal == CLATTN_CAUSAL_TOP_LEFT)
        return j <= i;
    if (f->causal == CLATTN_CAUSAL_BOTTOM_RIGHT)
        return j + f->L <= end + i;
    return 1;
}

/* The model's equations in fp64, head by head: out (B,H,L,dv), lse (B,H,L). */
static void reference(const mla_model *m, const mla_form *f, double *out, double *lse)
{
    const double scale = 1.0 / sqrt((double)(m->dn + m->dr));
    double *k_c = tu_dalloc(m->S * m->dn), *v = tu_dalloc(m->S * m->dv), *s = tu_dalloc(m->S);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < m->H; h++) {
            for (size_t j = 0; j < m->S; j++) {
                const float *c = m->latent + (b * m->S + j) * m->dqk;
                for (size_t n = 0; n < m->dn; n++)
                    k_c[j * m->dn + n] = dot(m->w_uk + (h * m->dn + n) * m->r, c, m->r);
                for (size_t n = 0; n < m->dv; n++)
                    v[j * m->dv + n] = dot(m->w_uv + (h * m->dv + n) * m->r, c, m->r);
            }
            for (size_t i = 0; i < m->L; i++) {
                const size_t row = (b * m->H + h) * m->L + i;
                const float *qc = m->q_c + row * m->dn, *qr = m->q_r + row * m->dr;
                double top = -INFINITY, sum = 0;
                for (size_t j = 0; j < m->S; j++) {
                    const float *kr = m->latent + (b * m->S + j) * m->dqk + m->r;
                    double t = 0;
                    for (size_t n = 0; n < m->dn; n++)
                        t += qc[n] * k_c[j * m->dn + n];
                    for (size_t n = 0; n < m->dr; n++)
                        t += (double)qr[n] * kr[n];
                    s[j] = visible(f, b, i, j) ? t * scale : -INFINITY;
                    top = fmax(top, s[j]);
                }
                for (size_t d = 0; d < m->dv; d++)
                    out[row * m->dv + d] = 0;
                for (size_t j = 0; j < m->S; j++) {
                    const double p = s[j] == -INFINITY ? 0 : exp(s[j] - top);
                    sum += p;
                    for (size_t d = 0; d < m->dv; d++)
                        out[row * m->dv + d] += p * v[j * m->dv + d];
                }
                for (size_t d = 0; d < m->dv; d++)
                    out[row * m->dv + d] /= sum;
                lse[row] = top + log(sum);
            }
        }
}

/* The absorbed queries q' = [W_UK,hᵀ q_C,h ; q_R,h] (B,H,L,dqk), in float as a caller would form them. */
static float *absorbed_queries(const mla_model *m)
{
    float *q = tu_falloc(B * m->H * m->L * m->dqk);
    for (size_t row = 0; row < B * m->H * m->L; row++) {
        const size_t h = row / m->L % m->H;
        for (size_t x = 0; x < m->r; x++) {
            double t = 0;
            for (size_t n = 0; n < m->dn; n++)
                t += (double)m->q_c[row * m->dn + n] * m->w_uk[(h * m->dn + n) * m->r + x];
            q[row * m->dqk + x] = (float)t;
        }
        memcpy(q + row * m->dqk + m->r, m->q_r + row * m->dr, m->dr * sizeof(float));
    }
    return q;
}

/* o_h = W_UV,h o'_h: the latent outputs (B,H,L,r) up-projected, in fp64. */
static double *up_project(const mla_model *m, const float *o_latent)
{
    double *o = tu_dalloc(B * m->H * m->L * m->dv);
    for (size_t row = 0; row < B * m->H * m->L; row++) {
        const size_t h = row / m->L % m->H;
        for (size_t d = 0; d < m->dv; d++)
            o[row * m->dv + d] = dot(m->w_uv + (h * m->dv + d) * m->r, o_latent + row * m->r, m->r);
    }
    return o;
}

/* A paged pool (one head, no v_pool) holding the typed latent rows, blocks in reverse order; int8: the pool's row
 * scales into *scales_out. */
static clattn_paged_cache paged_pool(clattn_context *ctx, const mla_model *m, const tu_typed *t, size_t *blocks_out,
                                     cl_mem *scales_out)
{
    const size_t per = (m->S + BLOCK - 1) / BLOCK, blocks = B * per, es = t->type == CLATTN_FLOAT32 ? 4
                                                                         : t->type == CLATTN_INT8 ? 1 : 2;
    unsigned char *pool = tu_track_malloc(blocks * BLOCK * m->dqk * es);
    float *scales = tu_falloc(blocks * BLOCK);
    int *table = tu_track_malloc(blocks * sizeof(int));
    for (size_t e = 0; e < blocks; e++)
        table[e] = (int)(blocks - 1 - e);
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < m->S; j++) {
            const size_t at = (size_t)table[b * per + j / BLOCK] * BLOCK + j % BLOCK;
            memcpy(pool + at * m->dqk * es, (const unsigned char *)t->bytes + (b * m->S + j) * m->dqk * es, m->dqk * es);
            if (t->scales)
                scales[at] = t->scales[b * m->S + j];
        }
    clattn_paged_cache c = CLATTN_PAGED_CACHE_INIT;
    c.k_pool = tu_dev_alloc(ctx, (blocks * BLOCK * m->dqk * es + 3) / 4, (const float *)pool);
    c.blocks = blocks, c.block_size = BLOCK, c.max_blocks = per;
    c.block_table = tu_dev_alloc(ctx, blocks, (const float *)table);
    *blocks_out = blocks;
    *scales_out = t->scales ? tu_dev_alloc(ctx, blocks * BLOCK, scales) : NULL;
    return c;
}

static int small_only(void) { return getenv("CLATTN_TEST_MLA_SMALL") && atoi(getenv("CLATTN_TEST_MLA_SMALL")); }

/* The expanded form's K (B,H,S,dn+dr) and V (B,H,S,dv), per head from the latent rows, in float. */
static void expand(const mla_model *m, float *k, float *v)
{
    const size_t dk = m->dn + m->dr;
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < m->H; h++)
            for (size_t j = 0; j < m->S; j++) {
                const float *c = m->latent + (b * m->S + j) * m->dqk;
                float *kr = k + ((b * m->H + h) * m->S + j) * dk, *vr = v + ((b * m->H + h) * m->S + j) * m->dv;
                for (size_t n = 0; n < m->dn; n++)
                    kr[n] = (float)dot(m->w_uk + (h * m->dn + n) * m->r, c, m->r);
                for (size_t n = 0; n < m->dv; n++)
                    vr[n] = (float)dot(m->w_uv + (h * m->dv + n) * m->r, c, m->r);
                memcpy(kr + m->dn, c + m->r, m->dr * sizeof(float));
            }
}

START_TEST(test_model)
{
    const size_t nf = sizeof forms / sizeof forms[0], dev = TU_DEVICE(_i);
    const mla_size *z = &sizes[TU_CASE(_i) / nf];
    const mla_form *f = &forms[TU_CASE(_i) % nf];
    if (z == &sizes[0] && small_only())
        return;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("MLA, %s, %s, on %s", z->name, f->name, tu_dev_spec[dev]);
    mla_model m = model_make(z, f->L, f->S, 4000 + TU_CASE(_i));
    /* The stored latent rows: the reference takes the values they hold. */
    const tu_typed t = tu_typed_make(f->type, m.latent, B * f->S * m.dqk, m.dqk);
    memcpy(m.latent, t.values, B * f->S * m.dqk * sizeof(float));
    const size_t rows = B * m.H * f->L, no = rows * m.dv;
    double *ro = tu_dalloc(no), *rl = tu_dalloc(rows);
    reference(&m, f, ro, rl);

    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = f->causal;
    masks.key_lengths = f->lengths[0] ? f->lengths : NULL;
    clattn_sdpa_desc d = tu_sdpa_desc(B, m.H, f->L, f->S, m.dqk, m.r);
    d.kv_heads = 1, d.scale = (float)(1.0 / sqrt((double)(m.dn + m.dr))), d.masks = &masks;
    d.k_dtype = d.v_dtype = f->type;
    cl_mem lse = tu_dev_alloc(ctx, rows, NULL);
    if (f->cache == EXPANDED) { /* K and V per head: the ordinary path, D_qk dn + dr, D_v dv */
        float *k = tu_falloc(B * m.H * f->S * (m.dn + m.dr)), *v = tu_falloc(B * m.H * f->S * m.dv);
        expand(&m, k, v);
        float *q = tu_falloc(rows * (m.dn + m.dr));
        for (size_t row = 0; row < rows; row++) {
            memcpy(q + row * (m.dn + m.dr), m.q_c + row * m.dn, m.dn * sizeof(float));
            memcpy(q + row * (m.dn + m.dr) + m.dn, m.q_r + row * m.dr, m.dr * sizeof(float));
        }
        d.qk_dim = m.dn + m.dr, d.v_dim = m.dv, d.kv_heads = 0;
        cl_mem out = tu_dev_alloc(ctx, no, NULL);
        TU_ASSERT_OK(clattn_sdpa(ctx, &d, tu_dev_alloc(ctx, rows * d.qk_dim, q),
                                 tu_dev_alloc(ctx, B * m.H * f->S * d.qk_dim, k),
                                 tu_dev_alloc(ctx, B * m.H * f->S * m.dv, v), NULL, out, NULL, lse),
                     ctx, "clattn_sdpa, expanded");
        check_close_named("out", tu_dev_read_checked(ctx, out, no, "out"), ro, no, NULL);
        check_close_named("lse", tu_dev_read_checked(ctx, lse, rows, "lse"), rl, rows, NULL);
        return;
    }
    cl_mem q = tu_dev_alloc(ctx, rows * m.dqk, absorbed_queries(&m)), out = tu_dev_alloc(ctx, rows * m.r, NULL);
    if (f->cache == DENSE) {
        cl_mem scales = tu_typed_scales(ctx, &t);
        d.k_scales = d.v_scales = scales;
        TU_ASSERT_OK(clattn_sdpa(ctx, &d, q, tu_typed_upload(ctx, &t), NULL, NULL, out, NULL, lse), ctx,
                     "clattn_sdpa, latent");
    } else {
        size_t blocks;
        cl_mem scales;
        clattn_paged_cache c = paged_pool(ctx, &m, &t, &blocks, &scales);
        d.k_scales = d.v_scales = scales;
        d.kv_len = 0;
        if (f->cache == PAGED_APPEND) { /* the same rows appended into a pool of sentinels, one chunk at a time */
            c.k_pool = tu_dev_alloc(ctx, blocks * BLOCK * m.dqk, NULL);
            clattn_sdpa_desc a = d;
            a.q_len = 1, a.masks = NULL;
            const size_t chunks[3] = {1, 60, f->S - 61};
            size_t done[B] = {0, 0};
            for (int k = 0; k < 3; k++) {
                float *part = tu_falloc(B * chunks[k] * m.dqk);
                for (size_t b = 0; b < B; b++)
                    memcpy(part + b * chunks[k] * m.dqk, m.latent + (b * f->S + done[b]) * m.dqk,
                           chunks[k] * m.dqk * sizeof(float));
                TU_ASSERT_OK(clattn_kv_append_paged(ctx, &a, &c, done, chunks[k],
                                                    tu_dev_alloc(ctx, B * chunks[k] * m.dqk, part), NULL),
                             ctx, "clattn_kv_append_paged, latent");
                for (size_t b = 0; b < B; b++)
                    done[b] += chunks[k];
            }
        }
        const size_t lengths[B] = {f->lengths[0], f->lengths[1]};
        masks.key_lengths = NULL;
        TU_ASSERT_OK(clattn_sdpa_paged(ctx, &d, &c, lengths, q, NULL, out, lse), ctx, "clattn_sdpa_paged, latent");
    }
    double *o = up_project(&m, tu_dev_read_checked(ctx, out, rows * m.r, "out"));
    float *of = tu_falloc(no);
    for (size_t e = 0; e < no; e++)
        of[e] = (float)o[e];
    check_close_named("out (up-projected)", of, ro, no, NULL);
    check_close_named("lse", tu_dev_read_checked(ctx, lse, rows, "lse"), rl, rows, NULL);
}
END_TEST

/* 2. The latent form on every path and storage type: bit for bit the call with V copied out of the keys. */
enum { PB = 2, PH = 4, PKVH = 2, PL = 5, PS = 149, PDK = 80, PDV = 64 }; /* (S past 2 tiles of every path) */
static const clattn_dtype path_types[4] = {CLATTN_FLOAT32, CLATTN_FLOAT16, CLATTN_BFLOAT16, CLATTN_INT8};

START_TEST(test_paths)
{
    const size_t path = TU_CASE(_i) % TU_NPATHS, type = TU_CASE(_i) / TU_NPATHS, dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("MLA's latent form, %s path, %s cache, on %s", tu_algorithm_name(tu_paths[path]),
                 clattn_dtype_name(path_types[type]), tu_dev_spec[dev]);
    const size_t nq = PB * PH * PL * PDK, nk = PB * PKVH * PS * PDK, nv = PB * PKVH * PS * PDV, no = PB * PH * PL * PDV;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv);
    tu_fill_uniform(q, nq, 1.0f, 77 + type);
    tu_fill_uniform(k, nk, 1.0f, 78 + type);
    const tu_typed tk = tu_typed_make(path_types[type], k, nk, PDK);
    /* V: the first PDV columns of each stored key row, bytes and scales as they are. */
    const size_t es = path_types[type] == CLATTN_FLOAT32 ? 4 : path_types[type] == CLATTN_INT8 ? 1 : 2;
    unsigned char *v_bytes = tu_track_malloc(nv * es);
    for (size_t row = 0; row < PB * PKVH * PS; row++) {
        memcpy(v_bytes + row * PDV * es, (const unsigned char *)tk.bytes + row * PDK * es, PDV * es);
        memcpy(v + row * PDV, tk.values + row * PDK, PDV * sizeof(float));
    }
    clattn_masks masks = CLATTN_MASKS_INIT;
    const size_t key_lengths[PB] = {PS, 131};
    masks.causal = CLATTN_CAUSAL_BOTTOM_RIGHT, masks.key_lengths = key_lengths;
    clattn_sdpa_desc d = tu_sdpa_desc(PB, PH, PL, PS, PDK, PDV);
    d.kv_heads = PKVH, d.masks = &masks, d.algorithm = tu_paths[path];
    d.k_dtype = d.v_dtype = path_types[type];
    d.k_scales = d.v_scales = tu_typed_scales(ctx, &tk);
    cl_mem qd = tu_dev_alloc(ctx, nq, q), kd = tu_typed_upload(ctx, &tk);
    cl_mem latent_out = tu_dev_alloc(ctx, no, NULL), copied_out = tu_dev_alloc(ctx, no, NULL);
    cl_mem latent_lse = tu_dev_alloc(ctx, PB * PH * PL, NULL), copied_lse = tu_dev_alloc(ctx, PB * PH * PL, NULL);
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, qd, kd, NULL, NULL, latent_out, NULL, latent_lse), ctx, "clattn_sdpa, latent");
    cl_mem vd = tu_dev_alloc(ctx, (nv * es + 3) / 4, (const float *)v_bytes);
    if (tk.scales) /* (V's rows are K's: the same scales, in a buffer of their own) */
        d.v_scales = tu_dev_alloc(ctx, PB * PKVH * PS, tk.scales);
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, qd, kd, vd, NULL, copied_out, NULL, copied_lse), ctx, "clattn_sdpa, V copied");
    const float *lo = tu_dev_read_checked(ctx, latent_out, no, "out"), *co = tu_dev_read_checked(ctx, copied_out, no, "out");
    const float *ll = tu_dev_read_checked(ctx, latent_lse, PB * PH * PL, "lse");
    ck_assert_msg(memcmp(lo, co, no * sizeof(float)) == 0, "%s: out differs from the call with V copied", tu_label());
    ck_assert_msg(memcmp(ll, tu_dev_read_checked(ctx, copied_lse, PB * PH * PL, "lse"), PB * PH * PL * sizeof(float)) == 0,
                  "%s: lse differs from the call with V copied", tu_label());
    double *ro = tu_dalloc(no), *rl = tu_dalloc(PB * PH * PL);
    clattn_sdpa_desc rd = d;
    rd.algorithm = CLATTN_ALGORITHM_AUTO;
    ref_sdpa(&rd, q, tk.values, v, NULL, ro, NULL, rl);
    check_close_named("out", lo, ro, no, NULL);
    check_close_named("lse", ll, rl, PB * PH * PL, NULL);
}
END_TEST

/* 3. Refusals. */
START_TEST(test_bad)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("MLA misuse on %s", tu_dev_spec[dev]);
    const size_t nq = PB * PH * PL * PDK, nk = PB * PKVH * PS * PDK, no = PB * PH * PL * PDV;
    float *x = tu_falloc(nk);
    tu_fill_uniform(x, nk, 1.0f, 5);
    cl_mem q = tu_dev_alloc(ctx, nq, x), k = tu_dev_alloc(ctx, nk, x), out = tu_dev_alloc(ctx, no, NULL);
    clattn_sdpa_desc d = tu_sdpa_desc(PB, PH, PL, PS, PDK, PDV);
    d.kv_heads = PKVH;
    d.v_dim = PDK + 16;
    tu_refused(ctx, clattn_sdpa(ctx, &d, q, k, NULL, NULL, out, NULL, NULL), CLATTN_ERROR_NULL_ARGUMENT,
               "needs v_dim below qk_dim, not v_dim = 96 and qk_dim = 80", out, no);
    d.v_dim = PDK; /* (equal head sizes: a forgotten V, never the latent form) */
    tu_refused(ctx, clattn_sdpa(ctx, &d, q, k, NULL, NULL, out, NULL, NULL), CLATTN_ERROR_NULL_ARGUMENT,
               "v is NULL", out, no);
    d.v_dim = PDV, d.v_dtype = CLATTN_FLOAT16;
    tu_refused(ctx, clattn_sdpa(ctx, &d, q, k, NULL, NULL, out, NULL, NULL), CLATTN_ERROR_INVALID_VALUE,
               "desc.v_dtype (float16) must be desc.k_dtype (float32)", out, no);
    d.k_dtype = d.v_dtype = CLATTN_FP8_E4M3;
    tu_refused(ctx, clattn_sdpa(ctx, &d, q, k, NULL, NULL, out, NULL, NULL), CLATTN_ERROR_INVALID_VALUE,
               "float32, float16, bfloat16 or int8 cache, not fp8_e4m3", out, no);
    d.k_dtype = d.v_dtype = CLATTN_INT8;
    d.k_scales = tu_dev_alloc(ctx, PB * PKVH * PS, x), d.v_scales = tu_dev_alloc(ctx, PB * PKVH * PS, x);
    tu_refused(ctx, clattn_sdpa(ctx, &d, q, k, NULL, NULL, out, NULL, NULL), CLATTN_ERROR_INVALID_VALUE,
               "desc.v_scales must be the same buffer", out, no);
    d.k_dtype = d.v_dtype = CLATTN_FLOAT32, d.k_scales = d.v_scales = NULL;
    /* The backward pass takes no latent form (the gradients of K and V would land in one tensor). */
    cl_mem lse = tu_dev_alloc(ctx, PB * PH * PL, NULL), dq = tu_dev_alloc(ctx, nq, NULL);
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, q, k, NULL, NULL, out, NULL, lse), ctx, "the forward, latent");
    tu_refused(ctx, clattn_sdpa_backward(ctx, &d, q, k, NULL, NULL, out, lse, out, dq, k, k, NULL),
               CLATTN_ERROR_NULL_ARGUMENT, "v", dq, nq);
    /* A pool without v_pool takes its new rows in k_new alone. */
    clattn_paged_cache c = CLATTN_PAGED_CACHE_INIT;
    const int table[PB] = {0, 1};
    c.k_pool = tu_dev_alloc(ctx, 2 * PKVH * BLOCK * PDK, NULL), c.blocks = 2, c.block_size = BLOCK, c.max_blocks = 1;
    c.block_table = tu_dev_alloc(ctx, PB, (const float *)table);
    const size_t lengths[PB] = {0, 0};
    clattn_sdpa_desc a = d;
    a.kv_len = 0;
    tu_refused(ctx, clattn_kv_append_paged(ctx, &a, &c, lengths, 4, k, k), CLATTN_ERROR_INVALID_VALUE,
               "v_new must be NULL", c.k_pool, 2 * PKVH * BLOCK * PDK);
    TU_ASSERT_OK(clattn_kv_append_paged(ctx, &a, &c, lengths, 4, k, NULL), ctx, "the same append, well formed");
}
END_TEST

static Suite *mla_suite(void)
{
    Suite *s = suite_create("mla");
    tu_add_loop(s, "model", test_model, sizeof sizes / sizeof sizes[0] * (sizeof forms / sizeof forms[0]) * tu_ndev);
    tu_add_loop(s, "paths", test_paths, 4 * TU_NPATHS * tu_ndev);
    tu_add_loop(s, "bad", test_bad, tu_ndev);
    return s;
}

int main(void) { return tu_main(mla_suite); }
