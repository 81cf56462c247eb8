/* The float64 host reference every result is checked against: scaled dot-product attention with
 * every mask kind and every variant of clattn_sdpa_desc (grouped-query K/V heads, soft-capping, ALiBi,
 * attention sinks, query offsets, sliding windows), its stages, and the multi-head layer. Written for
 * clarity, not speed: plain loops over the definitions, in double precision. A library of its own
 * (tools/meson.build), used by the test suites and `clattn devices --check`. Cross-checked against
 * ONNX's reference Attention by tools/scripts/check_reference_onnx.py. */
#include "reference.h"
#include "call_options.h" /* the call options' table: ref_mha forwards them as clattn_mha does */

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

size_t ref_v_dim(const clattn_sdpa_desc *d) { return d->v_dim ? d->v_dim : d->qk_dim; }

double ref_scale(float scale, size_t qk_dim)
{
    return isnan(scale) ? 1.0 / sqrt((double)qk_dim) : (double)scale;
}

static const clattn_masks no_masks = CLATTN_MASKS_INIT;

const clattn_masks *ref_masks(const clattn_masks *m) { return m ? m : &no_masks; }

size_t ref_kv_heads(const clattn_sdpa_desc *d) { return d->kv_heads ? d->kv_heads : d->heads; }

size_t ref_kv_head(const clattn_sdpa_desc *d, size_t h) { return h / (d->heads / ref_kv_heads(d)); }

long long ref_query_pos(const clattn_masks *m, size_t L, size_t S, size_t b, size_t i)
{
    m = ref_masks(m);
    if (m->query_offsets)
        return m->query_offsets[b] + (long long)i;
    if (m->causal == CLATTN_CAUSAL_BOTTOM_RIGHT)
        return (long long)i + (long long)S - (long long)L;
    return (long long)i;
}

int ref_key_visible(const clattn_masks *m, size_t L, size_t S, size_t b, size_t i, size_t j)
{
    m = ref_masks(m);
    long long p = ref_query_pos(m, L, S, b, i), lj = (long long)j;
    if (m->causal != CLATTN_CAUSAL_NONE && lj > p)
        return 0;
    if (m->window && m->window->left >= 0 && lj < p - m->window->left)
        return 0;
    if (m->window && m->window->right >= 0 && lj > p + m->window->right)
        return 0;
    if (m->key_lengths && j >= m->key_lengths[b])
        return 0;
    if (m->tree_parents && lj >= p - (long long)i && lj < p - (long long)i + (long long)L) { /* tree token t */
        const long long t = lj - (p - (long long)i);
        int a = (int)i;
        while (a >= 0 && a != t)
            a = m->tree_parents[b * L + (size_t)a];
        return a == t;
    }
    return 1;
}

int ref_key_masked(const clattn_masks *m, size_t L, size_t S, size_t b, size_t i, size_t j)
{
    return !ref_key_visible(m, L, S, b, i, j);
}

/* Scores as ref_score describes them, from double Q and K. */
static void ref_score_d(const clattn_sdpa_desc *d, const ref_mods *mods, const double *q, const double *k,
                        const float *mask, double *scores)
{
    size_t B = d->batch, H = d->heads, KVH = ref_kv_heads(d), L = d->q_len, S = d->kv_len,
           D = d->qk_dim;
    const clattn_masks *m = ref_masks(d->masks);
    double scale = ref_scale(d->scale, D), cap = (double)d->softcap;
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            size_t bh = b * H + h;
            const double *qq = q + bh * L * D, *kk = k + (b * KVH + ref_kv_head(d, h)) * S * D;
            double *ss = scores + bh * L * S;
            for (size_t i = 0; i < L; i++)
                for (size_t j = 0; j < S; j++) {
                    double s;
                    const long long p = ref_query_pos(m, L, S, b, i);
                    if (!ref_key_visible(m, L, S, b, i, j) ||
                        (mods && mods->mask_mod && !mods->mask_mod((int)b, (int)h, p, (long long)j, mods->user))) {
                        s = -INFINITY;
                    } else {
                        double dot = 0.0;
                        for (size_t t = 0; t < D; t++)
                            dot += qq[i * D + t] * kk[j * D + t];
                        s = dot * scale;
                        if (mods && mods->score_mod)
                            s = mods->score_mod(s, (int)b, (int)h, p, (long long)j, mods->user);
                        if (d->logit_scale)
                            s *= (double)d->logit_scale[h];
                        if (cap > 0.0)
                            s = cap * tanh(s / cap);
                        if (d->alibi_slopes)
                            s += (double)d->alibi_slopes[h] * (double)((long long)j - p);
                        if (m->additive == CLATTN_MASK_L_S)
                            s += (double)mask[i * S + j];
                        else if (m->additive == CLATTN_MASK_B_H_L_S)
                            s += (double)mask[(bh * L + i) * S + j];
                    }
                    ss[i * S + j] = s;
                }
        }
}

static double *to_double(const float *p, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    if (!d)
        abort(); /* a reference that cannot allocate has nothing to compare against */
    for (size_t i = 0; i < n; i++)
        d[i] = (double)p[i];
    return d;
}

void ref_score(const clattn_sdpa_desc *d, const float *q, const float *k, const float *mask,
               double *scores)
{
    size_t nq = d->batch * d->heads * d->q_len * d->qk_dim;
    size_t nk = d->batch * ref_kv_heads(d) * d->kv_len * d->qk_dim;
    double *qd = to_double(q, nq), *kd = to_double(k, nk);
    ref_score_d(d, NULL, qd, kd, mask, scores);
    free(qd);
    free(kd);
}

void ref_softmax_row(size_t cols, const double *s, double sink, double *p, double *lse)
{
    double mx = -INFINITY; /* the row maximum, sink included (a NaN score is skipped here, and
                              makes the sum NaN below) */
    bool any_nan = isnan(sink);
    for (size_t c = 0; c < cols; c++) {
        if (s[c] > mx)
            mx = s[c];
        any_nan |= isnan(s[c]);
    }
    if (sink > mx)
        mx = sink;
    if (mx == -INFINITY && !any_nan) { /* every key masked, no sink */
        if (p)
            for (size_t c = 0; c < cols; c++)
                p[c] = 0.0;
        if (lse)
            *lse = -INFINITY;
        return;
    }
    double sum = exp(sink - mx); /* 0 without a sink */
    for (size_t c = 0; c < cols; c++)
        sum += exp(s[c] - mx);
    if (p) /* a hidden key (−inf) has weight 0 even in a NaN row: it takes no part */
        for (size_t c = 0; c < cols; c++)
            p[c] = s[c] == -INFINITY ? 0.0 : exp(s[c] - mx) / sum;
    if (lse)
        *lse = mx + log(sum);
}

void ref_softmax_d(size_t rows, size_t cols, const double *s, double *p, double *lse)
{
    for (size_t r = 0; r < rows; r++)
        ref_softmax_row(cols, s + r * cols, -INFINITY, p ? p + r * cols : NULL, lse ? lse + r : NULL);
}

void ref_sdpa_softmax(const clattn_sdpa_desc *d, const double *scores, double *p, double *lse)
{
    size_t H = d->heads, L = d->q_len, S = d->kv_len, rows = d->batch * H * L;
    for (size_t r = 0; r < rows; r++) {
        double sink = d->sinks ? (double)d->sinks[(r / L) % H] : -INFINITY;
        ref_softmax_row(S, scores + r * S, sink, p ? p + r * S : NULL, lse ? lse + r : NULL);
    }
}

void ref_softmax(size_t rows, size_t cols, const float *s, double *p, double *lse)
{
    double *sd = to_double(s, rows * cols);
    ref_softmax_d(rows, cols, sd, p, lse);
    free(sd);
}

/* O = P·V from double P and V; query head h reads V head ref_kv_head(d, h). */
static void ref_weighted_sum_d(const clattn_sdpa_desc *d, const double *p, const double *v,
                               double *o)
{
    size_t H = d->heads, KVH = ref_kv_heads(d), L = d->q_len, S = d->kv_len, Dv = ref_v_dim(d);
    for (size_t b = 0; b < d->batch; b++)
        for (size_t h = 0; h < H; h++) {
            size_t bh = b * H + h;
            const double *vv = v + (b * KVH + ref_kv_head(d, h)) * S * Dv;
            for (size_t i = 0; i < L; i++)
                for (size_t t = 0; t < Dv; t++) {
                    double acc = 0.0;
                    for (size_t j = 0; j < S; j++) /* a key without weight takes no part (0·inf is NaN) */
                        if (p[(bh * L + i) * S + j] != 0.0)
                            acc += p[(bh * L + i) * S + j] * vv[j * Dv + t];
                    o[(bh * L + i) * Dv + t] = acc;
                }
        }
}

void ref_weighted_sum(const clattn_sdpa_desc *d, const float *p, const float *v, double *o)
{
    size_t BH = d->batch * d->heads, L = d->q_len, S = d->kv_len, Dv = ref_v_dim(d);
    double *pd = to_double(p, BH * L * S), *vd = to_double(v, d->batch * ref_kv_heads(d) * S * Dv);
    ref_weighted_sum_d(d, pd, vd, o);
    free(pd);
    free(vd);
}

static void sdpa_d_mods(const clattn_sdpa_desc *d, const ref_mods *mods, const double *q, const double *k,
                        const double *v, const float *mask, double *out, double *weights, double *lse)
{
    size_t BH = d->batch * d->heads, L = d->q_len, S = d->kv_len;
    double *sc = malloc(BH * L * S * sizeof *sc);
    double *pw = malloc(BH * L * S * sizeof *pw);
    if (!sc || !pw)
        abort();
    ref_score_d(d, mods, q, k, mask, sc);
    ref_sdpa_softmax(d, sc, pw, lse);
    ref_weighted_sum_d(d, pw, v, out);
    if (weights)
        memcpy(weights, pw, BH * L * S * sizeof *pw);
    free(sc);
    free(pw);
}

void ref_sdpa_d(const clattn_sdpa_desc *d, const double *q, const double *k, const double *v,
                const float *mask, double *out, double *weights, double *lse)
{
    sdpa_d_mods(d, NULL, q, k, v, mask, out, weights, lse);
}

void ref_sdpa_mods_d(const clattn_sdpa_desc *d, const ref_mods *mods, const double *q, const double *k,
                     const double *v, const float *mask, double *out, double *weights, double *lse)
{
    sdpa_d_mods(d, mods, q, k, v, mask, out, weights, lse);
}

/* The backward pass; D from `out_given` where it is not NULL, else from the fp64 forward. */
static void sdpa_backward(const clattn_sdpa_desc *d, const ref_mods *mods, ref_score_mod_grad score_mod_grad,
                          const double *q, const double *k, const double *v, const float *mask, const double *dout,
                          const float *out_given, double *dq, double *dk, double *dv, double *dsinks)
{
    const bool has_score_mod = mods && mods->score_mod;
    if (has_score_mod && !score_mod_grad)
        abort(); /* (a score_mod without its derivative has no gradient to give) */
    const size_t B = d->batch, H = d->heads, KVH = ref_kv_heads(d), L = d->q_len, S = d->kv_len, D = d->qk_dim,
                 Dv = ref_v_dim(d), rows = B * H * L;
    const double scale = ref_scale(d->scale, D), cap = (double)d->softcap;
    double *p = malloc(rows * S * sizeof *p), *o = malloc(rows * Dv * sizeof *o), *lse = malloc(rows * sizeof *lse);
    if (!p || !o || !lse)
        abort();
    sdpa_d_mods(d, mods, q, k, v, mask, o, p, lse);
    memset(dq, 0, rows * D * sizeof *dq);
    memset(dk, 0, B * KVH * S * D * sizeof *dk);
    memset(dv, 0, B * KVH * S * Dv * sizeof *dv);
    if (dsinks)
        memset(dsinks, 0, H * sizeof *dsinks);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            const size_t bh = b * H + h, g = b * KVH + ref_kv_head(d, h);
            const double ls = d->logit_scale ? (double)d->logit_scale[h] : 1.0;
            for (size_t i = 0; i < L; i++) {
                const size_t r = bh * L + i;
                const long long pos = ref_query_pos(ref_masks(d->masks), L, S, b, i);
                const double *qi = q + r * D, *doi = dout + r * Dv;
                double di = 0.0; /* D_i = dout_i · O_i */
                for (size_t t = 0; t < Dv; t++)
                    di += doi[t] * (out_given ? (double)out_given[r * Dv + t] : o[r * Dv + t]);
                if (dsinks && d->sinks && lse[r] > -INFINITY)
                    dsinks[h] -= exp((double)d->sinks[h] - lse[r]) * di;
                for (size_t j = 0; j < S; j++) {
                    const double pij = p[r * S + j];
                    if (pij == 0.0)
                        continue; /* hidden, or too small to count: no gradient */
                    const double *kj = k + (g * S + j) * D, *vj = v + (g * S + j) * Dv;
                    double dp = 0.0, s = 0.0;
                    for (size_t t = 0; t < Dv; t++) {
                        dp += doi[t] * vj[t];
                        dv[(g * S + j) * Dv + t] += pij * doi[t];
                    }
                    for (size_t t = 0; t < D; t++)
                        s += qi[t] * kj[t];
                    double modded = s * scale, dz_ds = ls;
                    if (has_score_mod) {
                        dz_ds *= score_mod_grad(modded, (int)b, (int)h, pos, (long long)j, mods->user);
                        modded = mods->score_mod(modded, (int)b, (int)h, pos, (long long)j, mods->user);
                    }
                    if (cap > 0.0) {
                        const double th = tanh(modded * ls / cap);
                        dz_ds *= 1.0 - th * th;
                    }
                    const double ds = pij * (dp - di) * dz_ds * scale;
                    for (size_t t = 0; t < D; t++) {
                        dq[r * D + t] += ds * kj[t];
                        dk[(g * S + j) * D + t] += ds * qi[t];
                    }
                }
            }
        }
    free(p);
    free(o);
    free(lse);
}

void ref_sdpa_backward_d(const clattn_sdpa_desc *d, const ref_mods *mods, ref_score_mod_grad score_mod_grad,
                         const double *q, const double *k, const double *v, const float *mask, const double *dout,
                         double *dq, double *dk, double *dv, double *dsinks)
{
    sdpa_backward(d, mods, score_mod_grad, q, k, v, mask, dout, NULL, dq, dk, dv, dsinks);
}

/* The float inputs widened, then the pass. */
static void backward_of_floats(const clattn_sdpa_desc *d, const ref_mods *mods, ref_score_mod_grad score_mod_grad,
                               const float *q, const float *k, const float *v, const float *mask, const float *out,
                               const float *dout, double *dq, double *dk, double *dv, double *dsinks)
{
    const size_t BH = d->batch * d->heads, BKV = d->batch * ref_kv_heads(d), L = d->q_len, S = d->kv_len,
                 D = d->qk_dim, Dv = ref_v_dim(d);
    double *qd = to_double(q, BH * L * D), *kd = to_double(k, BKV * S * D), *vd = to_double(v, BKV * S * Dv),
           *dod = to_double(dout, BH * L * Dv);
    sdpa_backward(d, mods, score_mod_grad, qd, kd, vd, mask, dod, out, dq, dk, dv, dsinks);
    free(qd);
    free(kd);
    free(vd);
    free(dod);
}

void ref_sdpa_backward(const clattn_sdpa_desc *d, const ref_mods *mods, ref_score_mod_grad score_mod_grad,
                       const float *q, const float *k, const float *v, const float *mask, const float *dout,
                       double *dq, double *dk, double *dv, double *dsinks)
{
    backward_of_floats(d, mods, score_mod_grad, q, k, v, mask, NULL, dout, dq, dk, dv, dsinks);
}

void ref_sdpa_backward_given_out(const clattn_sdpa_desc *d, const float *q, const float *k, const float *v,
                                 const float *mask, const float *out, const float *dout, double *dq, double *dk,
                                 double *dv)
{
    backward_of_floats(d, NULL, NULL, q, k, v, mask, out, dout, dq, dk, dv, NULL);
}

void ref_sdpa(const clattn_sdpa_desc *d, const float *q, const float *k, const float *v,
              const float *mask, double *out, double *weights, double *lse)
{
    ref_sdpa_mods(d, NULL, q, k, v, mask, out, weights, lse);
}

void ref_sdpa_mods(const clattn_sdpa_desc *d, const ref_mods *mods, const float *q, const float *k, const float *v,
                   const float *mask, double *out, double *weights, double *lse)
{
    size_t BH = d->batch * d->heads, BKV = d->batch * ref_kv_heads(d), L = d->q_len,
           S = d->kv_len, D = d->qk_dim, Dv = ref_v_dim(d);
    double *qd = to_double(q, BH * L * D), *kd = to_double(k, BKV * S * D),
           *vd = to_double(v, BKV * S * Dv);
    sdpa_d_mods(d, mods, qd, kd, vd, mask, out, weights, lse);
    free(qd);
    free(kd);
    free(vd);
}

void ref_matmul_d(size_t rows, size_t in, size_t out, const double *x, const float *w,
                  const float *bias, double *y)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < out; c++) {
            double acc = bias ? (double)bias[c] : 0.0;
            for (size_t t = 0; t < in; t++)
                acc += x[r * in + t] * (double)w[t * out + c];
            y[r * out + c] = acc;
        }
}

void ref_matmul(size_t rows, size_t in, size_t out, const float *x, const float *w,
                const float *bias, double *y)
{
    double *xd = to_double(x, rows * in);
    ref_matmul_d(rows, in, out, xd, w, bias, y);
    free(xd);
}

void ref_mha(const clattn_mha_desc *d, const float *x, const float *kv,
             const clattn_mha_host_weights *w, const float *mask, double *out,
             double *attn_weights)
{
    size_t B = d->batch, L = d->q_len, S = kv ? d->kv_len : d->q_len;
    size_t dm = d->model_dim, dkv = kv ? (d->kv_dim ? d->kv_dim : dm) : dm;
    size_t H = d->heads, Dqk = d->qk_dim, Dv = d->v_dim ? d->v_dim : d->qk_dim;
    size_t Hkv = d->kv_heads ? d->kv_heads : H; /* K/V heads (grouped-query attention) */
    size_t od = d->out_dim ? d->out_dim : dm;
    const float *src = kv ? kv : x;

    double *xq = to_double(x, B * L * dm), *xkv = to_double(src, B * S * dkv);
    double *qp = malloc(B * L * H * Dqk * sizeof(double));
    double *kp = malloc(B * S * Hkv * Dqk * sizeof(double));
    double *vp = malloc(B * S * Hkv * Dv * sizeof(double));
    double *qh = malloc(B * L * H * Dqk * sizeof(double));
    double *kh = malloc(B * S * Hkv * Dqk * sizeof(double));
    double *vh = malloc(B * S * Hkv * Dv * sizeof(double));
    double *oh = malloc(B * H * L * Dv * sizeof(double));
    double *cat = malloc(B * L * H * Dv * sizeof(double));
    if (!qp || !kp || !vp || !qh || !kh || !vh || !oh || !cat)
        abort();

    ref_matmul_d(B * L, dm, H * Dqk, xq, w->w_q, w->b_q, qp);
    ref_matmul_d(B * S, dkv, Hkv * Dqk, xkv, w->w_k, w->b_k, kp);
    ref_matmul_d(B * S, dkv, Hkv * Dv, xkv, w->w_v, w->b_v, vp);

    /* (B, rows, H·D) → (B, H, rows, D) */
    for (size_t b = 0; b < B; b++) {
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < L; i++)
                for (size_t t = 0; t < Dqk; t++)
                    qh[((b * H + h) * L + i) * Dqk + t] = qp[(b * L + i) * H * Dqk + h * Dqk + t];
        for (size_t h = 0; h < Hkv; h++)
            for (size_t j = 0; j < S; j++) {
                for (size_t t = 0; t < Dqk; t++)
                    kh[((b * Hkv + h) * S + j) * Dqk + t] = kp[(b * S + j) * Hkv * Dqk + h * Dqk + t];
                for (size_t t = 0; t < Dv; t++)
                    vh[((b * Hkv + h) * S + j) * Dv + t] = vp[(b * S + j) * Hkv * Dv + h * Dv + t];
            }
    }

    clattn_sdpa_desc sd = CLATTN_SDPA_DESC_INIT;
    call_options_mha_to_sdpa(&sd, d); /* every option the layer carries (src/base/call_options.def) */
    sd.kv_len = S;
    ref_sdpa_d(&sd, qh, kh, vh, mask, oh, attn_weights, NULL);

    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < L; i++)
                for (size_t t = 0; t < Dv; t++)
                    cat[(b * L + i) * H * Dv + h * Dv + t] = oh[((b * H + h) * L + i) * Dv + t];

    if (w->w_o)
        ref_matmul_d(B * L, H * Dv, od, cat, w->w_o, w->b_o, out);
    else
        memcpy(out, cat, B * L * H * Dv * sizeof(double));

    free(xq);
    free(xkv);
    free(qp);
    free(kp);
    free(vp);
    free(qh);
    free(kh);
    free(vh);
    free(oh);
    free(cat);
}

/* y = x·w + b's gradients for dy (rows × out): dx += dy·wᵀ (NULL: not wanted), dw = xᵀ·dy, db = Σ_rows dy. */
static void ref_linear_backward(size_t rows, size_t in, size_t out, const double *x, const float *w, const double *dy,
                                double *dx, double *dw, double *db)
{
    for (size_t r = 0; r < rows && dx; r++)
        for (size_t i = 0; i < in; i++) {
            double sum = 0.0;
            for (size_t c = 0; c < out; c++)
                sum += dy[r * out + c] * (double)w[i * out + c];
            dx[r * in + i] += sum;
        }
    for (size_t i = 0; i < in; i++)
        for (size_t c = 0; c < out; c++) {
            double sum = 0.0;
            for (size_t r = 0; r < rows; r++)
                sum += x[r * in + i] * dy[r * out + c];
            dw[i * out + c] = sum;
        }
    for (size_t c = 0; c < out; c++) {
        double sum = 0.0;
        for (size_t r = 0; r < rows; r++)
            sum += dy[r * out + c];
        db[c] = sum;
    }
}

/* (B, rows, heads·D) ↔ (B, heads, rows, D): to_heads 1 splits, 0 merges. */
static void ref_heads(size_t B, size_t rows, size_t heads, size_t D, const double *from, double *to, int to_heads)
{
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < heads; h++)
            for (size_t i = 0; i < rows; i++)
                for (size_t t = 0; t < D; t++) {
                    const size_t split = ((b * heads + h) * rows + i) * D + t, merged = (b * rows + i) * heads * D + h * D + t;
                    if (to_heads)
                        to[split] = from[merged];
                    else
                        to[merged] = from[split];
                }
}

void ref_mha_backward(const clattn_mha_desc *d, const float *x, const float *kv, const clattn_mha_host_weights *w,
                      const float *mask, const float *d_out, const ref_mha_grads *g)
{
    const size_t B = d->batch, L = d->q_len, S = kv ? d->kv_len : d->q_len;
    const size_t dm = d->model_dim, dkv = kv ? (d->kv_dim ? d->kv_dim : dm) : dm;
    const size_t H = d->heads, Dqk = d->qk_dim, Dv = d->v_dim ? d->v_dim : d->qk_dim;
    const size_t N = d->kv_heads ? d->kv_heads : H, od = d->out_dim ? d->out_dim : dm;
    const size_t hk = H * Dqk, hv = H * Dv, nk = N * Dqk, nv = N * Dv;
    double *xq = to_double(x, B * L * dm), *xkv = to_double(kv ? kv : x, B * S * dkv);
    double *buf[12];
    const size_t sizes[12] = {B * L * hk, B * S * nk, B * S * nv, B * L * hk, B * S * nk, B * S * nv,
                              B * H * L * Dv, B * L * hv, B * L * hv, B * H * L * Dv, B * L * hk, B * S * (nk + nv)};
    for (int i = 0; i < 12; i++)
        if (!(buf[i] = calloc(sizes[i] ? sizes[i] : 1, sizeof(double))))
            abort();
    double *qf = buf[0], *kf = buf[1], *vf = buf[2], *qh = buf[3], *kh = buf[4], *vh = buf[5], *oh = buf[6];
    double *cat = buf[7], *dcat = buf[8], *doh = buf[9], *dqh = buf[10], *dkvh = buf[11];
    double *dkh = dkvh, *dvh = dkvh + B * S * nk;
    ref_matmul_d(B * L, dm, hk, xq, w->w_q, w->b_q, qf);
    ref_matmul_d(B * S, dkv, nk, xkv, w->w_k, w->b_k, kf);
    ref_matmul_d(B * S, dkv, nv, xkv, w->w_v, w->b_v, vf);
    ref_heads(B, L, H, Dqk, qf, qh, 1);
    ref_heads(B, S, N, Dqk, kf, kh, 1);
    ref_heads(B, S, N, Dv, vf, vh, 1);
    clattn_sdpa_desc sd = CLATTN_SDPA_DESC_INIT;
    call_options_mha_to_sdpa(&sd, d);
    sd.kv_len = S;
    ref_sdpa_d(&sd, qh, kh, vh, mask, oh, NULL, NULL);
    ref_heads(B, L, H, Dv, oh, cat, 0);
    double *dy = to_double(d_out, B * L * (w->w_o ? od : hv));
    if (w->w_o) /* dcat = dy·W_Oᵀ, dW_O = catᵀ·dy, db_O */
        ref_linear_backward(B * L, hv, od, cat, w->w_o, dy, dcat, g->d_w_o, g->d_b_o);
    else
        memcpy(dcat, dy, B * L * hv * sizeof *dcat);
    ref_heads(B, L, H, Dv, dcat, doh, 1);
    ref_sdpa_backward_d(&sd, NULL, NULL, qh, kh, vh, mask, doh, dqh, dkh, dvh, NULL);
    /* the per-head gradients back to rows (reusing the forward's row buffers), then the projections' */
    ref_heads(B, L, H, Dqk, dqh, qf, 0);
    ref_heads(B, S, N, Dqk, dkh, kf, 0);
    ref_heads(B, S, N, Dv, dvh, vf, 0);
    memset(g->d_x, 0, B * L * dm * sizeof *g->d_x);
    double *d_kv_in = kv ? g->d_kv : g->d_x;
    if (kv)
        memset(g->d_kv, 0, B * S * dkv * sizeof *g->d_kv);
    ref_linear_backward(B * L, dm, hk, xq, w->w_q, qf, g->d_x, g->d_w_q, g->d_b_q);
    ref_linear_backward(B * S, dkv, nk, xkv, w->w_k, kf, d_kv_in, g->d_w_k, g->d_b_k);
    ref_linear_backward(B * S, dkv, nv, xkv, w->w_v, vf, d_kv_in, g->d_w_v, g->d_b_v);
    for (int i = 0; i < 12; i++)
        free(buf[i]);
    free(xq);
    free(xkv);
    free(dy);
}
