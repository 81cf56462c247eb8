/* Device groups: one attention call spread over the contexts of several devices, a scheduler of threads. Independent
 * batches are divided between the devices; a batch too small to divide is split along the keys instead, each device
 * running the partition primitive's sub-call over its run of keys (partition.h) and the host merging the partial
 * results as clattn_merge does — or, in reproducible arithmetic, along the query rows (each row's bits its own, no
 * merge). Each device's share follows its measured speed. The layers' calls: src/api/group_mha.c. */
#include "block_mask.h"
#include "cache.h"
#include "context.h"
#include "error.h"
#include "masks.h"
#include "mods.h"
#include "partition.h"
#include "sdpa.h"
#include "validate.h"
#include "reproducible.h"
#include "group_parts.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


static const char speed_record_name[] = "group speed, format 1";

/* The measuring call: fused SDPA, B=1, H=8, L=S=512, D=64; best of three after a warm-up. */
static clattn_status measure_speed(clattn_context *ctx, double *gflops)
{
    char *record = cache_record_load(ctx, speed_record_name);
    if (record) {
        const bool ok = sscanf(record, "%lf", gflops) == 1 && *gflops > 0 && isfinite(*gflops);
        free(record);
        if (ok)
            return CLATTN_SUCCESS;
    }
    enum { H = 8, L = 512, D = 64 };
    const size_t n = (size_t)H * L * D;
    float *data = calloc(4 * n, sizeof *data);
    if (!data)
        return set_error(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "measuring a device of the group");
    for (size_t i = 0; i < 3 * n; i++)
        data[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = 1;
    d.heads = H;
    d.q_len = d.kv_len = L;
    d.qk_dim = D;
    double best = INFINITY;
    clattn_status st = CLATTN_SUCCESS;
    for (int run = 0; run < 4 && st == CLATTN_SUCCESS; run++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        st = clattn_sdpa_host(ctx, &d, data, data + n, data + 2 * n, NULL, data + 3 * n, NULL, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (run > 0 && s < best)
            best = s;
    }
    free(data);
    if (st != CLATTN_SUCCESS)
        return st;
    *gflops = 4.0 * H * (double)L * L * D / (best * 1e9);
    char text[64];
    snprintf(text, sizeof text, "%.6g", *gflops);
    cache_record_store(ctx, speed_record_name, text);
    return CLATTN_SUCCESS;
}

void clattn_group_free(clattn_group *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->count; i++)
        clattn_context_free(g->ctx[i]);
    free(g);
}

/* One device spec of a comma-separated list into a new context of the group. */
static clattn_status group_add(clattn_group *g, const char *spec)
{
    if (g->count == GROUP_MAX)
        return set_error(NULL, CLATTN_ERROR_INVALID_VALUE, "a group holds at most %d devices", GROUP_MAX);
    clattn_context *ctx;
    clattn_status st = clattn_context_create(&ctx, spec);
    if (st != CLATTN_SUCCESS)
        return st;
    for (size_t i = 0; i < g->count; i++)
        if (clattn_context_device(g->ctx[i]) == clattn_context_device(ctx)) {
            clattn_context_free(ctx);
            return set_error(NULL, CLATTN_ERROR_INVALID_VALUE, "device spec \"%s\" names a device already in the group",
                             spec);
        }
    g->ctx[g->count++] = ctx;
    return CLATTN_SUCCESS;
}

clattn_status clattn_group_create(clattn_group **out, const char *specs)
{
    if (!out)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "clattn_group_create: group is NULL");
    *out = NULL;
    if (!specs || !*specs)
        return set_error(NULL, CLATTN_ERROR_INVALID_VALUE,
                         "clattn_group_create: specs is empty (give \"all\" or device specs such as \"0:0,0:1\")");
    clattn_group *g = calloc(1, sizeof *g);
    if (!g)
        return set_error(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating a device group");
    clattn_status st = CLATTN_SUCCESS;
    if (strcmp(specs, "all") == 0) {
        size_t n = 0;
        st = clattn_device_count(&n);
        for (size_t i = 0; i < n && st == CLATTN_SUCCESS; i++) {
            clattn_device_info info;
            char spec[32];
            if ((st = clattn_device_get(i, &info)) == CLATTN_SUCCESS) {
                snprintf(spec, sizeof spec, "%u:%u", info.platform_index, info.device_index);
                st = group_add(g, spec);
            }
        }
    } else {
        const char *p = specs;
        while (st == CLATTN_SUCCESS) {
            const char *comma = strchr(p, ',');
            const size_t len = comma ? (size_t)(comma - p) : strlen(p);
            char spec[128];
            if (len == 0 || len >= sizeof spec) {
                st = set_error(NULL, CLATTN_ERROR_INVALID_VALUE, "clattn_group_create: \"%s\" has an %s device spec",
                               specs, len ? "overlong" : "empty");
                break;
            }
            memcpy(spec, p, len);
            spec[len] = '\0';
            st = group_add(g, spec);
            if (!comma)
                break;
            p = comma + 1;
        }
    }
    /* A device that cannot run the kernels (they do not build there, say) fails the group here, named —
     * not dropped: a group that silently lost a device would not be the group asked for. */
    for (size_t i = 0; i < g->count && st == CLATTN_SUCCESS; i++)
        if ((st = measure_speed(g->ctx[i], &g->speed[i])) != CLATTN_SUCCESS)
            set_error(NULL, st, "device %zu of the group (%s) cannot run attention: %s", i,
                      clattn_context_device_name(g->ctx[i]), clattn_last_error(g->ctx[i]));
    if (st == CLATTN_SUCCESS && g->count == 0)
        st = set_error(NULL, CLATTN_ERROR_NO_DEVICE, "clattn_group_create: no device");
    if (st != CLATTN_SUCCESS) {
        clattn_group_free(g);
        return st;
    }
    *out = g;
    return CLATTN_SUCCESS;
}

size_t clattn_group_size(const clattn_group *g) { return g ? g->count : 0; }

clattn_context *clattn_group_context(const clattn_group *g, size_t i)
{
    return g && i < g->count ? g->ctx[i] : NULL;
}

double clattn_group_share(const clattn_group *g, size_t i)
{
    if (!g || i >= g->count)
        return 0.0;
    double total = 0.0;
    for (size_t j = 0; j < g->count; j++)
        total += g->speed[j];
    return g->speed[i] / total;
}

clattn_status clattn_group_set_speed(clattn_group *g, size_t i, double gflops)
{
    if (!g)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "the group is NULL");
    if (i >= g->count || !(gflops > 0.0) || !isfinite(gflops))
        return set_error(NULL, CLATTN_ERROR_INVALID_VALUE, "clattn_group_set_speed: %s", i >= g->count ?
                         "the group has no such device" : "the speed is not positive and finite");
    g->speed[i] = gflops;
    return CLATTN_SUCCESS;
}

/* What every group call starts with: each member context's last error and warning cleared (as a call on
 * one context clears its own), so that after a group call, failed or not, a member's warning is this
 * call's, never that of an earlier call or of the group's creation. Returns the first context's check. */
clattn_status group_begin_call(clattn_group *g)
{
    for (size_t i = 1; i < g->count; i++)
        (void)check_context(g->ctx[i]);
    return check_context(g->ctx[0]);
}

/* [begin[d], begin[d+1]) of n items for each device, in proportion to the shares (every item placed). */
void group_divide(const clattn_group *g, size_t n, size_t *begin)
{
    double acc = 0.0;
    begin[0] = 0;
    for (size_t d = 0; d < g->count; d++) {
        acc += clattn_group_share(g, d);
        begin[d + 1] = d + 1 == g->count ? n : (size_t)llround(acc * (double)n);
        if (begin[d + 1] < begin[d])
            begin[d + 1] = begin[d];
    }
}

/* One device's part of a group call, run on a thread of its own. */
typedef struct part {
    part_head head; /* first: run_parts reaches it */
    clattn_sdpa_desc desc; /* a run of batches' call */
    clattn_masks masks;
    clattn_window window;
    partition_part keys; /* a run of keys' (or of query rows') sub-call (its desc run instead of `desc`) */
    bool by_keys, by_rows;
    float *q_copy, *out_copy, *lse_copy; /* a run of query rows' own */
    const float *q, *mask;
    const void *k, *v; /* in desc's k_dtype and v_dtype */
    float *out, *lse;
} part;

static void *part_run(void *arg)
{
    part *p = arg;
    const clattn_sdpa_desc *d = p->by_keys || p->by_rows ? &p->keys.desc : &p->desc;
    p->head.status = clattn_sdpa_host(p->head.ctx, d, p->q, p->k, p->v, p->mask, p->out, NULL, p->lse);
    if (p->head.status != CLATTN_SUCCESS)
        snprintf(p->head.error, sizeof p->head.error, "%s", clattn_last_error(p->head.ctx));
    return NULL;
}

/* Run fn on the n parts (each `size` bytes, its part_head first) that have a device, concurrently, a
 * thread each (in turn where no thread can be had); the first failure names its device. */
clattn_status group_run_parts(void *parts, size_t size, size_t n, void *(*fn)(void *))
{
    pthread_t threads[GROUP_MAX];
    bool started[GROUP_MAX] = {false};
    for (size_t i = 0; i < n; i++) {
        part_head *h = (part_head *)((char *)parts + i * size);
        if (h->ctx)
            started[i] = pthread_create(&threads[i], NULL, fn, h) == 0;
    }
    for (size_t i = 0; i < n; i++) {
        part_head *h = (part_head *)((char *)parts + i * size);
        if (started[i])
            pthread_join(threads[i], NULL);
        else if (h->ctx)
            fn(h);
    }
    for (size_t i = 0; i < n; i++) {
        const part_head *h = (const part_head *)((const char *)parts + i * size);
        if (h->ctx && h->status != CLATTN_SUCCESS)
            return set_error(NULL, h->status, "device %zu of the group (%s): %s", i, clattn_context_device_name(h->ctx),
                             h->error);
    }
    return CLATTN_SUCCESS;
}

/* The additive mask's rows and batch stride, by layout (its last dimension has `cols` entries). */
size_t group_mask_batch_rows(const sdpa_shape *s)
{
    switch (s->masks.additive) {
    case CLATTN_MASK_B_H_L_S: return s->heads * s->q_len;
    case CLATTN_MASK_B_1_L_S: return s->q_len;
    case CLATTN_MASK_B_1_1_S: return 1;
    default: return 0; /* shared by the batches */
    }
}

/* The call's masks for one device's part (the window copied beside them), and for a run of batches
 * starting at b0 their per-batch arrays advanced to it. */
void group_part_masks(const sdpa_shape *s, clattn_masks *m, clattn_window *w, size_t b0)
{
    *m = s->masks;
    if (s->masks.window) {
        *w = *s->masks.window;
        m->window = w;
    }
    if (s->masks.key_lengths)
        m->key_lengths = s->masks.key_lengths + b0;
    if (s->masks.query_offsets)
        m->query_offsets = s->masks.query_offsets + b0;
}

/* A part's mods and block mask (the call's) as its device takes them: copies on the group's other members
 * (mods.h, block_mask.h), made there once and kept with the caller's objects. Run before the parts start. */
clattn_status group_part_mods(clattn_context *ctx, size_t device, const clattn_mods **mods,
                              const clattn_block_mask **mask)
{
    const clattn_mods *call_mods = *mods;
    clattn_status st = mods_on_context(call_mods, ctx, mods);
    if (st == CLATTN_SUCCESS)
        st = block_mask_on_context(*mask, ctx, call_mods, *mods, mask);
    if (st != CLATTN_SUCCESS)
        set_error(NULL, st, "device %zu of the group (%s): %s", device, clattn_context_device_name(ctx),
                  clattn_last_error(ctx));
    return st;
}

/* Bytes of `rows` rows of `dim` values in the type (the row's blocks whole: check_types made dim a multiple). */
static size_t row_bytes(clattn_dtype dtype, size_t rows, size_t dim)
{
    size_t bytes = 0;
    (void)dtype_span_bytes(dtype, dim, &bytes);
    return rows * bytes;
}

/* Bytes of one batch's K (V): kv_heads heads of kv_len rows (a token format's chunks whole). */
static size_t batch_bytes(const sdpa_shape *s, clattn_dtype dtype, size_t dim)
{
    size_t bytes = 0;
    (void)dtype_tensor_bytes(dtype, s->kv_heads, s->kv_len, dim, &bytes);
    return bytes;
}

/* Batches [b0, b1) on one device: every per-batch array sliced. */
static void batch_part(part *p, const sdpa_shape *s, const clattn_sdpa_desc *d, const float *q, const void *k,
                       const void *v, const float *mask, float *out, float *lse, size_t b0, size_t b1)
{
    p->desc = *d;
    p->desc.batch = b1 - b0;
    p->desc.origin_batch = d->origin_batch + b0; /* (mods and block masks see the call's batches) */
    p->desc.masks = &p->masks;
    group_part_masks(s, &p->masks, &p->window, b0);
    const size_t qb = s->heads * s->q_len * s->qk_dim, ob = s->heads * s->q_len * s->v_dim;
    p->q = q + b0 * qb;
    p->k = (const char *)k + b0 * batch_bytes(s, s->types.k, s->qk_dim);
    p->v = (const char *)v + b0 * batch_bytes(s, s->types.v, s->v_dim);
    p->out = out + b0 * ob;
    p->lse = lse + b0 * s->heads * s->q_len;
    const size_t rows = group_mask_batch_rows(s);
    p->mask = mask ? mask + (rows ? b0 * rows * s->mask_cols : 0) : NULL;
}

/* Keys [s0, s1) on one device: the partition primitive's sub-call of every query row over them, its K
 * and V rows and the mask's columns copied out. A run that the masks hide entirely sits the call out. */
static clattn_status key_part(part *p, const sdpa_shape *s, const clattn_sdpa_desc *d, const float *q, const void *k,
                              const void *v, const float *mask, float *out, float *lse, size_t s0, size_t s1)
{
    const size_t n = s1 - s0, bkv = s->batch * s->kv_heads;
    p->by_keys = true;
    if (!partition_part_init(&p->keys, s->batch))
        return set_error(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "a device's slice of the keys");
    if (!partition_part_make(s, d, 0, s->q_len, s0, n, &p->keys)) {
        p->head.ctx = NULL;
        return CLATTN_SUCCESS;
    }
    const size_t k_row = row_bytes(s->types.k, 1, s->qk_dim), v_row = row_bytes(s->types.v, 1, s->v_dim);
    void *kk = malloc(bkv * n * k_row), *vv = malloc(bkv * n * v_row);
    float *mm = mask ? malloc(partition_mask_elems(s, &p->keys) * sizeof *mm) : NULL;
    p->k = kk;
    p->v = vv;
    p->mask = mm;
    if (!kk || !vv || (mask && !mm))
        return set_error(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "a device's slice of the keys");
    partition_row_bytes_host(true, bkv, s->kv_len, k_row, s0, n, (void *)k, kk);
    partition_row_bytes_host(true, bkv, s->kv_len, v_row, s0, n, (void *)v, vv);
    if (mask)
        partition_mask_host(s, &p->keys, mask, mm);
    p->q = q;
    p->out = out;
    p->lse = lse;
    return CLATTN_SUCCESS;
}

/* Reproducible arithmetic's split of a batch too small to divide: query rows [i0, i1) of every batch and head on one
 * device over all the keys — the partition primitive's sub-call with the sinks kept (nothing is merged), its rows
 * of Q and of the mask copied out, its out and lse copied back after. Each row's bits are a function of its own
 * inputs, so the group's are one device's alone. */
static clattn_status rows_part(part *p, const sdpa_shape *s, const clattn_sdpa_desc *d, const float *q, const void *k,
                               const void *v, const float *mask, size_t i0, size_t i1)
{
    const size_t n = i1 - i0, slices = s->batch * s->heads;
    p->by_rows = true;
    if (!partition_part_init(&p->keys, s->batch))
        return set_error(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "a device's query rows");
    (void)partition_part_make(s, d, i0, n, 0, s->kv_len, &p->keys); /* (a hidden block still runs: its empty rows) */
    p->keys.desc.sinks = d->sinks;
    p->q_copy = malloc(slices * n * s->qk_dim * sizeof *p->q_copy);
    p->out_copy = malloc(slices * n * s->v_dim * sizeof *p->out_copy);
    p->lse_copy = malloc(slices * n * sizeof *p->lse_copy);
    float *mm = mask ? malloc(partition_mask_elems(s, &p->keys) * sizeof *mm) : NULL;
    p->mask = mm;
    if (!p->q_copy || !p->out_copy || !p->lse_copy || (mask && !mm))
        return set_error(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "a device's query rows");
    partition_rows_host(true, slices, s->q_len, s->qk_dim, i0, n, (float *)q, p->q_copy);
    if (mask)
        partition_mask_host(s, &p->keys, mask, mm);
    p->q = p->q_copy, p->k = k, p->v = v, p->out = p->out_copy, p->lse = p->lse_copy;
    return CLATTN_SUCCESS;
}

static void part_free(part *p)
{
    partition_part_release(&p->keys);
    if (p->by_keys) {
        free((void *)p->k);
        free((void *)p->v);
    }
    if (p->by_keys || p->by_rows)
        free((void *)p->mask);
    free(p->q_copy);
    free(p->out_copy);
    free(p->lse_copy);
}

/* The parts that ran, merged into out and lse (the sinks once), as clattn_merge merges them. */
static void merge_parts(const sdpa_shape *s, const part *parts, size_t n, float *out, float *lse)
{
    const float *outs[GROUP_MAX], *lses[GROUP_MAX];
    size_t ran = 0;
    for (size_t p = 0; p < n; p++)
        if (parts[p].head.ctx) {
            outs[ran] = parts[p].out;
            lses[ran++] = parts[p].lse;
        }
    partition_merge_host(s->lse_elems, s->heads, s->q_len, s->v_dim, s->desc.sinks, ran, outs, lses, out, lse);
}

clattn_status clattn_group_sdpa_host(clattn_group *g, const clattn_sdpa_desc *desc, const float *q, const void *k,
                                     const void *v, const void *mask, float *out, float *lse)
{
    if (!g)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "the group is NULL");
    clattn_context *first = g->ctx[0];
    sdpa_shape s;
    clattn_sdpa_desc full; /* the caller's descriptor at this version's size, for the parts' copies */
    clattn_status st = group_begin_call(g);
    if (st == CLATTN_SUCCESS && (st = sdpa_desc_read(first, desc, &full)) == CLATTN_SUCCESS)
        desc = &full;
    if (st == CLATTN_SUCCESS && (st = check_host_kv_types(NULL, &full, false, "clattn_group_sdpa_host")) != CLATTN_SUCCESS)
        return st;
    if (st != CLATTN_SUCCESS || (st = sdpa_check(first, desc, mask != NULL, &s)) != CLATTN_SUCCESS ||
        (st = sdpa_check_algorithm(first, &s, false)) != CLATTN_SUCCESS ||
        (st = masks_whole_call_only(first, &s, "clattn_group_sdpa_host")) != CLATTN_SUCCESS)
        return set_error(NULL, st, "%s", clattn_last_error(first));
    if (!q || !k || !v || !out)
        return set_error(NULL, CLATTN_ERROR_NULL_ARGUMENT, "host array %s is NULL",
                         !q ? "q" : !k ? "k" : !v ? "v" : "out");
    /* (Q and the outputs merge in float32 on the host; K and V are copied as bytes, in any format) */
    const char *typed = s.types.q != CLATTN_FLOAT32   ? "desc.q_dtype"
                        : s.types.o != CLATTN_FLOAT32 ? "desc.out_dtype"
                        : mask && s.masks.mask_type != CLATTN_MASK_FLOAT ? "masks.mask_type"
                                                                         : NULL;
    if (typed)
        return set_error(NULL, CLATTN_ERROR_INVALID_VALUE,
                         "%s: group calls take float32 Q and outputs and float masks", typed);
    if (s.softmax_double) /* (a split over the keys merges in float32: no whole double softmax) */
        return set_error(NULL, CLATTN_ERROR_INVALID_VALUE,
                         "desc.softmax_precision: clattn_group_sdpa_host computes its softmax in float32 (split-K "
                         "merges); the double softmax is for a single context's clattn_sdpa");
    part parts[GROUP_MAX];
    memset(parts, 0, sizeof parts);
    size_t begin[GROUP_MAX + 1];
    const bool by_batch = s.batch >= g->count;
    /* (reproducible arithmetic: query rows rather than keys, whose merge would change the bits) */
    const bool by_rows = !by_batch && reproducible_call(first, &s);
    if (!by_batch && !by_rows && (dtype_is_token(s.types.k) || dtype_is_token(s.types.v))) /* (chunks: whole heads) */
        return set_error(NULL, CLATTN_ERROR_INVALID_VALUE,
                         "desc.%s is %s, a token format: a group splits it by batches only (%zu batches for %zu "
                         "devices)", dtype_is_token(s.types.k) ? "k_dtype" : "v_dtype",
                         clattn_dtype_name(dtype_is_token(s.types.k) ? s.types.k : s.types.v), s.batch, g->count);
    float *lse_all = lse ? lse : malloc(s.lse_elems * sizeof *lse_all);
    float *scratch = by_batch || by_rows ? NULL : malloc(g->count * (s.out_elems + s.lse_elems) * sizeof *scratch);
    if (!lse_all || (!by_batch && !by_rows && !scratch)) {
        st = set_error(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "a group call's temporaries");
        goto done;
    }
    group_divide(g, by_batch ? s.batch : by_rows ? s.q_len : s.kv_len, begin);
    for (size_t d = 0; d < g->count && st == CLATTN_SUCCESS; d++) {
        if (begin[d + 1] == begin[d])
            continue; /* no share: the device sits this call out */
        parts[d].head.ctx = g->ctx[d];
        if (by_batch)
            batch_part(&parts[d], &s, desc, q, k, v, mask, out, lse_all, begin[d], begin[d + 1]);
        else if (by_rows)
            st = rows_part(&parts[d], &s, desc, q, k, v, mask, begin[d], begin[d + 1]);
        else
            st = key_part(&parts[d], &s, desc, q, k, v, mask, scratch + d * s.out_elems,
                          scratch + g->count * s.out_elems + d * s.lse_elems, begin[d], begin[d + 1]);
        clattn_sdpa_desc *pd = parts[d].by_keys || parts[d].by_rows ? &parts[d].keys.desc : &parts[d].desc;
        if (st == CLATTN_SUCCESS && parts[d].head.ctx)
            st = group_part_mods(g->ctx[d], d, &pd->mods, &pd->block_mask);
    }
    if (st == CLATTN_SUCCESS)
        st = group_run_parts(parts, sizeof parts[0], g->count, part_run);
    if (st == CLATTN_SUCCESS && !by_batch && !by_rows)
        merge_parts(&s, parts, g->count, out, lse_all);
    for (size_t d = 0; d < g->count && st == CLATTN_SUCCESS && by_rows; d++) /* (the rows back into place) */
        if (parts[d].head.ctx) {
            const size_t slices = s.batch * s.heads, n = begin[d + 1] - begin[d];
            partition_rows_host(false, slices, s.q_len, s.v_dim, begin[d], n, out, parts[d].out_copy);
            partition_rows_host(false, slices, s.q_len, 1, begin[d], n, lse_all, parts[d].lse_copy);
        }
done:
    for (size_t d = 0; d < g->count; d++)
        part_free(&parts[d]);
    if (lse_all != lse)
        free(lse_all);
    free(scratch);
    return st;
}
