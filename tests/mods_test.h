/*
 * What the two halves of test_mods share (test_mods.c: the example mods and their references, the
 * auxiliary tensors, the call shapes, and the cases examples, compose, masked scores, ragged, paged,
 * storage types; test_mods_layers.c: layers, block masks, refusals).
 */
#ifndef CLATTN_MODS_TEST_H
#define CLATTN_MODS_TEST_H

#include "test_util.h"

#include <stddef.h>

#define MAXH 8
#define BUCKETS 32
#define MAX_DISTANCE 16 /* small, so that the test's distances reach the logarithmic buckets and beyond */

/* What the reference callbacks read: the same values the device's auxiliary tensors hold. */
typedef struct mod_data {
    const float *slopes; /* per head */
    const int *doc;      /* per position */
    const float *bias;   /* (H, BUCKETS) */
    long long window, prefix;
    double cap;
} mod_data;

/* The reference callbacks of causal.cl, sliding_window.cl and document.cl. */
int ref_causal(int b, int h, long long q, long long k, const void *u);
int ref_window(int b, int h, long long q, long long k, const void *u);
int ref_document(int b, int h, long long q, long long k, const void *u);

enum aux_kind { AUX_NONE, AUX_SLOPES, AUX_DOC, AUX_T5 };
#define N_PATHS 3
extern const char *const path_names[N_PATHS];

/* A file of tools/mods/ (CLATTN_MODS_DIR), tracked. */
char *read_example(const char *file);

/* The device tensors and host values of one call's auxiliary tensors. */
typedef struct aux_set {
    float slopes[MAXH], bias[MAXH * BUCKETS];
    int doc[256];
    clattn_mod_aux aux[CLATTN_MODS_MAX_AUX];
    size_t count;
} aux_set;
void add_aux(clattn_context *ctx, aux_set *a, enum aux_kind kind, size_t heads, size_t positions);
clattn_mods *make_mods(clattn_context *ctx, const char *source, const char *const *defines, size_t ndefines,
                       const aux_set *a);

/* One shape a path is tested at: the fused and staged paths with L = S, the decode path with few rows
 * at the end of a longer key run (their positions through query offsets). */
typedef struct call_shape {
    size_t B, H, kvh, L, S, D, Dv;
} call_shape;
extern const call_shape shapes[N_PATHS];
/* A call of shape c on `path`, its query rows at the end of the keys (positions S − L + i, through
 * query offsets: m and offsets, of at least c->B entries, are the caller's). */
clattn_sdpa_desc shape_desc(const call_shape *c, size_t path, clattn_masks *m, long long *offsets);
/* Run d on the context's device from host arrays; out and lse come back. */
void run(clattn_context *ctx, const clattn_sdpa_desc *d, const float *q, const float *k, const float *v,
         const float *mask, float *out, float *weights, float *lse, const char *what);

/* test_mods_layers.c's test cases: mha, block_masks, block_mask_refusals, refusals. */
void mods_add_layer_cases(Suite *s);

#endif
