/*
 * Ring attention in reproducible arithmetic (src/mpi/ring_exact.c; docs/reproducible.md), part of test_ring
 * (run under 2 and 4 ranks): each rank's rows of out and lse are, bit for bit, those of one process's
 * reproducible clattn_sdpa_host over the whole tensors — causal and not, both layouts, uneven shards, GQA, key
 * lengths, query offsets, sinks, ALiBi, soft-capping, a window, cross lengths, block and FP8 K/V formats, rows that
 * see no key (a sequence's, and every rank's) — asked by desc.arithmetic; the slices still travel (bytes sent as the
 * default ring's), and each rank's device holds every key at the end (its memory count says so).
 */
#include "formats_ref.h"
#include "ring_test.h"

#include <string.h>

typedef struct {
    const char *name;
    size_t B, H, KVH, L, S, D, DV;
    clattn_causal causal;
    clattn_ring_layout layout;
    int key_lengths, offsets, sinks, alibi; /* key_lengths 1: S − 5 and 0; 2: none at all */
    long long win_left; /* −2: none */
    float softcap;
    clattn_dtype kt, vt;
} xcase;

static const xcase xcases[] = {
    {"non-causal, contiguous, GQA 4/2, L = S = 37", 2, 4, 2, 37, 37, 16, 16, CLATTN_CAUSAL_NONE, CONTIG, 0, 0, 0, 0, -2,
     0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"causal, zigzag, key lengths (one 0: rows that see no key), sinks, B 2", 2, 2, 2, 41, 41, 32, 16,
     CLATTN_CAUSAL_TOP_LEFT, ZIGZAG, 1, 0, 1, 0, -2, 0, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"cross: L 13, S 50, bottom-right causal, zigzag, ALiBi, soft-capping, window 9", 1, 4, 2, 13, 50, 16, 16,
     CLATTN_CAUSAL_BOTTOM_RIGHT, ZIGZAG, 0, 0, 0, 1, 9, 5.0f, CLATTN_FLOAT32, CLATTN_FLOAT32},
    {"query offsets: L 11 at 40 and 35 of S 51, causal, q8_0 K, fp8_e4m3 V", 2, 2, 1, 11, 51, 64, 64,
     CLATTN_CAUSAL_TOP_LEFT, CONTIG, 0, 1, 0, 0, -2, 0, CLATTN_Q8_0, CLATTN_FP8_E4M3},
    {"q4_0 K, u4_g32 V, causal zigzag, GQA 4/2, S 70", 1, 4, 2, 37, 70, 64, 64, CLATTN_CAUSAL_BOTTOM_RIGHT, ZIGZAG, 0,
     0, 0, 0, -2, 0, CLATTN_Q4_0, CLATTN_U4_G32},
};
#define NX (sizeof xcases / sizeof xcases[0])

/* x's values as stored in `type`, as bytes (float32: a copy); *row_bytes gets a row's bytes. */
static void *stored(clattn_dtype type, const float *x, size_t n, size_t row, size_t *row_bytes)
{
    *row_bytes = clattn_dtype_bytes(type, row);
    void *bytes = tu_falloc((clattn_dtype_bytes(type, n) + sizeof(float) - 1) / sizeof(float));
    if (type == CLATTN_FLOAT32)
        memcpy(bytes, x, n * sizeof *x);
    else
        fref_quantise(type, x, n, row, bytes, NULL);
    return bytes;
}

/* The bits of two float arrays, the first differing element named. */
static void assert_same_bits(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&got[i], &want[i], sizeof *got) == 0, "%s: rank %d: %s[%zu] = %a, one process %a",
                      tu_label(), rank, what, i, (double)got[i], (double)want[i]);
}

START_TEST(test_ring_reproducible)
{
    const xcase *c = &xcases[_i];
    tu_set_label("reproducible ring P %d \"%s\"", ranks, c->name);
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->DV);
    d.kv_heads = c->KVH;
    d.softcap = c->softcap;
    d.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
    d.k_dtype = c->kt;
    d.v_dtype = c->vt;
    const size_t lengths[2] = {c->key_lengths == 1 ? c->S - 5 : 0, 0};
    const long long offsets[2] = {40, 35};
    tu_variants var;
    tu_variants_apply(&d, &var, c->causal, c->key_lengths ? lengths : NULL, c->offsets ? offsets : NULL, c->win_left,
                      c->sinks, c->alibi);
    const size_t nq = c->B * c->H * c->L * c->D, nk = c->B * c->KVH * c->S * c->D, nv = c->B * c->KVH * c->S * c->DV;
    const size_t no = c->B * c->H * c->L * c->DV, nl = c->B * c->H * c->L;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv);
    tu_fill_uniform(q, nq, 1.0f, 71 + _i);
    tu_fill_uniform(k, nk, 1.0f, 72 + _i);
    tu_fill_uniform(v, nv, 1.0f, 73 + _i);
    size_t k_row, v_row;
    const float *kb = stored(c->kt, k, nk, c->D, &k_row), *vb = stored(c->vt, v, nv, c->DV, &v_row);
    ck_assert(k_row % sizeof(float) == 0 && v_row % sizeof(float) == 0);
    clattn_ring_shard qs, ks;
    clattn_ring_shard_of(c->L, ranks, rank, c->layout, &qs);
    clattn_ring_shard_of(c->S, ranks, rank, c->layout, &ks);
    float *my_q = tu_falloc(c->B * c->H * qs.rows * c->D), *my_k = tu_falloc(c->B * c->KVH * ks.rows * k_row / 4);
    float *my_v = tu_falloc(c->B * c->KVH * ks.rows * v_row / 4);
    ck_assert(clattn_ring_shard_take(&qs, c->B * c->H, c->L, c->D, q, my_q) == CLATTN_SUCCESS);
    ck_assert(clattn_ring_shard_take(&ks, c->B * c->KVH, c->S, k_row / 4, kb, my_k) == CLATTN_SUCCESS);
    ck_assert(clattn_ring_shard_take(&ks, c->B * c->KVH, c->S, v_row / 4, vb, my_v) == CLATTN_SUCCESS);
    const size_t my_no = c->B * c->H * qs.rows * c->DV, my_nl = c->B * c->H * qs.rows;
    float *o = tu_host_alloc(my_no, NULL), *l = tu_host_alloc(my_nl, NULL);
    clattn_context_release_temporaries(ctx);
    clattn_ring_stats stats = CLATTN_RING_STATS_INIT;
    clattn_status st = clattn_ring_sdpa_host(ring, &d, c->layout, my_q, my_k, my_v, o, l, &stats);
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: rank %d: %s: %s", tu_label(), rank, clattn_status_string(st),
                  clattn_ring_last_error(ring));
    tu_host_check_guard(o, my_no, "out");
    tu_host_check_guard(l, my_nl, "lse");
    /* The slices travel as in the default ring: in step t < P − 1 the slice of rank − t is passed on. */
    size_t want_sent = 0;
    for (int t = 0; t + 1 < ranks; t++) {
        clattn_ring_shard held;
        clattn_ring_shard_of(c->S, ranks, (rank - t + ranks) % ranks, c->layout, &held);
        want_sent += c->B * c->KVH * held.rows * (k_row + v_row);
    }
    ck_assert_msg(stats.bytes_sent == want_sent, "%s: rank %d sent %zu bytes, expected %zu", tu_label(), rank,
                  stats.bytes_sent, want_sent);
    const size_t whole_kv = c->B * c->KVH * c->S * (k_row + v_row);
    ck_assert_msg(stats.device_peak_bytes >= whole_kv, "%s: rank %d: device peak %zu bytes < every key's %zu",
                  tu_label(), rank, stats.device_peak_bytes, whole_kv);
    /* One process, reproducible, over the whole tensors: this rank's rows, bit for bit. */
    float *so = tu_falloc(no), *sl = tu_falloc(nl), *want_o = tu_falloc(my_no), *want_l = tu_falloc(my_nl);
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, q, kb, vb, NULL, so, NULL, sl), ctx, "clattn_sdpa_host (one process)");
    ck_assert(clattn_ring_shard_take(&qs, c->B * c->H, c->L, c->DV, so, want_o) == CLATTN_SUCCESS);
    ck_assert(clattn_ring_shard_take(&qs, c->B * c->H, c->L, 1, sl, want_l) == CLATTN_SUCCESS);
    assert_same_bits(o, want_o, my_no, "out");
    assert_same_bits(l, want_l, my_nl, "lse");
}
END_TEST

void ring_add_reproducible_tests(TCase *tc) { tcase_add_loop_test(tc, test_ring_reproducible, 0, NX); }
