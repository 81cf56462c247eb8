/*
 * Ring attention in reproducible arithmetic (src/mpi/ring_exact.c; docs/reproducible.md), part of test_ring
 * (run under 2 and 4 ranks): each rank's rows of out and lse are, bit for bit, those of one process's
 * reproducible clattn_sdpa_host over the whole tensors — causal and not, both layouts, uneven shards, GQA, key
 * lengths, query offsets, sinks, ALiBi, soft-capping, a window, cross lengths, block and FP8 K/V formats, rows that
 * see no key on every rank — asked by desc.arithmetic; the slices still travel (bytes sent as the
 * default ring's), and each rank's device holds every key at the end (its memory count says so).
 */
#include "ring_test.h"

#include <string.h>

#define F32 CLATTN_FLOAT32
static const rcase xcases[] = {
    {"non-causal, contiguous, GQA 4/2, L = S = 37", 2, 4, 2, 37, 37, 16, 16, CLATTN_CAUSAL_NONE, CONTIG, 0, 0, 0, 0, -2,
     0, 0, F32, F32},
    {"causal, zigzag, key lengths, sinks, B 2, Dv 16", 2, 2, 2, 41, 41, 32, 16, CLATTN_CAUSAL_TOP_LEFT, ZIGZAG, 1, 0, 1,
     0, -2, 0, 0, F32, F32},
    {"cross: L 13, S 50, bottom-right causal, zigzag, ALiBi, soft-capping, window 9", 1, 4, 2, 13, 50, 16, 16,
     CLATTN_CAUSAL_BOTTOM_RIGHT, ZIGZAG, 0, 0, 0, 1, 9, 5.0f, 0, F32, F32},
    {"query offsets: L 11 at 40 and 35 of S 51, causal, q8_0 K, fp8_e4m3 V", 2, 2, 1, 11, 51, 64, 64,
     CLATTN_CAUSAL_TOP_LEFT, CONTIG, 0, 1, 0, 0, -2, 0, 0, CLATTN_Q8_0, CLATTN_FP8_E4M3},
    {"q4_0 K, u4_g32 V, causal zigzag, GQA 4/2, S 70", 1, 4, 2, 37, 70, 64, 64, CLATTN_CAUSAL_BOTTOM_RIGHT, ZIGZAG, 0,
     0, 0, 0, -2, 0, 0, CLATTN_Q4_0, CLATTN_U4_G32},
    {"no key visible anywhere (key lengths 0), sinks: every rank's rows empty", 2, 2, 1, 9, 20, 16, 16,
     CLATTN_CAUSAL_NONE, ZIGZAG, 2, 0, 1, 0, -2, 0, 0, F32, F32},
};
#define NX (sizeof xcases / sizeof xcases[0])

/* The bits of two float arrays, the first differing element named. */
static void assert_same_bits(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&got[i], &want[i], sizeof *got) == 0, "%s: rank %d: %s[%zu] = %a, one process %a",
                      tu_label(), rank, what, i, (double)got[i], (double)want[i]);
}

START_TEST(test_ring_reproducible)
{
    const rcase *c = &xcases[_i];
    tu_set_label("reproducible ring P %d \"%s\"", ranks, c->name);
    ring_inputs *in = tu_track_malloc(sizeof *in);
    ring_inputs_make(c, 71 + _i, in);
    in->d.arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
    float *o = tu_host_alloc(in->my_no, NULL), *l = tu_host_alloc(in->my_nl, NULL);
    clattn_context_release_temporaries(ctx);
    clattn_ring_stats stats = CLATTN_RING_STATS_INIT;
    clattn_status st = clattn_ring_sdpa_host(ring, &in->d, c->layout, in->my_q, in->my_k, in->my_v, o, l, &stats);
    ck_assert_msg(st == CLATTN_SUCCESS, "%s: rank %d: %s: %s", tu_label(), rank, clattn_status_string(st),
                  clattn_ring_last_error(ring));
    tu_host_check_guard(o, in->my_no, "out");
    tu_host_check_guard(l, in->my_nl, "lse");
    ring_expect_sent(c, in, stats.bytes_sent); /* (the slices travel as in the default ring) */
    const size_t whole_kv = c->B * c->KVH * c->S * (in->k_row + in->v_row);
    ck_assert_msg(stats.device_peak_bytes >= whole_kv, "%s: rank %d: device peak %zu bytes < every key's %zu",
                  tu_label(), rank, stats.device_peak_bytes, whole_kv);
    /* One process, reproducible, over the whole tensors: this rank's rows, bit for bit. */
    float *so = tu_falloc(in->no), *sl = tu_falloc(in->nl), *want_o = tu_falloc(in->my_no), *want_l = tu_falloc(in->my_nl);
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &in->d, in->q, in->kb, in->vb, NULL, so, NULL, sl), ctx,
                 "clattn_sdpa_host (one process)");
    ck_assert(clattn_ring_shard_take(&in->qs, c->B * c->H, c->L, c->DV, so, want_o) == CLATTN_SUCCESS);
    ck_assert(clattn_ring_shard_take(&in->qs, c->B * c->H, c->L, 1, sl, want_l) == CLATTN_SUCCESS);
    assert_same_bits(o, want_o, in->my_no, "out");
    assert_same_bits(l, want_l, in->my_nl, "lse");
}
END_TEST

void ring_add_reproducible_tests(TCase *tc) { tcase_add_loop_test(tc, test_ring_reproducible, 0, NX); }
