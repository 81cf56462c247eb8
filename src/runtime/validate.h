/* Overflow-safe sizes and the argument checks shared by every entry point. Each failure records which
 * argument and which size was wrong. */
#ifndef CLATTN_VALIDATE_H
#define CLATTN_VALIDATE_H

#include "clattn/clattn.h"
#include "dtype.h"

#include <stdbool.h>
#include <stddef.h>

bool size_mul(size_t a, size_t b, size_t *out);
/* Product of n sizes, false on overflow. */
bool size_product(size_t *out, size_t n, ...);

/* A non-NULL context; clears its last error (every public call starts here). */
clattn_status check_context(clattn_context *ctx);
/* Buffer `buf` must be non-NULL and hold at least `elems` elements of elem_size bytes. */
clattn_status check_buffer(clattn_context *ctx, cl_mem buf, size_t elems, size_t elem_size, const char *name);
/* Buffer `buf` must hold `elems` elements of storage type `dtype`. */
clattn_status check_tensor(clattn_context *ctx, cl_mem buf, size_t elems, clattn_dtype dtype, const char *name);
/* A K/V tensor of `heads` heads (batch · kv_heads, or a pool's blocks · kv_heads) of `rows` rows of `dim`
 * values each, in any format: the one check that takes a token format (whose bytes are a head's, not a
 * row's); check_tensor refuses those, naming the calls that take them. */
clattn_status check_kv_tensor(clattn_context *ctx, cl_mem buf, clattn_dtype dtype, size_t heads, size_t rows,
                              size_t dim, const char *name);
/* A buffer argument by name, for the aliasing check below (mem NULL: absent, skipped). */
typedef struct named_mem {
    cl_mem mem;
    const char *name;
} named_mem;
/* No output may share memory with another output or with any input: the same cl_mem, or sub-buffers
 * (or a sub-buffer and its parent) whose byte ranges overlap. Kernels that read one tensor while
 * another is written give wrong answers when they overlap, so `fn` refuses such a call naming both. */
clattn_status check_no_overlap(clattn_context *ctx, const char *fn, const named_mem *outputs, size_t n_outputs,
                               const named_mem *inputs, size_t n_inputs);
/* A tensor of `elems` floats must fit in one device allocation. */
clattn_status check_alloc(clattn_context *ctx, size_t elems, const char *name);

/* A validated SDPA shape with its defaults resolved and its tensor sizes in elements. The masks and
 * the additive mask's size are filled in by masks_resolve (masks.h). */
typedef struct sdpa_shape {
    size_t batch, heads, q_len, kv_len, qk_dim, v_dim;
    size_t kv_heads, group; /* K/V heads; query head h reads K/V head h / group */
    float scale; /* desc.scale resolved (CLATTN_SCALE_DEFAULT: 1/sqrt(qk_dim)) */
    clattn_weights_output weights_output;
    bool softmax_double; /* desc.softmax_precision CLATTN_SOFTMAX_DOUBLE: the staged path's double softmax */
    clattn_algorithm algorithm;
    size_t q_elems, k_elems, v_elems, out_elems, weight_elems, lse_elems;
    clattn_masks masks;
    const size_t *q_starts; /* a ragged call's row starts on the host (its tree's parents follow them), else NULL */
    size_t mask_elems, mask_elem_size, mask_cols; /* the mask's entries, their size, its keys per row */
    tensor_types types;       /* storage types of Q, K, V and the output */
    cl_mem k_scales, v_scales; /* an int8 K's and V's row scales, else NULL */
    /* MLA's latent form (latent_resolve): no V tensor; each value row is the first v_dim columns of its key
     * row, read through K's view (and K's scales). */
    bool v_in_k;
    /* The caller's descriptor as read. Every score term — softcap, sinks, ALiBi slopes, logit_scale,
     * mods, block mask, origin — is read from here (s->desc.x) and from nowhere else: no field above
     * copies one. The fields above are only what the descriptor does not say as it stands: sizes,
     * defaults resolved (scale, v_dim, kv_heads), and the masks as resolved. */
    clattn_sdpa_desc desc;
} sdpa_shape;

/* The caller's descriptor (NULL is an error) copied by the struct_size rule (versioned.h) into `out`. */
clattn_status sdpa_desc_read(clattn_context *ctx, const clattn_sdpa_desc *desc, clattn_sdpa_desc *out);

/* Dimensions ≥ 1, heads a multiple of kv_heads, a scale that is finite or CLATTN_SCALE_DEFAULT, a
 * softcap that is finite and ≥ 0, finite sinks and ALiBi slopes, a known algorithm, and every tensor
 * size within size_t, for a descriptor already read by sdpa_desc_read. The masks are left empty. */
clattn_status sdpa_shape_resolve(clattn_context *ctx, const clattn_sdpa_desc *desc, sdpa_shape *shape);

/* MLA's latent form (DeepSeek-V2/V3, the absorbed attention): the call gave no V, so each value row is the
 * first v_dim columns of its key row — one cache for both, read once. Checks that v_dim < qk_dim (a V forgotten
 * where the head sizes are equal stays CLATTN_ERROR_NULL_ARGUMENT) and that V's
 * storage is K's (float32, float16, bfloat16 or int8, with desc.v_scales the same buffer as desc.k_scales), then
 * sets s->v_in_k. `who` names the entry point in messages. */
clattn_status latent_resolve(clattn_context *ctx, sdpa_shape *s, const char *who);

/* Query row i's absolute position in batch b under s's masks, as cl/masks.cl's clattn_query_position. */
long long sdpa_query_position(const sdpa_shape *s, size_t b, size_t i);

/* For the entry points that take no quantised K/V (host arrays, the past/present form, group calls): the
 * field of a descriptor already read that asks for one (int8 or a format of formats.def only K and V may
 * have) — "k_dtype" or "v_dtype" — or NULL. Asked before sdpa_shape_resolve, whose type checks would
 * otherwise ask an int8 K/V for scales these never take. */
const char *quantised_kv_field(const clattn_sdpa_desc *desc);

/* For the entry points that take K and V as host arrays (clattn_sdpa_host, group calls, ring attention):
 * the field of a descriptor already read whose K or V format reads row scales — int8's, or FP8's when
 * given — that live in a device buffer ("k_dtype" or "v_dtype"), or NULL. Every other format, blocks
 * included, is bytes the call copies as they are. Asked before sdpa_shape_resolve, as above. */
const char *row_scaled_kv_field(const clattn_sdpa_desc *desc);

/* The refusal of a host-array entry point `call` (its name, for the message) whose descriptor, already
 * read, asks for K/V it cannot take: any quantised format where `no_quantised` (the backward, ragged and
 * past/present host calls), else one with row scales (row_scaled_kv_field). (A token format is bytes of
 * whole heads: clattn_sdpa_host and group calls by batches take it.) CLATTN_ERROR_INVALID_VALUE
 * set on ctx (NULL: the thread's), or CLATTN_SUCCESS. */
clattn_status check_host_kv_types(clattn_context *ctx, const clattn_sdpa_desc *desc, bool no_quantised,
                                  const char *call);

/* The scales of an int8 K and V of k_rows and v_rows rows (desc.k_scales, v_scales): k_rows (v_rows)
 * floats each when present (sdpa_shape_resolve made sure they are present exactly for int8). */
clattn_status check_scales(clattn_context *ctx, const sdpa_shape *s, size_t k_rows, size_t v_rows);

#endif
