/* The ring's MPI side (ring.h): failures recorded on the ring, the waits — every wait on another rank
 * ends at the ring's timeout or at another rank's notice that it gave up —, exchanges among all ranks, and
 * the ring's creation (a duplicate of the application's communicator) and release. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "ring.h"

#include "deadline.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Thread_local char create_detail[512];

clattn_status ring_fail(clattn_ring *r, clattn_status st, int rank, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->detail, sizeof r->detail, fmt, ap);
    va_end(ap);
    r->failed_rank = rank;
    return st;
}

clattn_status ring_mpi_failed(clattn_ring *r, int code, const char *call)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, text, &len);
    r->broken = true;
    return ring_fail(r, CLATTN_ERROR_COMMUNICATION, r->rank, "rank %d: %s failed: %s", r->rank, call, text);
}

double ring_now_s(void) { return MPI_Wtime(); }

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
        return ring_fail(r, CLATTN_ERROR_TIMEOUT, late, "rank %d: rank %d did not answer within %g s (%s)", r->rank,
                         late, r->timeout_s, what);
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
        return ring_fail(r, CLATTN_ERROR_TIMEOUT, named, "rank %d: rank %d did not answer within %g s (%s)", r->rank,
                         named, r->timeout_s, what);
    const char *reported = "";
    notice_waited_on(r, reporter, &reported);
    return ring_fail(r, CLATTN_ERROR_TIMEOUT, named,
                     "rank %d: rank %d did not answer within %g s (%s, as rank %d reported)", r->rank, named,
                     r->timeout_s, reported, reporter);
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
clattn_status ring_wait_all(clattn_ring *r, int n, MPI_Request *reqs, const int *peer, cl_event device,
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
                    *device_done_at = ring_now_s();
            }
        }
        int done = 1;
        if (n > 0) {
            const int code = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
            if (code != MPI_SUCCESS)
                return ring_mpi_failed(r, code, "MPI_Testall");
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

clattn_status ring_exchange_all(clattn_ring *r, const void *mine, int bytes, void *all, int tag, const char *what)
{
    const int p = r->size;
    MPI_Request *reqs = malloc(2 * (size_t)p * sizeof *reqs);
    int *peer = malloc(2 * (size_t)p * sizeof *peer);
    void *sent = malloc((size_t)bytes); /* what the sends read: a send abandoned on timeout may read it later */
    if (!reqs || !peer || !sent) {
        free(reqs);
        free(peer);
        free(sent);
        return ring_fail(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY, r->rank, "rank %d: the exchange's requests", r->rank);
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
    clattn_status st = code == MPI_SUCCESS ? ring_wait_all(r, n, reqs, peer, NULL, false, what, NULL)
                                           : ring_mpi_failed(r, code, "MPI_Isend/MPI_Irecv");
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
                           ? ring_wait_all(r, 1, &req, &(int){0}, NULL, true, "duplicating the communicator", NULL)
                           : ring_mpi_failed(r, code, "MPI_Comm_idup");
    if (st == CLATTN_SUCCESS && (code = MPI_Comm_set_errhandler(r->comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS)
        st = ring_mpi_failed(r, code, "MPI_Comm_set_errhandler");
    if (st == CLATTN_SUCCESS && !(r->notices = calloc((size_t)r->size, sizeof *r->notices)))
        st = ring_fail(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY, r->rank, "rank %d: the notices", r->rank);
    if (st == CLATTN_SUCCESS && (code = MPI_Irecv(r->notice_in, NOTICE_BYTES, MPI_BYTE, MPI_ANY_SOURCE, TAG_NOTICE,
                                                  r->comm, &r->notice_req)) != MPI_SUCCESS)
        st = ring_mpi_failed(r, code, "MPI_Irecv (notices)");
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
    free(r->whole[0]);
    free(r->whole[1]);
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
