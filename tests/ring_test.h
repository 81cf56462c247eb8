/*
 * What the parts of test_ring share (test_ring.c: rank and size, shards, the table, memory, and the
 * program's main; test_ring_failures.c: fingerprints, bad calls, failing ranks, deadlines;
 * test_ring_reproducible.c: reproducible arithmetic).
 */
#ifndef CLATTN_RING_TEST_H
#define CLATTN_RING_TEST_H

#include "ring_util.h"

#include <stdint.h>

#define CONTIG CLATTN_RING_CONTIGUOUS
#define ZIGZAG CLATTN_RING_ZIGZAG

extern int rank, ranks;      /* this process's rank in MPI_COMM_WORLD, and its size */

/* A ring call of the tables (test_ring.c's, test_ring_reproducible.c's). */
typedef struct rcase {
    const char *name;
    size_t B, H, KVH, L, S, D, DV;
    clattn_causal causal;
    clattn_ring_layout layout;
    int key_lengths; /* 1: S − 5 and S / 3; 2: 0 and 0 (no key visible anywhere) */
    int offsets, sinks, alibi;
    long long win_left; /* −2: none */
    float softcap;
    int mods; /* programmable attention: documents by position, a per-head bias, and their block mask */
    clattn_dtype kt, vt; /* K's and V's formats (0: float32), sent around the ring as their bytes */
} rcase;

/* A case's whole tensors (every rank makes the same: seeds seed … seed + 2), K and V also as stored (kb, vb: q, k
 * and v then hold the values the formats hold), and this rank's rows of them in shard order. */
typedef struct ring_inputs {
    clattn_sdpa_desc d;
    tu_variants var;
    size_t lengths[2];
    long long offsets[2];
    float *q, *k, *v;
    const float *kb, *vb;
    size_t k_row, v_row; /* bytes of a stored K (V) row */
    size_t nq, nk, nv, no, nl, my_no, my_nl;
    clattn_ring_shard qs, ks;
    float *my_q, *my_k, *my_v;
} ring_inputs;
void ring_inputs_make(const rcase *c, uint64_t seed, ring_inputs *in);
/* The bytes this rank must have sent: in step t < P − 1 the slice of rank − t, K and V in their formats. */
void ring_expect_sent(const rcase *c, const ring_inputs *in, size_t bytes_sent);
extern clattn_context *ctx;  /* every rank's context on the first device */
extern clattn_ring *ring;    /* the suite's ring over MPI_COMM_WORLD */

/* test_ring_failures.c's tests, in the order every rank runs them: the fingerprints' verdict and the
 * deadlines (unit tests); the bad calls, older structs, a failing, a stalled and (last) a dead rank. */
void ring_add_unit_tests(TCase *tc);
void ring_add_failure_tests(TCase *tc);
/* test_ring_reproducible.c: the ring in reproducible arithmetic, each rank's rows one process's bits. */
void ring_add_reproducible_tests(TCase *tc);

#endif
