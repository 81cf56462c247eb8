/* The float64 host reference (tools/reference/reference.c). Inputs are float, as the library's are; every sum
 * and product is done in double. Tensors use the layouts of clattn.h: Q and O (B,H,L,·), K and V
 * (B,kv_heads,S,·), scores and weights (B,H,L,S), lse (B,H,L).
 *
 * Every field of clattn_sdpa_desc and clattn_masks is honoured, in ONNX Attention's order:
 *   s = scale·(q·k) → softcap·tanh(s/softcap) when softcap > 0 → + slope[h]·(j − p) (ALiBi)
 *     + additive mask, and −inf where the key is not visible (causal, window, key length)
 *   → softmax with the head's sink logit in the denominator → weights·V.
 * A row with no visible key gets zero weights and output and lse −inf, or lse = sink with sinks. */
#ifndef CLATTN_REFERENCE_H
#define CLATTN_REFERENCE_H

#include <clattn/clattn.h>
#include <stddef.h>

/* Dv of an sdpa desc (v_dim, or qk_dim when 0). */
size_t ref_v_dim(const clattn_sdpa_desc *d);

/* m, or the empty masks when m is NULL. */
const clattn_masks *ref_masks(const clattn_masks *m);

/* K/V heads: d->kv_heads, or d->heads when 0. */
size_t ref_kv_heads(const clattn_sdpa_desc *d);
/* The K/V head that query head h reads: h / (heads / kv_heads). */
size_t ref_kv_head(const clattn_sdpa_desc *d, size_t h);

/* Absolute key position p of query i in batch b (m may be NULL): m->query_offsets[b] + i when
 * query_offsets is given, else i + S − L under CLATTN_CAUSAL_BOTTOM_RIGHT, else i. Causal masks,
 * windows and ALiBi all measure from p. */
long long ref_query_pos(const clattn_masks *m, size_t L, size_t S, size_t b, size_t i);

/* 1 if key j is visible to query i of batch b under m (may be NULL): not hidden by a causal mask of
 * either kind (j ≤ p), the window (p − left ≤ j ≤ p + right, −1 unbounded) or the key length
 * (j < key_lengths[b]). The additive mask is not looked at (it is added, not tested). */
int ref_key_visible(const clattn_masks *m, size_t L, size_t S, size_t b, size_t i, size_t j);
/* !ref_key_visible (kept for the callers that ask the question this way round). */
int ref_key_masked(const clattn_masks *m, size_t L, size_t S, size_t b, size_t i, size_t j);

/* The scale actually used: desc scale, or 1/sqrt(Dqk) when CLATTN_SCALE_DEFAULT (NaN). */
double ref_scale(float scale, size_t qk_dim);

/* The scores that go into the softmax (B,H,L,S): scale·(q·k) soft-capped (d->softcap > 0), plus
 * ALiBi (d->alibi_slopes) and the additive mask; −inf where ref_key_visible says the key is hidden.
 * K is (B,kv_heads,S,Dqk). mask may be NULL when d->masks is NULL or its additive is NONE. The sinks
 * are not part of the scores (see ref_sdpa_softmax). */
void ref_score(const clattn_sdpa_desc *d, const float *q, const float *k, const float *mask,
               double *scores);

/* Row softmax of rows×cols floats: weights (rows×cols) and lse (rows), either may be NULL. All −inf
 * row → zeros and −inf. */
void ref_softmax(size_t rows, size_t cols, const float *s, double *p, double *lse);
void ref_softmax_d(size_t rows, size_t cols, const double *s, double *p, double *lse);

/* Softmax of one row of cols scores with a sink logit in the denominator (−INFINITY: no sink):
 * lse = log(Σ_j exp(s_j) + exp(sink)), p_j = exp(s_j − lse). p (cols) and lse may be NULL. A row of
 * −inf gives zeros and lse = sink (−inf without a sink). */
void ref_softmax_row(size_t cols, const double *s, double sink, double *p, double *lse);

/* The softmax of ref_sdpa over d's scores (B,H,L,S, as ref_score gives them): row (b,h,i) with
 * d->sinks[h] in its denominator when d->sinks is set. p (B,H,L,S) and lse (B,H,L) may be NULL. */
void ref_sdpa_softmax(const clattn_sdpa_desc *d, const double *scores, double *p, double *lse);

/* O = P·V for each (b,h): P (B,H,L,S), V (B,kv_heads,S,Dv) (head h reads ref_kv_head(d, h)),
 * O (B,H,L,Dv). Dv from d->v_dim (0 → qk_dim). */
void ref_weighted_sum(const clattn_sdpa_desc *d, const float *p, const float *v, double *o);

/* Full scaled dot-product attention: ref_score, ref_sdpa_softmax, then P·V. out (B,H,L,Dv)
 * required; weights (B,H,L,S) and lse (B,H,L) may be NULL. */
void ref_sdpa(const clattn_sdpa_desc *d, const float *q, const float *k, const float *v,
              const float *mask, double *out, double *weights, double *lse);
void ref_sdpa_d(const clattn_sdpa_desc *d, const double *q, const double *k, const double *v,
                const float *mask, double *out, double *weights, double *lse);

/* Programmable attention (clattn_mods) as C callbacks, in the library's order: s = scale·(q·k) →
 * score_mod(s, …) → × logit_scale → soft-capping → + ALiBi + additive mask; −inf where a built-in mask
 * or mask_mod (0) hides the key. q is the query's absolute position (ref_query_pos), k the key's.
 * Either function may be NULL; `user` is passed to both. */
typedef struct ref_mods {
    double (*score_mod)(double score, int b, int h, long long q, long long k, const void *user);
    int (*mask_mod)(int b, int h, long long q, long long k, const void *user);
    const void *user;
} ref_mods;

/* ref_sdpa with mods (NULL: none). */
void ref_sdpa_mods(const clattn_sdpa_desc *d, const ref_mods *mods, const float *q, const float *k, const float *v,
                   const float *mask, double *out, double *weights, double *lse);

/* The gradients of ref_sdpa (the backward pass, issue 27), analytic, every sum in double: for the loss
 * Σ dout·out, with dout (B,H,L,Dv): dq (B,H,L,Dqk), dk (B,kv_heads,S,Dqk) and dv (B,kv_heads,S,Dv) — a
 * K/V head's summed over the query heads that read it — and dsinks (H, with d->sinks; may be NULL).
 * With P the weights, O = P·V, D_i = Σ_t dout_it·O_it:
 *     dV_j = Σ_i P_ij·dout_i,   dP_ij = dout_i·V_j,   dZ_ij = P_ij·(dP_ij − D_i)   (Z: the softmax's input)
 *     dS_ij = dZ_ij·logit_scale·(1 − tanh²(S_ij·logit_scale/c)) (soft-capping c; 1 without) with S_ij
 *     the scaled score, then dQ_i = Σ_j dS_ij·scale·K_j, dK_j = Σ_i dS_ij·scale·Q_i,
 *     dsink_h = −Σ_{b,i} exp(sink_h − lse_i)·D_i.
 * Masks, key lengths, windows and ALiBi get no gradient (they are constants here); hidden pairs and rows
 * that see no key give zero. With mods: mask_mod hides pairs; a score_mod needs its derivative,
 * score_mod_grad(s, b, h, q, k, user) = d score_mod / d s (called with mods->user), which multiplies dS
 * (and soft-capping's derivative is taken at score_mod(s)·logit_scale). */
typedef double (*ref_score_mod_grad)(double score, int b, int h, long long q, long long k, const void *user);
void ref_sdpa_backward(const clattn_sdpa_desc *d, const ref_mods *mods, ref_score_mod_grad score_mod_grad,
                       const float *q, const float *k, const float *v, const float *mask, const float *dout,
                       double *dq, double *dk, double *dv, double *dsinks);
void ref_sdpa_backward_d(const clattn_sdpa_desc *d, const ref_mods *mods, ref_score_mod_grad score_mod_grad,
                         const double *q, const double *k, const double *v, const float *mask, const double *dout,
                         double *dq, double *dk, double *dv, double *dsinks);
/* ref_sdpa_backward with D_i = dO_i·O_i formed from the forward output `out` as given (a 16-bit output
 * widened, say) rather than its fp64 value: what a library that stores O in its type must do, so that a
 * comparison measures the backward pass's own error and not the output's rounding. */
void ref_sdpa_backward_given_out(const clattn_sdpa_desc *d, const float *q, const float *k, const float *v,
                                 const float *mask, const float *out, const float *dout, double *dq, double *dk,
                                 double *dv);

/* ref_sdpa (with mods: ref_sdpa_mods) from double inputs. */
void ref_sdpa_mods_d(const clattn_sdpa_desc *d, const ref_mods *mods, const double *q, const double *k,
                     const double *v, const float *mask, double *out, double *weights, double *lse);

/* Y = X·W (+ bias): X (rows,in), W (in,out), bias (out) or NULL, Y (rows,out). */
void ref_matmul(size_t rows, size_t in, size_t out, const float *x, const float *w,
                const float *bias, double *y);
void ref_matmul_d(size_t rows, size_t in, size_t out, const double *x, const float *w,
                  const float *bias, double *y);

/* Multi-head attention layer (see clattn_mha_desc). kv NULL for self-attention. out (B,L,out_dim)
 * with W_O else (B,L,H·Dv); attn_weights (B,H,L,S) may be NULL. */
void ref_mha(const clattn_mha_desc *d, const float *x, const float *kv,
             const clattn_mha_host_weights *w, const float *mask, double *out,
             double *attn_weights);

/* The gradients of ref_mha's layer for d_out (its output's gradient), every array wanted except d_kv
 * (cross-attention only) and d_w_o, d_b_o (with W_O only): the forward in fp64, the output projection's
 * gradients, ref_sdpa_backward_d per head, the input projections' (dX summed over Q, K and V for
 * self-attention). */
typedef struct ref_mha_grads {
    double *d_x, *d_kv, *d_w_q, *d_b_q, *d_w_k, *d_b_k, *d_w_v, *d_b_v, *d_w_o, *d_b_o;
} ref_mha_grads;
void ref_mha_backward(const clattn_mha_desc *d, const float *x, const float *kv, const clattn_mha_host_weights *w,
                      const float *mask, const float *d_out, const ref_mha_grads *g);

#endif
