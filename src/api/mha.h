/* Multi-head attention layers: projections, SDPA over the heads in place, the output projection. */
#ifndef CLATTN_MHA_H
#define CLATTN_MHA_H

#include "validate.h"

#include <stdbool.h>

/* A validated layer shape: the per-head SDPA shape plus the layer's own widths and element counts. */
typedef struct mha_shape {
    sdpa_shape sdpa;
    size_t model_dim, kv_dim, out_dim;
    size_t kv_k_width, kv_v_width; /* columns of W_K and W_V: kv_heads·Dqk, kv_heads·Dv */
    bool self_attention, has_out_proj;
    size_t x_elems, kv_elems, wq_elems, wk_elems, wv_elems, wo_elems, result_elems;
    clattn_dtype x_type, w_type, out_type; /* X and KV; the weights and biases; the result */
} mha_shape;

/* The caller's weights (NULL is an error) copied by the struct_size rule (versioned.h). */
clattn_status mha_weights_read(clattn_context *ctx, const clattn_mha_weights *w, clattn_mha_weights *out);
clattn_status mha_host_weights_read(clattn_context *ctx, const clattn_mha_host_weights *w,
                                    clattn_mha_host_weights *out);

/* The caller's descriptor (read by the struct_size rule), its shape and masks. kv_given: a separate KV input (cross-attention); has_w_o, has_b_o:
 * which of the output projection's weights came with the call; mask_given: an additive mask did. */
clattn_status mha_check(clattn_context *ctx, const clattn_mha_desc *desc, bool kv_given, bool has_w_o, bool has_b_o,
                        bool mask_given, mha_shape *m);

/* The layer on a validated shape, with buffers that hold their tensors (kv NULL: self-attention). */
clattn_status mha_run(clattn_context *ctx, const mha_shape *m, cl_mem x, cl_mem kv, const clattn_mha_weights *w,
                      cl_mem mask, cl_mem out, cl_mem attn_weights);

#endif
