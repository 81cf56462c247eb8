/*
 * clattn.h's thread rule: a context is used by one thread at a time; distinct contexts are
 * independent and may be used concurrently.
 *
 *  - concurrent: 4 threads, each creating its own context on the device and making 25 calls of mixed
 *    shapes (clattn_sdpa_host and clattn_sdpa on cl_mem, fused and staged, clattn_mha_host with and
 *    without W_O, every mask kind), each result checked in the thread against the fp64 reference;
 *    plus a deliberately invalid call per thread whose detail must stay in that thread's context;
 *  - last_error: clattn_last_error(NULL) is per thread: failures of device_select in one thread do not
 *    change another thread's detail (nor the main thread's);
 *  - handoff: one context used by a thread, then (after join) by another thread, then by the main
 *    thread;
 *  - two_contexts: the shared context of a device and a second one, each driven by its own thread
 *    through six checked SDPA calls at once; and a thread's first clattn_last_error(NULL) is "",
 *    while its failure does not replace the main thread's detail.
 *
 * check's assertions are not thread-safe: the workers only record failures (count and the first few
 * messages) in their own structs, and the main thread asserts on them after joining. The workers use
 * plain malloc and their own comparisons for the same reason (test_util's tracked allocations and
 * check_close update process-wide state).
 */
#define _POSIX_C_SOURCE 200809L

#include "test_util.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_THREADS 4
#define N_CALLS 25
#define MAX_MSGS 4

/* ---------------------------------------------------------------------------------------------- */
/* Per-thread failure records                                                                      */
/* ---------------------------------------------------------------------------------------------- */

typedef struct {
    size_t failures;
    size_t checks;
    char msgs[MAX_MSGS][400];
} record;

static void note_fail(record *rec, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_fail(record *rec, const char *fmt, ...)
{
    if (rec->failures < MAX_MSGS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rec->msgs[rec->failures], sizeof rec->msgs[0], fmt, ap);
        va_end(ap);
    }
    rec->failures++;
}

/* Asserts, in the main thread, that a worker recorded no failure. */
static void assert_clean(const record *rec, const char *who)
{
    for (size_t m = 0; m < rec->failures && m < MAX_MSGS; m++)
        fprintf(stderr, "%s: failure %zu: %s\n", who, m + 1, rec->msgs[m]);
    ck_assert_msg(rec->failures == 0, "%s: %zu failure(s) of %zu checks; first: %s", who,
                  rec->failures, rec->checks, rec->failures ? rec->msgs[0] : "");
}

/* The tolerance of check_close (|out − ref| ≤ 2e-5 + 1e-4·|ref|, infinities equal, never NaN),
 * without its assertions. Returns 1 when every element passes. */
static int close_enough(record *rec, const char *call, const char *what, const float *out,
                        const double *ref, size_t n)
{
    rec->checks++;
    for (size_t i = 0; i < n; i++) {
        double o = (double)out[i], r = ref[i];
        int ok;
        if (isinf(r) || isinf(o))
            ok = isinf(r) && isinf(o) && (signbit(r) != 0) == (signbit(o) != 0);
        else
            ok = !isnan(o) && !isnan(r) && fabs(o - r) <= TU_ATOL + TU_RTOL * fabs(r);
        if (!ok) {
            note_fail(rec, "%s: %s[%zu] = %.9g, fp64 reference %.17g", call, what, i, o, r);
            return 0;
        }
    }
    return 1;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        abort();
    return p;
}

/* A uniform integer in [lo, hi] from the thread's own generator. */
static size_t pick(tu_rng *r, size_t lo, size_t hi) { return lo + (size_t)(tu_rng_next(r) % (hi - lo + 1)); }

static float *rand_floats(size_t n, float a, tu_rng *r)
{
    float *p = xmalloc(n * sizeof *p);
    tu_fill_uniform(p, n, a, tu_rng_next(r));
    return p;
}

/* Uniform additive mask with about 1/6 of the entries −inf. */
static float *rand_mask(size_t n, tu_rng *r)
{
    float *m = rand_floats(n, 1.0f, r);
    for (size_t i = 0; i < n; i++)
        if (tu_rng_next(r) % 6 == 0)
            m[i] = -INFINITY;
    return m;
}

/* Random masks for B batches of S keys: causal kind, key lengths (0 allowed), additive layout. */
static void rand_masks(tu_rng *r, size_t B, size_t S, size_t *kl, clattn_masks *m)
{
    *m = (clattn_masks)CLATTN_MASKS_INIT;
    m->causal = (clattn_causal)pick(r, 0, 2);
    if (pick(r, 0, 2) == 0) {
        for (size_t b = 0; b < B; b++)
            kl[b] = pick(r, 0, S);
        m->key_lengths = kl;
    }
    m->additive = (clattn_mask_layout)pick(r, 0, 2);
}

/* ---------------------------------------------------------------------------------------------- */
/* One call of each kind, checked against the reference                                            */
/* ---------------------------------------------------------------------------------------------- */

/* kind 0: sdpa_host FUSED (out + lse); 1: sdpa_host STAGED (out + weights + lse); 2: sdpa on cl_mem,
 * AUTO with or without weights. */
static void sdpa_call(clattn_context *ctx, int kind, tu_rng *r, record *rec, const char *who,
                      size_t call)
{
    size_t kl[2];
    clattn_masks masks;
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = pick(r, 1, 2);
    d.heads = pick(r, 1, 3);
    d.q_len = pick(r, 1, 20);
    d.kv_len = pick(r, 1, 24);
    static const size_t dims[4] = {4, 8, 13, 16};
    d.qk_dim = dims[pick(r, 0, 3)];
    d.v_dim = pick(r, 0, 1) ? 5 : 0;
    d.scale = pick(r, 0, 3) == 0 ? 0.3f : CLATTN_SCALE_DEFAULT;
    rand_masks(r, d.batch, d.kv_len, kl, &masks);
    d.masks = &masks;
    int want_w = kind == 1 || (kind == 2 && pick(r, 0, 1));
    d.algorithm = kind == 0 ? CLATTN_ALGORITHM_FUSED
                  : kind == 1 ? CLATTN_ALGORITHM_STAGED
                              : CLATTN_ALGORITHM_AUTO;

    size_t BH = d.batch * d.heads, L = d.q_len, S = d.kv_len, D = d.qk_dim,
           Dv = d.v_dim ? d.v_dim : D;
    size_t nq = BH * L * D, nk = BH * S * D, nv = BH * S * Dv, no = BH * L * Dv, np = BH * L * S,
           nl = BH * L;
    size_t nm = masks.additive == CLATTN_MASK_L_S ? L * S
                : masks.additive == CLATTN_MASK_B_H_L_S ? np
                                                          : 0;
    float *q = rand_floats(nq, 1.0f, r), *k = rand_floats(nk, 1.0f, r), *v = rand_floats(nv, 1.0f, r);
    float *mask = nm ? rand_mask(nm, r) : NULL;
    float *o = xmalloc(no * sizeof *o), *w = xmalloc(np * sizeof *w), *l = xmalloc(nl * sizeof *l);
    double *ro = xmalloc(no * sizeof *ro), *rw = xmalloc(np * sizeof *rw), *rl = xmalloc(nl * sizeof *rl);

    char name[256];
    snprintf(name, sizeof name,
             "%s call %zu: sdpa%s %s (B %zu H %zu L %zu S %zu D %zu Dv %zu causal %d kl %s "
             "additive %d weights %d)",
             who, call, kind == 2 ? " cl_mem" : "_host",
             kind == 0 ? "fused" : kind == 1 ? "staged" : "auto", d.batch, d.heads, L, S, D, Dv,
             (int)masks.causal, masks.key_lengths ? "yes" : "no", (int)masks.additive, want_w);

    clattn_status st = CLATTN_SUCCESS;
    if (kind < 2) {
        st = clattn_sdpa_host(ctx, &d, q, k, v, mask, o, want_w ? w : NULL, l);
    } else {
        cl_context cl = clattn_context_cl_context(ctx);
        cl_command_queue queue = clattn_context_queue(ctx);
        cl_int err = CL_SUCCESS;
        cl_mem mem[7] = {NULL};
        const float *src[4] = {q, k, v, mask};
        size_t cnt[7] = {nq, nk, nv, nm, no, np, nl};
        for (int t = 0; t < 7 && err == CL_SUCCESS; t++) {
            if (cnt[t] == 0 || (t == 5 && !want_w))
                continue;
            cl_mem_flags flags = CL_MEM_READ_WRITE | (t < 4 ? CL_MEM_COPY_HOST_PTR : 0);
            mem[t] = clCreateBuffer(cl, flags, cnt[t] * sizeof(float), t < 4 ? (void *)src[t] : NULL,
                                    &err);
        }
        if (err != CL_SUCCESS) {
            note_fail(rec, "%s: clCreateBuffer: %d", name, (int)err);
        } else {
            st = clattn_sdpa(ctx, &d, mem[0], mem[1], mem[2], mem[3], mem[4], mem[5], mem[6]);
            if (st == CLATTN_SUCCESS)
                st = clattn_finish(ctx);
            if (st == CLATTN_SUCCESS) {
                err = clEnqueueReadBuffer(queue, mem[4], CL_TRUE, 0, no * sizeof(float), o, 0, NULL, NULL);
                if (err == CL_SUCCESS && want_w)
                    err = clEnqueueReadBuffer(queue, mem[5], CL_TRUE, 0, np * sizeof(float), w, 0, NULL,
                                              NULL);
                if (err == CL_SUCCESS)
                    err = clEnqueueReadBuffer(queue, mem[6], CL_TRUE, 0, nl * sizeof(float), l, 0, NULL,
                                              NULL);
                if (err != CL_SUCCESS)
                    note_fail(rec, "%s: clEnqueueReadBuffer: %d", name, (int)err);
            }
        }
        for (int t = 0; t < 7; t++)
            if (mem[t])
                clReleaseMemObject(mem[t]);
        if (err != CL_SUCCESS)
            want_w = -1; /* recorded already: nothing to compare */
    }
    if (st != CLATTN_SUCCESS) {
        note_fail(rec, "%s: %s: %s", name, clattn_status_string(st), clattn_last_error(ctx));
    } else if (want_w >= 0) {
        ref_sdpa(&d, q, k, v, mask, ro, rw, rl);
        if (close_enough(rec, name, "out", o, ro, no) && close_enough(rec, name, "lse", l, rl, nl) &&
            want_w)
            close_enough(rec, name, "weights", w, rw, np);
    }
    free(q), free(k), free(v), free(mask), free(o), free(w), free(l), free(ro), free(rw), free(rl);
}

/* kind 3: mha_host with W_O (and b_O half the time), FUSED or STAGED; kind 4: mha_host without W_O,
 * STAGED with attention weights or AUTO; self- or cross-attention. */
static void mha_call(clattn_context *ctx, int kind, tu_rng *r, record *rec, const char *who,
                     size_t call)
{
    size_t kl[2];
    clattn_masks masks;
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = pick(r, 1, 2);
    d.q_len = pick(r, 1, 12);
    int cross = (int)pick(r, 0, 1);
    d.kv_len = cross ? pick(r, 1, 15) : 0;
    d.model_dim = 8;
    d.kv_dim = cross ? 6 : 0;
    d.heads = pick(r, 1, 3);
    d.qk_dim = 4;
    d.v_dim = pick(r, 0, 1) ? 3 : 0;
    d.out_dim = kind == 3 && pick(r, 0, 1) ? 5 : 0;
    size_t S = cross ? d.kv_len : d.q_len, dkv = cross ? 6 : 8, H = d.heads, Dv = d.v_dim ? 3 : 4;
    rand_masks(r, d.batch, S, kl, &masks);
    d.masks = &masks;
    int want_w = kind == 4 && pick(r, 0, 1);
    d.algorithm = kind == 3 ? (pick(r, 0, 1) ? CLATTN_ALGORITHM_FUSED : CLATTN_ALGORITHM_STAGED)
                  : want_w  ? CLATTN_ALGORITHM_STAGED
                            : CLATTN_ALGORITHM_AUTO;
    size_t od = d.out_dim ? d.out_dim : 8, ycols = kind == 3 ? od : H * Dv;
    size_t nx = d.batch * d.q_len * 8, nkv = cross ? d.batch * S * dkv : 0;
    size_t ny = d.batch * d.q_len * ycols, nw = d.batch * H * d.q_len * S;
    size_t nm = masks.additive == CLATTN_MASK_L_S ? d.q_len * S
                : masks.additive == CLATTN_MASK_B_H_L_S ? nw
                                                          : 0;

    float *x = rand_floats(nx, 1.0f, r), *kv = cross ? rand_floats(nkv, 1.0f, r) : NULL;
    float *wq = rand_floats(8 * H * 4, 0.35f, r), *bq = rand_floats(H * 4, 0.5f, r);
    float *wk = rand_floats(dkv * H * 4, 0.4f, r), *bk = rand_floats(H * 4, 0.5f, r);
    float *wv = rand_floats(dkv * H * Dv, 0.4f, r), *bv = rand_floats(H * Dv, 0.5f, r);
    float *wo = kind == 3 ? rand_floats(H * Dv * od, 0.4f, r) : NULL;
    float *bo = kind == 3 && pick(r, 0, 1) ? rand_floats(od, 0.5f, r) : NULL;
    float *mask = nm ? rand_mask(nm, r) : NULL;
    clattn_mha_host_weights hw = CLATTN_MHA_HOST_WEIGHTS_INIT;
    hw.w_q = wq;
    hw.b_q = bq;
    hw.w_k = wk;
    hw.b_k = bk;
    hw.w_v = wv;
    hw.b_v = bv;
    hw.w_o = wo;
    hw.b_o = bo;
    float *y = xmalloc(ny * sizeof *y), *w = xmalloc(nw * sizeof *w);
    double *ry = xmalloc(ny * sizeof *ry), *rw = xmalloc(nw * sizeof *rw);

    char name[256];
    snprintf(name, sizeof name,
             "%s call %zu: mha_host %s (B %zu L %zu %s S %zu H %zu Dv %zu W_O %d b_O %d causal %d "
             "kl %s additive %d weights %d)",
             who, call, d.algorithm == CLATTN_ALGORITHM_FUSED ? "fused"
                        : d.algorithm == CLATTN_ALGORITHM_STAGED ? "staged" : "auto",
             d.batch, d.q_len, cross ? "cross" : "self", S, H, Dv, wo != NULL, bo != NULL,
             (int)masks.causal, masks.key_lengths ? "yes" : "no", (int)masks.additive, want_w);
    clattn_status st = clattn_mha_host(ctx, &d, x, kv, &hw, mask, y, want_w ? w : NULL);
    if (st != CLATTN_SUCCESS) {
        note_fail(rec, "%s: %s: %s", name, clattn_status_string(st), clattn_last_error(ctx));
    } else {
        ref_mha(&d, x, kv, &hw, mask, ry, rw);
        if (close_enough(rec, name, "out", y, ry, ny) && want_w)
            close_enough(rec, name, "attn_weights", w, rw, nw);
    }
    free(x), free(kv), free(wq), free(bq), free(wk), free(bk), free(wv), free(bv), free(wo), free(bo);
    free(mask), free(y), free(w), free(ry), free(rw);
}

/* `calls` calls cycling through the five kinds, starting at `first_kind`. */
static void mixed_calls(clattn_context *ctx, uint64_t seed, size_t calls, int first_kind,
                        record *rec, const char *who)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    for (size_t c = 0; c < calls; c++) {
        int kind = (int)((c + (size_t)first_kind) % 5);
        if (kind < 3)
            sdpa_call(ctx, kind, &r, rec, who, c);
        else
            mha_call(ctx, kind, &r, rec, who, c);
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* Concurrent contexts                                                                             */
/* ---------------------------------------------------------------------------------------------- */

typedef struct {
    size_t dev, index;
    char who[48];
    record rec;
} worker;

static pthread_barrier_t start_line;

static void *worker_main(void *arg)
{
    worker *wk = arg;
    /* all threads create their contexts (and compile, or load from the cache) at the same time */
    pthread_barrier_wait(&start_line);
    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create(&ctx, tu_dev_spec[wk->dev]);
    wk->rec.checks++;
    if (st != CLATTN_SUCCESS || !ctx) {
        note_fail(&wk->rec, "%s: clattn_context_create(\"%s\"): %s: %s", wk->who, tu_dev_spec[wk->dev],
             clattn_status_string(st), clattn_last_error(NULL));
        return NULL;
    }
    mixed_calls(ctx, 7000 + 100 * wk->index, N_CALLS / 2, (int)wk->index, &wk->rec, wk->who);

    /* an invalid call (FUSED asked for weights): its detail lands in this context only, while the
     * other threads keep working on theirs */
    clattn_sdpa_desc d = tu_sdpa_desc(1, 1, 1, 1, 1, 0);
    d.algorithm = CLATTN_ALGORITHM_FUSED;
    float one = 1.0f, o = 0.0f, w = 0.0f;
    st = clattn_sdpa_host(ctx, &d, &one, &one, &one, NULL, &o, &w, NULL);
    wk->rec.checks++;
    if (st != CLATTN_ERROR_INVALID_VALUE)
        note_fail(&wk->rec, "%s: FUSED with weights gave %s, expected CLATTN_ERROR_INVALID_VALUE",
             wk->who, clattn_status_string(st));
    char detail[512];
    snprintf(detail, sizeof detail, "%s", clattn_last_error(ctx));
    if (strstr(detail, "FUSED") == NULL)
        note_fail(&wk->rec, "%s: the invalid call's detail is \"%s\"", wk->who, detail);

    mixed_calls(ctx, 7050 + 100 * wk->index, N_CALLS - N_CALLS / 2, (int)wk->index + 2, &wk->rec,
                wk->who);

    /* nothing the other threads did (valid calls only) touched this context's detail */
    wk->rec.checks++;
    if (strcmp(detail, clattn_last_error(ctx)) != 0 && clattn_last_error(ctx)[0] != '\0')
        note_fail(&wk->rec, "%s: the context's detail changed to \"%s\"", wk->who, clattn_last_error(ctx));
    clattn_context_free(ctx);
    return NULL;
}

START_TEST(test_concurrent_contexts)
{
    size_t dev = (size_t)_i;
    worker wk[N_THREADS];
    pthread_t th[N_THREADS];
    memset(wk, 0, sizeof wk);
    ck_assert_int_eq(pthread_barrier_init(&start_line, NULL, N_THREADS), 0);
    for (size_t t = 0; t < N_THREADS; t++) {
        wk[t].dev = dev;
        wk[t].index = t;
        snprintf(wk[t].who, sizeof wk[t].who, "thread %zu on %s", t, tu_dev_spec[dev]);
        ck_assert_int_eq(pthread_create(&th[t], NULL, worker_main, &wk[t]), 0);
    }
    for (size_t t = 0; t < N_THREADS; t++)
        ck_assert_int_eq(pthread_join(th[t], NULL), 0);
    pthread_barrier_destroy(&start_line);
    size_t checks = 0;
    for (size_t t = 0; t < N_THREADS; t++) {
        assert_clean(&wk[t].rec, wk[t].who);
        checks += wk[t].rec.checks;
    }
    /* every call was checked: create, 25 calls (≥ 1 comparison each), the invalid call, the detail */
    printf("concurrent contexts on %s: %d threads × %d calls, %zu checks passed\n",
           tu_dev_spec[dev], N_THREADS, N_CALLS, checks);
    ck_assert_uint_ge(checks, N_THREADS * (N_CALLS + 3));
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* clattn_last_error(NULL) is per thread                                                           */
/* ---------------------------------------------------------------------------------------------- */

#define ROUNDS 20

typedef struct {
    int id;
    record rec;
} err_worker;

static pthread_barrier_t err_line;

/* Round k: thread 0 fails, both wait, thread 1 fails, both wait, both check their own detail. */
static void *err_main(void *arg)
{
    err_worker *e = arg;
    for (int k = 0; k < ROUNDS; k++) {
        char spec[64];
        snprintf(spec, sizeof spec, "no-such-device-thread%d-round%d", e->id, k);
        for (int turn = 0; turn < 2; turn++) {
            if (turn == e->id) {
                clattn_device_info info;
                clattn_status st = clattn_device_select(spec, &info);
                e->rec.checks++;
                if (st != CLATTN_ERROR_DEVICE_NOT_FOUND)
                    note_fail(&e->rec, "thread %d round %d: device_select(\"%s\") gave %s", e->id, k, spec,
                         clattn_status_string(st));
            }
            pthread_barrier_wait(&err_line);
        }
        e->rec.checks++;
        const char *detail = clattn_last_error(NULL);
        if (strstr(detail, spec) == NULL)
            note_fail(&e->rec, "thread %d round %d: clattn_last_error(NULL) = \"%.200s\", expected it to "
                 "name \"%s\"", e->id, k, detail, spec);
        pthread_barrier_wait(&err_line);
    }
    return NULL;
}

static void *silent_main(void *arg)
{
    record *rec = arg;
    /* a thread that never failed has nothing to say, whatever the others did */
    rec->checks++;
    if (clattn_last_error(NULL)[0] != '\0')
        note_fail(rec, "a thread without failures sees clattn_last_error(NULL) = \"%.200s\"",
             clattn_last_error(NULL));
    return NULL;
}

START_TEST(test_last_error_thread_local)
{
    clattn_device_info info;
    ck_assert_int_eq(clattn_device_select("no-such-device-main-thread", &info),
                     CLATTN_ERROR_DEVICE_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(clattn_last_error(NULL), "no-such-device-main-thread"));

    err_worker e[2];
    pthread_t th[2];
    memset(e, 0, sizeof e);
    ck_assert_int_eq(pthread_barrier_init(&err_line, NULL, 2), 0);
    for (int t = 0; t < 2; t++) {
        e[t].id = t;
        ck_assert_int_eq(pthread_create(&th[t], NULL, err_main, &e[t]), 0);
    }
    for (int t = 0; t < 2; t++)
        ck_assert_int_eq(pthread_join(th[t], NULL), 0);
    pthread_barrier_destroy(&err_line);
    assert_clean(&e[0].rec, "last_error thread 0");
    assert_clean(&e[1].rec, "last_error thread 1");

    /* a thread started after all that begins with an empty detail */
    record silent;
    memset(&silent, 0, sizeof silent);
    pthread_t s;
    ck_assert_int_eq(pthread_create(&s, NULL, silent_main, &silent), 0);
    ck_assert_int_eq(pthread_join(s, NULL), 0);
    assert_clean(&silent, "fresh thread");

    /* the main thread's own detail is still its own */
    ck_assert_msg(strstr(clattn_last_error(NULL), "no-such-device-main-thread") != NULL,
                  "main thread's clattn_last_error(NULL) changed to \"%.200s\"",
                  clattn_last_error(NULL));
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* One context handed from thread to thread                                                        */
/* ---------------------------------------------------------------------------------------------- */

typedef struct {
    size_t dev;
    int stage;
    clattn_context *ctx; /* created by stage 0, used by stage 1 */
    record rec;
    char who[48];
} handoff;

static void *handoff_main(void *arg)
{
    handoff *h = arg;
    if (h->stage == 0) {
        clattn_status st = clattn_context_create(&h->ctx, tu_dev_spec[h->dev]);
        h->rec.checks++;
        if (st != CLATTN_SUCCESS) {
            note_fail(&h->rec, "%s: clattn_context_create: %s: %s", h->who, clattn_status_string(st),
                 clattn_last_error(NULL));
            h->ctx = NULL;
            return NULL;
        }
    }
    /* every kind of call, so that both threads run kernels compiled by the first one */
    mixed_calls(h->ctx, 9000 + 10 * (uint64_t)h->stage, 10, h->stage, &h->rec, h->who);
    return NULL;
}

START_TEST(test_handoff)
{
    size_t dev = (size_t)_i;
    handoff h;
    memset(&h, 0, sizeof h);
    h.dev = dev;
    for (int stage = 0; stage < 2; stage++) {
        h.stage = stage;
        snprintf(h.who, sizeof h.who, "handoff thread %d on %s", stage + 1, tu_dev_spec[dev]);
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, handoff_main, &h), 0);
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        assert_clean(&h.rec, h.who);
    }
    ck_assert_ptr_nonnull(h.ctx);
    /* and back to the main thread, which frees it */
    snprintf(h.who, sizeof h.who, "handoff main thread on %s", tu_dev_spec[dev]);
    mixed_calls(h.ctx, 9100, 5, 0, &h.rec, h.who);
    clattn_context_free(h.ctx);
    assert_clean(&h.rec, h.who);
    ck_assert_uint_ge(h.rec.checks, 25);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Two contexts from two threads at once; a new thread's clattn_last_error(NULL) starts empty     */
/* ---------------------------------------------------------------------------------------------- */

typedef struct {
    clattn_context *ctx;
    int seed;
    int ok;
    char msg[256];
} thread_job;

/* No check assertions off the main thread (check is not thread-safe): record the outcome instead. */
static void *thread_sdpa(void *arg)
{
    thread_job *job = arg;
    job->ok = 1;
    for (int it = 0; it < 6 && job->ok; it++) {
        size_t kl[2];
        clattn_sdpa_desc d =
            tu_sdpa_desc(2, 3, 7 + (size_t)(it * 11), 61, 8, (size_t)(job->seed % 2 ? 21 : 7));
        clattn_masks masks = CLATTN_MASKS_INIT;
        masks.causal = (clattn_causal)(it % 3);
        masks.key_lengths = tu_make_key_lengths(it % 2 ? TU_KL_ZERO : TU_KL_VARIED, 2, 61, kl);
        d.masks = &masks;
        size_t nq = 2 * 3 * d.q_len * 8, nk = 2 * 3 * 61 * 8, nv = 2 * 3 * 61 * d.v_dim,
               no = 2 * 3 * d.q_len * d.v_dim;
        float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nv * sizeof *v),
              *o = malloc(no * sizeof *o);
        double *ro = malloc(no * sizeof *ro);
        if (!q || !k || !v || !o || !ro) {
            job->ok = 0;
            snprintf(job->msg, sizeof job->msg, "out of memory");
        } else {
            uint64_t seed = (uint64_t)(job->seed * 100 + it);
            tu_fill_uniform(q, nq, 1.0f, seed + 1);
            tu_fill_uniform(k, nk, 1.0f, seed + 2);
            tu_fill_uniform(v, nv, 1.0f, seed + 3);
            clattn_status st = clattn_sdpa_host(job->ctx, &d, q, k, v, NULL, o, NULL, NULL);
            if (st != CLATTN_SUCCESS) {
                job->ok = 0;
                snprintf(job->msg, sizeof job->msg, "iteration %d: %s: %.150s", it,
                         clattn_status_string(st), clattn_last_error(job->ctx));
            } else {
                ref_sdpa(&d, q, k, v, NULL, ro, NULL, NULL);
                for (size_t i = 0; i < no && job->ok; i++)
                    if (!(fabs((double)o[i] - ro[i]) <= TU_ATOL + TU_RTOL * fabs(ro[i]))) {
                        job->ok = 0;
                        snprintf(job->msg, sizeof job->msg,
                                 "iteration %d: out[%zu] = %.9g, fp64 reference %.17g", it, i,
                                 (double)o[i], ro[i]);
                    }
            }
        }
        free(q);
        free(k);
        free(v);
        free(o);
        free(ro);
    }
    return NULL;
}

START_TEST(test_threads_contexts)
{
    size_t dev = (size_t)_i;
    /* With several devices the second context is on the next one: two devices at work at once. */
    const size_t other = (dev + 1) % tu_ndev;
    tu_set_label("two contexts on %s and %s used from two threads at once", tu_dev_spec[dev], tu_dev_spec[other]);
    clattn_context *second = tu_context_new(tu_dev_spec[other]);
    thread_job jobs[2] = {{tu_ctx[dev], 1, 0, ""}, {second, 2, 0, ""}};
    pthread_t th[2];
    int started[2] = {0, 0};
    for (int t = 0; t < 2; t++)
        started[t] = pthread_create(&th[t], NULL, thread_sdpa, &jobs[t]) == 0;
    for (int t = 0; t < 2; t++)
        if (started[t])
            pthread_join(th[t], NULL);
    clattn_context_free(second);
    for (int t = 0; t < 2; t++) {
        ck_assert_msg(started[t], "%s: pthread_create failed", tu_label());
        ck_assert_msg(jobs[t].ok, "%s: thread %d: %s", tu_label(), t, jobs[t].msg);
    }
}
END_TEST

static void *thread_last_error(void *arg)
{
    char *out = arg;
    const char *before = clattn_last_error(NULL);
    snprintf(out, 256, "%s", before ? before : "(null)");
    clattn_device_info info;
    (void)clattn_device_select("no-such-device-in-thread", &info); /* must not touch main's message */
    return NULL;
}

START_TEST(test_threads_last_error)
{
    clattn_device_info info;
    ck_assert(clattn_device_select("99:99", &info) == CLATTN_ERROR_DEVICE_NOT_FOUND);
    char main_msg[512];
    snprintf(main_msg, sizeof main_msg, "%s", clattn_last_error(NULL));
    ck_assert_msg(main_msg[0] != '\0', "last_error(NULL) empty after a failed device_select");
    char seen[256] = "unset";
    pthread_t th;
    ck_assert(pthread_create(&th, NULL, thread_last_error, seen) == 0);
    pthread_join(th, NULL);
    ck_assert_msg(seen[0] == '\0',
                  "a new thread's clattn_last_error(NULL) should be \"\" but is \"%s\"", seen);
    ck_assert_msg(strcmp(clattn_last_error(NULL), main_msg) == 0,
                  "another thread's failure replaced this thread's last error: \"%s\"",
                  clattn_last_error(NULL));
}
END_TEST


static Suite *make_suite(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tu_tcase("concurrent_contexts");
    tcase_add_loop_test(tc, test_concurrent_contexts, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    tc = tu_tcase("last_error_thread_local");
    tcase_add_test(tc, test_last_error_thread_local);
    suite_add_tcase(s, tc);
    tc = tu_tcase("handoff");
    tcase_add_loop_test(tc, test_handoff, 0, (int)tu_ndev);
    suite_add_tcase(s, tc);
    tc = tu_tcase("two_contexts");
    tcase_add_loop_test(tc, test_threads_contexts, 0, (int)tu_ndev);
    tcase_add_test(tc, test_threads_last_error);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(make_suite); }
