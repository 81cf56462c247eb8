/* Ring attention over MPI (include/clattn/clattn_mpi.h), a scheduler of processes. Built on clattn's public
 * API only — clattn_partition for the whole call's checks and each (query run, key run) pair's sub-call,
 * clattn_sdpa to run it, clattn_merge for the running result — so that this library is a client of
 * libclattn like any application, and libclattn itself never needs MPI.
 *
 * One call: (1) every rank sends every other rank a fingerprint of its descriptor and its own argument
 * checks (the ring's rules, then libclattn's of the whole call), and all reach the same verdict; (2) P
 * steps, in step t rank r holds the K/V slice of rank r − t: it posts the send of that slice to r + 1 and
 * the receive of the next from r − 1, enqueues the uploads
 * and kernels, and polls both until done, so that the transfer hides behind the kernels; (3) a last
 * exchange of statuses, before any output is written, so that a failure on one rank is every rank's answer
 * and no rank writes its rows. Each wait on another rank ends at the ring's timeout, or at another rank's
 * notice that it gave up (transport.c's give_up).
 *
 * This file runs the steps; shard.c cuts rows into shards, transport.c holds the MPI waits and exchanges,
 * check.c the collective checks (ring.h declares what they share). */
#include "ring.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

clattn_status ring_cl_failed(clattn_ring *r, cl_int err, const char *what)
{
    return ring_fail(r, (clattn_status)err, r->rank, "rank %d: %s failed (%s)", r->rank, what,
                     clattn_status_string((clattn_status)err));
}

clattn_status ring_make_buffer(clattn_ring *r, ring_buffers *b, size_t bytes, cl_mem *out)
{
    cl_int err = CL_SUCCESS;
    *out = clCreateBuffer(clattn_context_cl_context(r->ctx), CL_MEM_READ_WRITE, bytes ? bytes : 4, NULL, &err);
    if (err != CL_SUCCESS)
        return ring_cl_failed(r, err, "clCreateBuffer");
    b->bytes += bytes ? bytes : 4;
    return CLATTN_SUCCESS;
}

static void release_buffers(ring_buffers *b)
{
    cl_mem *all[] = {&b->q[0], &b->q[1], &b->out[0], &b->out[1], &b->lse[0], &b->lse[1], &b->k[0], &b->k[1],
                     &b->v[0], &b->v[1], &b->part_out, &b->part_lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (*all[i]) {
            clReleaseMemObject(*all[i]);
            *all[i] = NULL;
        }
}

/* (A K/V row's bytes are its format's.) */
cl_int ring_copy_rows(cl_command_queue queue, bool write, cl_mem dev, void *host, size_t slices, size_t total,
                        size_t row0, size_t rows, size_t row_bytes)
{
    const size_t buffer_origin[3] = {0, 0, 0}, host_origin[3] = {0, row0, 0}, region[3] = {row_bytes, rows, slices};
    if (write)
        return clEnqueueWriteBufferRect(queue, dev, CL_FALSE, buffer_origin, host_origin, region, row_bytes,
                                        rows * row_bytes, row_bytes, total * row_bytes, host, 0, NULL, NULL);
    return clEnqueueReadBufferRect(queue, dev, CL_FALSE, buffer_origin, host_origin, region, row_bytes,
                                   rows * row_bytes, row_bytes, total * row_bytes, host, 0, NULL, NULL);
}

static clattn_status allocate(clattn_ring *r, const ring_shape *s, ring_buffers *b)
{
    const size_t f = sizeof(float), bh = s->batch * s->heads, bkv = s->batch * s->kv_heads;
    /* Host buffers for the slices received, kept by the ring between calls. */
    const size_t need[2] = {bkv * s->max_kv_rows * s->k_row, bkv * s->max_kv_rows * s->v_row};
    for (int h = 0; h < 2; h++)
        for (int t = 0; t < 2; t++) {
            if (r->host_bytes[h][t] >= need[t])
                continue;
            void *grown = realloc(r->host[h][t], need[t] ? need[t] : 1);
            if (!grown)
                return ring_fail(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY, r->rank, "rank %d: a K/V slice's host buffer",
                                 r->rank);
            r->host[h][t] = grown;
            r->host_bytes[h][t] = need[t];
        }
    clattn_status st = CLATTN_SUCCESS;
    for (int c = 0; c < 2 && st == CLATTN_SUCCESS; c++) {
        if (!s->qs.len[c])
            continue;
        if ((st = ring_make_buffer(r, b, bh * s->qs.len[c] * s->qk_dim * f, &b->q[c])) == CLATTN_SUCCESS &&
            (st = ring_make_buffer(r, b, bh * s->qs.len[c] * s->v_dim * f, &b->out[c])) == CLATTN_SUCCESS)
            st = ring_make_buffer(r, b, bh * s->qs.len[c] * f, &b->lse[c]);
    }
    if (s->exact) { /* every key on the device at the end, no partial results */
        if (st == CLATTN_SUCCESS && (st = ring_exact_reserve(r, s)) == CLATTN_SUCCESS &&
            (st = ring_make_buffer(r, b, bkv * s->kv_len * s->k_row, &b->k[0])) == CLATTN_SUCCESS)
            st = ring_make_buffer(r, b, bkv * s->kv_len * s->v_row, &b->v[0]);
        return st;
    }
    for (int c = 0; c < 2 && st == CLATTN_SUCCESS; c++)
        if ((st = ring_make_buffer(r, b, bkv * s->max_kv_run * s->k_row, &b->k[c])) == CLATTN_SUCCESS)
            st = ring_make_buffer(r, b, bkv * s->max_kv_run * s->v_row, &b->v[c]);
    if (st == CLATTN_SUCCESS && (st = ring_make_buffer(r, b, bh * s->max_q_run * s->v_dim * f, &b->part_out)) == CLATTN_SUCCESS)
        st = ring_make_buffer(r, b, bh * s->max_q_run * f, &b->part_lse);
    return st;
}

/* Uploads the queries, starts the running results (lse −inf: "no key yet", output 0). */
static clattn_status start_results(clattn_ring *r, const ring_shape *s, ring_buffers *b, const float *q)
{
    cl_command_queue queue = clattn_context_queue(r->ctx);
    const size_t bh = s->batch * s->heads;
    for (int c = 0; c < 2; c++) {
        if (!s->qs.len[c])
            continue;
        const float minus_inf = -INFINITY, zero = 0.0f;
        cl_int err = ring_copy_rows(queue, true, b->q[c], (float *)q, bh, s->qs.rows, c ? s->qs.len[0] : 0, s->qs.len[c],
                               s->qk_dim * sizeof(float));
        if (err == CL_SUCCESS)
            err = clEnqueueFillBuffer(queue, b->lse[c], &minus_inf, sizeof minus_inf, 0, bh * s->qs.len[c] * sizeof(float),
                                      0, NULL, NULL);
        if (err == CL_SUCCESS)
            err = clEnqueueFillBuffer(queue, b->out[c], &zero, sizeof zero, 0,
                                      bh * s->qs.len[c] * s->v_dim * sizeof(float), 0, NULL, NULL);
        if (err != CL_SUCCESS)
            return ring_cl_failed(r, err, "uploading the queries");
    }
    return CLATTN_SUCCESS;
}

/* Step t's work on the device: the held slice's runs uploaded, every visible pair attended and merged
 * into its query run's result. */
static clattn_status attend_slice(clattn_ring *r, clattn_partition *partition, const ring_shape *s, ring_buffers *b,
                                  const clattn_ring_shard *ks, const void *k, const void *v, unsigned *pairs)
{
    cl_command_queue queue = clattn_context_queue(r->ctx);
    const size_t bkv = s->batch * s->kv_heads;
    for (int kc = 0; kc < 2; kc++) {
        if (!ks->len[kc])
            continue;
        bool uploaded = false;
        for (int qc = 0; qc < 2; qc++) {
            if (!s->qs.len[qc])
                continue;
            const clattn_sdpa_desc *pd = NULL;
            clattn_status st =
                clattn_partition_part(partition, s->qs.start[qc], s->qs.len[qc], ks->start[kc], ks->len[kc], &pd);
            if (st == CLATTN_SUCCESS && !pd)
                continue; /* the masks hide the pair: it adds nothing */
            if (st == CLATTN_SUCCESS && !uploaded) {
                const size_t row0 = kc ? ks->len[0] : 0;
                cl_int err = ring_copy_rows(queue, true, b->k[kc], (void *)k, bkv, ks->rows, row0, ks->len[kc], s->k_row);
                if (err == CL_SUCCESS)
                    err = ring_copy_rows(queue, true, b->v[kc], (void *)v, bkv, ks->rows, row0, ks->len[kc], s->v_row);
                if (err != CL_SUCCESS)
                    return ring_cl_failed(r, err, "uploading a K/V run");
                uploaded = true;
            }
            if (st == CLATTN_SUCCESS)
                st = clattn_sdpa(r->ctx, pd, b->q[qc], b->k[kc], b->v[kc], NULL, b->part_out, NULL, b->part_lse);
            if (st == CLATTN_SUCCESS) {
                const cl_mem outs[2] = {b->out[qc], b->part_out}, lses[2] = {b->lse[qc], b->part_lse};
                st = clattn_merge(r->ctx, pd, 2, outs, lses, b->out[qc], b->lse[qc]);
            }
            if (st != CLATTN_SUCCESS)
                return ring_fail(r, st, r->rank, "rank %d: attention over keys %zu–%zu: %s", r->rank, ks->start[kc],
                                 ks->start[kc] + ks->len[kc] - 1, clattn_last_error(r->ctx));
            ++*pairs;
        }
    }
    return CLATTN_SUCCESS;
}

/* The sinks, counted once, merged into the running results (d NULL: none to merge); the device finished. */
static clattn_status add_sinks(clattn_ring *r, const clattn_sdpa_desc *d, const ring_shape *s, ring_buffers *b)
{
    for (int c = 0; c < 2 && d && d->sinks; c++) {
        if (!s->qs.len[c])
            continue;
        clattn_sdpa_desc md = *d;
        md.q_len = s->qs.len[c];
        const clattn_status st = clattn_merge(r->ctx, &md, 1, &b->out[c], &b->lse[c], b->out[c], b->lse[c]);
        if (st != CLATTN_SUCCESS)
            return ring_fail(r, st, r->rank, "rank %d: the sinks: %s", r->rank, clattn_last_error(r->ctx));
    }
    const clattn_status st = clattn_finish(r->ctx);
    return st == CLATTN_SUCCESS ? st : ring_fail(r, st, r->rank, "rank %d: %s", r->rank, clattn_last_error(r->ctx));
}

/* The results read back into out and lse: only once every rank has succeeded (a failed call writes
 * nothing, on any rank). */
static clattn_status read_results(clattn_ring *r, const ring_shape *s, ring_buffers *b, float *out, float *lse)
{
    cl_command_queue queue = clattn_context_queue(r->ctx);
    const size_t bh = s->batch * s->heads;
    for (int c = 0; c < 2; c++) {
        if (!s->qs.len[c])
            continue;
        const size_t row0 = c ? s->qs.len[0] : 0;
        cl_int err =
            ring_copy_rows(queue, false, b->out[c], out, bh, s->qs.rows, row0, s->qs.len[c], s->v_dim * sizeof(float));
        if (err == CL_SUCCESS && lse)
            err = ring_copy_rows(queue, false, b->lse[c], lse, bh, s->qs.rows, row0, s->qs.len[c], sizeof(float));
        if (err != CL_SUCCESS)
            return ring_cl_failed(r, err, "reading the results");
    }
    const clattn_status st = clattn_finish(r->ctx);
    return st == CLATTN_SUCCESS ? st : ring_fail(r, st, r->rank, "rank %d: %s", r->rank, clattn_last_error(r->ctx));
}

/* A slice of `rows` rows of `row_bytes` bytes as an MPI count and type: 4-byte units (MPI_FLOAT, float32
 * rows' own type) where the row's bytes allow — the counts local_checks bounds — else 2 (16-bit values;
 * blocks are always an even number of bytes) or 1 (8-bit values). The ranks share byte order and widths
 * (the fingerprint's platform), and MPI converts nothing between them, so any unit carries the bytes
 * unchanged. */
static int slice_count(size_t bytes_per_slice_row, size_t rows, MPI_Datatype *type)
{
    const size_t unit = bytes_per_slice_row % 4 == 0 ? 4 : bytes_per_slice_row % 2 == 0 ? 2 : 1;
    *type = unit == 4 ? MPI_FLOAT : unit == 2 ? MPI_UINT16_T : MPI_BYTE;
    return (int)(rows * bytes_per_slice_row / unit);
}

/* Posts one step's exchange: the receives of the arriving slice's K and V from the previous rank into
 * into_k/into_v, the sends of the held slice's to the next; reqs gets the four requests (*n of them). */
static clattn_status post_exchange(clattn_ring *r, const ring_shape *s, const clattn_ring_shard *held,
                                   const clattn_ring_shard *arriving, const void *held_k, const void *held_v,
                                   void *into_k, void *into_v, MPI_Request *reqs, int *n, size_t *bytes_sent)
{
    const int next = (r->rank + 1) % r->size, prev = (r->rank + r->size - 1) % r->size;
    const size_t bkv = s->batch * s->kv_heads;
    MPI_Datatype kt, vt;
    const int kn = slice_count(bkv * s->k_row, arriving->rows, &kt), vn = slice_count(bkv * s->v_row, arriving->rows, &vt);
    const int hk = slice_count(bkv * s->k_row, held->rows, &kt), hv = slice_count(bkv * s->v_row, held->rows, &vt);
    int code = MPI_Irecv(into_k, kn, kt, prev, TAG_KEYS, r->comm, &reqs[(*n)++]);
    if (code == MPI_SUCCESS)
        code = MPI_Irecv(into_v, vn, vt, prev, TAG_VALUES, r->comm, &reqs[(*n)++]);
    if (code == MPI_SUCCESS)
        code = MPI_Isend(held_k, hk, kt, next, TAG_KEYS, r->comm, &reqs[(*n)++]);
    if (code == MPI_SUCCESS)
        code = MPI_Isend(held_v, hv, vt, next, TAG_VALUES, r->comm, &reqs[(*n)++]);
    if (code != MPI_SUCCESS)
        return ring_mpi_failed(r, code, "posting a K/V slice's send or receive");
    if (bytes_sent)
        *bytes_sent += bkv * held->rows * (s->k_row + s->v_row);
    return CLATTN_SUCCESS;
}

static size_t max_of(size_t a, size_t b) { return a > b ? a : b; }

/* The P steps. A rank whose device work fails goes on passing slices (its neighbours need them) and
 * reports at the end. */
static clattn_status run_ring(clattn_ring *r, const clattn_sdpa_desc *d, clattn_partition *partition,
                              clattn_ring_layout layout, const float *q,
                              const void *k, const void *v, float *out, float *lse, clattn_ring_stats *stats)
{
    const size_t v_dim = d->v_dim ? d->v_dim : d->qk_dim;
    ring_shape s = {d->batch, d->heads, d->kv_heads ? d->kv_heads : d->heads, d->qk_dim, v_dim,
                    clattn_dtype_bytes(d->k_dtype, d->qk_dim), clattn_dtype_bytes(d->v_dtype, v_dim),
                    {{0}, {0}, 0}, 0, 0, 0, d->kv_len, ring_reproducible(d)};
    clattn_ring_shard_of(d->q_len, r->size, r->rank, layout, &s.qs);
    for (int p = 0; p < r->size; p++) {
        clattn_ring_shard ks, qs;
        clattn_ring_shard_of(d->kv_len, r->size, p, layout, &ks);
        clattn_ring_shard_of(d->q_len, r->size, p, layout, &qs);
        s.max_kv_rows = max_of(s.max_kv_rows, ks.rows);
        s.max_kv_run = max_of(s.max_kv_run, max_of(ks.len[0], ks.len[1]));
        s.max_q_run = max_of(s.max_q_run, max_of(qs.len[0], qs.len[1]));
    }
    ring_buffers b;
    memset(&b, 0, sizeof b);
    clattn_status st = allocate(r, &s, &b);
    if (st == CLATTN_SUCCESS)
        st = start_results(r, &s, &b, q);
    /* Every rank ready (its buffers made) before any slice travels: one that is not stops them all. */
    st = ring_agree_on_status(r, st);
    const bool ready = st == CLATTN_SUCCESS;
    cl_command_queue queue = clattn_context_queue(r->ctx);
    const int next = (r->rank + 1) % r->size, prev = (r->rank + r->size - 1) % r->size;
    const void *held_k = k, *held_v = v;
    for (int t = 0; ready && t < r->size && !r->broken; t++) {
        const int owner = (r->rank - t + r->size) % r->size, incoming = (owner + r->size - 1) % r->size;
        clattn_ring_shard held, arriving;
        clattn_ring_shard_of(d->kv_len, r->size, owner, layout, &held);
        clattn_ring_shard_of(d->kv_len, r->size, incoming, layout, &arriving);
        MPI_Request reqs[4];
        int peer[4] = {prev, prev, next, next}, n = 0;
        void *into_k = r->host[t % 2][0], *into_v = r->host[t % 2][1];
        if (t + 1 < r->size) { /* the slice of step t + 1 arrives while this step's kernels run */
            const clattn_status posted = post_exchange(r, &s, &held, &arriving, held_k, held_v, into_k, into_v, reqs, &n,
                                                       stats ? &stats->bytes_sent : NULL);
            if (posted != CLATTN_SUCCESS) {
                st = posted;
                break;
            }
        }
        const double started = ring_now_s();
        cl_event marker = NULL;
        if (st == CLATTN_SUCCESS && s.exact)
            ring_exact_place(r, &s, &held, held_k, held_v); /* (attended once every slice has passed) */
        else if (st == CLATTN_SUCCESS)
            st = attend_slice(r, partition, &s, &b, &held, held_k, held_v, stats ? &stats->pairs : &(unsigned){0});
        if (st == CLATTN_SUCCESS) {
            cl_int err = clEnqueueMarkerWithWaitList(queue, 0, NULL, &marker);
            if (err == CL_SUCCESS)
                err = clFlush(queue);
            if (err != CL_SUCCESS)
                st = ring_cl_failed(r, err, "clEnqueueMarkerWithWaitList");
        }
        double device_done = started;
        char what[96];
        snprintf(what, sizeof what, "the K/V slice of rank %d, step %d", incoming, t + 1);
        if (!marker)
            clFinish(queue); /* a failed step's uploads may still read the slice received into next */
        const clattn_status waited = ring_wait_all(r, n, reqs, peer, marker, false, what, &device_done);
        if (marker) {
            cl_int exec = CL_COMPLETE;
            clGetEventInfo(marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, NULL);
            clReleaseEvent(marker);
            if (exec < 0 && st == CLATTN_SUCCESS)
                st = ring_cl_failed(r, exec, "the step's kernels");
        }
        if (waited != CLATTN_SUCCESS) {
            st = waited;
            break;
        }
        if (stats && n > 0)
            stats->wait_seconds += ring_now_s() - device_done;
        /* The kernels that read held_k/held_v are done: the buffer of step t − 1 may be received into. */
        held_k = into_k;
        held_v = into_v;
    }
    if (ready && !r->broken) {
        if (st == CLATTN_SUCCESS && s.exact)
            st = ring_exact_attend(r, d, partition, &s, &b, stats ? &stats->pairs : &(unsigned){0});
        if (st == CLATTN_SUCCESS)
            st = add_sinks(r, s.exact ? NULL : d, &s, &b);
        st = ring_agree_on_status(r, st); /* every rank's outcome, before anything is written */
        if (st == CLATTN_SUCCESS)
            st = read_results(r, &s, &b, out, lse);
    }
    clFinish(queue); /* nothing of this call may still read the caller's arrays or use the buffers below */
    if (stats) {
        stats->steps = (unsigned)r->size;
        stats->device_peak_bytes = b.bytes + clattn_context_temp_peak_bytes(r->ctx);
        stats->host_bytes = r->host_bytes[0][0] + r->host_bytes[0][1] + r->host_bytes[1][0] + r->host_bytes[1][1];
    }
    release_buffers(&b);
    return st;
}

clattn_status clattn_ring_sdpa_host(clattn_ring *r, const clattn_sdpa_desc *desc, clattn_ring_layout layout,
                                    const float *q, const void *k, const void *v, float *out, float *lse,
                                    clattn_ring_stats *stats)
{
    if (!r)
        return CLATTN_ERROR_NULL_ARGUMENT; /* alone: without a ring there is no one to tell */
    r->detail[0] = '\0';
    r->failed_rank = -1;
    if (r->broken)
        return ring_fail(r, CLATTN_ERROR_COMMUNICATION, r->rank,
                         "rank %d: this ring timed out or lost a message before; free it", r->rank);
    clattn_ring_stats local = CLATTN_RING_STATS_INIT;
    clattn_ring_stats *into = stats ? &local : NULL;
    const double started = ring_now_s();
    ring_call call;
    clattn_status st = ring_collective_check(r, desc, layout, q, k, v, out, stats, &call);
    if (st == CLATTN_SUCCESS) /* (its outcome agreed by every rank) */
        st = run_ring(r, &call.desc, call.partition, layout, q, k, v, out, lse, into);
    clattn_partition_free(call.partition);
    if (stats && st == CLATTN_SUCCESS) {
        local.seconds = ring_now_s() - started;
        /* As many bytes as the caller's struct_size names (checked): an older struct gets its fields, a newer
         * one keeps its later ones. */
        const size_t given = stats->struct_size;
        memcpy((char *)stats + sizeof stats->struct_size, (const char *)&local + sizeof local.struct_size,
               (given < sizeof local ? given : sizeof local) - sizeof local.struct_size);
    }
    return st;
}
