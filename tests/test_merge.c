/*
 * clattn_merge: attention over all keys equals the merge of attention over disjoint slices of them.
 * The keys of a problem are cut into 1 to 7 contiguous slices at seeded cut points (empty slices
 * included), each slice is computed by clattn_sdpa on its own K and V (its log-sum-exp beside its
 * output), and the merge must give the fp64 reference over all keys: with a slice whose keys one batch
 * may not see (a fully masked part for that batch), with sinks counted once in the merge, in place over
 * part 0, on every device. Misuse is refused before anything is written.
 */
#include "test_util.h"

#include <math.h>
#include <string.h>

enum { B = 2, H = 3, L = 5, S = 37, D = 8, DV = 6 };
#define NO (B * H * L * DV)
#define NL (B * H * L)

static clattn_sdpa_desc shape_desc(size_t kv_len)
{
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, kv_len, D, DV);
    return d;
}

typedef struct problem {
    float q[B * H * L * D], k[B * H * S * D], v[B * H * S * DV], sinks[H];
    float mask[B * H * L * S]; /* the reference's view of the masked slice: −inf for batch 1 */
    double ref_out[NO], ref_lse[NL];
} problem;

/* K or V rows [begin, end) of every (batch, head), packed. */
static float *slice(const float *t, size_t dim, size_t begin, size_t end)
{
    float *s = tu_falloc(B * H * (end - begin) * dim + 1);
    for (size_t bh = 0; bh < B * H; bh++)
        memcpy(s + bh * (end - begin) * dim, t + (bh * S + begin) * dim, (end - begin) * dim * sizeof *t);
    return s;
}

/* Cuts [0, S) into `parts` slices at seeded points (sorted, duplicates allowed: empty slices). */
static void cut(size_t parts, uint64_t seed, size_t *bounds)
{
    bounds[0] = 0;
    bounds[parts] = S;
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    for (size_t p = 1; p < parts; p++)
        bounds[p] = (size_t)(tu_rng_unit(&rng) * (S + 1));
    for (size_t i = 1; i < parts; i++) /* insertion sort of the inner cuts */
        for (size_t j = i; j > 1 && bounds[j - 1] > bounds[j]; j--) {
            size_t t = bounds[j];
            bounds[j] = bounds[j - 1];
            bounds[j - 1] = t;
        }
}

static problem pr;

/* parts slices; masked_part ≥ 0: batch 1 sees none of that slice's keys; sinks: counted in the merge. */
static void check_merge(size_t dev, size_t parts, int masked_part, int with_sinks, int in_place, uint64_t seed)
{
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("merge of %zu parts%s%s%s (seed %llu) on %s", parts, masked_part >= 0 ? ", one masked for batch 1" : "",
                 with_sinks ? ", sinks" : "", in_place ? ", in place" : "", (unsigned long long)seed, tu_dev_spec[dev]);
    size_t bounds[8];
    cut(parts, seed, bounds);
    tu_fill_uniform(pr.q, sizeof pr.q / sizeof pr.q[0], 1.0f, seed + 1);
    tu_fill_uniform(pr.k, sizeof pr.k / sizeof pr.k[0], 1.0f, seed + 2);
    tu_fill_uniform(pr.v, sizeof pr.v / sizeof pr.v[0], 1.0f, seed + 3);
    tu_fill_uniform(pr.sinks, H, 2.0f, seed + 4);
    for (size_t bh = 0; bh < B * H; bh++)
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < S; j++)
                pr.mask[(bh * L + i) * S + j] = masked_part >= 0 && bh / H == 1 && j >= bounds[masked_part] &&
                                                        j < bounds[masked_part + 1]
                                                    ? -INFINITY
                                                    : 0.0f;
    clattn_masks full_masks = CLATTN_MASKS_INIT;
    full_masks.additive = CLATTN_MASK_B_H_L_S;
    clattn_sdpa_desc full = shape_desc(S);
    full.masks = &full_masks;
    full.sinks = with_sinks ? pr.sinks : NULL;
    ref_sdpa(&full, pr.q, pr.k, pr.v, pr.mask, pr.ref_out, NULL, pr.ref_lse);

    cl_mem outs[7], lses[7];
    for (size_t p = 0; p < parts; p++) {
        const size_t n = bounds[p + 1] - bounds[p];
        if (n == 0) { /* an empty slice: lse −inf, and an output that must not matter */
            float *garbage = tu_falloc(NO), *minus_inf = tu_falloc(NL);
            for (size_t t = 0; t < NO; t++)
                garbage[t] = t % 2 ? NAN : INFINITY;
            for (size_t t = 0; t < NL; t++)
                minus_inf[t] = -INFINITY;
            outs[p] = tu_dev_alloc(ctx, NO, garbage);
            lses[p] = tu_dev_alloc(ctx, NL, minus_inf);
            continue;
        }
        size_t lengths[B] = {n, (int)p == masked_part ? 0 : n};
        clattn_masks m = CLATTN_MASKS_INIT;
        m.key_lengths = lengths;
        clattn_sdpa_desc d = shape_desc(n);
        d.masks = &m;
        float *o = tu_host_alloc(NO, NULL), *l = tu_host_alloc(NL, NULL);
        TU_ASSERT_OK(clattn_sdpa_host(ctx, &d, pr.q, slice(pr.k, D, bounds[p], bounds[p + 1]),
                                      slice(pr.v, DV, bounds[p], bounds[p + 1]), NULL, o, NULL, l),
                     ctx, "a part");
        outs[p] = tu_dev_alloc(ctx, NO, o);
        lses[p] = tu_dev_alloc(ctx, NL, l);
    }
    clattn_sdpa_desc md = shape_desc(0);
    md.sinks = with_sinks ? pr.sinks : NULL;
    cl_mem out = in_place ? outs[0] : tu_dev_alloc(ctx, NO, NULL), lse = in_place ? lses[0] : tu_dev_alloc(ctx, NL, NULL);
    TU_ASSERT_OK(clattn_merge(ctx, &md, parts, outs, lses, out, lse), ctx, "clattn_merge");
    tu_finish(ctx);
    check_close_named("merged out", tu_dev_read_checked(ctx, out, NO, "out"), pr.ref_out, NO, NULL);
    check_close_named("merged lse", tu_dev_read_checked(ctx, lse, NL, "lse"), pr.ref_lse, NL, NULL);
}

START_TEST(test_merge_parts)
{
    const size_t parts = TU_CASE(_i) + 1, dev = TU_DEVICE(_i);
    check_merge(dev, parts, -1, 0, 0, 100 + parts);
    check_merge(dev, parts, (int)(parts / 2), 0, 0, 200 + parts);
    check_merge(dev, parts, -1, 1, 0, 300 + parts);
    check_merge(dev, parts, (int)(parts - 1), 1, 1, 400 + parts);
}
END_TEST

/* Every part empty (or the only keys masked) and no sink: the empty row, zeros and lse −inf; with a
 * sink: zeros and lse = the sink. */
START_TEST(test_merge_nothing_seen)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("merge of parts that saw no key on %s", tu_dev_spec[dev]);
    float *minus_inf = tu_falloc(NL), *ones = tu_falloc(NO), sinks[H] = {0.5f, -1.0f, 3.0f};
    for (size_t t = 0; t < NL; t++)
        minus_inf[t] = -INFINITY;
    for (size_t t = 0; t < NO; t++)
        ones[t] = 1.0f;
    cl_mem outs[2] = {tu_dev_alloc(ctx, NO, ones), tu_dev_alloc(ctx, NO, ones)};
    cl_mem lses[2] = {tu_dev_alloc(ctx, NL, minus_inf), tu_dev_alloc(ctx, NL, minus_inf)};
    cl_mem out = tu_dev_alloc(ctx, NO, NULL), lse = tu_dev_alloc(ctx, NL, NULL);
    clattn_sdpa_desc md = shape_desc(0);
    double zeros[NO] = {0}, want[NL];
    for (int with_sinks = 0; with_sinks < 2; with_sinks++) {
        md.sinks = with_sinks ? sinks : NULL;
        TU_ASSERT_OK(clattn_merge(ctx, &md, 2, outs, lses, out, lse), ctx, "clattn_merge");
        tu_finish(ctx);
        for (size_t r = 0; r < NL; r++)
            want[r] = with_sinks ? sinks[r / L % H] : -INFINITY;
        check_close_named("out", tu_dev_read_checked(ctx, out, NO, "out"), zeros, NO, NULL);
        check_close_named("lse", tu_dev_read_checked(ctx, lse, NL, "lse"), want, NL, NULL);
    }
}
END_TEST

/* Misuse: its status, the field named, out and lse untouched. */
START_TEST(test_merge_errors)
{
    const size_t dev = _i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("clattn_merge misuse on %s", tu_dev_spec[dev]);
    cl_mem outs[2] = {tu_dev_alloc(ctx, NO, NULL), tu_dev_alloc(ctx, NO, NULL)};
    cl_mem lses[2] = {tu_dev_alloc(ctx, NL, NULL), tu_dev_alloc(ctx, NL, NULL)};
    cl_mem out = tu_dev_alloc(ctx, NO, NULL), lse = tu_dev_alloc(ctx, NL, NULL), small = tu_dev_alloc_exact(ctx, NL - 1, NULL);
    clattn_sdpa_desc md = shape_desc(0), bad = md;
    bad.heads = 0;
    float nan_sink[H] = {0, NAN, 0};
    clattn_sdpa_desc nan_desc = md;
    nan_desc.sinks = nan_sink;
    const cl_mem outs_small[2] = {outs[0], small};
    const cl_mem outs_aliased[2] = {outs[0], out};
    const struct {
        const char *what;
        const clattn_sdpa_desc *d;
        size_t parts;
        const cl_mem *o, *l;
        cl_mem out, lse;
        clattn_status want;
        const char *named;
    } cases[] = {
        {"no parts", &md, 0, outs, lses, out, lse, CLATTN_ERROR_ZERO_SIZE, "parts"},
        {"NULL outs", &md, 2, NULL, lses, out, lse, CLATTN_ERROR_NULL_ARGUMENT, "outs"},
        {"a part too small", &md, 2, outs_small, lses, out, lse, CLATTN_ERROR_BUFFER_TOO_SMALL, "outs[1]"},
        {"lse too small", &md, 2, outs, lses, out, small, CLATTN_ERROR_BUFFER_TOO_SMALL, "lse"},
        {"out is part 1's", &md, 2, outs_aliased, lses, out, lse, CLATTN_ERROR_INVALID_VALUE, "part 1"},
        {"heads 0", &bad, 2, outs, lses, out, lse, CLATTN_ERROR_ZERO_SIZE, "heads"},
        {"a NaN sink", &nan_desc, 2, outs, lses, out, lse, CLATTN_ERROR_INVALID_VALUE, "sinks"},
        {"NULL out", &md, 2, outs, lses, NULL, lse, CLATTN_ERROR_NULL_ARGUMENT, "out"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        clattn_status st = clattn_merge(ctx, cases[c].d, cases[c].parts, cases[c].o, cases[c].l, cases[c].out,
                                        cases[c].lse);
        ck_assert_msg(st == cases[c].want, "%s: %s: got %s, expected %s", tu_label(), cases[c].what,
                      clattn_status_string(st), clattn_status_string(cases[c].want));
        ck_assert_msg(strstr(clattn_last_error(ctx), cases[c].named) != NULL, "%s: %s: \"%s\" does not name %s",
                      tu_label(), cases[c].what, clattn_last_error(ctx), cases[c].named);
    }
    ck_assert_int_eq(clattn_merge(NULL, &md, 2, outs, lses, out, lse), CLATTN_ERROR_NULL_ARGUMENT);
    tu_finish(ctx);
    ck_assert_msg(tu_dev_all_sentinel(ctx, out, NO) && tu_dev_all_sentinel(ctx, lse, NL),
                  "%s: a refused merge wrote its output", tu_label());
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("merge");
    tu_add_loop(s, "parts", test_merge_parts, 7 * tu_ndev);
    tu_add_loop(s, "nothing_seen", test_merge_nothing_seen, tu_ndev);
    tu_add_loop(s, "errors", test_merge_errors, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
