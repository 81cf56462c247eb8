/* clattn_block_mask_*: a block mask made from mask_mod (cl/block_mask.cl, one work-item a block) or from
 * a host block-sparse layout, its counts, and its checks against each call that uses it. */
#include "block_mask.h"

#include "context.h"
#include "error.h"
#include "mods.h"
#include "program.h"
#include "versioned.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_DEFAULT 128
enum { STATE_EMPTY = 0, STATE_PARTIAL = 1, STATE_FULL = 2 }; /* as cl/masks.cl's BLOCK_* */

struct clattn_block_mask_s {
    clattn_context *ctx;
    /* Copies on other contexts (block_mask_on_context), made once each, under `lock`. */
    struct clattn_block_mask_s *peers, *next_peer;
    pthread_mutex_t lock;
    const clattn_mods *mods; /* made from their mask_mod; NULL: from a layout */
    size_t batch, heads, q_len, kv_len, block_q, block_k, qblocks, kblocks;
    cl_mem states; /* (batch, heads, qblocks, kblocks) bytes */
    size_t counts[3];
};

/* The states from the layout: listed blocks full, the rest empty. */
static clattn_status states_from_layout(clattn_context *ctx, const clattn_block_mask_desc *d, clattn_block_mask *m,
                                        unsigned char *states)
{
    if (!d->layout_starts || !d->layout_blocks)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "desc.%s is NULL (a block mask needs mods or a layout)",
                         d->layout_starts ? "layout_blocks" : "layout_starts");
    if (m->batch != 1 || m->heads != 1)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "desc.batch and desc.heads: a layout holds one set of blocks for every batch and head (0)");
    if (d->layout_starts[0] != 0)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.layout_starts[0] = %zu, not 0", d->layout_starts[0]);
    memset(states, STATE_EMPTY, m->qblocks * m->kblocks);
    for (size_t r = 0; r < m->qblocks; r++) {
        if (d->layout_starts[r + 1] < d->layout_starts[r])
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.layout_starts[%zu] = %zu is below the entry before",
                             r + 1, d->layout_starts[r + 1]);
        for (size_t i = d->layout_starts[r]; i < d->layout_starts[r + 1]; i++) {
            if (d->layout_blocks[i] >= m->kblocks)
                return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                                 "desc.layout_blocks[%zu] = %zu: there are %zu key blocks (kv_len %zu, block_k %zu)", i,
                                 d->layout_blocks[i], m->kblocks, m->kv_len, m->block_k);
            states[r * m->kblocks + d->layout_blocks[i]] = STATE_FULL;
        }
    }
    return CLATTN_SUCCESS;
}

/* The states from the mods' mask_mod, on the device, into m->states. */
static clattn_status states_from_mods(clattn_context *ctx, const clattn_block_mask_desc *d, clattn_block_mask *m)
{
    if (mods_context(d->mods) != ctx)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.mods was made on another clattn context");
    if (!mods_has_mask(d->mods))
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.mods defines no mask_mod to make blocks of");
    if (d->layout_starts || d->layout_blocks)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.mods and a layout: give one or the other");
    /* The auxiliary tensors must hold what mask_mod reads over the grid: a call of its sizes, positions 0.. */
    sdpa_shape grid;
    memset(&grid, 0, sizeof grid);
    grid.batch = m->batch, grid.heads = m->heads, grid.q_len = m->q_len, grid.kv_len = m->kv_len;
    cl_mem aux[4];
    clattn_status st = mods_bind(ctx, d->mods, &grid, aux);
    const family_build *fb = NULL;
    if (st == CLATTN_SUCCESS)
        st = program_get(ctx, &family_block_mask, "", 0, FEATURE_BIT(MODS), mods_program(d->mods),
                         &fb);
    if (st != CLATTN_SUCCESS)
        return st;
    block_mask_build_params p = {.states = m->states, .batch = m->batch, .heads = m->heads, .q_len = m->q_len,
                                 .kv_len = m->kv_len, .block_q = m->block_q, .block_k = m->block_k,
                                 .qblocks = m->qblocks, .kblocks = m->kblocks, .mod_aux0 = aux[0], .mod_aux1 = aux[1],
                                 .mod_aux2 = aux[2], .mod_aux3 = aux[3]};
    kernel_args a = kernel_args_begin(fb->kernels[0]);
    params_bind(&a, &params_block_mask_build, &p, fb->features);
    const size_t global[3] = {m->kblocks, m->qblocks, m->batch * m->heads};
    return kernel_launch_auto(ctx, &a, "block mask", 3, global);
}

clattn_status clattn_block_mask_create(clattn_context *ctx, const clattn_block_mask_desc *desc, clattn_block_mask **out)
{
    if (out)
        *out = NULL;
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    if (!desc || !out)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_block_mask_create: %s is NULL", desc ? "out" : "desc");
    clattn_block_mask_desc d;
    if ((st = versioned_copy(ctx, desc, sizeof d, sizeof d, sizeof d, "clattn_block_mask_desc",
                             "CLATTN_BLOCK_MASK_DESC_INIT", &d)) != CLATTN_SUCCESS)
        return st;
    if (d.q_len == 0 || d.kv_len == 0)
        return set_error(ctx, CLATTN_ERROR_ZERO_SIZE, "desc.%s is 0", d.q_len ? "kv_len" : "q_len");
    clattn_block_mask *m = calloc(1, sizeof *m);
    if (!m)
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating a block mask");
    m->ctx = ctx;
    m->mods = d.mods;
    pthread_mutex_init(&m->lock, NULL);
    m->batch = d.batch ? d.batch : 1, m->heads = d.heads ? d.heads : 1;
    m->q_len = d.q_len, m->kv_len = d.kv_len;
    m->block_q = d.block_q ? d.block_q : BLOCK_DEFAULT, m->block_k = d.block_k ? d.block_k : BLOCK_DEFAULT;
    m->qblocks = (m->q_len - 1) / m->block_q + 1, m->kblocks = (m->kv_len - 1) / m->block_k + 1;
    size_t bytes = 0;
    unsigned char *states = NULL;
    if (!size_product(&bytes, 4, m->batch, m->heads, m->qblocks, m->kblocks) || bytes > ctx->caps.max_alloc)
        st = set_error(ctx, CLATTN_ERROR_SIZE_OVERFLOW, "a block mask of %zu x %zu x %zu x %zu blocks is too large",
                       m->batch, m->heads, m->qblocks, m->kblocks);
    else if (!(states = malloc(bytes)))
        st = set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating %zu bytes of block states", bytes);
    if (st == CLATTN_SUCCESS && !d.mods)
        st = states_from_layout(ctx, &d, m, states);
    cl_int err = CL_SUCCESS;
    if (st == CLATTN_SUCCESS) {
        m->states = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | (d.mods ? 0 : CL_MEM_COPY_HOST_PTR), bytes,
                                   d.mods ? NULL : states, &err);
        if (err != CL_SUCCESS)
            st = cl_error(ctx, err, "clCreateBuffer (block states)");
    }
    if (st == CLATTN_SUCCESS && d.mods)
        st = states_from_mods(ctx, &d, m);
    if (st == CLATTN_SUCCESS && d.mods &&
        (err = clEnqueueReadBuffer(ctx->queue, m->states, CL_TRUE, 0, bytes, states, 0, NULL, NULL)) != CL_SUCCESS)
        st = cl_error(ctx, err, "clEnqueueReadBuffer (block states)");
    for (size_t i = 0; st == CLATTN_SUCCESS && i < bytes; i++)
        m->counts[states[i] < 3 ? states[i] : STATE_PARTIAL]++;
    free(states);
    if (st != CLATTN_SUCCESS) {
        clattn_block_mask_free(m);
        return st;
    }
    *out = m;
    return CLATTN_SUCCESS;
}

clattn_status clattn_block_mask_counts(const clattn_block_mask *mask, size_t counts[3])
{
    if (!mask || !counts)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "clattn_block_mask_counts: %s is NULL",
                         mask ? "counts" : "the block mask");
    memcpy(counts, mask->counts, sizeof mask->counts);
    return CLATTN_SUCCESS;
}

void clattn_block_mask_free(clattn_block_mask *mask)
{
    if (!mask)
        return;
    while (mask->peers) {
        clattn_block_mask *peer = mask->peers;
        mask->peers = peer->next_peer;
        clattn_block_mask_free(peer);
    }
    if (mask->states)
        clReleaseMemObject(mask->states);
    pthread_mutex_destroy(&mask->lock);
    free(mask);
}

/* A copy of m on ctx with the mods `mods` (m's own, as that context takes them): its states read back once
 * (a block mask never changes). */
static clattn_status make_peer(const clattn_block_mask *m, clattn_context *ctx, const clattn_mods *mods,
                               clattn_block_mask **out)
{
    const size_t bytes = m->batch * m->heads * m->qblocks * m->kblocks; /* (checked when m was made) */
    clattn_block_mask *peer = calloc(1, sizeof *peer);
    unsigned char *states = malloc(bytes);
    if (!peer || !states) {
        free(peer);
        free(states);
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "copying a block mask to another device");
    }
    *peer = *m;
    peer->ctx = ctx;
    peer->mods = mods;
    peer->peers = peer->next_peer = NULL;
    peer->states = NULL;
    pthread_mutex_init(&peer->lock, NULL);
    cl_int err = clEnqueueReadBuffer(m->ctx->queue, m->states, CL_TRUE, 0, bytes, states, 0, NULL, NULL);
    if (err == CL_SUCCESS)
        peer->states = clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, states, &err);
    free(states);
    if (err != CL_SUCCESS) {
        clattn_block_mask_free(peer);
        return cl_error(ctx, err, "copying a block mask to another device");
    }
    *out = peer;
    return CLATTN_SUCCESS;
}

clattn_status block_mask_on_context(const clattn_block_mask *m, clattn_context *ctx, const clattn_mods *call_mods,
                                    const clattn_mods *mods, const clattn_block_mask **out)
{
    *out = m;
    if (!m || m->ctx == ctx)
        return CLATTN_SUCCESS;
    if (m->mods && m->mods != call_mods) /* (block_mask_bind's check, which the copy could no longer make) */
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.block_mask was made from other mods than desc.mods: "
                         "its full blocks would skip a mask_mod it never saw");
    clattn_block_mask *owner = (clattn_block_mask *)m; /* (its peers are a cache; the mask stays as made) */
    pthread_mutex_lock(&owner->lock);
    clattn_block_mask *peer = owner->peers;
    while (peer && peer->ctx != ctx)
        peer = peer->next_peer;
    clattn_status st = CLATTN_SUCCESS;
    if (!peer && (st = make_peer(m, ctx, m->mods ? mods : NULL, &peer)) == CLATTN_SUCCESS) {
        peer->next_peer = owner->peers;
        owner->peers = peer;
    }
    pthread_mutex_unlock(&owner->lock);
    if (st == CLATTN_SUCCESS)
        *out = peer;
    return st;
}

clattn_status block_mask_bind(clattn_context *ctx, const clattn_block_mask *m, const sdpa_shape *s,
                              block_mask_args *out)
{
    memset(out, 0, sizeof *out);
    if (!m)
        return CLATTN_SUCCESS;
    if (m->ctx != ctx)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.block_mask was made on another clattn context");
    if (m->mods && s->desc.mods != m->mods)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.block_mask was made from other mods than desc.mods: "
                         "its full blocks would skip a mask_mod it never saw");
    if (!m->mods && s->desc.mods && mods_has_mask(s->desc.mods))
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.block_mask comes from a layout, which stands for a "
                         "mask_mod: the call's mods must not define one");
    /* A part of a larger call (desc.origin_*) reads the whole call's blocks at its own batches and positions. */
    const size_t b0 = s->desc.origin_batch;
    const long long p0 = s->desc.origin_position;
    if ((m->batch != 1 && m->batch < b0 + s->batch) || /* (a run of its batches may be a group's part) */
        (m->heads != 1 && m->heads != s->heads))
        return set_error(ctx, CLATTN_ERROR_SHAPE_MISMATCH, "desc.block_mask holds %zu batches and %zu heads; the call "
                         "has %zu (from batch %zu) and %zu", m->batch, m->heads, s->batch, b0, s->heads);
    if (s->kv_len + (size_t)p0 > m->kv_len)
        return set_error(ctx, CLATTN_ERROR_SHAPE_MISMATCH, "desc.block_mask covers %zu keys; the call has %zu "
                         "(from key %lld)", m->kv_len, s->kv_len, p0);
    for (size_t b = 0; b < s->batch; b++) {
        const long long first = p0 + sdpa_query_position(s, b, 0), last = p0 + sdpa_query_position(s, b, s->q_len - 1);
        if (first < 0 || last >= (long long)m->q_len)
            return set_error(ctx, CLATTN_ERROR_SHAPE_MISMATCH, "desc.block_mask covers query positions 0..%zu; batch "
                             "%zu's run from %lld to %lld", m->q_len - 1, b, first, last);
    }
    *out = (block_mask_args){m->states, m->batch, m->heads, m->qblocks, m->kblocks, m->block_q, m->block_k};
    return CLATTN_SUCCESS;
}
