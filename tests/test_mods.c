/*
 * Programmable attention (clattn_mods, 0.9): score_mod and mask_mod from OpenCL C source.
 *   examples: every example mod of tools/mods/ (and one hiding whole rows) on the fused, staged and
 *             decode paths against the fp64 reference with the same functions as C callbacks, and,
 *             where the library has the same thing built in, against the built-in call;
 *   compose:  one source with both functions and two auxiliary tensors, together with key lengths, an
 *             additive mask, soft-capping, logit scales, ALiBi and sinks, grouped-query heads, on every
 *             path; the staged path's weights and masked scores;
 *   ragged:   a packed batch (the fused and decode kernels' ragged builds), each sequence against its
 *             reference;
 *   blocks:   block masks from mask_mod (their counts) and from host layouts, on every path, reused; their
 *             refusals;
 *   layers:   clattn_mha_host with causal.cl, with its block mask, and with sliding_window.cl, against the
 *             fp64 reference of the layer with the same mask_mod and against the built-in equivalent;
 *   refusals: sources that do not compile (the log names the user's line), functions missing or taking
 *             other arguments, bad defines and auxiliary tensors, tensors too short for a call, mods of
 *             another context, group calls — each a status and a message, nothing written.
 */
#include "test_util.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int ref_causal(int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h, (void)u;
    return k <= q;
}
static int ref_window(int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h;
    return k <= q && q - k <= ((const mod_data *)u)->window;
}
static int ref_document(int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h;
    const int *doc = ((const mod_data *)u)->doc;
    return doc[q] == doc[k] && k <= q;
}
static int ref_prefix(int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h;
    return k <= q || k < ((const mod_data *)u)->prefix;
}
static int ref_hide_rows(int b, int h, long long q, long long k, const void *u)
{
    (void)u, (void)k;
    return (q + b + h) % 3 != 0;
}
static double ref_alibi(double s, int b, int h, long long q, long long k, const void *u)
{
    (void)b;
    return s + (double)((const mod_data *)u)->slopes[h] * (double)(k - q);
}
static double ref_softcap(double s, int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h, (void)q, (void)k;
    const double cap = ((const mod_data *)u)->cap;
    return cap * tanh(s / cap);
}
/* tools/mods/t5_bias.cl's buckets, in the same float arithmetic. */
static int t5_bucket(long long relative)
{
    const int half = BUCKETS / 2, exact = half / 2, base = relative > 0 ? half : 0;
    const long long n = relative < 0 ? -relative : relative;
    if (n < exact)
        return base + (int)n;
    const float spread = log2f((float)n / (float)exact) / log2f((float)MAX_DISTANCE / (float)exact);
    const int bucket = exact + (int)(spread * (float)(half - exact));
    return base + (bucket < half - 1 ? bucket : half - 1);
}
static double ref_t5(double s, int b, int h, long long q, long long k, const void *u)
{
    (void)b;
    return s + (double)((const mod_data *)u)->bias[h * BUCKETS + t5_bucket(k - q)];
}

/* The example mods (files of tools/mods/, or a source here) and how each is checked. */
enum aux_kind { AUX_NONE, AUX_SLOPES, AUX_DOC, AUX_T5 };
enum builtin { NO_BUILTIN, BUILTIN_CAUSAL, BUILTIN_WINDOW, BUILTIN_ALIBI, BUILTIN_SOFTCAP };
typedef struct example {
    const char *name, *file, *source; /* a file of tools/mods/, or the source itself */
    const char *defines[2];
    enum aux_kind aux;
    double (*score)(double, int, int, long long, long long, const void *);
    int (*mask)(int, int, long long, long long, const void *);
    enum builtin builtin;
} example;

static const example examples[] = {
    {"causal", "causal.cl", NULL, {NULL}, AUX_NONE, NULL, ref_causal, BUILTIN_CAUSAL},
    {"sliding window", "sliding_window.cl", NULL, {"WINDOW=5"}, AUX_NONE, NULL, ref_window, BUILTIN_WINDOW},
    {"alibi", "alibi.cl", NULL, {NULL}, AUX_SLOPES, ref_alibi, NULL, BUILTIN_ALIBI},
    {"softcap", "softcap.cl", NULL, {"CAP=2.5f"}, AUX_NONE, ref_softcap, NULL, BUILTIN_SOFTCAP},
    {"document", "document.cl", NULL, {NULL}, AUX_DOC, NULL, ref_document, NO_BUILTIN},
    {"prefix-lm", "prefix_lm.cl", NULL, {"PREFIX=7"}, AUX_NONE, NULL, ref_prefix, NO_BUILTIN},
    {"t5 bias", "t5_bias.cl", NULL, {"BUCKETS=32", "MAX_DISTANCE=16"}, AUX_T5, ref_t5, NULL, NO_BUILTIN},
    {"whole rows hidden", NULL,
     "// every third row of each (b, h) sees no key\n"
     "bool mask_mod(int b, int h, long q, long k) { return (q + b + h) % 3 != 0; }\n",
     {NULL}, AUX_NONE, NULL, ref_hide_rows, NO_BUILTIN},
};
#define N_EXAMPLES (sizeof examples / sizeof examples[0])

static const clattn_algorithm paths[] = {CLATTN_ALGORITHM_FUSED, CLATTN_ALGORITHM_STAGED, CLATTN_ALGORITHM_DECODE};
static const char *const path_names[] = {"fused", "staged", "decode"};
#define N_PATHS 3

static char *read_example(const char *file)
{
    const char *dir = getenv("CLATTN_MODS_DIR");
    ck_assert_msg(dir != NULL, "CLATTN_MODS_DIR is not set (tests/meson.build sets it to tools/mods)");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *text = tu_read_file(path, NULL);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    return tu_track(text);
}

/* The device tensors and host values of one call's auxiliary tensors. */
typedef struct aux_set {
    float slopes[MAXH], bias[MAXH * BUCKETS];
    int doc[256];
    clattn_mod_aux aux[CLATTN_MODS_MAX_AUX];
    size_t count;
} aux_set;

/* Documents of 1 to 9 positions, varied, over n positions. */
static void fill_documents(int *doc, size_t n)
{
    int id = 0;
    for (size_t i = 0; i < n;) {
        const size_t len = 1 + (size_t)(id * 7 + 3) % 9;
        for (size_t j = 0; j < len && i < n; j++)
            doc[i++] = id;
        id++;
    }
}

static void add_aux(clattn_context *ctx, aux_set *a, enum aux_kind kind, size_t heads, size_t positions)
{
    clattn_mod_aux *x = &a->aux[a->count++];
    if (kind == AUX_SLOPES) {
        for (size_t h = 0; h < heads; h++)
            a->slopes[h] = -0.07f * (float)(h + 1);
        *x = (clattn_mod_aux){"slopes", CLATTN_AUX_FLOAT, tu_dev_alloc(ctx, heads, a->slopes), CLATTN_AUX_BY_HEAD, 0};
    } else if (kind == AUX_DOC) {
        ck_assert(positions <= 256);
        fill_documents(a->doc, positions);
        *x = (clattn_mod_aux){"doc", CLATTN_AUX_INT, tu_dev_alloc(ctx, positions, (const float *)a->doc),
                              CLATTN_AUX_BY_POSITION, 0};
    } else {
        tu_fill_uniform(a->bias, heads * BUCKETS, 1.5f, 77);
        *x = (clattn_mod_aux){"bias", CLATTN_AUX_FLOAT, tu_dev_alloc(ctx, heads * BUCKETS, a->bias),
                              CLATTN_AUX_BY_LENGTH, heads * BUCKETS};
    }
}

static clattn_mods *make_mods(clattn_context *ctx, const char *source, const char *const *defines, size_t ndefines,
                              const aux_set *a)
{
    clattn_mods_desc md = CLATTN_MODS_DESC_INIT;
    md.source = source;
    md.defines = defines;
    md.define_count = ndefines;
    md.aux = a->aux;
    md.aux_count = a->count;
    clattn_mods *mods = NULL;
    TU_ASSERT_OK(clattn_mods_create(ctx, &md, &mods), ctx, "clattn_mods_create");
    ck_assert(mods != NULL);
    return mods;
}

/* One shape a path is tested at: the fused and staged paths with L = S, the decode path with few rows
 * at the end of a longer key run (their positions through query offsets). */
typedef struct call_shape {
    size_t B, H, kvh, L, S, D, Dv;
} call_shape;
static const call_shape shapes[N_PATHS] = {
    {2, 4, 2, 37, 37, 24, 16}, {2, 4, 2, 37, 37, 24, 16}, {2, 4, 2, 3, 53, 24, 16}};

/* A call of shape c on `path`, its query rows at the end of the keys (positions S − L + i, through
 * query offsets: m and offsets, of at least c->B entries, are the caller's). */
static clattn_sdpa_desc shape_desc(const call_shape *c, size_t path, clattn_masks *m, long long *offsets)
{
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->Dv);
    d.kv_heads = c->kvh;
    d.algorithm = paths[path];
    for (size_t b = 0; b < c->B; b++)
        offsets[b] = (long long)(c->S - c->L);
    *m = (clattn_masks)CLATTN_MASKS_INIT;
    m->query_offsets = offsets;
    d.masks = m;
    return d;
}

/* Run d on the context's device from host arrays; out and lse come back. */
static void run(clattn_context *ctx, const clattn_sdpa_desc *d, const float *q, const float *k, const float *v,
                const float *mask, float *out, float *weights, float *lse, const char *what)
{
    TU_ASSERT_OK(clattn_sdpa_host(ctx, d, q, k, v, mask, out, weights, lse), ctx, what);
}

START_TEST(test_examples)
{
    const size_t which = TU_CASE(_i) / N_PATHS, path = TU_CASE(_i) % N_PATHS, dev = TU_DEVICE(_i);
    const example *e = &examples[which];
    const call_shape *c = &shapes[path];
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("mods example %s, %s path on %s", e->name, path_names[path], tu_dev_spec[dev]);
    long long offsets[4];
    clattn_masks m;
    clattn_sdpa_desc d = shape_desc(c, path, &m, offsets);
    aux_set a = {0};
    if (e->aux != AUX_NONE)
        add_aux(ctx, &a, e->aux, c->H, c->S);
    size_t ndefines = 0;
    while (ndefines < 2 && e->defines[ndefines])
        ndefines++;
    clattn_mods *mods = make_mods(ctx, e->file ? read_example(e->file) : e->source, e->defines, ndefines, &a);
    const mod_data data = {a.slopes, a.doc, a.bias, 5, 7, 2.5};
    const ref_mods rm = {e->score, e->mask, &data};

    const size_t nq = c->B * c->H * c->L * c->D, nk = c->B * c->kvh * c->S * c->D, nv = c->B * c->kvh * c->S * c->Dv;
    const size_t no = c->B * c->H * c->L * c->Dv, nl = c->B * c->H * c->L;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv);
    tu_fill_uniform(q, nq, 1.5f, 31 + _i);
    tu_fill_uniform(k, nk, 1.5f, 32 + _i);
    tu_fill_uniform(v, nv, 1.0f, 33 + _i);
    double *ref = tu_dalloc(no), *ref_lse = tu_dalloc(nl);
    ref_sdpa_mods(&d, &rm, q, k, v, NULL, ref, NULL, ref_lse);
    float *out = tu_host_alloc(no, NULL), *lse = tu_host_alloc(nl, NULL);
    d.mods = mods;
    run(ctx, &d, q, k, v, NULL, out, NULL, lse, "clattn_sdpa_host with mods");
    check_close_named("out", out, ref, no, NULL);
    check_close_named("lse", lse, ref_lse, nl, NULL);

    /* The mods matter: without them the reference differs. */
    double *plain = tu_dalloc(no), largest = 0;
    clattn_sdpa_desc without = d;
    without.mods = NULL;
    ref_sdpa(&without, q, k, v, NULL, plain, NULL, NULL);
    for (size_t i = 0; i < no; i++)
        largest = fmax(largest, fabs(plain[i] - ref[i]));
    ck_assert_msg(largest > 1e-3, "%s: the mods change nothing (%g)", tu_label(), largest);

    if (e->builtin != NO_BUILTIN) { /* the same as the library's own mask or term */
        clattn_sdpa_desc built = without;
        clattn_masks bm = m;
        clattn_window w = {5, 0};
        built.masks = &bm;
        if (e->builtin == BUILTIN_CAUSAL || e->builtin == BUILTIN_WINDOW)
            bm.causal = CLATTN_CAUSAL_TOP_LEFT;
        if (e->builtin == BUILTIN_WINDOW)
            bm.window = &w;
        if (e->builtin == BUILTIN_ALIBI)
            built.alibi_slopes = a.slopes;
        if (e->builtin == BUILTIN_SOFTCAP)
            built.softcap = 2.5f;
        float *same = tu_host_alloc(no, NULL);
        run(ctx, &built, q, k, v, NULL, same, NULL, NULL, "the built-in equivalent");
        double *as_double = tu_dalloc(no);
        for (size_t i = 0; i < no; i++)
            as_double[i] = (double)same[i];
        check_close_named("out against the built-in", out, as_double, no, NULL);
    }
    clattn_mods_free(mods);
}
END_TEST

/* Both functions in one source with two auxiliary tensors and a define, with every built-in term. */
static const char compose_source[] =
    "float score_mod(float score, int b, int h, long q, long k, __global const int *doc, __global const float *bias)\n"
    "{\n"
    "    return score * SHARPEN + bias[h * BUCKETS + (k - q > 0 ? 1 : 0)];\n"
    "}\n"
    "bool mask_mod(int b, int h, long q, long k, __global const int *doc, __global const float *bias)\n"
    "{\n"
    "    return doc[q] == doc[k] || k == 0; /* each document, and the sequence's first key */\n"
    "}\n";
static double ref_compose_score(double s, int b, int h, long long q, long long k, const void *u)
{
    (void)b;
    return s * 1.25 + (double)((const mod_data *)u)->bias[h * BUCKETS + (k - q > 0 ? 1 : 0)];
}
static int ref_compose_mask(int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h;
    const int *doc = ((const mod_data *)u)->doc;
    return doc[q] == doc[k] || k == 0;
}

START_TEST(test_compose)
{
    const size_t path = TU_CASE(_i), dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    const call_shape *c = &shapes[path];
    tu_set_label("mods with every built-in term, %s path on %s", path_names[path], tu_dev_spec[dev]);
    clattn_sdpa_desc d = tu_sdpa_desc(c->B, c->H, c->L, c->S, c->D, c->Dv);
    d.kv_heads = c->kvh;
    d.algorithm = paths[path];
    d.softcap = 3.0f;
    float scales[MAXH], slopes[MAXH], sinks[MAXH];
    for (size_t h = 0; h < c->H; h++) {
        scales[h] = 0.6f + 0.3f * (float)h;
        slopes[h] = -0.04f * (float)(h + 1);
        sinks[h] = 0.5f - 0.25f * (float)h;
    }
    d.logit_scale = scales;
    d.alibi_slopes = slopes;
    d.sinks = sinks;
    size_t lengths[4];
    for (size_t b = 0; b < c->B; b++)
        lengths[b] = c->S - 4 * b;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.key_lengths = lengths;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    m.additive = CLATTN_MASK_L_S;
    d.masks = &m;
    aux_set a = {0};
    add_aux(ctx, &a, AUX_DOC, c->H, c->S);
    add_aux(ctx, &a, AUX_T5, c->H, c->S);
    const char *defines[] = {"SHARPEN=1.25f", "BUCKETS=32"};
    clattn_mods *mods = make_mods(ctx, compose_source, defines, 2, &a);
    const mod_data data = {NULL, a.doc, a.bias, 0, 0, 0};
    const ref_mods rm = {ref_compose_score, ref_compose_mask, &data};
    const size_t nq = c->B * c->H * c->L * c->D, nk = c->B * c->kvh * c->S * c->D, nv = c->B * c->kvh * c->S * c->Dv;
    const size_t no = c->B * c->H * c->L * c->Dv, nl = c->B * c->H * c->L, nw = c->B * c->H * c->L * c->S;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv), *mask = tu_falloc(c->L * c->S);
    tu_fill_uniform(q, nq, 1.5f, 41);
    tu_fill_uniform(k, nk, 1.5f, 42);
    tu_fill_uniform(v, nv, 1.0f, 43);
    tu_fill_uniform(mask, c->L * c->S, 1.0f, 44);
    double *ref = tu_dalloc(no), *ref_lse = tu_dalloc(nl), *ref_w = tu_dalloc(nw);
    ref_sdpa_mods(&d, &rm, q, k, v, mask, ref, ref_w, ref_lse);
    d.mods = mods;
    float *out = tu_host_alloc(no, NULL), *lse = tu_host_alloc(nl, NULL);
    float *w = paths[path] == CLATTN_ALGORITHM_STAGED ? tu_host_alloc(nw, NULL) : NULL;
    run(ctx, &d, q, k, v, mask, out, w, lse, "clattn_sdpa_host with mods and every term");
    check_close_named("out", out, ref, no, NULL);
    check_close_named("lse", lse, ref_lse, nl, NULL);
    if (w)
        check_close_named("weights", w, ref_w, nw, NULL);
    clattn_mods_free(mods);
}
END_TEST

/* The staged path's masked scores: score_mod applied, mask_mod's hidden pairs −inf. */
START_TEST(test_masked_scores)
{
    const size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("mods in the staged path's masked scores on %s", tu_dev_spec[dev]);
    enum { B = 1, H = 2, L = 9, S = 13, D = 8 };
    clattn_sdpa_desc d = tu_sdpa_desc(B, H, L, S, D, D);
    d.algorithm = CLATTN_ALGORITHM_STAGED;
    d.weights_output = CLATTN_WEIGHTS_MASKED;
    aux_set a = {0};
    add_aux(ctx, &a, AUX_DOC, H, S);
    add_aux(ctx, &a, AUX_T5, H, S);
    const char *defines[] = {"SHARPEN=1.25f", "BUCKETS=32"};
    clattn_mods *mods = make_mods(ctx, compose_source, defines, 2, &a);
    d.mods = mods;
    float q[B * H * L * D], k[B * H * S * D], v[B * H * S * D], out[B * H * L * D], w[B * H * L * S];
    tu_fill_uniform(q, B * H * L * D, 1.0f, 51);
    tu_fill_uniform(k, B * H * S * D, 1.0f, 52);
    tu_fill_uniform(v, B * H * S * D, 1.0f, 53);
    run(ctx, &d, q, k, v, NULL, out, w, NULL, "clattn_sdpa_host, masked scores");
    const mod_data data = {NULL, a.doc, a.bias, 0, 0, 0};
    double want[B * H * L * S];
    for (size_t h = 0; h < H; h++)
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < S; j++) {
                double dot = 0;
                for (size_t t = 0; t < D; t++)
                    dot += (double)q[(h * L + i) * D + t] * (double)k[(h * S + j) * D + t];
                const double s = ref_compose_score(dot / sqrt((double)D), 0, (int)h, (long long)i, (long long)j, &data);
                want[(h * L + i) * S + j] = ref_compose_mask(0, (int)h, (long long)i, (long long)j, &data) ? s : -INFINITY;
            }
    check_close_named("masked scores", w, want, B * H * L * S, NULL);
    clattn_mods_free(mods);
}
END_TEST

/* One sequence of a batch with per-sequence lengths, under document.cl and a bottom-right causal mask,
 * against its dense reference: q (H, rows, D), k and v (KVH, len, D); got (H, rows, D), or (rows, H, D)
 * when token_major (a ragged batch's rows). */
static void check_document_sequence(const aux_set *a, size_t H, size_t KVH, size_t rows, size_t len, size_t D,
                                    const float *q, const float *k, const float *v, const float *got,
                                    bool token_major, const char *what)
{
    clattn_sdpa_desc one = tu_sdpa_desc(1, H, rows, len, D, D);
    one.kv_heads = KVH;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    one.masks = &m;
    const mod_data data = {NULL, a->doc, NULL, 0, 0, 0};
    const ref_mods rm = {NULL, ref_document, &data};
    double *ref = tu_dalloc(H * rows * D), *want = tu_dalloc(H * rows * D);
    ref_sdpa_mods(&one, &rm, q, k, v, NULL, ref, NULL, NULL);
    for (size_t h = 0; h < H; h++)
        for (size_t i = 0; i < rows; i++)
            for (size_t e = 0; e < D; e++)
                want[(token_major ? i * H + h : h * rows + i) * D + e] = ref[(h * rows + i) * D + e];
    check_close_named(what, got, want, H * rows * D, NULL);
}

/* A packed batch of two sequences (row starts), each with its own documents through one position-indexed
 * tensor: the fused kernel (L > the decode rows) and the decode kernels (L ≤ them), against the dense
 * reference of each sequence. */
START_TEST(test_ragged)
{
    const size_t dev = TU_DEVICE(_i), rows = TU_CASE(_i) ? 2 : 19;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("mods through a ragged batch of %zu query rows a sequence on %s", rows, tu_dev_spec[dev]);
    enum { H = 4, KVH = 2, D = 16, NB = 2 };
    static const size_t keys[NB] = {23, 41};
    const size_t q_starts[NB + 1] = {0, rows, 2 * rows}, k_starts[NB + 1] = {0, keys[0], keys[0] + keys[1]};
    float *q = tu_falloc(NB * rows * H * D), *k = tu_falloc(64 * KVH * D), *v = tu_falloc(64 * KVH * D);
    tu_fill_uniform(q, NB * rows * H * D, 1.0f, 61);
    tu_fill_uniform(k, 64 * KVH * D, 1.0f, 62);
    tu_fill_uniform(v, 64 * KVH * D, 1.0f, 63);
    aux_set a = {0};
    add_aux(ctx, &a, AUX_DOC, H, keys[1]);
    clattn_mods *mods = make_mods(ctx, read_example("document.cl"), NULL, 0, &a);
    clattn_sdpa_desc d = tu_sdpa_desc(NB, H, rows, keys[1], D, D);
    d.kv_heads = KVH;
    d.mods = mods;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT; /* each sequence's rows are its last positions */
    d.masks = &m;
    clattn_ragged r = CLATTN_RAGGED_INIT;
    r.q_starts = q_starts;
    r.k_starts = k_starts;
    float *out = tu_host_alloc(NB * rows * H * D, NULL);
    TU_ASSERT_OK(clattn_sdpa_ragged_host(ctx, &d, &r, q, k, v, NULL, out, NULL), ctx, "clattn_sdpa_ragged_host");
    for (size_t b = 0; b < NB; b++) {
        float *qd = tu_falloc(H * rows * D), *kd = tu_falloc(KVH * keys[b] * D), *vd = tu_falloc(KVH * keys[b] * D);
        for (size_t i = 0; i < rows; i++)
            for (size_t h = 0; h < H; h++)
                memcpy(qd + (h * rows + i) * D, q + ((q_starts[b] + i) * H + h) * D, D * sizeof(float));
        for (size_t j = 0; j < keys[b]; j++)
            for (size_t g = 0; g < KVH; g++) {
                memcpy(kd + (g * keys[b] + j) * D, k + ((k_starts[b] + j) * KVH + g) * D, D * sizeof(float));
                memcpy(vd + (g * keys[b] + j) * D, v + ((k_starts[b] + j) * KVH + g) * D, D * sizeof(float));
            }
        check_document_sequence(&a, H, KVH, rows, keys[b], D, qd, kd, vd, out + q_starts[b] * H * D, true,
                                "ragged out");
    }
    clattn_mods_free(mods);
}
END_TEST

/* A paged cache (blocks of 8 rows in a shuffled pool): the decode kernels (2 rows) and the fused kernel
 * through the table (12 rows), each sequence against its dense reference. */
START_TEST(test_paged)
{
    enum { NB = 2, H = 4, KVH = 2, D = 16, BS = 8, MAXB = 4, BLOCKS = NB * MAXB };
    const size_t dev = TU_DEVICE(_i), rows = TU_CASE(_i) ? 12 : 2;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("mods through a paged cache, %zu query rows on %s", rows, tu_dev_spec[dev]);
    static const size_t lengths[NB] = {21, 30};
    static const cl_int table[NB * MAXB] = {5, 2, 7, 0, 1, 6, 3, 4}; /* sequence b's blocks, in order */
    float *kpool = tu_falloc(BLOCKS * KVH * BS * D), *vpool = tu_falloc(BLOCKS * KVH * BS * D);
    float *q = tu_falloc(NB * H * rows * D);
    tu_fill_uniform(kpool, BLOCKS * KVH * BS * D, 1.0f, 81);
    tu_fill_uniform(vpool, BLOCKS * KVH * BS * D, 1.0f, 82);
    tu_fill_uniform(q, NB * H * rows * D, 1.0f, 83);
    aux_set a = {0};
    add_aux(ctx, &a, AUX_DOC, H, MAXB * BS);
    clattn_mods *mods = make_mods(ctx, read_example("document.cl"), NULL, 0, &a);
    clattn_paged_cache cache = CLATTN_PAGED_CACHE_INIT;
    cache.k_pool = tu_dev_alloc(ctx, BLOCKS * KVH * BS * D, kpool);
    cache.v_pool = tu_dev_alloc(ctx, BLOCKS * KVH * BS * D, vpool);
    cache.blocks = BLOCKS;
    cache.block_size = BS;
    cache.block_table = tu_dev_alloc(ctx, NB * MAXB, (const float *)table);
    cache.max_blocks = MAXB;
    clattn_sdpa_desc d = tu_sdpa_desc(NB, H, rows, MAXB * BS, D, D);
    d.kv_heads = KVH;
    d.mods = mods;
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    d.masks = &m;
    cl_mem qm = tu_dev_alloc(ctx, NB * H * rows * D, q), om = tu_dev_alloc(ctx, NB * H * rows * D, NULL);
    TU_ASSERT_OK(clattn_sdpa_paged(ctx, &d, &cache, lengths, qm, NULL, om, NULL), ctx, "clattn_sdpa_paged");
    const float *out = tu_dev_read(ctx, om, NB * H * rows * D);
    for (size_t b = 0; b < NB; b++) {
        float *kd = tu_falloc(KVH * lengths[b] * D), *vd = tu_falloc(KVH * lengths[b] * D);
        for (size_t g = 0; g < KVH; g++)
            for (size_t j = 0; j < lengths[b]; j++) {
                const size_t at = (((size_t)table[b * MAXB + j / BS] * KVH + g) * BS + j % BS) * D;
                memcpy(kd + (g * lengths[b] + j) * D, kpool + at, D * sizeof(float));
                memcpy(vd + (g * lengths[b] + j) * D, vpool + at, D * sizeof(float));
            }
        check_document_sequence(&a, H, KVH, rows, lengths[b], D, q + b * H * rows * D, kd, vd,
                                out + b * H * rows * D, false, "paged out");
    }
    clattn_mods_free(mods);
}
END_TEST

/* Storage types: the typed loads feed the same scores, so the mods apply alike — float16 Q/K/V/O,
 * bfloat16, and int8 K/V with row scales, on the fused and decode paths, against the reference over the
 * values the stored elements stand for. */
START_TEST(test_storage_types)
{
    static const struct {
        clattn_dtype qo, kv;
        const char *name;
    } types[] = {{CLATTN_FLOAT16, CLATTN_FLOAT16, "float16"},
                 {CLATTN_BFLOAT16, CLATTN_BFLOAT16, "bfloat16"},
                 {CLATTN_FLOAT32, CLATTN_INT8, "int8 K/V"}};
    const size_t t = TU_CASE(_i) / 2, path = TU_CASE(_i) % 2 ? 2 : 0, dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    const call_shape *c = &shapes[path];
    tu_set_label("mods with %s storage, %s path on %s", types[t].name, path_names[path], tu_dev_spec[dev]);
    long long offsets[4];
    clattn_masks m;
    clattn_sdpa_desc d = shape_desc(c, path, &m, offsets);
    d.q_dtype = d.out_dtype = types[t].qo;
    d.k_dtype = d.v_dtype = types[t].kv;
    aux_set a = {0};
    add_aux(ctx, &a, AUX_DOC, c->H, c->S);
    add_aux(ctx, &a, AUX_T5, c->H, c->S);
    const char *defines[] = {"SHARPEN=1.25f", "BUCKETS=32"};
    clattn_mods *mods = make_mods(ctx, compose_source, defines, 2, &a);
    const size_t nq = c->B * c->H * c->L * c->D, nk = c->B * c->kvh * c->S * c->D, nv = c->B * c->kvh * c->S * c->Dv;
    const size_t no = c->B * c->H * c->L * c->Dv;
    float *src = tu_falloc(nq + nk + nv);
    tu_fill_uniform(src, nq + nk + nv, 1.0f, 71 + _i);
    const tu_typed q = tu_typed_make(types[t].qo, src, nq, c->D), k = tu_typed_make(types[t].kv, src + nq, nk, c->D),
                   v = tu_typed_make(types[t].kv, src + nq + nk, nv, c->Dv);
    d.k_scales = tu_typed_scales(ctx, &k);
    d.v_scales = tu_typed_scales(ctx, &v);
    const tu_typed zero = tu_typed_make(types[t].qo, tu_falloc(no), no, c->Dv);
    cl_mem om = tu_typed_upload(ctx, &zero);
    const mod_data data = {NULL, a.doc, a.bias, 0, 0, 0};
    const ref_mods rm = {ref_compose_score, ref_compose_mask, &data};
    double *ref = tu_dalloc(no);
    clattn_sdpa_desc as_float = d;
    as_float.q_dtype = as_float.k_dtype = as_float.v_dtype = as_float.out_dtype = CLATTN_FLOAT32;
    as_float.k_scales = as_float.v_scales = NULL;
    ref_sdpa_mods(&as_float, &rm, q.values, k.values, v.values, NULL, ref, NULL, NULL);
    d.mods = mods;
    TU_ASSERT_OK(clattn_sdpa(ctx, &d, tu_typed_upload(ctx, &q), tu_typed_upload(ctx, &k), tu_typed_upload(ctx, &v),
                             NULL, om, NULL, NULL),
                 ctx, "clattn_sdpa with mods, typed");
    tu_check_typed("out", tu_typed_read(ctx, om, types[t].qo, no), ref, no, types[t].qo, NULL);
    clattn_mods_free(mods);
}
END_TEST

/* The fp64 reference of a self-attention layer with mods (ref_mha has none: it is a layer of ref_sdpa):
 * X·W_Q, X·W_K, X·W_V (no biases) split into d's heads, ref_sdpa_mods_d with `rm` (and d's masks) per
 * head, the heads concatenated and ·W_O. out (B, L, model_dim). */
static void ref_layer_mods(const clattn_mha_desc *d, const ref_mods *rm, const float *x,
                           const clattn_mha_host_weights *w, double *out)
{
    const size_t B = d->batch, L = d->q_len, DM = d->model_dim, H = d->heads, D = d->qk_dim;
    const size_t DV = d->v_dim ? d->v_dim : D;
    ck_assert_msg(d->kv_heads == 0 && !w->b_q && !w->b_k && !w->b_v && !w->b_o && (d->out_dim == 0 || d->out_dim == DM),
                  "%s: ref_layer_mods covers self-attention without biases only", tu_label());
    double *proj[3], *heads[3];
    const float *wqkv[3] = {w->w_q, w->w_k, w->w_v};
    for (int t = 0; t < 3; t++) {
        const size_t dt = t == 2 ? DV : D;
        proj[t] = tu_dalloc(B * L * H * dt);
        heads[t] = tu_dalloc(B * H * L * dt);
        ref_matmul(B * L, DM, H * dt, x, wqkv[t], NULL, proj[t]);
        for (size_t b = 0; b < B; b++) /* (B, L, H·dt) → (B, H, L, dt) */
            for (size_t h = 0; h < H; h++)
                for (size_t i = 0; i < L; i++)
                    for (size_t c = 0; c < dt; c++)
                        heads[t][((b * H + h) * L + i) * dt + c] = proj[t][(b * L + i) * H * dt + h * dt + c];
    }
    clattn_sdpa_desc sd = tu_sdpa_desc(B, H, L, L, D, DV);
    sd.scale = d->scale;
    sd.masks = d->masks;
    double *o = tu_dalloc(B * H * L * DV), *cat = tu_dalloc(B * L * H * DV);
    ref_sdpa_mods_d(&sd, rm, heads[0], heads[1], heads[2], NULL, o, NULL, NULL);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < L; i++)
                for (size_t c = 0; c < DV; c++)
                    cat[(b * L + i) * H * DV + h * DV + c] = o[((b * H + h) * L + i) * DV + c];
    ref_matmul_d(B * L, H * DV, DM, cat, w->w_o, NULL, out);
}

/* A layer (clattn_mha_host) with tools/mods/causal.cl, then with its block mask too, and with
 * sliding_window.cl (WINDOW=5): each against the fp64 reference of the layer with the same mask_mod as a
 * C callback (ref_layer_mods), and against the same layer with the built-in equivalent (a causal mask,
 * with a window of 5 keys before). Head sizes 24 and 16, as the examples' fused calls: the same programs
 * serve (kernel builds are most of this suite's time on a CPU). */
START_TEST(test_mha)
{
    enum { B = 2, L = 19, DM = 24, H = 3, DK = 24, DV = 16 };
    const size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("mods in a layer (clattn_mha_host) on %s", tu_dev_spec[dev]);
    float *x = tu_falloc(B * L * DM), *wq = tu_falloc(DM * H * DK), *wk = tu_falloc(DM * H * DK),
          *wv = tu_falloc(DM * H * DV), *wo = tu_falloc(H * DV * DM);
    tu_fill_uniform(x, B * L * DM, 1.0f, 91);
    tu_fill_uniform(wq, DM * H * DK, 0.4f, 92);
    tu_fill_uniform(wk, DM * H * DK, 0.4f, 93);
    tu_fill_uniform(wv, DM * H * DV, 0.4f, 94);
    tu_fill_uniform(wo, H * DV * DM, 0.4f, 95);
    clattn_mha_host_weights w = CLATTN_MHA_HOST_WEIGHTS_INIT;
    w.w_q = wq, w.w_k = wk, w.w_v = wv, w.w_o = wo;
    clattn_mha_desc d = CLATTN_MHA_DESC_INIT;
    d.batch = B, d.q_len = L, d.model_dim = DM, d.heads = H, d.qk_dim = DK, d.v_dim = DV;
    const mod_data data = {NULL, NULL, NULL, 5, 0, 0};
    const ref_mods causal_ref = {NULL, ref_causal, &data}, window_ref = {NULL, ref_window, &data};
    double *ref = tu_dalloc(B * L * DM), *ref_window_out = tu_dalloc(B * L * DM), *plain = tu_dalloc(B * L * DM);
    ref_layer_mods(&d, &causal_ref, x, &w, ref);
    ref_layer_mods(&d, &window_ref, x, &w, ref_window_out);
    ref_mha(&d, x, NULL, &w, NULL, plain, NULL);
    /* The masks matter: without them, and with the window against causal alone, the references differ. */
    double causal_change = 0, window_change = 0;
    for (size_t i = 0; i < B * L * DM; i++) {
        causal_change = fmax(causal_change, fabs(plain[i] - ref[i]));
        window_change = fmax(window_change, fabs(ref_window_out[i] - ref[i]));
    }
    ck_assert_msg(causal_change > 1e-3 && window_change > 1e-3,
                  "%s: the masks change the reference little (causal %g, the window %g)", tu_label(), causal_change,
                  window_change);

    aux_set none = {0};
    clattn_mods *mods = make_mods(ctx, read_example("causal.cl"), NULL, 0, &none);
    d.mods = mods;
    float *with_mods = tu_host_alloc(B * L * DM, NULL), *built_in = tu_host_alloc(B * L * DM, NULL);
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, x, NULL, &w, NULL, with_mods, NULL), ctx, "clattn_mha_host with causal.cl");
    check_close_named("layer with causal.cl against the fp64 reference", with_mods, ref, B * L * DM, NULL);
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_TOP_LEFT;
    d.masks = &m;
    d.mods = NULL;
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, x, NULL, &w, NULL, built_in, NULL), ctx, "clattn_mha_host, causal");
    check_close_named("layer with the built-in causal mask against the fp64 reference", built_in, ref, B * L * DM,
                      NULL);
    double *as_double = tu_dalloc(B * L * DM);
    for (size_t i = 0; i < B * L * DM; i++)
        as_double[i] = (double)built_in[i];
    check_close_named("layer with causal.cl against the built-in causal mask", with_mods, as_double, B * L * DM, NULL);
    /* And with causal.cl's block mask (blocks of 4 × 8: empty above the diagonal, full below). */
    clattn_block_mask_desc bd = CLATTN_BLOCK_MASK_DESC_INIT;
    bd.q_len = bd.kv_len = L;
    bd.block_q = 4, bd.block_k = 8;
    bd.mods = mods;
    clattn_block_mask *bm = NULL;
    TU_ASSERT_OK(clattn_block_mask_create(ctx, &bd, &bm), ctx, "clattn_block_mask_create");
    d.masks = NULL;
    d.mods = mods;
    d.block_mask = bm;
    float *blocked = tu_host_alloc(B * L * DM, NULL);
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, x, NULL, &w, NULL, blocked, NULL), ctx, "clattn_mha_host with a block mask");
    check_close_named("layer with causal.cl's block mask against the fp64 reference", blocked, ref, B * L * DM, NULL);
    check_close_named("layer with causal.cl's block mask against the built-in causal mask", blocked, as_double,
                      B * L * DM, NULL);
    clattn_block_mask_free(bm);
    clattn_mods_free(mods);
    d.block_mask = NULL;

    /* sliding_window.cl: each query sees itself and the 5 keys before it. */
    static const char *const window_defines[] = {"WINDOW=5"};
    mods = make_mods(ctx, read_example("sliding_window.cl"), window_defines, 1, &none);
    d.mods = mods;
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, x, NULL, &w, NULL, with_mods, NULL), ctx,
                 "clattn_mha_host with sliding_window.cl");
    check_close_named("layer with sliding_window.cl against the fp64 reference", with_mods, ref_window_out, B * L * DM,
                      NULL);
    const clattn_window win = {5, 0};
    m.window = &win;
    d.masks = &m;
    d.mods = NULL;
    TU_ASSERT_OK(clattn_mha_host(ctx, &d, x, NULL, &w, NULL, built_in, NULL), ctx, "clattn_mha_host, causal window");
    check_close_named("layer with the built-in window against the fp64 reference", built_in, ref_window_out,
                      B * L * DM, NULL);
    for (size_t i = 0; i < B * L * DM; i++)
        as_double[i] = (double)built_in[i];
    check_close_named("layer with sliding_window.cl against the built-in window", with_mods, as_double, B * L * DM,
                      NULL);
    clattn_mods_free(mods);
}
END_TEST

/* Block masks. From document.cl's mask_mod over a grid of uneven blocks: the counts of empty, partial and
 * full blocks as the host finds them, then calls carrying it (fused, staged, decode: the fused kernels
 * skip the empty tiles) against the reference, the mask reused by a second call; from a host layout
 * (no mask_mod: the listed blocks are what each query block sees), with and without a built-in causal
 * mask. */
typedef struct layout_data {
    const size_t *starts, *blocks;
    size_t block_q, block_k;
} layout_data;
static int ref_layout(int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h;
    const layout_data *l = u;
    const size_t r = (size_t)q / l->block_q;
    for (size_t i = l->starts[r]; i < l->starts[r + 1]; i++)
        if (l->blocks[i] == (size_t)k / l->block_k)
            return 1;
    return 0;
}

START_TEST(test_block_masks)
{
    const size_t path = TU_CASE(_i), dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    const call_shape *c = &shapes[path];
    enum { BQ = 8, BK = 16 };
    tu_set_label("block masks, %s path on %s", path_names[path], tu_dev_spec[dev]);
    aux_set a = {0};
    add_aux(ctx, &a, AUX_DOC, c->H, c->S);
    clattn_mods *mods = make_mods(ctx, read_example("document.cl"), NULL, 0, &a);
    clattn_block_mask_desc bd = CLATTN_BLOCK_MASK_DESC_INIT;
    bd.q_len = bd.kv_len = c->S;
    bd.block_q = BQ, bd.block_k = BK;
    bd.mods = mods;
    clattn_block_mask *bm = NULL;
    TU_ASSERT_OK(clattn_block_mask_create(ctx, &bd, &bm), ctx, "clattn_block_mask_create from mask_mod");
    size_t counts[3], want[3] = {0, 0, 0};
    const mod_data data = {NULL, a.doc, NULL, 0, 0, 0};
    for (size_t q0 = 0; q0 < c->S; q0 += BQ)
        for (size_t k0 = 0; k0 < c->S; k0 += BK) {
            size_t seen = 0, pairs = 0;
            for (size_t q = q0; q < q0 + BQ && q < c->S; q++)
                for (size_t k = k0; k < k0 + BK && k < c->S; k++, pairs++)
                    seen += (size_t)ref_document(0, 0, (long long)q, (long long)k, &data);
            want[seen == 0 ? 0 : seen == pairs ? 2 : 1]++;
        }
    TU_ASSERT_OK(clattn_block_mask_counts(bm, counts), NULL, "clattn_block_mask_counts");
    ck_assert_msg(counts[0] == want[0] && counts[1] == want[1] && counts[2] == want[2],
                  "%s: %zu empty, %zu partial, %zu full blocks; the host finds %zu, %zu, %zu", tu_label(), counts[0],
                  counts[1], counts[2], want[0], want[1], want[2]);
    /* (Documents of at most 9 positions leave no block of 8 × 16 pairs whole: the layout below has full ones.) */
    ck_assert_msg(want[0] > 0 && want[1] > 0, "%s: the grid lacks empty or partial blocks", tu_label());

    long long offsets[4];
    clattn_masks m;
    clattn_sdpa_desc d = shape_desc(c, path, &m, offsets);
    const size_t nq = c->B * c->H * c->L * c->D, nk = c->B * c->kvh * c->S * c->D, nv = c->B * c->kvh * c->S * c->Dv;
    const size_t no = c->B * c->H * c->L * c->Dv;
    float *q = tu_falloc(nq), *k = tu_falloc(nk), *v = tu_falloc(nv);
    tu_fill_uniform(k, nk, 1.5f, 102);
    tu_fill_uniform(v, nv, 1.0f, 103);
    double *ref = tu_dalloc(no);
    float *out = tu_host_alloc(no, NULL);
    const ref_mods rm = {NULL, ref_document, &data};
    for (int call = 0; call < 2; call++) { /* the same mask, two calls */
        tu_fill_uniform(q, nq, 1.5f, 101 + (uint64_t)call);
        ref_sdpa_mods(&d, &rm, q, k, v, NULL, ref, NULL, NULL);
        d.mods = mods;
        d.block_mask = bm;
        run(ctx, &d, q, k, v, NULL, out, NULL, NULL, "clattn_sdpa_host with a block mask");
        check_close_named("out with the block mask", out, ref, no, NULL);
        d.mods = NULL;
        d.block_mask = NULL;
    }

    /* A layout: query block r sees key blocks r, r - 2 and 0 (when they exist). */
    const size_t qblocks = (c->S + BQ - 1) / BQ, kblocks = (c->S + BK - 1) / BK;
    size_t *starts = tu_track_malloc((qblocks + 1) * sizeof *starts), *blocks = tu_track_malloc(3 * qblocks * sizeof *blocks);
    for (size_t r = 0; r < qblocks; r++) {
        size_t n = starts[r];
        const size_t kb = r * BQ / BK;
        blocks[n++] = 0;
        if (kb >= 2)
            blocks[n++] = kb - 2;
        if (kb > 0 && kb < kblocks)
            blocks[n++] = kb;
        starts[r + 1] = n;
    }
    clattn_block_mask_desc ld = CLATTN_BLOCK_MASK_DESC_INIT;
    ld.q_len = ld.kv_len = c->S;
    ld.block_q = BQ, ld.block_k = BK;
    ld.layout_starts = starts, ld.layout_blocks = blocks;
    clattn_block_mask *lm = NULL;
    TU_ASSERT_OK(clattn_block_mask_create(ctx, &ld, &lm), ctx, "clattn_block_mask_create from a layout");
    const layout_data layout = {starts, blocks, BQ, BK};
    const ref_mods lr = {NULL, ref_layout, &layout};
    for (int causal = 0; causal < 2; causal++) {
        m.causal = causal ? CLATTN_CAUSAL_TOP_LEFT : CLATTN_CAUSAL_NONE;
        d.block_mask = NULL;
        ref_sdpa_mods(&d, &lr, q, k, v, NULL, ref, NULL, NULL);
        d.block_mask = lm;
        run(ctx, &d, q, k, v, NULL, out, NULL, NULL, "clattn_sdpa_host with a layout");
        check_close_named("out with the layout", out, ref, no, NULL);
    }
    clattn_block_mask_free(lm);
    clattn_block_mask_free(bm);
    clattn_mods_free(mods);
}
END_TEST

/* What block masks refuse: at creation and at the calls that carry them. */
START_TEST(test_block_mask_refusals)
{
    const size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("block mask refusals on %s", tu_dev_spec[dev]);
    aux_set none = {0}, a = {0};
    clattn_mods *causal = make_mods(ctx, read_example("causal.cl"), NULL, 0, &none);
    clattn_mods *scores_only = make_mods(ctx, read_example("softcap.cl"), (const char *const[]){"CAP=2.0f"}, 1, &none);
    add_aux(ctx, &a, AUX_DOC, 1, 8);
    clattn_mods *doc = make_mods(ctx, read_example("document.cl"), NULL, 0, &a);
    clattn_block_mask_desc bd = CLATTN_BLOCK_MASK_DESC_INIT;
    clattn_block_mask *bm = (clattn_block_mask *)&bm;
    ck_assert(clattn_block_mask_create(ctx, NULL, &bm) == CLATTN_ERROR_NULL_ARGUMENT && bm == NULL);
    bd.q_len = 0, bd.kv_len = 8, bd.mods = causal;
    ck_assert(clattn_block_mask_create(ctx, &bd, &bm) == CLATTN_ERROR_ZERO_SIZE && bm == NULL);
    bd.q_len = 8, bd.mods = scores_only;
    ck_assert(clattn_block_mask_create(ctx, &bd, &bm) == CLATTN_ERROR_INVALID_VALUE);
    ck_assert(strstr(clattn_last_error(ctx), "no mask_mod") != NULL);
    bd.mods = doc, bd.q_len = bd.kv_len = 200; /* doc holds 8 positions (and a guard of 64) */
    ck_assert(clattn_block_mask_create(ctx, &bd, &bm) == CLATTN_ERROR_BUFFER_TOO_SMALL);
    bd.mods = NULL;
    ck_assert(clattn_block_mask_create(ctx, &bd, &bm) == CLATTN_ERROR_NULL_ARGUMENT);
    const size_t starts[3] = {0, 1, 2}, bad_blocks[2] = {0, 5}, blocks[2] = {0, 1};
    bd.q_len = bd.kv_len = 8, bd.block_q = bd.block_k = 4;
    bd.layout_starts = starts, bd.layout_blocks = bad_blocks;
    ck_assert(clattn_block_mask_create(ctx, &bd, &bm) == CLATTN_ERROR_INVALID_VALUE);
    ck_assert(strstr(clattn_last_error(ctx), "layout_blocks[1]") != NULL);
    bd.layout_blocks = blocks, bd.batch = 2;
    ck_assert(clattn_block_mask_create(ctx, &bd, &bm) == CLATTN_ERROR_INVALID_VALUE);
    bd.batch = 0;
    clattn_block_mask *layout = NULL;
    TU_ASSERT_OK(clattn_block_mask_create(ctx, &bd, &layout), ctx, "a layout");
    bd.layout_starts = NULL, bd.layout_blocks = NULL, bd.mods = causal, bd.batch = 2;
    clattn_block_mask *from_causal = NULL;
    TU_ASSERT_OK(clattn_block_mask_create(ctx, &bd, &from_causal), ctx, "from causal.cl");

    /* Calls: other mods, a layout with a mask_mod, another batch count, positions past the grid. */
    float q[2 * 8 * 4], kv[2 * 8 * 4];
    tu_fill_uniform(q, 64, 1.0f, 1);
    tu_fill_uniform(kv, 64, 1.0f, 2);
    float *out = tu_host_alloc(128, NULL);
    struct {
        const clattn_mods *mods;
        const clattn_block_mask *mask;
        size_t B, L;
        clattn_status want;
        const char *needle;
    } calls[] = {{doc, from_causal, 2, 8, CLATTN_ERROR_INVALID_VALUE, "other mods"},
                 {causal, layout, 2, 8, CLATTN_ERROR_INVALID_VALUE, "layout"},
                 {causal, from_causal, 3, 8, CLATTN_ERROR_SHAPE_MISMATCH, "batches"},
                 {NULL, layout, 1, 16, CLATTN_ERROR_SHAPE_MISMATCH, "covers"}};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        clattn_sdpa_desc d = tu_sdpa_desc(calls[i].B, 1, calls[i].L, calls[i].L > 8 ? 16 : 8, 4, 4);
        d.mods = calls[i].mods;
        d.block_mask = calls[i].mask;
        float *wide = calls[i].L > 8 || calls[i].B > 2 ? tu_falloc(16 * 4 * calls[i].B) : NULL;
        const clattn_status st = clattn_sdpa_host(ctx, &d, wide ? wide : q, wide ? wide : kv, wide ? wide : kv, NULL,
                                                  out, NULL, NULL);
        ck_assert_msg(st == calls[i].want && strstr(clattn_last_error(ctx), calls[i].needle), "%s: call %zu: %s (%s)",
                      tu_label(), i, clattn_status_string(st), clattn_last_error(ctx));
        ck_assert_msg(tu_host_all_sentinel(out, 32 * calls[i].B), "%s: call %zu wrote its output", tu_label(), i);
    }
    size_t counts[3];
    ck_assert(clattn_block_mask_counts(NULL, counts) == CLATTN_ERROR_NULL_ARGUMENT);
    clattn_block_mask_free(NULL);
    clattn_block_mask_free(layout);
    clattn_block_mask_free(from_causal);
    clattn_mods_free(causal);
    clattn_mods_free(scores_only);
    clattn_mods_free(doc);
}
END_TEST

/* clattn_mods_create's refusals: status, a message naming the problem, *out NULL. */
static void expect_refused(clattn_context *ctx, const clattn_mods_desc *md, clattn_status want, const char *needle)
{
    clattn_mods *mods = (clattn_mods *)&mods; /* not NULL before: a refusal must clear it */
    const clattn_status st = clattn_mods_create(ctx, md, &mods);
    ck_assert_msg(st == want, "%s: %s, expected %s (%s)", tu_label(), clattn_status_string(st),
                  clattn_status_string(want), clattn_last_error(ctx));
    ck_assert_msg(mods == NULL, "%s: *out is not NULL after a refusal", tu_label());
    ck_assert_msg(strstr(clattn_last_error(ctx), needle) != NULL, "%s: \"%s\" lacks \"%s\"", tu_label(),
                  clattn_last_error(ctx), needle);
}

START_TEST(test_refusals)
{
    const size_t dev = (size_t)_i;
    clattn_context *ctx = tu_ctx[dev];
    float zeros[64] = {0};
    cl_mem small = tu_dev_alloc_exact(ctx, 4, zeros), fine = tu_dev_alloc_exact(ctx, 64, zeros);
    clattn_mods_desc md = CLATTN_MODS_DESC_INIT;

    tu_set_label("a source that does not compile, on %s", tu_dev_spec[dev]);
    md.source = "bool mask_mod(int b, int h, long q, long k)\n{\n    return k <= q + undeclared;\n}\n";
    expect_refused(ctx, &md, CLATTN_ERROR_BUILD_FAILED, "does not compile");
    /* Line 3 of the source, where the compiler honours #line (PoCL and rusticl do; oclgrind names every
     * line of the whole program "input.cl"). */
    const char *log = clattn_build_log(ctx);
    ck_assert_msg(strstr(log, "mods:3:") != NULL || (strstr(log, "input.cl:") && strstr(log, "undeclared")),
                  "%s: the build log does not name line 3 of the source: %s", tu_label(), log);

    tu_set_label("neither function, on %s", tu_dev_spec[dev]);
    md.source = "// score_mod(...) only in a comment\nfloat helper(float x) { return x; }\n";
    expect_refused(ctx, &md, CLATTN_ERROR_INVALID_VALUE, "neither score_mod nor mask_mod");

    tu_set_label("a missing auxiliary tensor, on %s", tu_dev_spec[dev]);
    md.source = "bool mask_mod(int b, int h, long q, long k, __global const int *doc) { return doc[q] == doc[k]; }\n";
    expect_refused(ctx, &md, CLATTN_ERROR_BUILD_FAILED, "does not compile");

    tu_set_label("an auxiliary tensor of the wrong type, on %s", tu_dev_spec[dev]);
    clattn_mod_aux aux = {"doc", CLATTN_AUX_FLOAT, fine, CLATTN_AUX_BY_POSITION, 0};
    md.aux = &aux;
    md.aux_count = 1;
    expect_refused(ctx, &md, CLATTN_ERROR_BUILD_FAILED, "does not compile");

    tu_set_label("a wrong signature, on %s", tu_dev_spec[dev]);
    md.aux_count = 0;
    md.source = "float score_mod(float s, int b, int h) { return s; }\n";
    expect_refused(ctx, &md, CLATTN_ERROR_BUILD_FAILED, "does not compile");

    tu_set_label("bad auxiliary entries, on %s", tu_dev_spec[dev]);
    md.source = "bool mask_mod(int b, int h, long q, long k, __global const int *doc) { return doc[q] == doc[k]; }\n";
    md.aux_count = 1;
    aux = (clattn_mod_aux){"not a name", CLATTN_AUX_INT, fine, CLATTN_AUX_BY_POSITION, 0};
    expect_refused(ctx, &md, CLATTN_ERROR_INVALID_VALUE, "desc.aux[0].name");
    aux = (clattn_mod_aux){"doc", (clattn_aux_type)99, fine, CLATTN_AUX_BY_POSITION, 0};
    expect_refused(ctx, &md, CLATTN_ERROR_INVALID_VALUE, "unknown type");
    aux = (clattn_mod_aux){"doc", CLATTN_AUX_INT, NULL, CLATTN_AUX_BY_POSITION, 0};
    expect_refused(ctx, &md, CLATTN_ERROR_NULL_ARGUMENT, "desc.aux[0].buffer");
    aux = (clattn_mod_aux){"doc", CLATTN_AUX_INT, fine, CLATTN_AUX_BY_LENGTH, 0};
    expect_refused(ctx, &md, CLATTN_ERROR_INVALID_VALUE, "length 0");
    aux = (clattn_mod_aux){"doc", CLATTN_AUX_INT, small, CLATTN_AUX_BY_LENGTH, 5};
    expect_refused(ctx, &md, CLATTN_ERROR_BUFFER_TOO_SMALL, "desc.aux[0]");
    md.aux_count = CLATTN_MODS_MAX_AUX + 1;
    expect_refused(ctx, &md, CLATTN_ERROR_INVALID_VALUE, "at most");

    tu_set_label("bad defines, on %s", tu_dev_spec[dev]);
    md.aux_count = 0;
    md.source = "bool mask_mod(int b, int h, long q, long k) { return k <= q + W; }\n";
    const char *bad_define[] = {"1W=3"};
    md.defines = bad_define;
    md.define_count = 1;
    expect_refused(ctx, &md, CLATTN_ERROR_INVALID_VALUE, "desc.defines[0]");
    /* A value ending in a backslash would splice the generated source's next line into the macro. */
    const char *spliced[] = {"W=3 \\", "W=3\\  "};
    for (int i = 0; i < 2; i++) {
        md.defines = spliced + i;
        expect_refused(ctx, &md, CLATTN_ERROR_INVALID_VALUE, "backslash");
    }
    md.define_count = 0;
    expect_refused(ctx, &md, CLATTN_ERROR_BUILD_FAILED, "does not compile"); /* W undefined */

    tu_set_label("NULL arguments, on %s", tu_dev_spec[dev]);
    clattn_mods *mods = NULL;
    ck_assert(clattn_mods_create(ctx, NULL, &mods) == CLATTN_ERROR_NULL_ARGUMENT && mods == NULL);
    ck_assert(clattn_mods_create(NULL, &md, &mods) == CLATTN_ERROR_NULL_ARGUMENT);
    md.source = NULL;
    expect_refused(ctx, &md, CLATTN_ERROR_NULL_ARGUMENT, "desc.source");
    clattn_mods_free(NULL);

    /* A tensor too short for a call: refused at the call, its output untouched. */
    tu_set_label("an auxiliary tensor shorter than the call's positions, on %s", tu_dev_spec[dev]);
    md.source = "bool mask_mod(int b, int h, long q, long k, __global const int *doc) { return doc[q] == doc[k]; }\n";
    aux = (clattn_mod_aux){"doc", CLATTN_AUX_INT, small, CLATTN_AUX_BY_POSITION, 0};
    md.aux_count = 1;
    TU_ASSERT_OK(clattn_mods_create(ctx, &md, &mods), ctx, "clattn_mods_create");
    clattn_sdpa_desc d = tu_sdpa_desc(1, 1, 3, 5, 4, 4);
    d.mods = mods;
    float q[12], k[20], v[20];
    tu_fill_uniform(q, 12, 1.0f, 1);
    tu_fill_uniform(k, 20, 1.0f, 2);
    tu_fill_uniform(v, 20, 1.0f, 3);
    float *out = tu_host_alloc(12, NULL);
    clattn_status st = clattn_sdpa_host(ctx, &d, q, k, v, NULL, out, NULL, NULL);
    ck_assert_msg(st == CLATTN_ERROR_BUFFER_TOO_SMALL && strstr(clattn_last_error(ctx), "aux \"doc\""),
                  "%s: %s (%s)", tu_label(), clattn_status_string(st), clattn_last_error(ctx));
    ck_assert_msg(tu_host_all_sentinel(out, 12), "%s: a refused call wrote its output", tu_label());
    /* Negative query positions cannot index it. */
    long long offsets[1] = {-2};
    clattn_masks m = CLATTN_MASKS_INIT;
    m.query_offsets = offsets;
    d = tu_sdpa_desc(1, 1, 3, 4, 4, 4);
    d.masks = &m;
    d.mods = mods;
    st = clattn_sdpa_host(ctx, &d, q, k, v, NULL, out, NULL, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(ctx), "position -2"), "%s: %s (%s)",
                  tu_label(), clattn_status_string(st), clattn_last_error(ctx));
    ck_assert_msg(tu_host_all_sentinel(out, 12), "%s: a refused call wrote its output", tu_label());

    /* Mods of another context. */
    tu_set_label("mods of another context, on %s", tu_dev_spec[dev]);
    clattn_context *other = tu_context_new(tu_dev_spec[dev]);
    d = tu_sdpa_desc(1, 1, 3, 4, 4, 4);
    d.mods = mods;
    st = clattn_sdpa_host(other, &d, q, k, v, NULL, out, NULL, NULL);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && strstr(clattn_last_error(other), "another clattn context"),
                  "%s: %s (%s)", tu_label(), clattn_status_string(st), clattn_last_error(other));
    clattn_context_free(other);
    clattn_mods_free(mods);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("mods");
    tu_add_loop(s, "examples", test_examples, N_EXAMPLES * N_PATHS * tu_ndev);
    tu_add_loop(s, "compose", test_compose, N_PATHS * tu_ndev);
    tu_add_loop(s, "masked_scores", test_masked_scores, tu_ndev);
    tu_add_loop(s, "ragged", test_ragged, 2 * tu_ndev);
    tu_add_loop(s, "paged", test_paged, 2 * tu_ndev);
    tu_add_loop(s, "mha", test_mha, tu_ndev);
    tu_add_loop(s, "block_masks", test_block_masks, N_PATHS * tu_ndev);
    tu_add_loop(s, "block_mask_refusals", test_block_mask_refusals, tu_ndev);
    tu_add_loop(s, "storage_types", test_storage_types, 3 * 2 * tu_ndev);
    tu_add_loop(s, "refusals", test_refusals, tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
