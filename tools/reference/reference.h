/* The float64 host reference (tools/reference/reference.c). Inputs are float, as the library's are; every sum
 * and product is done in double. Tensors use the layouts of clattn.h. */
#ifndef CLATTN_REFERENCE_H
#define CLATTN_REFERENCE_H

#include <clattn/clattn.h>
#include <stddef.h>

/* Dv of an sdpa desc (v_dim, or qk_dim when 0). */
size_t ref_v_dim(const clattn_sdpa_desc *d);

/* m, or the empty masks when m is NULL. */
const clattn_masks *ref_masks(const clattn_masks *m);

/* 1 if key j of query i in batch b is masked by the causal and key-length masks of m (may be NULL). */
int ref_key_masked(const clattn_masks *m, size_t L, size_t S, size_t b, size_t i, size_t j);

/* The scale actually used: desc scale, or 1/sqrt(Dqk) when CLATTN_SCALE_DEFAULT (NaN). */
double ref_scale(float scale, size_t qk_dim);

/* Scaled, masked scores (B,H,L,S): masked entries −inf, additive mask added. mask may be NULL when
 * d->masks is NULL or its additive is NONE. */
void ref_score(const clattn_sdpa_desc *d, const float *q, const float *k, const float *mask,
               double *scores);

/* Row softmax of rows×cols floats: weights (rows×cols) and lse (rows), either may be NULL. All −inf
 * row → zeros and −inf. */
void ref_softmax(size_t rows, size_t cols, const float *s, double *p, double *lse);
void ref_softmax_d(size_t rows, size_t cols, const double *s, double *p, double *lse);

/* O = P·V for each (b,h): P (B,H,L,S), V (B,H,S,Dv), O (B,H,L,Dv). Dv from d->v_dim (0 → qk_dim). */
void ref_weighted_sum(const clattn_sdpa_desc *d, const float *p, const float *v, double *o);

/* Full scaled dot-product attention. out (B,H,L,Dv) required; weights and lse may be NULL. */
void ref_sdpa(const clattn_sdpa_desc *d, const float *q, const float *k, const float *v,
              const float *mask, double *out, double *weights, double *lse);
void ref_sdpa_d(const clattn_sdpa_desc *d, const double *q, const double *k, const double *v,
                const float *mask, double *out, double *weights, double *lse);

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

#endif
