/* The call options' table (call_options.def) and what follows from it by code: the surfaces' bits, the
 * kinds, and the copy of every option the two descriptors share (the layer's forwarding to SDPA, the
 * reference layer's, the Python layer's). Header-only, so that the MPI library, the Python extension and
 * the reference (none of which links the library's internals) use the same rows. */
#ifndef CLATTN_CALL_OPTIONS_H
#define CLATTN_CALL_OPTIONS_H

#include "clattn/clattn.h"

/* Which calls take an option (a row's `calls`). */
enum {
    OPT_SDPA = 1 << 0,      /* clattn_sdpa_desc: clattn_sdpa and every SDPA-shaped entry point */
    OPT_LAYER = 1 << 1,     /* clattn_mha_desc: clattn_mha, clattn_mha_backward, clattn_group_mha_host */
    OPT_RING = 1 << 2,      /* clattn_ring_sdpa_host (libclattn_mpi): in the ranks' fingerprint when `result` */
    OPT_PY_SDPA = 1 << 3,   /* clattn.scaled_dot_product_attention */
    OPT_PY_LAYER = 1 << 4,  /* clattn.multi_head_attention */
    OPT_CLI_SDPA = 1 << 5,  /* clattn sdpa */
    OPT_CLI_MHA = 1 << 6,   /* clattn mha */
    OPT_CLI_BENCH = 1 << 7, /* clattn bench */
    OPT_CLI_RING = 1 << 8,  /* clattn ring */
    OPT_REF = 1 << 9,       /* the fp64 reference (tools/reference/): ref_sdpa and ref_mha */
    OPT_LIB_CALLS = OPT_SDPA | OPT_LAYER | OPT_RING,
    OPT_C_CALLS = OPT_LIB_CALLS | OPT_REF,
    OPT_ALL_CALLS = OPT_C_CALLS | OPT_PY_SDPA | OPT_PY_LAYER | OPT_CLI_SDPA | OPT_CLI_MHA | OPT_CLI_RING
};

/* The kinds (a row's `kind`): how a value is checked (validate.c), fingerprinted (src/mpi/fingerprint.c)
 * and read from Python (src/python/attention.c).
 *   OPT_DIM        size_t >= 1                      OPT_DIM0      size_t, 0: a default
 *   OPT_KV_HEADS   size_t, 0 or a divisor of heads  OPT_SIZE      size_t
 *   OPT_SCALE      float, finite or NaN (default)   OPT_CAP       float, 0 or finite >= FLT_MIN
 *   OPT_PER_HEAD   NULL or `heads` finite floats    OPT_ENUM      0..limit
 *   OPT_RESERVED   unsigned, 0                      OPT_DTYPE     a clattn_dtype
 *   OPT_BUFFER     a cl_mem                         OPT_MASKS     a clattn_masks pointer
 *   OPT_MODS       a clattn_mods                    OPT_BLOCK_MASK a clattn_block_mask
 *   OPT_ORIGIN     0..2^61                          OPT_LENGTHS   NULL or `batch` size_t
 *   OPT_OFFSETS    NULL or `batch` long long        OPT_WINDOW    NULL or a clattn_window
 *   OPT_TREE       NULL or `batch`·`q_len` int parents (a ragged call's: one per packed row) */

/* The options both descriptors carry (CLATTN_OPTION rows), copied from a layer's descriptor to SDPA's
 * (the layer's forwarding, the reference layer's) and back (the Python layer's): no hand copy. */
static inline void call_options_mha_to_sdpa(clattn_sdpa_desc *dst, const clattn_mha_desc *src)
{
#define CLATTN_OPTION(name, ...) dst->name = src->name;
#include "call_options.def"
#undef CLATTN_OPTION
}

static inline void call_options_sdpa_to_mha(clattn_mha_desc *dst, const clattn_sdpa_desc *src)
{
#define CLATTN_OPTION(name, ...) dst->name = src->name;
#include "call_options.def"
#undef CLATTN_OPTION
}

#endif
