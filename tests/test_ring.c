/*
 * Ring attention across MPI ranks (clattn_mpi.h), run by meson under `mpirun -np 2` and `mpirun -np 4
 * --oversubscribe`, every rank on the machine's first OpenCL device:
 *
 *  0. rank and size: clattn_ring_rank/_size over the world and over a split communicator.
 *  1. shards: clattn_ring_shard_of covers every row once, in order, for both layouts and uneven sizes;
 *     fingerprints: the verdict refuses a rank of another platform before reading its numbers.
 *  2. table: non-causal and causal attention in both layouts, uneven L and S (not divisible by P), cross
 *     lengths (L ≠ S, bottom-right), GQA, key lengths, query offsets, windows, sinks, ALiBi, soft-capping —
 *     each rank's rows against the fp64 reference within the conformance tolerance, and against
 *     clattn_sdpa_host on the whole tensors in one process; the bytes each rank sends; K and V in block
 *     formats and FP8 (q4_0, u4_g32, fp8_e5m2, q8_0), sent as their bytes.
 *  3. memory: L = S = 512, D = 64: each rank's device memory (the library's own count: the call's buffers
 *     plus the context's temporaries' peak) at most 2 · (L + S)/P · B·H·(Dqk + Dv) floats, and the causal
 *     zigzag layout's pairs the same on every rank.
 *  4. bad: a rank whose kv_len differs (every rank gets CLATTN_ERROR_SHAPE_MISMATCH naming it), P > S, an
 *     int8 V or a float16 Q (refused on every rank), a
 *     NULL array on one rank, a descriptor clattn_sdpa refuses (every rank gets its status), a rank whose
 *     kernels do not build (it fails at its first pair, keeps passing slices, and every rank returns its
 *     status naming it), a rank that stops answering after its first step (every rank names it), and
 *     last a rank that never calls: the others return CLATTN_ERROR_TIMEOUT naming it, within the ring's
 *     timeout (measured from before a barrier every rank passes before calling, and honest about
 *     clocks: see clock_epsilon). Structs of older and newer headers are read by their struct_size.
 *  5. deadlines (src/mpi/deadline.h): rounded up, reached at their end and not before, and on the real
 *     clock a wait polled until its deadline has taken its whole time.
 *
 * Parts 1 (fingerprints), 4 and 5 are in test_ring_failures.c (the same program; ring_test.h holds what the
 * two share). Every rank runs the same cases in the same order, without forking (CK_NOFORK). Rank 0 prints check's
 * summary; a failure on any rank fails the run (mpirun's exit status), and rank 0 prints every rank's.
 */
#include "formats_ref.h"
#include "ring_test.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int rank, ranks;
clattn_context *ctx;
clattn_ring *ring;
static double worst_ref, worst_single; /* largest errors against the reference and one process */

/* x (n values, rows of `row`) quantised into new bytes (float32: x itself), and x replaced by the values
 * those bytes hold; *row_bytes gets a row's bytes. */
static void *quantised_copy(clattn_dtype type, float *x, size_t n, size_t row, size_t *row_bytes)
{
    *row_bytes = clattn_dtype_bytes(type, row);
    if (type == CLATTN_FLOAT32)
        return x;
    void *q = tu_falloc((clattn_dtype_bytes(type, n) + sizeof(float) - 1) / sizeof(float));
    fref_quantise(type, x, n, row, q, NULL);
    for (size_t i = 0; i < n; i++)
        x[i] = fref_value(type, q, i);
    return q;
}

/* The library's own copy, which must succeed here. */
static void take_rows(const float *all, size_t slices, size_t n, size_t width, const clattn_ring_shard *sh, float *out)
{
    ck_assert(clattn_ring_shard_take(sh, slices, n, width, all, out) == CLATTN_SUCCESS);
}

void ring_inputs_make(const rcase *c, uint64_t seed, ring_inputs *in)
{
    memset(in, 0, sizeof *in);
    in->d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->DV);
    in->d.kv_heads = c->KVH;
    in->d.softcap = c->softcap;
    in->d.k_dtype = c->kt;
    in->d.v_dtype = c->vt;
    in->lengths[0] = c->key_lengths == 1 ? c->S - 5 : 0, in->lengths[1] = c->key_lengths == 1 ? c->S / 3 : 0;
    in->offsets[0] = 40, in->offsets[1] = 35;
    tu_variants_apply(&in->d, &in->var, c->causal, c->key_lengths ? in->lengths : NULL, c->offsets ? in->offsets : NULL,
                      c->win_left, c->sinks, c->alibi);
    in->nq = c->B * c->H * c->L * c->D, in->nk = c->B * c->KVH * c->S * c->D, in->nv = c->B * c->KVH * c->S * c->DV;
    in->no = c->B * c->H * c->L * c->DV, in->nl = c->B * c->H * c->L;
    in->q = tu_falloc(in->nq), in->k = tu_falloc(in->nk), in->v = tu_falloc(in->nv);
    tu_fill_uniform(in->q, in->nq, 1.0f, seed);
    tu_fill_uniform(in->k, in->nk, 1.0f, seed + 1);
    tu_fill_uniform(in->v, in->nv, 1.0f, seed + 2);
    clattn_ring_shard_of(c->L, ranks, rank, c->layout, &in->qs);
    clattn_ring_shard_of(c->S, ranks, rank, c->layout, &in->ks);
    /* K and V in their formats: a rank's rows are whole rows of bytes (every case's row a multiple of 4
     * bytes, so the float copy moves them), the reference reads the values they hold. */
    in->kb = quantised_copy(c->kt, in->k, in->nk, c->D, &in->k_row);
    in->vb = quantised_copy(c->vt, in->v, in->nv, c->DV, &in->v_row);
    ck_assert(in->k_row % sizeof(float) == 0 && in->v_row % sizeof(float) == 0);
    in->my_q = tu_falloc(c->B * c->H * in->qs.rows * c->D);
    in->my_k = tu_falloc(c->B * c->KVH * in->ks.rows * in->k_row / 4);
    in->my_v = tu_falloc(c->B * c->KVH * in->ks.rows * in->v_row / 4);
    take_rows(in->q, c->B * c->H, c->L, c->D, &in->qs, in->my_q);
    take_rows(in->kb, c->B * c->KVH, c->S, in->k_row / 4, &in->ks, in->my_k);
    take_rows(in->vb, c->B * c->KVH, c->S, in->v_row / 4, &in->ks, in->my_v);
    in->my_no = c->B * c->H * in->qs.rows * c->DV, in->my_nl = c->B * c->H * in->qs.rows;
}

void ring_expect_sent(const rcase *c, const ring_inputs *in, size_t bytes_sent)
{
    size_t want = 0;
    for (int t = 0; t + 1 < ranks; t++) {
        clattn_ring_shard held;
        clattn_ring_shard_of(c->S, ranks, (rank - t + ranks) % ranks, c->layout, &held);
        want += c->B * c->KVH * held.rows * (in->k_row + in->v_row);
    }
    ck_assert_msg(bytes_sent == want, "%s: rank %d sent %zu bytes, expected %zu", tu_label(), rank, bytes_sent, want);
}

/* The ring's rank and size are its communicator's; NULL gives −1 and 0. A ring over a split communicator
 * (two rings of the even and the odd ranks) has that communicator's. */
START_TEST(test_rank_and_size)
{
    ck_assert_int_eq(clattn_ring_rank(ring), rank);
    ck_assert_int_eq(clattn_ring_size(ring), ranks);
    ck_assert_int_eq(clattn_ring_rank(NULL), -1);
    ck_assert_int_eq(clattn_ring_size(NULL), 0);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    clattn_ring *r = NULL;
    clattn_status st = clattn_ring_create(&r, ctx, half, 60.0);
    ck_assert_msg(st == CLATTN_SUCCESS, "rank %d: clattn_ring_create: %s", rank, clattn_ring_last_error(NULL));
    ck_assert_int_eq(clattn_ring_rank(r), rank / 2);
    ck_assert_int_eq(clattn_ring_size(r), (ranks - rank % 2 + 1) / 2);
    clattn_ring_free(r);
    MPI_Comm_free(&half);
}
END_TEST

START_TEST(test_shards)
{
    const size_t sizes[] = {1, 7, 8, 45, 1000};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int layout = 0; layout < 2; layout++)
            for (int p = 1; p <= 5; p++) {
                const size_t n = sizes[si];
                char *seen = calloc(n, 1);
                size_t total = 0;
                for (int r = 0; r < p; r++) {
                    clattn_ring_shard sh;
                    ck_assert(clattn_ring_shard_of(n, p, r, (clattn_ring_layout)layout, &sh) == CLATTN_SUCCESS);
                    ck_assert(sh.rows == sh.len[0] + sh.len[1]);
                    for (int c = 0; c < 2; c++)
                        for (size_t i = 0; i < sh.len[c]; i++) {
                            ck_assert(sh.start[c] + i < n && !seen[sh.start[c] + i]);
                            seen[sh.start[c] + i] = 1;
                        }
                    total += sh.rows;
                }
                ck_assert_msg(total == n, "n %zu, P %d, layout %d: %zu rows dealt", n, p, layout, total);
                free(seen);
            }
    clattn_ring_shard sh;
    ck_assert(clattn_ring_shard_of(10, 2, 2, CLATTN_RING_ZIGZAG, &sh) == CLATTN_ERROR_INVALID_VALUE);
    ck_assert(clattn_ring_shard_of(10, 0, 0, CLATTN_RING_ZIGZAG, &sh) == CLATTN_ERROR_INVALID_VALUE);
    ck_assert(clattn_ring_shard_of(10, 2, 0, (clattn_ring_layout)7, &sh) == CLATTN_ERROR_INVALID_VALUE);
    ck_assert(clattn_ring_shard_of(10, 2, 0, CLATTN_RING_ZIGZAG, NULL) == CLATTN_ERROR_NULL_ARGUMENT);
    /* Zigzag: rank r holds runs r and 2P − 1 − r of 2P. */
    ck_assert(clattn_ring_shard_of(8, 2, 0, CLATTN_RING_ZIGZAG, &sh) == CLATTN_SUCCESS);
    ck_assert(sh.start[0] == 0 && sh.len[0] == 2 && sh.start[1] == 6 && sh.len[1] == 2);
    /* take then put: the rows go out and come back to their places, the others untouched. */
    float whole[2 * 8], part[2 * 4], back[2 * 8];
    for (int i = 0; i < 16; i++) {
        whole[i] = (float)i;
        back[i] = -1.0f;
    }
    ck_assert(clattn_ring_shard_take(&sh, 2, 8, 1, whole, part) == CLATTN_SUCCESS);
    const float want[8] = {0, 1, 6, 7, 8, 9, 14, 15};
    for (int i = 0; i < 8; i++)
        ck_assert_msg(part[i] == want[i], "part[%d] = %g, expected %g", i, (double)part[i], (double)want[i]);
    ck_assert(clattn_ring_shard_put(&sh, 2, 8, 1, part, back) == CLATTN_SUCCESS);
    for (int i = 0; i < 16; i++)
        ck_assert(back[i] == ((i % 8) < 2 || (i % 8) >= 6 ? whole[i] : -1.0f));
    ck_assert(clattn_ring_shard_take(&sh, 2, 7, 1, whole, part) == CLATTN_ERROR_INVALID_VALUE); /* run past 7 rows */
    ck_assert(clattn_ring_shard_take(NULL, 2, 8, 1, whole, part) == CLATTN_ERROR_NULL_ARGUMENT);
    ck_assert(clattn_ring_shard_put(&sh, 2, 8, 1, NULL, back) == CLATTN_ERROR_NULL_ARGUMENT);
    ck_assert(clattn_ring_shard_take(&sh, SIZE_MAX / 2, 8, 4, whole, part) == CLATTN_ERROR_SIZE_OVERFLOW);
}
END_TEST

#define F32 CLATTN_FLOAT32
static const rcase cases[] = {
    {"non-causal, contiguous, GQA 4/2, L = S = 37", 2, 4, 2, 37, 37, 16, 16, NONE, CONTIG, 0, 0, 0, 0, -2, 0, 0, F32, F32},
    {"non-causal, zigzag, L 23, S 61, Dv 8", 1, 2, 1, 23, 61, 16, 8, NONE, ZIGZAG, 0, 0, 0, 0, -2, 0, 0, F32, F32},
    {"causal, zigzag, L = S = 45", 1, 2, 2, 45, 45, 32, 32, TL, ZIGZAG, 0, 0, 0, 0, -2, 0, 0, F32, F32},
    {"causal, contiguous, L = S = 29, GQA 3/1", 1, 3, 1, 29, 29, 16, 16, TL, CONTIG, 0, 0, 0, 0, -2, 0, 0, F32, F32},
    {"causal, zigzag, key lengths, B 2", 2, 2, 2, 41, 41, 16, 16, TL, ZIGZAG, 1, 0, 0, 0, -2, 0, 0, F32, F32},
    {"cross: L 13, S 50, bottom-right causal, zigzag", 1, 2, 2, 13, 50, 16, 16, BR, ZIGZAG, 0, 0, 0, 0, -2, 0, 0, F32, F32},
    {"query offsets: L 11 at 40 and 35 of S 51, causal", 2, 2, 1, 11, 51, 16, 16, TL, CONTIG, 0, 1, 0, 0, -2, 0, 0, F32, F32},
    {"sinks, ALiBi, soft-capping, window 9, zigzag causal", 1, 4, 2, 33, 33, 16, 16, TL, ZIGZAG, 0, 0, 1, 1, 9, 5.0f, 0, F32, F32},
    {"mods and block mask: documents, a head bias, zigzag", 1, 2, 2, 43, 43, 16, 16, NONE, ZIGZAG, 0, 0, 0, 0, -2, 0, 1, F32, F32},
    {"mods: cross L 17 at the end of S 59, contiguous", 2, 2, 1, 17, 59, 16, 16, BR, CONTIG, 0, 0, 0, 0, -2, 0, 1, F32, F32},
    {"q4_0 K, u4_g32 V, causal zigzag, GQA 4/2, key lengths", 2, 4, 2, 37, 37, 64, 64, TL, ZIGZAG, 1, 0, 0, 0, -2, 0, 0,
     CLATTN_Q4_0, CLATTN_U4_G32},
    {"fp8_e5m2 K, q8_0 V, cross L 9, S 70, contiguous", 1, 2, 1, 9, 70, 32, 64, BR, CONTIG, 0, 0, 0, 0, -2, 0, 0,
     CLATTN_FP8_E5M2, CLATTN_Q8_0},
};
#define NCASES (sizeof cases / sizeof cases[0])

static double max_abs_diff(const float *a, const double *ref, size_t n, double *worst_ratio)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - ref[i]);
        if (isinf(ref[i]) && a[i] == ref[i])
            continue;
        ck_assert_msg(isfinite(d), "%s: element %zu is %g, expected %g", tu_label(), i, (double)a[i], ref[i]);
        worst = fmax(worst, d);
        *worst_ratio = fmax(*worst_ratio, d / (TU_ATOL + TU_RTOL * fabs(ref[i])));
    }
    return worst;
}

/* The ring's mods: each rank makes them on its own context (the partition's parts carry the positions of
 * the whole call, desc.origin_position: a part's keys numbered from 0 would read other documents). */
static const char ring_mods_source[] =
    "float score_mod(float s, int b, int h, long q, long k, __global const int *doc) { return s + 0.25f * (float)h; }\n"
    "bool mask_mod(int b, int h, long q, long k, __global const int *doc) { return doc[q] == doc[k] || k == 0; }\n";
static int ring_doc[128];
static double ring_ref_score(double s, int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)q, (void)k, (void)u;
    return s + 0.25 * (double)h;
}
static int ring_ref_mask(int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h, (void)u;
    return ring_doc[q] == ring_doc[k] || k == 0;
}

START_TEST(test_table)
{
    const rcase *c = &cases[_i];
    tu_set_label("ring P %d \"%s\"", ranks, c->name);
    ring_inputs *in = tu_track_malloc(sizeof *in);
    ring_inputs_make(c, 11 + _i, in);
    clattn_sdpa_desc d = in->d;
    const float *q = in->q, *k = in->k, *v = in->v, *kb = in->kb, *vb = in->vb;
    const size_t no = in->no, nl = in->nl, my_no = in->my_no, my_nl = in->my_nl;
    const clattn_ring_shard qs = in->qs;
    clattn_mods *mods = NULL;
    clattn_block_mask *blocks = NULL;
    if (c->mods) {
        for (size_t i = 0, id = 0; i < c->S;) /* documents of 1 to 13 positions */
            for (size_t n = 1 + (id++ * 5 + 3) % 13; n-- && i < c->S;)
                ring_doc[i++] = (int)id;
        const clattn_mod_aux aux = {"doc", CLATTN_AUX_INT, tu_dev_alloc(ctx, c->S, (const float *)ring_doc),
                                    CLATTN_AUX_BY_POSITION, 0};
        clattn_mods_desc md = CLATTN_MODS_DESC_INIT;
        md.source = ring_mods_source;
        md.aux = &aux;
        md.aux_count = 1;
        TU_ASSERT_OK(clattn_mods_create(ctx, &md, &mods), ctx, "clattn_mods_create");
        clattn_block_mask_desc bd = CLATTN_BLOCK_MASK_DESC_INIT;
        bd.q_len = bd.kv_len = c->S;
        bd.block_q = bd.block_k = 8;
        bd.mods = mods;
        TU_ASSERT_OK(clattn_block_mask_create(ctx, &bd, &blocks), ctx, "clattn_block_mask_create");
        d.mods = mods;
        d.block_mask = c->layout == ZIGZAG ? blocks : NULL;
    }
    float *o = tu_host_alloc(my_no, NULL), *l = tu_host_alloc(my_nl, NULL);
    clattn_ring_stats stats = CLATTN_RING_STATS_INIT;
    clattn_status st = clattn_ring_sdpa_host(ring, &d, c->layout, in->my_q, in->my_k, in->my_v, o, l, &stats);
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: rank %d: %s: %s", tu_label(), rank, clattn_status_string(st),
                  clattn_ring_last_error(ring));
    tu_host_check_guard(o, my_no, "out");
    tu_host_check_guard(l, my_nl, "lse");
    ck_assert_uint_eq(stats.steps, (unsigned)ranks);
    ring_expect_sent(c, in, stats.bytes_sent);
    /* The fp64 reference over the whole tensors, and one process's clattn_sdpa_host: this rank's rows. */
    double *ro = tu_dalloc(no), *rl = tu_dalloc(nl);
    const ref_mods rm = {ring_ref_score, ring_ref_mask, NULL};
    clattn_sdpa_desc rd = d; /* (over the values K and V hold: float32) */
    rd.k_dtype = rd.v_dtype = CLATTN_FLOAT32;
    ref_sdpa_mods(&rd, c->mods ? &rm : NULL, q, k, v, NULL, ro, NULL, rl);
    float *so = tu_falloc(no), *sl = tu_falloc(nl);
    st = clattn_sdpa_host(ctx, &d, q, kb, vb, NULL, so, NULL, sl);
    TU_ASSERT_OK(st, ctx, "clattn_sdpa_host (one process)");
    float *ref_mine = tu_falloc(my_no), *single_mine = tu_falloc(my_no), *ref_lse = tu_falloc(my_nl);
    float *single_lse = tu_falloc(my_nl), *rof = tu_falloc(no), *rlf = tu_falloc(nl);
    for (size_t i = 0; i < no; i++)
        rof[i] = (float)ro[i];
    for (size_t i = 0; i < nl; i++)
        rlf[i] = (float)rl[i];
    take_rows(rof, c->B * c->H, c->L, c->DV, &qs, ref_mine);
    take_rows(rlf, c->B * c->H, c->L, 1, &qs, ref_lse);
    take_rows(so, c->B * c->H, c->L, c->DV, &qs, single_mine);
    take_rows(sl, c->B * c->H, c->L, 1, &qs, single_lse);
    double *ref_d = tu_dalloc(my_no), *ref_ld = tu_dalloc(my_nl), *single_d = tu_dalloc(my_no), *single_ld = tu_dalloc(my_nl);
    for (size_t i = 0; i < my_no; i++) {
        ref_d[i] = ref_mine[i];
        single_d[i] = single_mine[i];
    }
    for (size_t i = 0; i < my_nl; i++) {
        ref_ld[i] = ref_lse[i];
        single_ld[i] = single_lse[i];
    }
    double ratio = 0.0, single_ratio = 0.0;
    worst_ref = fmax(worst_ref, max_abs_diff(o, ref_d, my_no, &ratio));
    worst_ref = fmax(worst_ref, max_abs_diff(l, ref_ld, my_nl, &ratio));
    worst_single = fmax(worst_single, max_abs_diff(o, single_d, my_no, &single_ratio));
    worst_single = fmax(worst_single, max_abs_diff(l, single_ld, my_nl, &single_ratio));
    ck_assert_msg(ratio <= 1.0, "%s: rank %d: error %.3g × the tolerance against the reference", tu_label(), rank, ratio);
    ck_assert_msg(single_ratio <= 1.0, "%s: rank %d: error %.3g × the tolerance against one process", tu_label(), rank,
                  single_ratio);
    clattn_block_mask_free(blocks);
    clattn_mods_free(mods);
}
END_TEST

START_TEST(test_memory)
{
    const size_t B = 1, H = 4, L = 512, S = 512, D = 64;
    tu_set_label("ring P %d memory, L = S = %zu, D %zu, causal zigzag", ranks, L, D);
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, D);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = TL;
    d.masks = &m;
    clattn_ring_shard qs, ks;
    clattn_ring_shard_of(L, ranks, rank, ZIGZAG, &qs);
    clattn_ring_shard_of(S, ranks, rank, ZIGZAG, &ks);
    float *q = tu_falloc(B * H * qs.rows * D), *k = tu_falloc(B * H * ks.rows * D), *v = tu_falloc(B * H * ks.rows * D);
    tu_fill_uniform(q, B * H * qs.rows * D, 1.0f, 100 + (uint64_t)rank);
    tu_fill_uniform(k, B * H * ks.rows * D, 1.0f, 200 + (uint64_t)rank);
    tu_fill_uniform(v, B * H * ks.rows * D, 1.0f, 300 + (uint64_t)rank);
    float *o = tu_falloc(B * H * qs.rows * D);
    clattn_context_release_temporaries(ctx); /* the peak from here on is this call's */
    clattn_ring_stats stats = CLATTN_RING_STATS_INIT;
    const double t0 = MPI_Wtime();
    clattn_status st = clattn_ring_sdpa_host(ring, &d, ZIGZAG, q, k, v, o, NULL, &stats);
    const double seconds = MPI_Wtime() - t0;
    ck_assert_msg(st == CLATTN_SUCCESS, "rank %d: %s: %s", rank, clattn_status_string(st), clattn_ring_last_error(ring));
    const double bound = 2.0 * (double)(L + S) / ranks * (double)(B * H * (D + D)) * sizeof(float);
    const double whole = (double)(B * H * (L + S) * (D + D)) * sizeof(float); /* Q, K, V, O of one device */
    unsigned pairs_min = stats.pairs, pairs_max = stats.pairs;
    MPI_Allreduce(MPI_IN_PLACE, &pairs_min, 1, MPI_UNSIGNED, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &pairs_max, 1, MPI_UNSIGNED, MPI_MAX, MPI_COMM_WORLD);
    printf("ring: P %d rank %d: device peak %zu bytes (%.2f of the whole call's Q/K/V/O, bound %.0f), host %zu bytes, "
           "sent %zu bytes, %u pairs, %.3f s (waiting %.3f s)\n",
           ranks, rank, stats.device_peak_bytes, stats.device_peak_bytes / whole, bound, stats.host_bytes,
           stats.bytes_sent, stats.pairs, seconds, stats.wait_seconds);
    ck_assert_msg((double)stats.device_peak_bytes <= bound, "rank %d: device peak %zu bytes > %.0f", rank,
                  stats.device_peak_bytes, bound);
    ck_assert_msg(stats.device_peak_bytes > 0 && stats.host_bytes > 0, "rank %d: nothing counted", rank);
    /* Zigzag under a causal mask: every rank attends the same number of (query run, key run) pairs. */
    ck_assert_msg(pairs_min == pairs_max, "pairs per rank differ: %u to %u", pairs_min, pairs_max);
}
END_TEST


static Suite *make_suite(void)
{
    Suite *s = suite_create("ring");
    TCase *tc = tcase_create("ring");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_rank_and_size);
    tcase_add_test(tc, test_shards);
    ring_add_unit_tests(tc); /* fingerprints, deadlines */
    tcase_add_loop_test(tc, test_table, 0, NCASES);
    tcase_add_test(tc, test_memory);
    ring_add_reproducible_tests(tc);
    ring_add_failure_tests(tc); /* bad calls, older structs, failing, stalled and dead ranks (the last) */
    suite_add_tcase(s, tc);
    return s;
}

/* The largest errors over every rank (collective: every rank calls it). */
static void print_worst(void)
{
    double worst[2] = {worst_ref, worst_single};
    MPI_Allreduce(MPI_IN_PLACE, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("ring: P %d: max |error| %.3g against the fp64 reference, %.3g against one process\n", ranks, worst[0],
               worst[1]);
}

int main(int argc, char **argv)
{
    return ring_test_main(argc, argv, "ring", make_suite, print_worst, &rank, &ranks, &ctx, &ring);
}
