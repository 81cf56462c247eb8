/*
 * The ring's fingerprint follows the call options' table (src/base/call_options.def, issue 37):
 *  - every option whose `result` is 1 is in it: a descriptor that differs from another in that option
 *    alone — a number, an array's contents, the mods' functions, a block mask — has another fingerprint,
 *    and the verdict names the option;
 *  - ranks that disagree on logit_scale, on the mods or on the origin fail every rank with
 *    CLATTN_ERROR_SHAPE_MISMATCH naming the option and the rank; ranks that agree on logit_scale run.
 * Run under mpiexec like tests/test_ring.c (suite mpi: ring-options-np2).
 */
#include "ring_util.h"

#include "../src/mpi/fingerprint.h" /* compiled into this test */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, ranks;
static clattn_context *ctx;
static clattn_ring *ring;

enum { FB = 2, FH = 2 };

/* Another value of each kind than the default's (0 where the kind has none to give). */
static const float other_heads[FH] = {0.5f, -1.25f};
static const size_t other_lengths[FB] = {3, 4};
static const long long other_offsets[FB] = {1, 2};
static const clattn_window other_window = {2, 0};
static const int other_tree[FB * 9] = {-1, 0, 0, 1, -1, 4, 2, 6, 6, -1, 0, 1, 2, 3, 4, 5, 6, 7}; /* (B·L: base's L 9) */
static const clattn_mods *other_mods;
static const clattn_block_mask *other_block_mask;
#define OTHER_OPT_DIM(f) ((f) += 1, 1)
#define OTHER_OPT_DIM0(f) ((f) += 1, 1)
#define OTHER_OPT_SIZE(f) ((f) += 1, 1)
#define OTHER_OPT_KV_HEADS(f) ((f) = 1, 1)
#define OTHER_OPT_ORIGIN(f) ((f) += 1, 1)
#define OTHER_OPT_SCALE(f) ((f) = 0.75f, 1)
#define OTHER_OPT_CAP(f) ((f) = 0.75f, 1)
#define OTHER_OPT_PER_HEAD(f) ((f) = other_heads, 1)
#define OTHER_OPT_LENGTHS(f) ((f) = other_lengths, 1)
#define OTHER_OPT_OFFSETS(f) ((f) = other_offsets, 1)
#define OTHER_OPT_WINDOW(f) ((f) = &other_window, 1)
#define OTHER_OPT_TREE(f) ((f) = other_tree, 1)
#define OTHER_OPT_ENUM(f) ((f) = 1, 1)
#define OTHER_OPT_DTYPE(f) ((f) = CLATTN_FLOAT16, 1)
#define OTHER_OPT_MODS(f) ((f) = other_mods, 1)
#define OTHER_OPT_BLOCK_MASK(f) ((f) = other_block_mask, 1)
#define OTHER_OPT_RESERVED(f) 0
#define OTHER_OPT_BUFFER(f) 0
#define OTHER_OPT_MASKS(f) 0

/* The verdict over two ranks' fingerprints of a and b: a shape mismatch naming `name`. */
static void expect_caught(const clattn_sdpa_desc *a, const clattn_sdpa_desc *b, const char *name, size_t *caught)
{
    ring_fingerprint fp[2];
    memset(fp, 0, sizeof fp);
    ring_fingerprint_fill(a, CLATTN_RING_ZIGZAG, &fp[0]);
    ring_fingerprint_fill(b, CLATTN_RING_ZIGZAG, &fp[1]);
    char text[512], want[80];
    int who = -1;
    const clattn_status st = ring_fingerprints_verdict(fp, 2, 1, &who, text, sizeof text);
    snprintf(want, sizeof want, "rank 1's %s is", name);
    ck_assert_msg(st == CLATTN_ERROR_SHAPE_MISMATCH && who == 1 && strstr(text, want), "option %s: %s, rank %d: %s",
                  name, clattn_status_string(st), who, text);
    ++*caught;
}

START_TEST(test_every_result_option)
{
    static const char mods_source[] = "float score_mod(float s, int b, int h, long q, long k) { return s * 0.5f; }\n";
    clattn_mods_desc md = CLATTN_MODS_DESC_INIT;
    md.source = mods_source;
    clattn_mods *mods = NULL;
    ck_assert_msg(clattn_mods_create(ctx, &md, &mods) == CLATTN_SUCCESS, "mods: %s", clattn_last_error(ctx));
    const size_t starts[2] = {0, 1}, blocks[1] = {0};
    clattn_block_mask_desc bd = CLATTN_BLOCK_MASK_DESC_INIT;
    bd.q_len = bd.kv_len = 16;
    bd.layout_starts = starts, bd.layout_blocks = blocks;
    clattn_block_mask *bm = NULL;
    ck_assert_msg(clattn_block_mask_create(ctx, &bd, &bm) == CLATTN_SUCCESS, "block mask: %s", clattn_last_error(ctx));
    other_mods = mods, other_block_mask = bm;
    ck_assert(clattn_mods_id(mods) && strlen(clattn_mods_id(mods)) == 16 && clattn_mods_id(NULL) == NULL);

    const clattn_masks no_masks = CLATTN_MASKS_INIT;
    clattn_sdpa_desc base = tu_sdpa_desc(FB, FH, 9, 11, 8, 8);
    base.masks = &no_masks;
    size_t caught = 0, results = 0;
#define CLATTN_OPTION(name, kind, type, def, limit, range, calls, result, ...)                                      \
    {                                                                                                               \
        clattn_sdpa_desc d = base;                                                                                  \
        results += (result);                                                                                        \
        if ((result) && OTHER_##kind(d.name))                                                                       \
            expect_caught(&base, &d, #name, &caught);                                                               \
    }
#define CLATTN_SDPA_OPTION CLATTN_OPTION
#define CLATTN_MASKS_OPTION(name, kind, type, def, limit, range, calls, result, ...)                                \
    {                                                                                                               \
        clattn_masks m = no_masks;                                                                                  \
        clattn_sdpa_desc d = base;                                                                                  \
        d.masks = &m;                                                                                               \
        results += (result);                                                                                        \
        if ((result) && OTHER_##kind(m.name))                                                                       \
            expect_caught(&base, &d, "masks." #name, &caught);                                                      \
    }
#include "../src/base/call_options.def"
#undef CLATTN_OPTION
#undef CLATTN_SDPA_OPTION
#undef CLATTN_MASKS_OPTION
    ck_assert_msg(caught == results && results + 1 == RING_FIELDS, "%zu of %zu options caught, %d fields", caught,
                  results, (int)RING_FIELDS);
    /* One call said two ways (defaults resolved, NULL masks or empty ones) is one fingerprint. */
    clattn_sdpa_desc spelled = base;
    spelled.kv_heads = FH, spelled.v_dim = 8, spelled.masks = NULL;
    ring_fingerprint fp[2];
    memset(fp, 0, sizeof fp);
    ring_fingerprint_fill(&base, CLATTN_RING_ZIGZAG, &fp[0]);
    ring_fingerprint_fill(&spelled, CLATTN_RING_ZIGZAG, &fp[1]);
    ck_assert(memcmp(fp[0].field, fp[1].field, sizeof fp[0].field) == 0);
    clattn_block_mask_free(bm);
    clattn_mods_free(mods);
}
END_TEST

static void expect_failure(clattn_status st, clattn_status want, int who, const char *needle)
{
    ring_expect_failure(ring, rank, st, want, who, needle);
}

START_TEST(test_ranks_disagree)
{
    const size_t S = 4 * (size_t)ranks + 3, D = 8, n = FH * S * D;
    clattn_sdpa_desc d = tu_sdpa_desc(1, FH, S, S, D, D);
    float *q = tu_falloc(n), *k = tu_falloc(n), *v = tu_falloc(n), *o = tu_host_alloc(n, NULL);
    tu_fill_uniform(q, n, 1.0f, 5);
    tu_fill_uniform(k, n, 1.0f, 6);
    tu_fill_uniform(v, n, 1.0f, 7);
    const float scales[FH] = {1.5f, 0.5f}, others[FH] = {1.5f, 0.25f};
    d.logit_scale = scales;
    tu_set_label("ring: every rank with one logit_scale");
    clattn_status st = clattn_ring_sdpa_host(ring, &d, CLATTN_RING_ZIGZAG, q, k, v, o, NULL, NULL);
    ck_assert_msg(st == CLATTN_SUCCESS, "rank %d: %s (%s)", rank, clattn_status_string(st), clattn_ring_last_error(ring));
    if (ranks < 2)
        return;
    tu_set_label("ring: the last rank's logit_scale differs");
    clattn_sdpa_desc mine = d;
    if (rank == ranks - 1)
        mine.logit_scale = others;
    st = clattn_ring_sdpa_host(ring, &mine, CLATTN_RING_ZIGZAG, q, k, v, o, NULL, NULL);
    expect_failure(st, CLATTN_ERROR_SHAPE_MISMATCH, ranks - 1, "logit_scale");
    tu_set_label("ring: the last rank has a softcap of its own");
    mine = d;
    if (rank == ranks - 1)
        mine.softcap = 5.0f;
    st = clattn_ring_sdpa_host(ring, &mine, CLATTN_RING_ZIGZAG, q, k, v, o, NULL, NULL);
    expect_failure(st, CLATTN_ERROR_SHAPE_MISMATCH, ranks - 1, "softcap");
    tu_set_label("ring: the last rank's mods differ");
    clattn_mods_desc md = CLATTN_MODS_DESC_INIT;
    md.source = rank == ranks - 1 ? "float score_mod(float s, int b, int h, long q, long k) { return s * 0.5f; }\n"
                                  : "float score_mod(float s, int b, int h, long q, long k) { return s; }\n";
    clattn_mods *mods = NULL;
    ck_assert_msg(clattn_mods_create(ctx, &md, &mods) == CLATTN_SUCCESS, "mods: %s", clattn_last_error(ctx));
    mine = d;
    mine.mods = mods;
    st = clattn_ring_sdpa_host(ring, &mine, CLATTN_RING_ZIGZAG, q, k, v, o, NULL, NULL);
    expect_failure(st, CLATTN_ERROR_SHAPE_MISMATCH, ranks - 1, "mods");
    clattn_mods_free(mods);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("ring-options");
    TCase *tc = tcase_create("ring-options");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_every_result_option);
    tcase_add_test(tc, test_ranks_disagree);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return ring_test_main(argc, argv, "ring-options", make_suite, NULL, &rank, &ranks, &ctx, &ring);
}
