/*
 * The per-device parameter tables of the kernel families (src/runtime/tuning_tables.c) and their one lookup
 * (src/runtime/tuning.c), on every device:
 *  1. tables: every family's defaults and candidates for every device class within their ranges, spelled
 *     and read back unchanged, candidates distinct and few, the completed defaults among the completed
 *     candidates (clattn_tune reports the default's speed from it); family names unique and found;
 *  2. options.tuning's grammar through clattn_context_create_with_options: what is accepted (and what it
 *     sets), what is refused (CLATTN_ERROR_INVALID_VALUE, no context, the detail naming options.tuning);
 *     CLATTN_TUNING used, or ignored with a warning when malformed;
 *  3. the lookup's order: options, then the tuning record (read once per context; a damaged one ignored
 *     with a warning), then the class's table row; tuning_use; options.tile and options.gemm over the
 *     fused and gemm entries;
 *  4. (test_tuning_candidates.c, the same program) every candidate of every family against the fp64
 *     reference, each program built with the candidate's values;
 *  5. clattn_tune_report: refused before clattn_tune; after it, with two families fixed by the options,
 *     every family's entry in order (fixed ones unmeasured), the short-buffer and NULL refusals, and the
 *     records a later context starts from.
 * Internal: links the library's objects (clattn_internal_dep) to reach the tables and the lookup.
 */
#define _POSIX_C_SOURCE 200809L
#include "tuning_test.h"

#include "cache.h" /* internal: cache_record_store, to plant a damaged record */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A context on device `dev`: options.tuning, options.tile and options.gemm as given (NULL: the
 * environment's; every test passes "" where it means none, so that CLATTN_TUNING, CLATTN_TILE and
 * CLATTN_GEMM in the caller's environment change nothing), the program cache in `cache_dir` (NULL: the
 * default folder), kernel times recorded. Fails the test unless it is made. */
clattn_context *context_with(size_t dev, const char *tuning, const char *tile, const char *gemm,
                                    const char *cache_dir)
{
    clattn_context_options o = CLATTN_CONTEXT_OPTIONS_INIT;
    o.device = tu_dev_spec[dev];
    o.tuning = tuning;
    o.tile = tile;
    o.gemm = gemm;
    o.profile = 1;
    if (cache_dir) {
        o.cache = CLATTN_CACHE_ON;
        o.cache_dir = cache_dir;
    }
    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create_with_options(&ctx, &o);
    TU_ASSERT_OK(st, NULL, "clattn_context_create_with_options");
    ck_assert_msg(ctx != NULL, "%s: no context", tu_label());
    return ctx;
}

static bool same_values(const tuning_values *a, const tuning_values *b) { return memcmp(a, b, sizeof *a) == 0; }

/* "4x16x32x1x0x4": every value of the family, for messages. */
static const char *values_text(tuning_family f, const tuning_values *v)
{
    static char buf[4][96];
    static int next;
    char *out = buf[next++ % 4];
    size_t at = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < tuning_tables[f].count && at < sizeof buf[0]; i++)
        at += (size_t)snprintf(out + at, sizeof buf[0] - at, i ? "x%u" : "{%u", v->v[i]);
    if (at < sizeof buf[0] - 1)
        strcat(out, "}");
    return out;
}

/* Family f's values for a class, completed for this device. */
tuning_values completed(const device_caps *caps, const tuning_options *o, tuning_family f,
                               const tuning_values *v)
{
    tuning_values c = *v;
    tuning_complete(caps, o, f, &c);
    return c;
}

static tuning_values completed_defaults(clattn_context *ctx, tuning_family f)
{
    const tuning_values d = tuning_defaults(&ctx->caps, &ctx->tuning, f);
    return completed(&ctx->caps, &ctx->tuning, f, &d);
}

/* tuning_lookup on ctx, with an assertion on its status and the source expected. */
tuning_values lookup_from(clattn_context *ctx, tuning_family f, tuning_source expected)
{
    static const char *const sources[] = {"options", "record", "table"};
    tuning_values v;
    memset(&v, 0xa5, sizeof v);
    tuning_source from = (tuning_source)-1;
    clattn_status st = tuning_lookup(ctx, f, &v, &from);
    TU_ASSERT_OK(st, ctx, "tuning_lookup");
    ck_assert_msg(from == expected, "%s: the %s values %s came from the %s, expected the %s", tu_label(),
                  tuning_tables[f].name, values_text(f, &v), (unsigned)from < 3 ? sources[from] : "?",
                  sources[expected]);
    return v;
}

void assert_values(const char *what, tuning_family f, const tuning_values *got, const tuning_values *want)
{
    ck_assert_msg(same_values(got, want), "%s: %s: %s values %s, expected %s", tu_label(), what,
                  tuning_tables[f].name, values_text(f, got), values_text(f, want));
}

/* The device classes to check on device `dev`: its own, then gpu when that is another. */
size_t classes_of(size_t dev, device_class out[2])
{
    const device_class own = device_class_of(&tu_ctx[dev]->caps);
    out[0] = own;
    if (own == DEVICE_CLASS_GPU)
        return 1;
    out[1] = DEVICE_CLASS_GPU;
    return 2;
}

/* ---------------------------------------------------------------------------------------------- */
/* 1. The tables                                                                                    */
/* ---------------------------------------------------------------------------------------------- */

static bool is_vec(const tuning_value_range *r) { return strcmp(r->name, "VEC") == 0; }

/* Every value of v within its range (a VEC 0 or a power of two), nothing beyond the family's count;
 * `complete`: no "the device's" zero left either. */
static void check_in_range(const char *what, tuning_family f, const tuning_values *v, bool complete)
{
    const tuning_table *t = &tuning_tables[f];
    for (unsigned i = 0; i < TUNING_MAX_VALUES; i++) {
        const unsigned x = v->v[i];
        if (i >= t->count) {
            ck_assert_msg(x == 0, "%s: %s: %s sets value %u beyond the family's %u", tu_label(), what,
                          values_text(f, v), i, t->count);
            continue;
        }
        const tuning_value_range *r = &t->range[i];
        ck_assert_msg(x >= r->lo && x <= r->hi, "%s: %s: %s: %s %u is outside %u..%u", tu_label(), what,
                      values_text(f, v), r->name, x, r->lo, r->hi);
        if (is_vec(r))
            ck_assert_msg((x & (x - 1)) == 0, "%s: %s: %s: VEC %u is not a vector width", tu_label(), what,
                          values_text(f, v), x);
        if (complete)
            ck_assert_msg(x != 0, "%s: %s: %s: %s is still 0 (\"the device's\") after tuning_complete", tu_label(),
                          what, values_text(f, v), r->name);
    }
}

/* v spelled by tuning_format and read back by tuning_parse over the class's defaults (as options and
 * records are read); `exact`: the very values come back, else the same once completed. */
static void check_round_trip(const char *what, const device_caps *caps, const tuning_options *o, tuning_family f,
                             const tuning_values *v, bool exact)
{
    char text[64];
    memset(text, 0, sizeof text);
    tuning_format(f, v, text, sizeof text);
    ck_assert_msg(text[0] != '\0' && strlen(text) < 48, "%s: %s: %s spelled \"%s\"", tu_label(), what,
                  values_text(f, v), text); /* clattn_tune_family.chosen holds 48 */
    const tuning_values base = tuning_defaults(caps, o, f);
    tuning_values back;
    memset(&back, 0x5a, sizeof back);
    ck_assert_msg(tuning_parse(f, text, &base, &back), "%s: %s: tuning_parse refuses \"%s\", the spelling of %s",
                  tu_label(), what, text, values_text(f, v));
    if (exact) {
        ck_assert_msg(same_values(&back, v), "%s: %s: %s spelled \"%s\" reads back as %s", tu_label(), what,
                      values_text(f, v), text, values_text(f, &back));
    } else {
        const tuning_values a = completed(caps, o, f, v), b = completed(caps, o, f, &back);
        ck_assert_msg(same_values(&a, &b), "%s: %s: %s spelled \"%s\" reads back as %s, completed %s, not %s",
                      tu_label(), what, values_text(f, v), text, values_text(f, &back), values_text(f, &b),
                      values_text(f, &a));
    }
}

START_TEST(test_tables)
{
    const size_t dev = TU_DEVICE(_i);
    const device_caps *caps = &tu_ctx[dev]->caps;
    for (int f = 0; f < TUNING_FAMILIES; f++) {
        const tuning_table *t = &tuning_tables[f];
        tu_set_label("the %s table on %s", t->name ? t->name : "(unnamed)", tu_dev_spec[dev]);
        ck_assert_msg(t->name && t->name[0] && t->record && t->record[0], "%s: no name or record name", tu_label());
        ck_assert_msg(t->count >= 1 && t->count <= TUNING_MAX_VALUES && t->least >= 1 && t->least <= t->count,
                      "%s: %u values, at least %u given", tu_label(), t->count, t->least);
        ck_assert_msg(tuning_family_named(t->name, strlen(t->name)) == (tuning_family)f,
                      "%s: tuning_family_named does not find \"%s\"", tu_label(), t->name);
        ck_assert_msg(tuning_family_named(t->name, strlen(t->name) - 1) == TUNING_FAMILIES,
                      "%s: tuning_family_named finds a prefix of \"%s\"", tu_label(), t->name);
        for (int g = 0; g < f; g++) {
            ck_assert_msg(strcmp(t->name, tuning_tables[g].name) != 0, "%s: two families named \"%s\"", tu_label(),
                          t->name);
            ck_assert_msg(strcmp(t->record, tuning_tables[g].record) != 0, "%s: two families record as \"%s\"",
                          tu_label(), t->record);
        }
        for (int c = 0; c < DEVICE_CLASSES; c++) {
            tu_set_label("the %s table, class %s, on %s", t->name, device_class_name((device_class)c),
                         tu_dev_spec[dev]);
            tuning_options o;
            memset(&o, 0, sizeof o);
            o.device_class = c;
            const tuning_values d = tuning_defaults(caps, &o, (tuning_family)f);
            assert_values("tuning_defaults", (tuning_family)f, &d, &t->defaults[c]);
            check_in_range("the defaults", (tuning_family)f, &d, false);
            /* The GEMM's "clattn" (rows and vectors 0) stands for the class's tile: the same once completed. */
            check_round_trip("the defaults", caps, &o, (tuning_family)f, &d, f != TUNING_GEMM || (d.v[1] && d.v[2]));
            const tuning_values dc = completed(caps, &o, (tuning_family)f, &d);
            check_in_range("the completed defaults", (tuning_family)f, &dc, true);
            check_round_trip("the completed defaults", caps, &o, (tuning_family)f, &dc, false);

            unsigned n = 0;
            const tuning_values *cand = tuning_candidates(caps, &o, (tuning_family)f, &n);
            ck_assert_msg(cand == t->candidates[c] && n == t->candidate_count[c],
                          "%s: tuning_candidates is not the table's row", tu_label());
            ck_assert_msg(cand != NULL && n >= 1 && n <= 16, "%s: %u candidates (1 to 16)", tu_label(), n);
            bool default_found = false;
            for (unsigned i = 0; i < n; i++) {
                char what[64];
                snprintf(what, sizeof what, "candidate %u", i);
                check_in_range(what, (tuning_family)f, &cand[i], false);
                check_round_trip(what, caps, &o, (tuning_family)f, &cand[i], true);
                const tuning_values ci = completed(caps, &o, (tuning_family)f, &cand[i]);
                check_in_range(what, (tuning_family)f, &ci, true);
                check_round_trip(what, caps, &o, (tuning_family)f, &ci, false);
                default_found |= same_values(&ci, &dc);
                for (unsigned j = 0; j < i; j++) {
                    ck_assert_msg(!same_values(&cand[i], &cand[j]), "%s: candidates %u and %u are both %s", tu_label(),
                                  j, i, values_text((tuning_family)f, &cand[i]));
                    const tuning_values cj = completed(caps, &o, (tuning_family)f, &cand[j]);
                    ck_assert_msg(!same_values(&ci, &cj), "%s: candidates %u and %u are both %s once completed",
                                  tu_label(), j, i, values_text((tuning_family)f, &ci));
                }
            }
            ck_assert_msg(default_found, "%s: the completed defaults %s are no completed candidate (clattn_tune "
                                         "would report no default speed)",
                          tu_label(), values_text((tuning_family)f, &dc));
        }
    }
    /* Names that are none of them. */
    ck_assert(tuning_family_named("fusedx", 6) == TUNING_FAMILIES);
    ck_assert(tuning_family_named("", 0) == TUNING_FAMILIES);
    ck_assert(tuning_family_named("class", 5) == TUNING_FAMILIES);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 2. options.tuning and CLATTN_TUNING                                                              */
/* ---------------------------------------------------------------------------------------------- */

/* An accepted value and what it sets: the class (-1: the device's own), the families fixed, and for
 * `family` (TUNING_FAMILIES: none) its first `n` values (the rest: the class's defaults). */
typedef struct good_case {
    const char *text;
    int device_class;
    unsigned fixed;
    tuning_family family;
    unsigned n;
    unsigned v[TUNING_MAX_VALUES];
} good_case;

#define BIT(f) (1u << (f))
static const good_case good[] = {
    {"decode=8", -1, BIT(TUNING_DECODE), TUNING_DECODE, 1, {8}},
    {"decode=8x16x32x1x0x4", -1, BIT(TUNING_DECODE), TUNING_DECODE, 6, {8, 16, 32, 1, 0, 4}},
    {"decode=8x16x32x1x0x4x1024", -1, BIT(TUNING_DECODE), TUNING_DECODE, 7, {8, 16, 32, 1, 0, 4, 1024}},
    {"fused=64x64x4x16", -1, BIT(TUNING_FUSED), TUNING_FUSED, 4, {64, 64, 4, 16}},
    {"fused=32x32", -1, BIT(TUNING_FUSED), TUNING_FUSED, 2, {32, 32}},
    {"staged=8x4", -1, BIT(TUNING_STAGED), TUNING_STAGED, 2, {8, 4}},
    {"gemm=clattn:6x3", -1, BIT(TUNING_GEMM), TUNING_GEMM, 3, {TUNING_GEMM_CLATTN, 6, 3}},
    {"gemm=clblast", -1, BIT(TUNING_GEMM), TUNING_GEMM, 1, {TUNING_GEMM_CLBLAST}},
    {"class=gpu", DEVICE_CLASS_GPU, 0, TUNING_FAMILIES, 0, {0}},
    {"class=cpu,decode=2", DEVICE_CLASS_CPU, BIT(TUNING_DECODE), TUNING_DECODE, 1, {2}},
    /* the class comes first whatever the order: decode's other values are gpu's */
    {"decode=2,class=gpu", DEVICE_CLASS_GPU, BIT(TUNING_DECODE), TUNING_DECODE, 1, {2}},
    {"class=cpu-lanes,staged=2,fused=16x8x2", DEVICE_CLASS_CPU_LANES, BIT(TUNING_STAGED) | BIT(TUNING_FUSED),
     TUNING_FUSED, 3, {16, 8, 2}},
    {"", -1, 0, TUNING_FAMILIES, 0, {0}},
};
#define N_GOOD (sizeof good / sizeof good[0])

static const char *const bad[] = {
    "bogus=1", "decode=", "decode=8,", ",decode=8", "decode=8;staged=4", "fused=64", "fused=64x64x4x3", "staged=0",
    "decode=65", "class=fpga", "gemm=clattn:0x1", "decode=1x2x3x4x4x4x4x4", "decode", "=8", "decode=8,,staged=4",
    "Decode=8", "decode=8 ", "decode=x8", "gemm=8", "class=", "decode=0x16", "fused=2000x64",
};
#define N_BAD (sizeof bad / sizeof bad[0])

/* What ctx's options fix, against the good case. */
static void check_good(clattn_context *ctx, const good_case *g)
{
    const tuning_options *t = &ctx->tuning;
    ck_assert_msg(t->device_class == g->device_class, "%s: class %d, expected %d", tu_label(), t->device_class,
                  g->device_class);
    ck_assert_msg(t->fixed == g->fixed, "%s: fixed 0x%x, expected 0x%x", tu_label(), t->fixed, g->fixed);
    for (int f = 0; f < TUNING_FAMILIES; f++)
        ck_assert_msg(tuning_fixed(ctx, (tuning_family)f) == ((g->fixed >> f) & 1u), "%s: tuning_fixed(%s)",
                      tu_label(), tuning_tables[f].name);
    if (g->family == TUNING_FAMILIES)
        return;
    tuning_values want = tuning_defaults(&ctx->caps, t, g->family);
    for (unsigned i = 0; i < g->n; i++)
        want.v[i] = g->v[i];
    assert_values("options.tuning", g->family, &t->values[g->family], &want);
    /* and the lookup gives them, completed */
    const tuning_values got = lookup_from(ctx, g->family, TUNING_FROM_OPTIONS);
    const tuning_values wc = completed(&ctx->caps, t, g->family, &want);
    assert_values("tuning_lookup", g->family, &got, &wc);
}

START_TEST(test_options)
{
    const size_t dev = TU_DEVICE(_i);
    for (size_t i = 0; i < N_GOOD; i++) {
        tu_set_label("options.tuning \"%s\" on %s", good[i].text, tu_dev_spec[dev]);
        clattn_context *ctx = context_with(dev, good[i].text, "", "", NULL);
        check_good(ctx, &good[i]);
        clattn_context_free(ctx);
    }
    for (size_t i = 0; i < N_BAD; i++) {
        tu_set_label("options.tuning \"%s\" on %s", bad[i], tu_dev_spec[dev]);
        clattn_context_options o = CLATTN_CONTEXT_OPTIONS_INIT;
        o.device = tu_dev_spec[dev];
        o.tuning = bad[i];
        clattn_context *ctx = tu_ctx[dev]; /* must come back NULL */
        clattn_status st = clattn_context_create_with_options(&ctx, &o);
        ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && ctx == NULL, "%s: got %s (context %s)", tu_label(),
                      clattn_status_string(st), ctx ? "made" : "none");
        ck_assert_msg(strstr(clattn_last_error(NULL), "options.tuning") != NULL,
                      "%s: the detail \"%s\" does not name options.tuning", tu_label(), clattn_last_error(NULL));
    }

    /* The environment: a good CLATTN_TUNING is used, a malformed one ignored with a warning, and
     * options.tuning "" (none) wins over it. */
    static const char *const env[] = {"CLATTN_TUNING"};
    tu_env_save(env, 1);
    setenv("CLATTN_TUNING", "decode=8", 1);
    tu_set_label("CLATTN_TUNING=decode=8 on %s", tu_dev_spec[dev]);
    clattn_context *ctx = context_with(dev, NULL, "", "", NULL);
    check_good(ctx, &good[0]);
    clattn_context_free(ctx);
    tu_set_label("CLATTN_TUNING=decode=8 under options.tuning \"\" on %s", tu_dev_spec[dev]);
    ctx = context_with(dev, "", "", "", NULL);
    check_good(ctx, &good[N_GOOD - 1]);
    clattn_context_free(ctx);
    static const char *const bogus[] = {"bogus", "decode=8,bogus=1", "decode=99"};
    for (size_t i = 0; i < sizeof bogus / sizeof bogus[0]; i++) {
        setenv("CLATTN_TUNING", bogus[i], 1);
        tu_set_label("CLATTN_TUNING=%s on %s", bogus[i], tu_dev_spec[dev]);
        ctx = context_with(dev, NULL, "", "", NULL);
        /* (the context's creation is its last call yet, so its warning is still there) */
        ck_assert_msg(strstr(clattn_last_warning(ctx), "CLATTN_TUNING") != NULL, "%s: the warning is \"%s\"",
                      tu_label(), clattn_last_warning(ctx));
        check_good(ctx, &good[N_GOOD - 1]); /* ignored whole: nothing fixed, the device's class */
        clattn_context_free(ctx);
    }
    tu_env_restore();
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 3. The lookup's order                                                                            */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_lookup)
{
    const size_t dev = TU_DEVICE(_i);
    const char *dir = tu_scratch_dir("clattn-test-tuning");

    tu_set_label("a fresh context on %s", tu_dev_spec[dev]);
    clattn_context *ctx = context_with(dev, "", "", "", dir);
    for (int f = 0; f < TUNING_FAMILIES; f++) {
        const tuning_values got = lookup_from(ctx, (tuning_family)f, TUNING_FROM_TABLE);
        const tuning_values want = completed_defaults(ctx, (tuning_family)f);
        assert_values("the table", (tuning_family)f, &got, &want);
    }
    /* A decode record of another candidate than the default. */
    unsigned n = 0;
    const tuning_values *cand = tuning_candidates(&ctx->caps, &ctx->tuning, TUNING_DECODE, &n);
    ck_assert_msg(n >= 3, "%s: %u decode candidates", tu_label(), n);
    const tuning_values dflt = completed_defaults(ctx, TUNING_DECODE);
    tuning_values other = dflt, third = dflt;
    for (unsigned i = 0; i < n && same_values(&third, &dflt); i++) {
        const tuning_values c = completed(&ctx->caps, &ctx->tuning, TUNING_DECODE, &cand[i]);
        if (same_values(&c, &dflt))
            continue;
        if (same_values(&other, &dflt))
            other = c;
        else
            third = c;
    }
    ck_assert_msg(!same_values(&other, &dflt) && !same_values(&third, &dflt), "%s: no two other decode candidates",
                  tu_label());
    tuning_record(ctx, TUNING_DECODE, &other);
    /* this context read the records already (none then): they are read once per context */
    tuning_values got = lookup_from(ctx, TUNING_DECODE, TUNING_FROM_TABLE);
    assert_values("after tuning_record, in the same context", TUNING_DECODE, &got, &dflt);
    clattn_context_free(ctx);

    tu_set_label("a context on a folder with a decode record on %s", tu_dev_spec[dev]);
    ctx = context_with(dev, "", "", "", dir);
    got = lookup_from(ctx, TUNING_DECODE, TUNING_FROM_RECORD);
    assert_values("the record", TUNING_DECODE, &got, &other);
    for (int f = 0; f < TUNING_FAMILIES; f++)
        if (f != TUNING_DECODE) {
            const tuning_values g = lookup_from(ctx, (tuning_family)f, TUNING_FROM_TABLE);
            const tuning_values want = completed_defaults(ctx, (tuning_family)f);
            assert_values("the table", (tuning_family)f, &g, &want);
        }
    /* tuning_use: its values from now on; NULL: the context's record or table again. */
    clattn_status st = tuning_use(ctx, TUNING_DECODE, &third);
    TU_ASSERT_OK(st, ctx, "tuning_use");
    got = lookup_from(ctx, TUNING_DECODE, TUNING_FROM_RECORD);
    assert_values("after tuning_use", TUNING_DECODE, &got, &third);
    st = tuning_use(ctx, TUNING_DECODE, NULL);
    TU_ASSERT_OK(st, ctx, "tuning_use(NULL)");
    got = lookup_from(ctx, TUNING_DECODE, TUNING_FROM_RECORD); /* the record is looked for again */
    ck_assert_msg(same_values(&got, &other),
                  "%s: after tuning_use(NULL) the decode values are %s", tu_label(), values_text(TUNING_DECODE, &got));
    clattn_context_free(ctx);

    tu_set_label("options.tuning \"decode=2\" over a decode record on %s", tu_dev_spec[dev]);
    ctx = context_with(dev, "decode=2", "", "", dir);
    tuning_values want = dflt;
    want.v[0] = 2;
    got = lookup_from(ctx, TUNING_DECODE, TUNING_FROM_OPTIONS);
    assert_values("options over the record", TUNING_DECODE, &got, &want);
    st = tuning_use(ctx, TUNING_DECODE, &third); /* the options still win */
    TU_ASSERT_OK(st, ctx, "tuning_use");
    got = lookup_from(ctx, TUNING_DECODE, TUNING_FROM_OPTIONS);
    assert_values("options over tuning_use", TUNING_DECODE, &got, &want);
    clattn_context_free(ctx);

    /* A damaged record: ignored with a warning, the table's row. */
    tu_set_label("a damaged decode record on %s", tu_dev_spec[dev]);
    ctx = context_with(dev, "", "", "", dir);
    cache_record_store(ctx, tuning_tables[TUNING_DECODE].record, "4x16x0x1\n"); /* keys per tile 0 */
    clattn_context_free(ctx);
    ctx = context_with(dev, "", "", "", dir);
    got = lookup_from(ctx, TUNING_DECODE, TUNING_FROM_TABLE);
    assert_values("under a damaged record", TUNING_DECODE, &got, &dflt);
    ck_assert_msg(strstr(clattn_last_warning(ctx), "tuning record") != NULL, "%s: the warning is \"%s\"", tu_label(),
                  clattn_last_warning(ctx));
    clattn_context_free(ctx);

    /* options.tile over the fused entry, options.gemm over the gemm entry. */
    static const struct {
        const char *tuning, *tile;
        unsigned rows; /* the rows per work-item expected; 0: the class's */
    } tiles[] = {{"fused=16x16", "32x64", 0}, {"fused=16x16x2", "32x64", 2}, {"fused=16x16x2", "32x64x1", 1},
                 {"", "32x64", 0}};
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        tu_set_label("options.tile \"%s\" over options.tuning \"%s\" on %s", tiles[i].tile, tiles[i].tuning,
                     tu_dev_spec[dev]);
        ctx = context_with(dev, tiles[i].tuning, tiles[i].tile, "", NULL);
        want = completed_defaults(ctx, TUNING_FUSED);
        want.v[0] = 32, want.v[1] = 64, want.v[4] = 1; /* a tile is of the rows along d */
        if (tiles[i].rows)
            want.v[2] = tiles[i].rows;
        got = lookup_from(ctx, TUNING_FUSED, TUNING_FROM_OPTIONS);
        assert_values("options.tile", TUNING_FUSED, &got, &want);
        clattn_context_free(ctx);
    }
    tu_set_label("options.gemm \"clblast\" over options.tuning \"gemm=clattn:4x2\" on %s", tu_dev_spec[dev]);
    ctx = context_with(dev, "gemm=clattn:4x2", "", "clblast", NULL);
    got = lookup_from(ctx, TUNING_GEMM, TUNING_FROM_OPTIONS);
    ck_assert_msg(got.v[0] == TUNING_GEMM_CLBLAST, "%s: %s", tu_label(), values_text(TUNING_GEMM, &got));
    clattn_context_free(ctx);
    tu_set_label("options.gemm \"clattn:3x1\" over options.tuning \"gemm=clblast\" on %s", tu_dev_spec[dev]);
    ctx = context_with(dev, "gemm=clblast", "", "clattn:3x1", NULL);
    got = lookup_from(ctx, TUNING_GEMM, TUNING_FROM_OPTIONS);
    ck_assert_msg(got.v[0] == TUNING_GEMM_CLATTN && got.v[1] == 3 && got.v[2] == 1, "%s: %s", tu_label(),
                  values_text(TUNING_GEMM, &got));
    clattn_context_free(ctx);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 5. clattn_tune_report                                                                            */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_tune_report)
{
    const size_t dev = TU_DEVICE(_i);
    const char *dir = tu_scratch_dir("clattn-test-tuning");
    tu_set_label("clattn_tune_report on %s, decode and fused fixed", tu_dev_spec[dev]);
    clattn_context *ctx = context_with(dev, "decode=4x16", "64x64x4", "", dir);
    clattn_tune_family fam[CLATTN_TUNE_MAX_FAMILIES];
    size_t count = 99;
    clattn_status st = clattn_tune_report(ctx, fam, CLATTN_TUNE_MAX_FAMILIES, &count);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE, "%s: before clattn_tune: %s", tu_label(), clattn_status_string(st));

    clattn_tune_result r;
    memset(&r, 0xff, sizeof r);
    st = clattn_tune(ctx, &r);
    TU_ASSERT_OK(st, ctx, "clattn_tune");
    unsigned gemm_count = 0;
    tuning_candidates(&ctx->caps, &ctx->tuning, TUNING_GEMM, &gemm_count);
    ck_assert_msg(r.candidates == gemm_count && r.fused_tile[0] == '\0' && r.fused_gflops == 0,
                  "%s: clattn_tune measured %u candidates (%u GEMMs, no tiles expected), fused tile \"%s\"", tu_label(),
                  r.candidates, gemm_count, r.fused_tile);

    count = 0;
    st = clattn_tune_report(ctx, fam, 1, &count);
    ck_assert_msg(st == CLATTN_ERROR_BUFFER_TOO_SMALL && count == TUNING_FAMILIES, "%s: capacity 1: %s, count %zu",
                  tu_label(), clattn_status_string(st), count);
    count = 0;
    st = clattn_tune_report(ctx, NULL, 0, &count);
    ck_assert_msg(st == CLATTN_ERROR_BUFFER_TOO_SMALL && count == TUNING_FAMILIES, "%s: capacity 0: %s, count %zu",
                  tu_label(), clattn_status_string(st), count);
    st = clattn_tune_report(ctx, fam, CLATTN_TUNE_MAX_FAMILIES, NULL);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "%s: NULL count: %s", tu_label(), clattn_status_string(st));
    st = clattn_tune_report(ctx, NULL, CLATTN_TUNE_MAX_FAMILIES, &count);
    ck_assert_msg(st == CLATTN_ERROR_NULL_ARGUMENT, "%s: NULL families: %s", tu_label(), clattn_status_string(st));
    memset(fam, 0, sizeof fam);
    count = 0;
    st = clattn_tune_report(ctx, fam, CLATTN_TUNE_MAX_FAMILIES, &count);
    TU_ASSERT_OK(st, ctx, "clattn_tune_report");
    ck_assert_msg(count == 4 && TUNING_FAMILIES == 4, "%s: %zu families", tu_label(), count);

    static const char *const order[] = {"gemm", "fused", "decode", "staged"};
    static const char *const fixed_spelling[] = {NULL, "64x64x4", "4x16", NULL};
    char chosen[TUNING_FAMILIES][48];
    for (int f = 0; f < TUNING_FAMILIES; f++) {
        const clattn_tune_family *e = &fam[f];
        tu_set_label("clattn_tune_report's entry %d on %s", f, tu_dev_spec[dev]);
        ck_assert_msg(e->family && strcmp(e->family, order[f]) == 0, "%s: family \"%s\", expected \"%s\"", tu_label(),
                      e->family ? e->family : "(NULL)", order[f]);
        ck_assert_msg(e->shape && e->shape[0] && e->unit &&
                          strcmp(e->unit, f == TUNING_DECODE ? "GB/s" : "GFLOP/s") == 0,
                      "%s: shape \"%s\", unit \"%s\"", tu_label(), e->shape ? e->shape : "(NULL)",
                      e->unit ? e->unit : "(NULL)");
        char spelled[64];
        const tuning_values d = completed_defaults(ctx, (tuning_family)f);
        tuning_format((tuning_family)f, &d, spelled, sizeof spelled);
        ck_assert_msg(strcmp(e->device_default, spelled) == 0, "%s: device_default \"%s\", expected \"%s\"",
                      tu_label(), e->device_default, spelled);
        tuning_values parsed;
        ck_assert_msg(tuning_parse((tuning_family)f, e->chosen, &d, &parsed), "%s: chosen \"%s\" does not parse",
                      tu_label(), e->chosen);
        snprintf(chosen[f], sizeof chosen[f], "%s", e->chosen);
        if (fixed_spelling[f]) {
            ck_assert_msg(e->fixed == 1 && e->candidates == 0 && e->speed == 0 && e->default_speed == 0,
                          "%s: fixed %d, %u candidates, speed %g, default speed %g", tu_label(), e->fixed,
                          e->candidates, e->speed, e->default_speed);
            const tuning_values now = lookup_from(ctx, (tuning_family)f, TUNING_FROM_OPTIONS);
            tuning_format((tuning_family)f, &now, spelled, sizeof spelled);
            const size_t len = strlen(fixed_spelling[f]);
            ck_assert_msg(strcmp(e->chosen, spelled) == 0 && strncmp(e->chosen, fixed_spelling[f], len) == 0 &&
                              (e->chosen[len] == '\0' || e->chosen[len] == 'x'),
                          "%s: chosen \"%s\", expected \"%s\" (the options' \"%s\")", tu_label(), e->chosen, spelled,
                          fixed_spelling[f]);
        } else {
            unsigned n = 0;
            tuning_candidates(&ctx->caps, &ctx->tuning, (tuning_family)f, &n);
            ck_assert_msg(e->fixed == 0 && e->candidates == n, "%s: fixed %d, %u candidates, the table has %u",
                          tu_label(), e->fixed, e->candidates, n);
            ck_assert_msg(e->default_speed > 0 && e->speed >= e->default_speed,
                          "%s: speed %g, default speed %g (chosen \"%s\")", tu_label(), e->speed, e->default_speed,
                          e->chosen);
            /* in use now, and recorded */
            const tuning_values now = lookup_from(ctx, (tuning_family)f, TUNING_FROM_RECORD);
            tuning_format((tuning_family)f, &now, spelled, sizeof spelled);
            ck_assert_msg(strcmp(e->chosen, spelled) == 0, "%s: chosen \"%s\", in use \"%s\"", tu_label(), e->chosen,
                          spelled);
        }
    }
    clattn_context_free(ctx);

    /* A later context on the folder starts from the records of the families measured; the fixed ones
     * were not recorded. */
    tu_set_label("a context after clattn_tune on %s", tu_dev_spec[dev]);
    ctx = context_with(dev, "", "", "", dir);
    for (int f = 0; f < TUNING_FAMILIES; f++) {
        const bool measured = f == TUNING_GEMM || f == TUNING_STAGED;
        const tuning_values now = lookup_from(ctx, (tuning_family)f, measured ? TUNING_FROM_RECORD : TUNING_FROM_TABLE);
        char spelled[64];
        tuning_format((tuning_family)f, &now, spelled, sizeof spelled);
        if (measured)
            ck_assert_msg(strcmp(chosen[f], spelled) == 0, "%s: the %s record gives \"%s\", tuning chose \"%s\"",
                          tu_label(), tuning_tables[f].name, spelled, chosen[f]);
    }
    clattn_context_free(ctx);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("tuning");
    tu_add_loop(s, "tables", test_tables, tu_ndev);
    tu_add_loop(s, "options", test_options, tu_ndev);
    tu_add_loop(s, "lookup", test_lookup, tu_ndev);
    tuning_add_candidate_cases(s);
    tu_add_loop(s, "tune_report", test_tune_report, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
