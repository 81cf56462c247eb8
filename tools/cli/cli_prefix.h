/* `clattn sdpa --prefix-k PK.npy --prefix-v PV.npy`: keys and values every batch entry shares before its own
 * K and V (a system prompt), attended over as cascade attention (clattn_sdpa_cascade). */
#ifndef CLATTN_CLI_PREFIX_H
#define CLATTN_CLI_PREFIX_H

#include <clattn/clattn.h>

/* Attention of q (B,H,L,D) over each entry's keys: the prefix pk (N,P,D) / pv (N,P,Dv) shared by all, then
 * its own k (B,N,S,D) / v (B,N,S,Dv) — d's shape with kv_len = S, float32 host arrays. The rows are laid
 * into a paged pool made here (blocks of 16 rows, the prefix's once); out (B,H,L,Dv) and lse (B,H,L) or
 * NULL receive the result. */
clattn_status cli_prefix_attention(clattn_context *ctx, const clattn_sdpa_desc *d, const float *pk, const float *pv,
                                   size_t prefix_rows, const float *q, const float *k, const float *v, float *out,
                                   float *lse);

#endif
