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
 * notice that it gave up (give_up). The caller's structs are read by clattn.h's struct_size rule
 * (../versioned_rule.h), and the ranks' fingerprints are fingerprint.c's. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "clattn/clattn_mpi.h"

#include "../base/versioned_rule.h"
#include "deadline.h"
#include "fingerprint.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TAG_CHECK = 1, TAG_KEYS = 2, TAG_VALUES = 3, TAG_STATUS = 4, TAG_NOTICE = 5 };

/* A notice: what a rank that gave up on a wait tells every other, as text ("<rank it waited on> <what>",
 * readable by a rank of any platform). */
#define NOTICE_BYTES 160

struct clattn_ring_s {
    clattn_context *ctx;
    MPI_Comm comm; /* clattn's duplicate of the application's communicator */
    int rank, size;
    double timeout_s;
    bool broken; /* a wait timed out or MPI failed: messages may be in flight, the ring cannot go on */
    int failed_rank;
    char detail[512];
    float *host[2][2]; /* [buffer][K, V]: received slices (kept, never freed, once broken) */
    size_t host_elems[2][2];
    /* Notices (see give_up): one receive from any rank always posted, every rank's last notice kept
     * ("" none), and this rank's own, which abandoned sends may read after the call. */
    MPI_Request notice_req;
    char notice_in[NOTICE_BYTES];
    char (*notices)[NOTICE_BYTES];
    char notice_out[NOTICE_BYTES];
    bool notice_sent;
};

static _Thread_local char create_detail[512];

/* ---------------------------------------------------------------------------------------------- */
/* Shards                                                                                          */
/* ---------------------------------------------------------------------------------------------- */

/* Run c of n rows cut into `runs` runs, the first n % runs one row longer. */
static void run_of(size_t n, size_t runs, size_t c, size_t *start, size_t *len)
{
    const size_t base = n / runs, extra = n % runs;
    *start = c * base + (c < extra ? c : extra);
    *len = base + (c < extra);
}

clattn_status clattn_ring_shard_of(size_t n, int ranks, int rank, clattn_ring_layout layout, clattn_ring_shard *shard)
{
    if (!shard)
        return CLATTN_ERROR_NULL_ARGUMENT;
    if (ranks < 1 || rank < 0 || rank >= ranks ||
        (layout != CLATTN_RING_CONTIGUOUS && layout != CLATTN_RING_ZIGZAG))
        return CLATTN_ERROR_INVALID_VALUE;
    memset(shard, 0, sizeof *shard);
    const size_t p = (size_t)ranks, r = (size_t)rank;
    if (layout == CLATTN_RING_CONTIGUOUS) {
        run_of(n, p, r, &shard->start[0], &shard->len[0]);
    } else {
        run_of(n, 2 * p, r, &shard->start[0], &shard->len[0]);
        run_of(n, 2 * p, 2 * p - 1 - r, &shard->start[1], &shard->len[1]);
    }
    shard->rows = shard->len[0] + shard->len[1];
    return CLATTN_SUCCESS;
}

/* Checks for _take and _put: the shard inside n rows, slices·n·width floats addressable. */
static clattn_status shard_copy_check(const clattn_ring_shard *sh, size_t slices, size_t n, size_t width,
                                      const float *a, const float *b)
{
    if (!sh || !a || !b)
        return CLATTN_ERROR_NULL_ARGUMENT;
    for (int c = 0; c < 2; c++)
        if (sh->start[c] > n || sh->len[c] > n - sh->start[c])
            return CLATTN_ERROR_INVALID_VALUE;
    if (sh->rows != sh->len[0] + sh->len[1])
        return CLATTN_ERROR_INVALID_VALUE;
    if ((width && n > SIZE_MAX / width) || (slices && n * width > SIZE_MAX / sizeof(float) / slices))
        return CLATTN_ERROR_SIZE_OVERFLOW;
    return CLATTN_SUCCESS;
}

/* Copies a shard's rows: whole → part (take) or part → whole. */
static void shard_copy(const clattn_ring_shard *sh, size_t slices, size_t n, size_t width, bool take, float *whole,
                       float *part)
{
    size_t o = 0;
    for (size_t s = 0; s < slices; s++)
        for (int c = 0; c < 2; c++) {
            float *w = whole + (s * n + sh->start[c]) * width, *p = part + o * width;
            const size_t bytes = sh->len[c] * width * sizeof(float);
            if (bytes)
                memcpy(take ? p : w, take ? w : p, bytes);
            o += sh->len[c];
        }
}

clattn_status clattn_ring_shard_take(const clattn_ring_shard *shard, size_t slices, size_t n, size_t width,
                                     const float *whole, float *part)
{
    const clattn_status st = shard_copy_check(shard, slices, n, width, whole, part);
    if (st == CLATTN_SUCCESS)
        shard_copy(shard, slices, n, width, true, (float *)whole, part);
    return st;
}

clattn_status clattn_ring_shard_put(const clattn_ring_shard *shard, size_t slices, size_t n, size_t width,
                                    const float *part, float *whole)
{
    const clattn_status st = shard_copy_check(shard, slices, n, width, whole, part);
    if (st == CLATTN_SUCCESS)
        shard_copy(shard, slices, n, width, false, whole, (float *)part);
    return st;
}

/* ---------------------------------------------------------------------------------------------- */
/* Errors and waiting                                                                              */
/* ---------------------------------------------------------------------------------------------- */

static clattn_status fail(clattn_ring *r, clattn_status st, int rank, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->detail, sizeof r->detail, fmt, ap);
    va_end(ap);
    r->failed_rank = rank;
    return st;
}

static clattn_status mpi_failed(clattn_ring *r, int code, const char *call)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, text, &len);
    r->broken = true;
    return fail(r, CLATTN_ERROR_COMMUNICATION, r->rank, "rank %d: %s failed: %s", r->rank, call, text);
}

/* Seconds for the statistics (clattn_ring_stats). The timeouts run on deadline.h's monotonic clock. */
static double now_s(void) { return MPI_Wtime(); }

static void nap(void)
{
    /* Long enough to leave a core to the device's threads (PoCL runs kernels on the host's cores),
     * short against a kernel's time. */
    const struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
}

/* Notices. A rank that gives up on a wait — its timeout passed, or a notice came — tells every other
 * rank whom it was waiting on. Every wait also ends at a notice, so that one rank that stops answering
 * ends every rank's call at once, and each rank names it by following who waited on whom: rank 3 waits
 * on rank 2, which reported that it waited on rank 1, which reported nothing — rank 1 stopped. */

/* Moves the notices that arrived into r->notices; how many did. */
static int notices_poll(clattn_ring *r)
{
    int arrived = 0;
    while (r->notices && r->notice_req != MPI_REQUEST_NULL) {
        int flag = 0;
        MPI_Status status;
        if (MPI_Test(&r->notice_req, &flag, &status) != MPI_SUCCESS || !flag)
            break;
        if (status.MPI_SOURCE >= 0 && status.MPI_SOURCE < r->size) {
            r->notice_in[NOTICE_BYTES - 1] = '\0';
            memcpy(r->notices[status.MPI_SOURCE], r->notice_in, NOTICE_BYTES);
            arrived++;
        }
        if (MPI_Irecv(r->notice_in, NOTICE_BYTES, MPI_BYTE, MPI_ANY_SOURCE, TAG_NOTICE, r->comm, &r->notice_req) !=
            MPI_SUCCESS)
            r->notice_req = MPI_REQUEST_NULL;
    }
    return arrived;
}

/* The rank that rank `from`'s notice says it waited on (−1: none, or no notice). */
static int notice_waited_on(const clattn_ring *r, int from, const char **what)
{
    int waited_on = -1, used = 0;
    if (from < 0 || from >= r->size || !r->notices[from][0] ||
        sscanf(r->notices[from], "%d %n", &waited_on, &used) != 1 || waited_on < -1 || waited_on >= r->size)
        return -1;
    if (what)
        *what = r->notices[from] + used;
    return waited_on;
}

/* The end of the chain of waits from rank `start`: the first rank that sent no notice (or this rank, or
 * the start of a cycle). *reporter is the last rank whose notice moved the chain (−1: none). */
static int follow_waits(const clattn_ring *r, int start, int *reporter)
{
    bool *seen = calloc((size_t)r->size, sizeof *seen);
    int at = start;
    *reporter = -1;
    if (!seen)
        return start;
    seen[r->rank] = true;
    while (at >= 0 && !seen[at]) {
        seen[at] = true;
        const int next = notice_waited_on(r, at, NULL);
        if (next < 0)
            break;
        *reporter = at;
        at = next;
    }
    free(seen);
    return at;
}

/* This rank gives up on a wait in which it was waiting on rank `late` (−1: on no one, a notice ended
 * it): it tells every other rank, gathers their notices for a grace (until every rank but the one
 * named has reported), and names the rank at the end of the chain of waits. */
static clattn_status give_up(clattn_ring *r, int late, const char *what)
{
    r->broken = true;
    if (!r->notices)
        return fail(r, CLATTN_ERROR_TIMEOUT, late, "rank %d: rank %d did not answer within %g s (%s)", r->rank, late,
                    r->timeout_s, what);
    if (!r->notice_sent) {
        r->notice_sent = true;
        snprintf(r->notice_out, sizeof r->notice_out, "%d %s", late, what);
        for (int i = 0; i < r->size; i++) {
            MPI_Request req = MPI_REQUEST_NULL;
            if (i != r->rank && MPI_Isend(r->notice_out, NOTICE_BYTES, MPI_BYTE, i, TAG_NOTICE, r->comm, &req) ==
                                    MPI_SUCCESS)
                MPI_Request_free(&req); /* abandoned: a rank that stopped may never receive it */
        }
    }
    /* A rank that gave up without waiting on anyone starts from the first notice it holds. */
    int start = late, first_reporter = -1, reporter = -1, named = -1;
    const ring_deadline until = ring_deadline_after(ring_clock_now(), r->timeout_s < 2.0 ? r->timeout_s : 2.0);
    for (;;) {
        for (int i = 0; start < 0 && i < r->size; i++)
            if (i != r->rank && (start = notice_waited_on(r, i, NULL)) >= 0)
                first_reporter = i;
        named = follow_waits(r, start, &reporter);
        if (reporter < 0)
            reporter = first_reporter;
        int silent = 0;
        for (int i = 0; i < r->size; i++)
            silent += i != r->rank && i != named && !r->notices[i][0];
        if (!silent || ring_deadline_reached(&until, ring_clock_now()))
            break;
        nap();
        notices_poll(r);
    }
    if (reporter < 0)
        return fail(r, CLATTN_ERROR_TIMEOUT, named, "rank %d: rank %d did not answer within %g s (%s)", r->rank, named,
                    r->timeout_s, what);
    const char *reported = "";
    notice_waited_on(r, reporter, &reported);
    return fail(r, CLATTN_ERROR_TIMEOUT, named, "rank %d: rank %d did not answer within %g s (%s, as rank %d reported)",
                r->rank, named, r->timeout_s, reported, reporter);
}

/* One wait: requests on other ranks (peer[i] is the rank request i waits on) and, when `device` is given,
 * the kernels before that event. The timeout runs from when this rank's own work is done (the device's,
 * else the call's start), on deadline.h's monotonic clock: this rank gives up only once a fresh reading
 * of the clock, after every poll and nap, is at or past that deadline — never sooner. A notice from
 * another rank that gave up ends the wait too (give_up), which can be sooner by this rank's clock: that
 * rank's own timeout ran out, from its own start, which may have come before this rank's. Then the
 * point-to-point receives are cancelled and the sends abandoned (a collective request cannot be:
 * `collective` leaves it be), and the ring is marked broken. *device_done_at, when given, receives the
 * time the device finished. */
static clattn_status wait_all(clattn_ring *r, int n, MPI_Request *reqs, const int *peer, cl_event device,
                              bool collective, const char *what, double *device_done_at)
{
    bool own_done = !device;
    ring_deadline deadline = ring_deadline_after(ring_clock_now(), r->timeout_s);
    for (;;) {
        if (!own_done) {
            cl_int exec = CL_QUEUED;
            const cl_int err = clGetEventInfo(device, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, NULL);
            /* Failed kernels (an error or a negative status) end this rank's own work too: it finishes
             * waiting on the others regardless (the ring must go on). */
            if (err != CL_SUCCESS || exec < 0 || exec == CL_COMPLETE) {
                own_done = true;
                deadline = ring_deadline_after(ring_clock_now(), r->timeout_s);
                if (device_done_at)
                    *device_done_at = now_s();
            }
        }
        int done = 1;
        if (n > 0) {
            const int code = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
            if (code != MPI_SUCCESS)
                return mpi_failed(r, code, "MPI_Testall");
        }
        if (notices_poll(r))
            break; /* another rank gave up: this call cannot succeed */
        if (done && own_done)
            return CLATTN_SUCCESS;
        if (own_done && ring_deadline_reached(&deadline, ring_clock_now()))
            break;
        nap();
    }
    /* Given up: name the first rank still owing something, then let go of every request. */
    int late = -1;
    for (int i = 0; i < n; i++) {
        int flag = 1;
        if (reqs[i] != MPI_REQUEST_NULL)
            MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
        if (!flag) {
            if (late < 0)
                late = peer[i];
            if (!collective) {
                MPI_Cancel(&reqs[i]);
                MPI_Request_free(&reqs[i]); /* a send that was never matched: abandoned with its buffer */
            }
        }
    }
    return give_up(r, late, what);
}

/* Every rank sends `bytes` of `mine` to every other and receives theirs: all[i·bytes] is rank i's. */
static clattn_status exchange_all(clattn_ring *r, const void *mine, int bytes, void *all, int tag, const char *what)
{
    const int p = r->size;
    MPI_Request *reqs = malloc(2 * (size_t)p * sizeof *reqs);
    int *peer = malloc(2 * (size_t)p * sizeof *peer);
    void *sent = malloc((size_t)bytes); /* what the sends read: a send abandoned on timeout may read it later */
    if (!reqs || !peer || !sent) {
        free(reqs);
        free(peer);
        free(sent);
        return fail(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY, r->rank, "rank %d: the exchange's requests", r->rank);
    }
    memcpy(sent, mine, (size_t)bytes);
    mine = sent;
    memcpy((char *)all + (size_t)r->rank * (size_t)bytes, mine, (size_t)bytes);
    int n = 0, code = MPI_SUCCESS;
    for (int i = 0; i < p && code == MPI_SUCCESS; i++) {
        if (i == r->rank)
            continue;
        peer[n] = i;
        code = MPI_Irecv((char *)all + (size_t)i * (size_t)bytes, bytes, MPI_BYTE, i, tag, r->comm, &reqs[n++]);
        if (code == MPI_SUCCESS) {
            peer[n] = i;
            code = MPI_Isend(mine, bytes, MPI_BYTE, i, tag, r->comm, &reqs[n++]);
        }
    }
    clattn_status st = code == MPI_SUCCESS ? wait_all(r, n, reqs, peer, NULL, false, what, NULL)
                                           : mpi_failed(r, code, "MPI_Isend/MPI_Irecv");
    free(reqs);
    free(peer);
    if (!r->broken)
        free(sent); /* else MPI may still read it: kept (the caller keeps `all` too) */
    return st;
}

/* ---------------------------------------------------------------------------------------------- */
/* Create and free                                                                                 */
/* ---------------------------------------------------------------------------------------------- */

clattn_status clattn_ring_create(clattn_ring **out, clattn_context *ctx, MPI_Comm comm, double timeout_s)
{
    create_detail[0] = '\0';
    if (!out || !ctx) {
        snprintf(create_detail, sizeof create_detail, "%s is NULL", !out ? "ring" : "ctx");
        return CLATTN_ERROR_NULL_ARGUMENT;
    }
    *out = NULL;
    if (!(timeout_s >= 0.0) || isinf(timeout_s)) {
        snprintf(create_detail, sizeof create_detail, "timeout_s is %g: 0 (60 s) or a positive time", timeout_s);
        return CLATTN_ERROR_INVALID_VALUE;
    }
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized || comm == MPI_COMM_NULL) {
        snprintf(create_detail, sizeof create_detail, "%s", !initialized ? "MPI is not initialised" : "comm is MPI_COMM_NULL");
        return !initialized ? CLATTN_ERROR_COMMUNICATION : CLATTN_ERROR_NULL_ARGUMENT;
    }
    clattn_ring *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(create_detail, sizeof create_detail, "allocating the ring");
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    }
    r->ctx = ctx;
    r->timeout_s = timeout_s > 0 ? timeout_s : 60.0;
    r->failed_rank = -1;
    r->comm = MPI_COMM_NULL;
    r->notice_req = MPI_REQUEST_NULL;
    MPI_Comm_rank(comm, &r->rank);
    MPI_Comm_size(comm, &r->size);
    /* A non-blocking duplicate, so that a rank that never arrives ends in a timeout, not a hang. */
    MPI_Request req = MPI_REQUEST_NULL;
    int code = MPI_Comm_idup(comm, &r->comm, &req);
    clattn_status st = code == MPI_SUCCESS
                           ? wait_all(r, 1, &req, &(int){0}, NULL, true, "duplicating the communicator", NULL)
                           : mpi_failed(r, code, "MPI_Comm_idup");
    if (st == CLATTN_SUCCESS && (code = MPI_Comm_set_errhandler(r->comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS)
        st = mpi_failed(r, code, "MPI_Comm_set_errhandler");
    if (st == CLATTN_SUCCESS && !(r->notices = calloc((size_t)r->size, sizeof *r->notices)))
        st = fail(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY, r->rank, "rank %d: the notices", r->rank);
    if (st == CLATTN_SUCCESS && (code = MPI_Irecv(r->notice_in, NOTICE_BYTES, MPI_BYTE, MPI_ANY_SOURCE, TAG_NOTICE,
                                                  r->comm, &r->notice_req)) != MPI_SUCCESS)
        st = mpi_failed(r, code, "MPI_Irecv (notices)");
    if (st != CLATTN_SUCCESS) {
        snprintf(create_detail, sizeof create_detail, "%s", r->detail);
        if (r->broken)
            return st; /* the unfinished duplication may still write r->comm: r is left to it */
        if (r->comm != MPI_COMM_NULL)
            MPI_Comm_free(&r->comm);
        free(r->notices);
        free(r);
        return st;
    }
    *out = r;
    return CLATTN_SUCCESS;
}

void clattn_ring_free(clattn_ring *r)
{
    if (!r)
        return;
    if (r->broken)
        return; /* an abandoned send may still read the host buffers; the communicator may hold messages */
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 2; t++)
            free(r->host[b][t]);
    if (r->notice_req != MPI_REQUEST_NULL) { /* (a cancelled receive completes at once) */
        MPI_Cancel(&r->notice_req);
        MPI_Wait(&r->notice_req, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&r->comm);
    free(r->notices);
    free(r);
}

int clattn_ring_rank(const clattn_ring *r) { return r ? r->rank : -1; }
int clattn_ring_size(const clattn_ring *r) { return r ? r->size : 0; }
int clattn_ring_failed_rank(const clattn_ring *r) { return r ? r->failed_rank : -1; }
const char *clattn_ring_last_error(const clattn_ring *r) { return r ? r->detail : create_detail; }

/* ---------------------------------------------------------------------------------------------- */
/* The collective check                                                                            */
/* ---------------------------------------------------------------------------------------------- */

/* The caller's structs, read by the struct_size rule (versioned_rule.h, as libclattn reads them): an
 * older struct's missing fields take their defaults (0), a newer one's unknown fields must be 0. */
typedef struct ring_call {
    clattn_sdpa_desc desc; /* desc.masks points to `masks` when the caller gave masks */
    clattn_masks masks;
    clattn_partition *partition; /* the call, checked by libclattn: the pairs' sub-calls come from it */
} ring_call;

/* clattn_ring_stats as published in 0.6: the oldest struct_size read. */
#define RING_STATS_SIZE_0_6 (offsetof(clattn_ring_stats, wait_seconds) + sizeof(double))

static clattn_status read_versioned(const void *src, size_t ours, size_t oldest, const char *name, const char *init,
                                    void *dst, char *detail, size_t cap)
{
    size_t given = 0, byte = 0;
    switch (versioned_check(src, ours, ours, oldest, &given, &byte)) {
    case VERSIONED_BAD_SIZE:
        snprintf(detail, cap, "%s->struct_size is %zu, not the size of any version of it (start from %s)", name,
                 given, init);
        return CLATTN_ERROR_INVALID_VALUE;
    case VERSIONED_RESERVED_SET: /* (no reserved bytes are passed: fields_end is ours) */
    case VERSIONED_UNKNOWN_FIELD:
        snprintf(detail, cap, "%s sets a field at byte %zu that this clattn_mpi (%s, %zu bytes) does not know: the "
                 "program was built against a newer header", name, byte, CLATTN_VERSION_STRING, ours);
        return CLATTN_ERROR_INVALID_VALUE;
    case VERSIONED_OK:
        break;
    }
    if (dst)
        versioned_take(src, given, ours, dst);
    return CLATTN_SUCCESS;
}

static bool mul_ok(size_t a, size_t b, size_t *out)
{
    if (b && a > SIZE_MAX / b)
        return false;
    *out = a * b;
    return true;
}

/* This rank's own checks, before anything is exchanged: the caller's structs read into *call, the ring's
 * own rules, libclattn's checks of the whole call (clattn_partition_create: those of clattn_sdpa), then
 * what clattn_sdpa cannot see (the host arrays, the message sizes). */
static clattn_status local_checks(clattn_ring *r, const clattn_sdpa_desc *given, clattn_ring_layout layout,
                                  const float *q, const float *k, const float *v, const float *out,
                                  const clattn_ring_stats *stats, ring_call *call, char *detail, size_t cap)
{
    if (!given) {
        snprintf(detail, cap, "desc is NULL");
        return CLATTN_ERROR_NULL_ARGUMENT;
    }
    clattn_status st = read_versioned(given, sizeof call->desc, SDPA_DESC_SIZE_0_2, "desc", "CLATTN_SDPA_DESC_INIT",
                                      &call->desc, detail, cap);
    if (st == CLATTN_SUCCESS && call->desc.masks) {
        st = read_versioned(call->desc.masks, sizeof call->masks, MASKS_SIZE_0_2, "desc->masks", "CLATTN_MASKS_INIT",
                            &call->masks, detail, cap);
        call->desc.masks = &call->masks;
        call->masks.struct_size = sizeof call->masks;
    }
    if (st == CLATTN_SUCCESS && stats)
        st = read_versioned(stats, sizeof *stats, RING_STATS_SIZE_0_6, "stats", "CLATTN_RING_STATS_INIT", NULL, detail,
                            cap);
    if (st != CLATTN_SUCCESS)
        return st;
    call->desc.struct_size = sizeof call->desc; /* what clattn_sdpa is handed: this header's struct, whole */
    const clattn_sdpa_desc *d = &call->desc;
    if (layout != CLATTN_RING_CONTIGUOUS && layout != CLATTN_RING_ZIGZAG) {
        snprintf(detail, cap, "layout %d is not a clattn_ring_layout", (int)layout);
        return CLATTN_ERROR_INVALID_VALUE;
    }
    const size_t kv_heads = d->kv_heads ? d->kv_heads : d->heads, v_dim = d->v_dim ? d->v_dim : d->qk_dim;
    const clattn_masks *m = d->masks;
    /* The ring's own rules first: libclattn would word them as its own calls' (a NULL mask, int8 scales). */
    if (m && m->additive != CLATTN_MASK_NONE) {
        snprintf(detail, cap, "ring calls take no additive mask (masks->additive)");
        return CLATTN_ERROR_INVALID_VALUE;
    }
    if (d->q_dtype || d->k_dtype || d->v_dtype || d->out_dtype) {
        snprintf(detail, cap, "ring calls take float32 tensors (desc's storage types)");
        return CLATTN_ERROR_INVALID_VALUE;
    }
    if (d->algorithm == CLATTN_ALGORITHM_STAGED && d->weights_output != CLATTN_WEIGHTS_SOFTMAX) {
        snprintf(detail, cap, "ring calls return no weights (desc->weights_output)");
        return CLATTN_ERROR_INVALID_VALUE;
    }
    /* The whole call, as clattn_sdpa checks it: the pairs' shifted positions and clipped lengths could no
     * longer show a bad value of the call's own (a key length beyond S, an offset beyond ±2^61). */
    if ((st = clattn_partition_create(r->ctx, d, 0, &call->partition)) != CLATTN_SUCCESS) {
        snprintf(detail, cap, "%s", clattn_last_error(r->ctx));
        return st;
    }
    if ((size_t)r->size > d->q_len || (size_t)r->size > d->kv_len) {
        const bool queries = (size_t)r->size > d->q_len;
        snprintf(detail, cap, "%d ranks for %zu %s: every rank needs at least one", r->size,
                 queries ? d->q_len : d->kv_len, queries ? "queries" : "keys");
        return CLATTN_ERROR_INVALID_VALUE;
    }
    if (!q || !k || !v || !out) {
        snprintf(detail, cap, "host array %s is NULL", !q ? "q" : !k ? "k" : !v ? "v" : "out");
        return CLATTN_ERROR_NULL_ARGUMENT;
    }
    /* Sizes must not overflow, and the longest K or V slice any rank sends (a run of ⌈S/P⌉ rows at
     * most), in floats, must fit an MPI count (an int). */
    const size_t width = d->qk_dim > v_dim ? d->qk_dim : v_dim;
    size_t q_elems, slice_elems;
    if (!mul_ok(d->batch, d->heads, &q_elems) || !mul_ok(q_elems, d->q_len, &q_elems) ||
        !mul_ok(q_elems, width, &q_elems) || !mul_ok(d->batch, kv_heads, &slice_elems) ||
        !mul_ok(slice_elems, d->kv_len / (size_t)r->size + 1, &slice_elems) ||
        !mul_ok(slice_elems, width, &slice_elems) || slice_elems > INT_MAX) {
        snprintf(detail, cap, "the tensors' sizes overflow, or a rank's K or V slice passes an MPI message's %d "
                 "floats", INT_MAX);
        return CLATTN_ERROR_SIZE_OVERFLOW;
    }
    return CLATTN_SUCCESS;
}

/* Exchange fingerprints (fingerprint.h), all ranks reaching the same verdict; on success *call holds the
 * caller's structs as read. */
static clattn_status collective_check(clattn_ring *r, const clattn_sdpa_desc *given, clattn_ring_layout layout,
                                      const float *q, const float *k, const float *v, const float *out,
                                      const clattn_ring_stats *stats, ring_call *call)
{
    ring_fingerprint mine;
    memset(&mine, 0, sizeof mine);
    memset(call, 0, sizeof *call);
    mine.status = local_checks(r, given, layout, q, k, v, out, stats, call, mine.detail, sizeof mine.detail);
    ring_platform(mine.platform);
    if (mine.status == CLATTN_SUCCESS)
        ring_fingerprint_fill(&call->desc, layout, &mine);
    ring_fingerprint *all = malloc((size_t)r->size * sizeof *all);
    if (!all)
        return fail(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY, r->rank, "rank %d: the fingerprints", r->rank);
    clattn_status st = exchange_all(r, &mine, (int)sizeof mine, all, TAG_CHECK, "the check of shapes and options");
    if (st == CLATTN_SUCCESS) {
        /* (0 when the descriptor could not be read: call is zeroed) */
        const size_t least_rows = call->desc.q_len < call->desc.kv_len ? call->desc.q_len : call->desc.kv_len;
        int who = -1;
        char detail[sizeof r->detail];
        st = ring_fingerprints_verdict(all, r->size, least_rows, &who, detail, sizeof detail);
        if (st != CLATTN_SUCCESS)
            fail(r, st, who, "%s", detail);
    }
    if (!r->broken)
        free(all); /* else an abandoned receive may still write it */
    return st;
}

/* After the ring: every rank's status, the first failure everyone's answer. */
static clattn_status agree_on_status(clattn_ring *r, clattn_status st)
{
    typedef struct outcome {
        int32_t status, failed_rank;
        char detail[sizeof r->detail];
    } outcome;
    outcome mine = {(int32_t)st, r->failed_rank, {0}};
    if (st != CLATTN_SUCCESS)
        snprintf(mine.detail, sizeof mine.detail, "%s", r->detail);
    outcome *all = malloc((size_t)r->size * sizeof *all);
    if (!all)
        return fail(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY, r->rank, "rank %d: the statuses", r->rank);
    clattn_status agreed = exchange_all(r, &mine, (int)sizeof mine, all, TAG_STATUS, "the statuses of the call");
    for (int i = 0; i < r->size && agreed == CLATTN_SUCCESS; i++)
        if (all[i].status != CLATTN_SUCCESS) {
            all[i].detail[sizeof all[i].detail - 1] = '\0';
            agreed = fail(r, (clattn_status)all[i].status, all[i].failed_rank, "%s", all[i].detail);
        }
    if (!r->broken)
        free(all);
    return agreed;
}

/* ---------------------------------------------------------------------------------------------- */
/* The ring                                                                                        */
/* ---------------------------------------------------------------------------------------------- */

/* The device side of one call: the rank's query runs, the K/V runs held, and the running results. */
typedef struct ring_buffers {
    cl_mem q[2], out[2], lse[2]; /* per query run */
    cl_mem k[2], v[2];           /* per run of the K/V slice held */
    cl_mem part_out, part_lse;   /* one pair's result before it is merged */
    size_t bytes;
} ring_buffers;

static clattn_status cl_failed(clattn_ring *r, cl_int err, const char *what)
{
    return fail(r, (clattn_status)err, r->rank, "rank %d: %s failed (%s)", r->rank, what,
                clattn_status_string((clattn_status)err));
}

static clattn_status make_buffer(clattn_ring *r, ring_buffers *b, size_t bytes, cl_mem *out)
{
    cl_int err = CL_SUCCESS;
    *out = clCreateBuffer(clattn_context_cl_context(r->ctx), CL_MEM_READ_WRITE, bytes ? bytes : 4, NULL, &err);
    if (err != CL_SUCCESS)
        return cl_failed(r, err, "clCreateBuffer");
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

/* Rows [row0, row0 + rows) of each of `slices` (B·heads) slices of a host tensor with `total` rows of
 * `width` floats, to or from a device buffer holding just those rows. */
static cl_int copy_rows(cl_command_queue queue, bool write, cl_mem dev, float *host, size_t slices, size_t total,
                        size_t row0, size_t rows, size_t width)
{
    const size_t row_bytes = width * sizeof(float);
    const size_t buffer_origin[3] = {0, 0, 0}, host_origin[3] = {0, row0, 0}, region[3] = {row_bytes, rows, slices};
    if (write)
        return clEnqueueWriteBufferRect(queue, dev, CL_FALSE, buffer_origin, host_origin, region, row_bytes,
                                        rows * row_bytes, row_bytes, total * row_bytes, host, 0, NULL, NULL);
    return clEnqueueReadBufferRect(queue, dev, CL_FALSE, buffer_origin, host_origin, region, row_bytes,
                                   rows * row_bytes, row_bytes, total * row_bytes, host, 0, NULL, NULL);
}

/* A call's shape, resolved. */
typedef struct ring_shape {
    size_t batch, heads, kv_heads, qk_dim, v_dim;
    clattn_ring_shard qs; /* this rank's queries */
    size_t max_kv_rows;   /* the longest K/V slice of any rank */
    size_t max_kv_run;    /* the longest run of one */
    size_t max_q_run;
} ring_shape;

static clattn_status allocate(clattn_ring *r, const ring_shape *s, ring_buffers *b)
{
    const size_t f = sizeof(float), bh = s->batch * s->heads, bkv = s->batch * s->kv_heads;
    /* Host buffers for the slices received, kept by the ring between calls. */
    const size_t need[2] = {bkv * s->max_kv_rows * s->qk_dim, bkv * s->max_kv_rows * s->v_dim};
    for (int h = 0; h < 2; h++)
        for (int t = 0; t < 2; t++) {
            if (r->host_elems[h][t] >= need[t])
                continue;
            float *grown = realloc(r->host[h][t], need[t] * f);
            if (!grown)
                return fail(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY, r->rank, "rank %d: a K/V slice's host buffer", r->rank);
            r->host[h][t] = grown;
            r->host_elems[h][t] = need[t];
        }
    clattn_status st = CLATTN_SUCCESS;
    for (int c = 0; c < 2 && st == CLATTN_SUCCESS; c++) {
        if (!s->qs.len[c])
            continue;
        if ((st = make_buffer(r, b, bh * s->qs.len[c] * s->qk_dim * f, &b->q[c])) == CLATTN_SUCCESS &&
            (st = make_buffer(r, b, bh * s->qs.len[c] * s->v_dim * f, &b->out[c])) == CLATTN_SUCCESS)
            st = make_buffer(r, b, bh * s->qs.len[c] * f, &b->lse[c]);
    }
    for (int c = 0; c < 2 && st == CLATTN_SUCCESS; c++)
        if ((st = make_buffer(r, b, bkv * s->max_kv_run * s->qk_dim * f, &b->k[c])) == CLATTN_SUCCESS)
            st = make_buffer(r, b, bkv * s->max_kv_run * s->v_dim * f, &b->v[c]);
    if (st == CLATTN_SUCCESS && (st = make_buffer(r, b, bh * s->max_q_run * s->v_dim * f, &b->part_out)) == CLATTN_SUCCESS)
        st = make_buffer(r, b, bh * s->max_q_run * f, &b->part_lse);
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
        cl_int err = copy_rows(queue, true, b->q[c], (float *)q, bh, s->qs.rows, c ? s->qs.len[0] : 0, s->qs.len[c],
                               s->qk_dim);
        if (err == CL_SUCCESS)
            err = clEnqueueFillBuffer(queue, b->lse[c], &minus_inf, sizeof minus_inf, 0, bh * s->qs.len[c] * sizeof(float),
                                      0, NULL, NULL);
        if (err == CL_SUCCESS)
            err = clEnqueueFillBuffer(queue, b->out[c], &zero, sizeof zero, 0,
                                      bh * s->qs.len[c] * s->v_dim * sizeof(float), 0, NULL, NULL);
        if (err != CL_SUCCESS)
            return cl_failed(r, err, "uploading the queries");
    }
    return CLATTN_SUCCESS;
}

/* Step t's work on the device: the held slice's runs uploaded, every visible pair attended and merged
 * into its query run's result. */
static clattn_status attend_slice(clattn_ring *r, clattn_partition *partition, const ring_shape *s, ring_buffers *b,
                                  const clattn_ring_shard *ks, const float *k, const float *v, unsigned *pairs)
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
                cl_int err = copy_rows(queue, true, b->k[kc], (float *)k, bkv, ks->rows, row0, ks->len[kc], s->qk_dim);
                if (err == CL_SUCCESS)
                    err = copy_rows(queue, true, b->v[kc], (float *)v, bkv, ks->rows, row0, ks->len[kc], s->v_dim);
                if (err != CL_SUCCESS)
                    return cl_failed(r, err, "uploading a K/V run");
                uploaded = true;
            }
            if (st == CLATTN_SUCCESS)
                st = clattn_sdpa(r->ctx, pd, b->q[qc], b->k[kc], b->v[kc], NULL, b->part_out, NULL, b->part_lse);
            if (st == CLATTN_SUCCESS) {
                const cl_mem outs[2] = {b->out[qc], b->part_out}, lses[2] = {b->lse[qc], b->part_lse};
                st = clattn_merge(r->ctx, pd, 2, outs, lses, b->out[qc], b->lse[qc]);
            }
            if (st != CLATTN_SUCCESS)
                return fail(r, st, r->rank, "rank %d: attention over keys %zu–%zu: %s", r->rank, ks->start[kc],
                            ks->start[kc] + ks->len[kc] - 1, clattn_last_error(r->ctx));
            ++*pairs;
        }
    }
    return CLATTN_SUCCESS;
}

/* The sinks (counted once) and the results read back into out and lse. */
/* The sinks, counted once, merged into the running results; the device finished. */
static clattn_status add_sinks(clattn_ring *r, const clattn_sdpa_desc *d, const ring_shape *s, ring_buffers *b)
{
    for (int c = 0; c < 2 && d->sinks; c++) {
        if (!s->qs.len[c])
            continue;
        clattn_sdpa_desc md = *d;
        md.q_len = s->qs.len[c];
        const clattn_status st = clattn_merge(r->ctx, &md, 1, &b->out[c], &b->lse[c], b->out[c], b->lse[c]);
        if (st != CLATTN_SUCCESS)
            return fail(r, st, r->rank, "rank %d: the sinks: %s", r->rank, clattn_last_error(r->ctx));
    }
    const clattn_status st = clattn_finish(r->ctx);
    return st == CLATTN_SUCCESS ? st : fail(r, st, r->rank, "rank %d: %s", r->rank, clattn_last_error(r->ctx));
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
        cl_int err = copy_rows(queue, false, b->out[c], out, bh, s->qs.rows, row0, s->qs.len[c], s->v_dim);
        if (err == CL_SUCCESS && lse)
            err = copy_rows(queue, false, b->lse[c], lse, bh, s->qs.rows, row0, s->qs.len[c], 1);
        if (err != CL_SUCCESS)
            return cl_failed(r, err, "reading the results");
    }
    const clattn_status st = clattn_finish(r->ctx);
    return st == CLATTN_SUCCESS ? st : fail(r, st, r->rank, "rank %d: %s", r->rank, clattn_last_error(r->ctx));
}

/* Posts one step's exchange: the receives of the arriving slice's K and V from the previous rank into
 * into_k/into_v, the sends of the held slice's to the next; reqs gets the four requests (*n of them). */
static clattn_status post_exchange(clattn_ring *r, const ring_shape *s, const clattn_ring_shard *held,
                                   const clattn_ring_shard *arriving, const float *held_k, const float *held_v,
                                   float *into_k, float *into_v, MPI_Request *reqs, int *n, size_t *bytes_sent)
{
    const int next = (r->rank + 1) % r->size, prev = (r->rank + r->size - 1) % r->size;
    const size_t bkv = s->batch * s->kv_heads;
    /* (counts fit an int: local_checks bounds the longest slice) */
    const int kn = (int)(bkv * arriving->rows * s->qk_dim), vn = (int)(bkv * arriving->rows * s->v_dim);
    const int hk = (int)(bkv * held->rows * s->qk_dim), hv = (int)(bkv * held->rows * s->v_dim);
    int code = MPI_Irecv(into_k, kn, MPI_FLOAT, prev, TAG_KEYS, r->comm, &reqs[(*n)++]);
    if (code == MPI_SUCCESS)
        code = MPI_Irecv(into_v, vn, MPI_FLOAT, prev, TAG_VALUES, r->comm, &reqs[(*n)++]);
    if (code == MPI_SUCCESS)
        code = MPI_Isend(held_k, hk, MPI_FLOAT, next, TAG_KEYS, r->comm, &reqs[(*n)++]);
    if (code == MPI_SUCCESS)
        code = MPI_Isend(held_v, hv, MPI_FLOAT, next, TAG_VALUES, r->comm, &reqs[(*n)++]);
    if (code != MPI_SUCCESS)
        return mpi_failed(r, code, "posting a K/V slice's send or receive");
    if (bytes_sent)
        *bytes_sent += ((size_t)hk + (size_t)hv) * sizeof(float);
    return CLATTN_SUCCESS;
}

static size_t max_of(size_t a, size_t b) { return a > b ? a : b; }

/* The P steps. A rank whose device work fails goes on passing slices (its neighbours need them) and
 * reports at the end. */
static clattn_status run_ring(clattn_ring *r, const clattn_sdpa_desc *d, clattn_partition *partition,
                              clattn_ring_layout layout, const float *q,
                              const float *k, const float *v, float *out, float *lse, clattn_ring_stats *stats)
{
    ring_shape s = {d->batch, d->heads, d->kv_heads ? d->kv_heads : d->heads, d->qk_dim,
                    d->v_dim ? d->v_dim : d->qk_dim, {{0}, {0}, 0}, 0, 0, 0};
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
    st = agree_on_status(r, st);
    const bool ready = st == CLATTN_SUCCESS;
    cl_command_queue queue = clattn_context_queue(r->ctx);
    const int next = (r->rank + 1) % r->size, prev = (r->rank + r->size - 1) % r->size;
    const float *held_k = k, *held_v = v;
    for (int t = 0; ready && t < r->size && !r->broken; t++) {
        const int owner = (r->rank - t + r->size) % r->size, incoming = (owner + r->size - 1) % r->size;
        clattn_ring_shard held, arriving;
        clattn_ring_shard_of(d->kv_len, r->size, owner, layout, &held);
        clattn_ring_shard_of(d->kv_len, r->size, incoming, layout, &arriving);
        MPI_Request reqs[4];
        int peer[4] = {prev, prev, next, next}, n = 0;
        float *into_k = r->host[t % 2][0], *into_v = r->host[t % 2][1];
        if (t + 1 < r->size) { /* the slice of step t + 1 arrives while this step's kernels run */
            const clattn_status posted = post_exchange(r, &s, &held, &arriving, held_k, held_v, into_k, into_v, reqs, &n,
                                                       stats ? &stats->bytes_sent : NULL);
            if (posted != CLATTN_SUCCESS) {
                st = posted;
                break;
            }
        }
        const double started = now_s();
        cl_event marker = NULL;
        if (st == CLATTN_SUCCESS)
            st = attend_slice(r, partition, &s, &b, &held, held_k, held_v, stats ? &stats->pairs : &(unsigned){0});
        if (st == CLATTN_SUCCESS) {
            cl_int err = clEnqueueMarkerWithWaitList(queue, 0, NULL, &marker);
            if (err == CL_SUCCESS)
                err = clFlush(queue);
            if (err != CL_SUCCESS)
                st = cl_failed(r, err, "clEnqueueMarkerWithWaitList");
        }
        double device_done = started;
        char what[96];
        snprintf(what, sizeof what, "the K/V slice of rank %d, step %d", incoming, t + 1);
        if (!marker)
            clFinish(queue); /* a failed step's uploads may still read the slice received into next */
        const clattn_status waited = wait_all(r, n, reqs, peer, marker, false, what, &device_done);
        if (marker) {
            cl_int exec = CL_COMPLETE;
            clGetEventInfo(marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, NULL);
            clReleaseEvent(marker);
            if (exec < 0 && st == CLATTN_SUCCESS)
                st = cl_failed(r, exec, "the step's kernels");
        }
        if (waited != CLATTN_SUCCESS) {
            st = waited;
            break;
        }
        if (stats && n > 0)
            stats->wait_seconds += now_s() - device_done;
        /* The kernels that read held_k/held_v are done: the buffer of step t − 1 may be received into. */
        held_k = into_k;
        held_v = into_v;
    }
    if (ready && !r->broken) {
        if (st == CLATTN_SUCCESS)
            st = add_sinks(r, d, &s, &b);
        st = agree_on_status(r, st); /* every rank's outcome, before anything is written */
        if (st == CLATTN_SUCCESS)
            st = read_results(r, &s, &b, out, lse);
    }
    clFinish(queue); /* nothing of this call may still read the caller's arrays or use the buffers below */
    if (stats) {
        stats->steps = (unsigned)r->size;
        stats->device_peak_bytes = b.bytes + clattn_context_temp_peak_bytes(r->ctx);
        stats->host_bytes = (r->host_elems[0][0] + r->host_elems[0][1] + r->host_elems[1][0] + r->host_elems[1][1]) *
                            sizeof(float);
    }
    release_buffers(&b);
    return st;
}

clattn_status clattn_ring_sdpa_host(clattn_ring *r, const clattn_sdpa_desc *desc, clattn_ring_layout layout,
                                    const float *q, const float *k, const float *v, float *out, float *lse,
                                    clattn_ring_stats *stats)
{
    if (!r)
        return CLATTN_ERROR_NULL_ARGUMENT; /* alone: without a ring there is no one to tell */
    r->detail[0] = '\0';
    r->failed_rank = -1;
    if (r->broken)
        return fail(r, CLATTN_ERROR_COMMUNICATION, r->rank,
                    "rank %d: this ring timed out or lost a message before; free it", r->rank);
    clattn_ring_stats local = CLATTN_RING_STATS_INIT;
    clattn_ring_stats *into = stats ? &local : NULL;
    const double started = now_s();
    ring_call call;
    clattn_status st = collective_check(r, desc, layout, q, k, v, out, stats, &call);
    if (st == CLATTN_SUCCESS) /* (its outcome agreed by every rank) */
        st = run_ring(r, &call.desc, call.partition, layout, q, k, v, out, lse, into);
    clattn_partition_free(call.partition);
    if (stats && st == CLATTN_SUCCESS) {
        local.seconds = now_s() - started;
        /* As many bytes as the caller's struct_size names (checked): an older struct gets its fields, a newer
         * one keeps its later ones. */
        const size_t given = stats->struct_size;
        memcpy((char *)stats + sizeof stats->struct_size, (const char *)&local + sizeof local.struct_size,
               (given < sizeof local ? given : sizeof local) - sizeof local.struct_size);
    }
    return st;
}
