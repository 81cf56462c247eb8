/* `clattn devices --check`: a few SDPA cases per device — every mask kind and every variant (grouped-query
 * heads, windows, offsets, soft-capping, sinks, ALiBi) on the staged, fused and decode paths — compared
 * with the fp64 reference of the test suite (tools/reference) under the suite's tolerance
 * |out − ref| ≤ 2e-5 + 1e-4·|ref|; then the storage types (conformance_types.c), and the K/V layouts and
 * the merge (conformance_layouts.c). */
#include "conformance.h"
#include "reference.h"

#include <clattn/clattn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct check_case {
    size_t B, H, L, S, D, Dv;
    clattn_causal causal;
    bool key_lengths;
    clattn_mask_layout additive;
    /* The variants: K/V heads (0: H), softcap, a window when window_on, query offsets, sinks, ALiBi. */
    size_t kv_heads;
    float softcap;
    bool window_on;
    clattn_window window;
    bool offsets, sinks, alibi;
} check_case;

static const check_case cases[] = {
    {1, 1, 4, 4, 4, 4, CLATTN_CAUSAL_NONE, false, CLATTN_MASK_NONE, 0, 0.0f, false, {0, 0}, false, false, false},
    {2, 3, 7, 61, 21, 8, CLATTN_CAUSAL_TOP_LEFT, false, CLATTN_MASK_NONE, 0, 0.0f, false, {0, 0}, false, false, false},
    {2, 2, 64, 127, 64, 64, CLATTN_CAUSAL_NONE, true, CLATTN_MASK_L_S, 0, 0.0f, false, {0, 0}, false, false, false},
    /* S < L: fully masked rows */
    {2, 1, 61, 7, 8, 7, CLATTN_CAUSAL_BOTTOM_RIGHT, false, CLATTN_MASK_NONE, 0, 0.0f, false, {0, 0}, false, false,
     false},
    {1, 3, 127, 127, 72, 72, CLATTN_CAUSAL_TOP_LEFT, true, CLATTN_MASK_B_H_L_S, 0, 0.0f, false, {0, 0}, false, false,
     false},
    /* Grouped-query attention with every other variant. */
    {2, 6, 13, 29, 21, 7, CLATTN_CAUSAL_TOP_LEFT, true, CLATTN_MASK_NONE, 2, 5.0f, true, {4, 2}, true, true, true},
    /* Multi-query, a window over a longer row, ALiBi and an additive mask. */
    {1, 4, 64, 96, 64, 64, CLATTN_CAUSAL_BOTTOM_RIGHT, false, CLATTN_MASK_L_S, 1, 0.0f, true, {16, -1}, false, false,
     true},
};

static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void conformance_fill(float *p, size_t n, uint64_t *state, bool some_inf)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_random(state);
        p[i] = some_inf && r % 7 == 0 ? -INFINITY : (float)((double)(r >> 11) / 4503599627370496.0 - 1.0);
    }
}

/* Half a unit in the last place of `type` at |r| (0 for float32, whose rounding the tolerance covers). */
static double half_ulp(double r, clattn_dtype type)
{
    if (type != CLATTN_FLOAT16 && type != CLATTN_BFLOAT16)
        return 0.0;
    const int bits = type == CLATTN_FLOAT16 ? 10 : 7, min_exp = type == CLATTN_FLOAT16 ? -14 : -126;
    int e;
    frexp(fabs(r), &e); /* |r| in [2^(e−1), 2^e) */
    if (e - 1 < min_exp || r == 0.0)
        e = min_exp + 1; /* subnormals: the smallest binade's step */
    return 0.5 * ldexp(1.0, e - 1 - bits);
}

bool conformance_compare(const char *what, const float *out, const double *ref, size_t n, clattn_dtype type,
                         double *max_error, conformance_result *r)
{
    for (size_t i = 0; i < n; i++) {
        if (isinf(ref[i]) && out[i] == (float)ref[i])
            continue;
        double err = fabs((double)out[i] - ref[i]);
        if (!(err <= 2e-5 + 1e-4 * fabs(ref[i]) + half_ulp(ref[i], type))) {
            snprintf(r->message, sizeof r->message, "case %zu: %s[%zu] = %g, reference %g", r->cases, what, i,
                     (double)out[i], ref[i]);
            return false;
        }
        if (err > *max_error)
            *max_error = err;
    }
    return true;
}

/* The float32 cases' comparison. */
static bool compare(const char *what, const float *out, const double *ref, size_t n, conformance_result *r)
{
    return conformance_compare(what, out, ref, n, CLATTN_FLOAT32, &r->max_error, r);
}

static bool run_case(clattn_context *ctx, const check_case *c, uint64_t *seed, conformance_result *r)
{
    size_t lengths[8];
    for (size_t b = 0; b < c->B; b++)
        lengths[b] = b == 0 ? c->S / 2 : c->S - b; /* ragged lengths */
    long long offsets[8];
    for (size_t b = 0; b < c->B; b++)
        offsets[b] = (long long)(c->S / 2) - (long long)(3 * b); /* one batch further along than the other */
    float per_head[2][16];
    for (size_t h = 0; h < c->H; h++) {
        per_head[0][h] = (float)h * 0.5f - 1.0f;    /* sinks */
        per_head[1][h] = 0.5f / (float)(1u << h); /* ALiBi slopes */
    }
    clattn_masks masks = CLATTN_MASKS_INIT;
    masks.causal = c->causal;
    masks.key_lengths = c->key_lengths ? lengths : NULL;
    masks.additive = c->additive;
    masks.window = c->window_on ? &c->window : NULL;
    masks.query_offsets = c->offsets ? offsets : NULL;
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = c->B;
    d.heads = c->H;
    d.q_len = c->L;
    d.kv_len = c->S;
    d.qk_dim = c->D;
    d.v_dim = c->Dv;
    d.masks = &masks;
    d.algorithm = CLATTN_ALGORITHM_STAGED;
    d.kv_heads = c->kv_heads;
    d.softcap = c->softcap;
    d.sinks = c->sinks ? per_head[0] : NULL;
    d.alibi_slopes = c->alibi ? per_head[1] : NULL;
    const size_t bkv = c->B * (c->kv_heads ? c->kv_heads : c->H);
    const size_t bh = c->B * c->H, nq = bh * c->L * c->D, nk = bkv * c->S * c->D, nv = bkv * c->S * c->Dv;
    const size_t no = bh * c->L * c->Dv, nw = bh * c->L * c->S, nl = bh * c->L;
    const size_t nm = c->additive == CLATTN_MASK_L_S ? c->L * c->S : c->additive == CLATTN_MASK_B_H_L_S ? nw : 0;
    float *f = malloc((nq + nk + nv + nm + no + nw + nl + 1) * sizeof *f);
    double *ref = malloc((no + nw + nl) * sizeof *ref);
    bool ok = f && ref;
    if (!ok) {
        snprintf(r->message, sizeof r->message, "out of host memory");
    } else {
        float *q = f, *k = q + nq, *v = k + nk, *mask = v + nv, *out = mask + nm, *w = out + no, *lse = w + nw;
        conformance_fill(q, nq + nk + nv, seed, false);
        conformance_fill(mask, nm, seed, true);
        ref_sdpa(&d, q, k, v, nm ? mask : NULL, ref, ref + no, ref + no + nw);
        /* The staged path with the weights, then the fused and the decode kernels (which have none). */
        clattn_status st = clattn_sdpa_host(ctx, &d, q, k, v, nm ? mask : NULL, out, w, lse);
        ok = st == CLATTN_SUCCESS && compare("staged out", out, ref, no, r) &&
             compare("weights", w, ref + no, nw, r) && compare("staged lse", lse, ref + no + nw, nl, r);
        if (ok) {
            d.algorithm = CLATTN_ALGORITHM_FUSED;
            st = clattn_sdpa_host(ctx, &d, q, k, v, nm ? mask : NULL, out, NULL, lse);
            ok = st == CLATTN_SUCCESS && compare("fused out", out, ref, no, r) &&
                 compare("fused lse", lse, ref + no + nw, nl, r);
        }
        if (ok) {
            d.algorithm = CLATTN_ALGORITHM_DECODE;
            st = clattn_sdpa_host(ctx, &d, q, k, v, nm ? mask : NULL, out, NULL, lse);
            ok = st == CLATTN_SUCCESS && compare("decode out", out, ref, no, r) &&
                 compare("decode lse", lse, ref + no + nw, nl, r);
        }
        if (st != CLATTN_SUCCESS)
            snprintf(r->message, sizeof r->message, "case %zu: %s: %s", r->cases, clattn_status_string(st),
                     clattn_last_error(ctx));
    }
    free(f);
    free(ref);
    return ok;
}

void conformance_run(const char *device_spec, conformance_result *r)
{
    memset(r, 0, sizeof *r);
    clattn_context *ctx;
    clattn_status st = clattn_context_create(&ctx, device_spec);
    if (st != CLATTN_SUCCESS) {
        snprintf(r->message, sizeof r->message, "%s: %s", clattn_status_string(st), clattn_last_error(NULL));
        return;
    }
    uint64_t seed = 2024;
    r->passed = true;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && r->passed; i++) {
        r->passed = run_case(ctx, &cases[i], &seed, r);
        r->cases++;
    }
    if (r->passed)
        r->passed = conformance_run_types(ctx, &seed, r);
    if (r->passed)
        r->passed = conformance_run_layouts(ctx, &seed, r);
    clattn_context_free(ctx);
}
