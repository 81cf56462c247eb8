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
 * and in test_mods_layers.c (the same program; mods_test.h holds what the two share) layers, block
 * masks and refusals.
 */
#include "mods_test.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int ref_causal(int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h, (void)u;
    return k <= q;
}
int ref_window(int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)h;
    return k <= q && q - k <= ((const mod_data *)u)->window;
}
int ref_document(int b, int h, long long q, long long k, const void *u)
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
const char *const path_names[] = {"fused", "staged", "decode"};

char *read_example(const char *file)
{
    const char *dir = getenv("CLATTN_MODS_DIR");
    ck_assert_msg(dir != NULL, "CLATTN_MODS_DIR is not set (tests/meson.build sets it to tools/mods)");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *text = tu_read_file(path, NULL);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    return tu_track(text);
}


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

void add_aux(clattn_context *ctx, aux_set *a, enum aux_kind kind, size_t heads, size_t positions)
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

clattn_mods *make_mods(clattn_context *ctx, const char *source, const char *const *defines, size_t ndefines,
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

const call_shape shapes[N_PATHS] = {
    {2, 4, 2, 37, 37, 24, 16}, {2, 4, 2, 37, 37, 24, 16}, {2, 4, 2, 3, 53, 24, 16}};

/* A call of shape c on `path`, its query rows at the end of the keys (positions S − L + i, through
 * query offsets: m and offsets, of at least c->B entries, are the caller's). */
clattn_sdpa_desc shape_desc(const call_shape *c, size_t path, clattn_masks *m, long long *offsets)
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
void run(clattn_context *ctx, const clattn_sdpa_desc *d, const float *q, const float *k, const float *v,
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

static Suite *make_suite(void)
{
    Suite *s = suite_create("mods");
    tu_add_loop(s, "examples", test_examples, N_EXAMPLES * N_PATHS * tu_ndev);
    tu_add_loop(s, "compose", test_compose, N_PATHS * tu_ndev);
    tu_add_loop(s, "masked_scores", test_masked_scores, tu_ndev);
    tu_add_loop(s, "ragged", test_ragged, 2 * tu_ndev);
    tu_add_loop(s, "paged", test_paged, 2 * tu_ndev);
    tu_add_loop(s, "storage_types", test_storage_types, 3 * 2 * tu_ndev);
    mods_add_layer_cases(s);
    return s;
}

int main(void) { return tu_main(make_suite); }
