/* Loads the mask flags of `clattn sdpa` and `clattn mha` into a clattn_masks, and their variant flags
 * (--kv-heads, --softcap, --sinks, --alibi). */
#include "cli_masks.h"

#include "call_options.h" /* the layer's options through SDPA's */
#include "npy.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Mask values as additive floats: a boolean True ("may attend") adds 0, False adds -inf. */
static int mask_values(const char *command, const char *path, const npy_array *a, float **out)
{
    char err[512];
    if (a->dtype == NPY_B1) {
        const unsigned char *b = a->data;
        float *f = malloc((a->count ? a->count : 1) * sizeof *f);
        if (!f)
            return cli_fail(CLI_RUNTIME_ERROR, command, "%s: out of memory reading the mask", path);
        for (size_t i = 0; i < a->count; i++)
            f[i] = b[i] ? 0.0f : -INFINITY;
        *out = f;
        return CLI_OK;
    }
    /* A half mask widens exactly; it then travels as float32 like the others. */
    if (a->dtype != NPY_F4 && a->dtype != NPY_F8 && a->dtype != NPY_F2)
        return cli_fail(CLI_USAGE_ERROR, command, "%s: a mask must be float ('<f4', '<f8', '<f2') or boolean ('|b1')",
                        path);
    if (npy_to_float(a, out, err, sizeof err) != 0)
        return cli_fail(CLI_USAGE_ERROR, command, "%s: %s", path, err);
    return CLI_OK;
}

/* Broadcasts a mask of rank ≤ 4 against (B,H,L,S), NumPy style (aligned right, 1 stretches). */
static int load_mask(const char *command, cli_masks *m, size_t B, size_t H, size_t L, size_t S)
{
    npy_array a;
    char err[512];
    if (npy_load(m->mask_path, &a, err, sizeof err) != 0)
        return cli_fail(CLI_USAGE_ERROR, command, "%s: %s", m->mask_path, err);
    const size_t full[4] = {B, H, L, S};
    size_t shape[4] = {1, 1, 1, 1};
    int rc = CLI_OK;
    if (a.ndim < 2 || a.ndim > 4) {
        rc = cli_fail(CLI_USAGE_ERROR, command, "%s: a mask needs 2 to 4 dimensions, not %zu", m->mask_path, a.ndim);
        goto done;
    }
    for (size_t d = 0; d < a.ndim; d++)
        shape[4 - a.ndim + d] = a.shape[d];
    /* The last dimension may also be narrower than S, as ONNX's Attention allows: the keys past it are
     * masked (the library's masks.mask_kv_len). A 1 there broadcasts, as NumPy and PyTorch read it. */
    const size_t cols = shape[3] == 1 ? S : shape[3];
    for (size_t d = 0; d < 4; d++) {
        if (shape[d] != full[d] && shape[d] != 1 && !(d == 3 && shape[d] < S)) {
            rc = cli_fail(CLI_USAGE_ERROR, command,
                          d == 3 ? "%s: mask shape does not broadcast to (B=%zu, H=%zu, L=%zu, S=%zu): dimension %zu "
                                   "is %zu, more than the S keys"
                                 : "%s: mask shape does not broadcast to (B=%zu, H=%zu, L=%zu, S=%zu): dimension %zu "
                                   "is %zu",
                          m->mask_path, B, H, L, S, d, shape[d]);
            goto done;
        }
    }
    float *values = NULL;
    if ((rc = mask_values(command, m->mask_path, &a, &values)) != CLI_OK)
        goto done;
    const bool per_head = shape[0] != 1 || shape[1] != 1;
    const size_t mats = per_head ? B * H : 1;
    m->masks.additive = per_head ? CLATTN_MASK_B_H_L_S : CLATTN_MASK_L_S;
    m->masks.mask_kv_len = cols < S ? cols : 0;
    m->mask_cols = cols;
    if (shape[0] == 1 && shape[1] == 1 && shape[2] == L && shape[3] == cols) {
        m->mask = values; /* already (L,S), or (L,cols): no copy */
        goto done;
    }
    /* Every product checked (mats, L, cols ≥ 1): a crafted shape must not wrap the expanded mask's size. */
    if (L > SIZE_MAX / mats || cols > SIZE_MAX / sizeof *m->mask / (mats * L)) {
        free(values);
        rc = cli_fail(CLI_USAGE_ERROR, command, "%s: the mask expanded to (%zu, %zu, %zu) is too large for memory",
                      m->mask_path, mats, L, cols);
        goto done;
    }
    const size_t count = mats * L * cols;
    m->mask = malloc(count * sizeof *m->mask);
    if (!m->mask) {
        free(values);
        rc = cli_fail(CLI_RUNTIME_ERROR, command, "out of memory expanding the mask");
        goto done;
    }
    for (size_t b = 0; b < (per_head ? B : 1); b++)
        for (size_t h = 0; h < (per_head ? H : 1); h++)
            for (size_t i = 0; i < L; i++)
                for (size_t j = 0; j < cols; j++) {
                    size_t src = (((shape[0] > 1 ? b : 0) * shape[1] + (shape[1] > 1 ? h : 0)) * shape[2] +
                                  (shape[2] > 1 ? i : 0)) * shape[3] + (shape[3] > 1 ? j : 0);
                    m->mask[((b * (per_head ? H : 1) + h) * L + i) * cols + j] = values[src];
                }
    free(values);
done:
    npy_free(&a);
    return rc;
}

/* An integer array (B,) of --FLAG's file, as numpy writes them ('<i8', also '<i4'), into *values
 * (malloc'd, B entries). */
static int load_batch_integers(const char *command, const char *flag, const char *path, size_t B,
                               long long **values)
{
    npy_array a;
    char err[512];
    if (npy_load(path, &a, err, sizeof err) != 0)
        return cli_fail(CLI_USAGE_ERROR, command, "%s: %s", path, err);
    int rc = CLI_OK;
    if (a.ndim != 1 || a.shape[0] != B)
        rc = cli_fail(CLI_USAGE_ERROR, command, "%s: --%s needs shape (%zu,), one integer per batch", path, flag, B);
    else if (npy_to_int64(&a, values, err, sizeof err) != 0)
        rc = cli_fail(CLI_USAGE_ERROR, command, "%s: %s", path, err);
    npy_free(&a);
    return rc;
}

static int load_lengths(const char *command, cli_masks *m, size_t B, size_t S)
{
    long long *values = NULL;
    int rc = load_batch_integers(command, "key-lengths", m->lengths_path, B, &values);
    if (rc == CLI_OK && !(m->lengths = malloc(B * sizeof *m->lengths)))
        rc = cli_fail(CLI_RUNTIME_ERROR, command, "out of memory");
    for (size_t b = 0; b < B && rc == CLI_OK; b++) {
        if (values[b] < 0 || (unsigned long long)values[b] > S)
            rc = cli_fail(CLI_USAGE_ERROR, command, "%s: key length %lld of batch %zu is outside 0..%zu",
                          m->lengths_path, values[b], b, S);
        else
            m->lengths[b] = (size_t)values[b];
    }
    m->masks.key_lengths = m->lengths;
    free(values);
    return rc;
}

/* --offset N (the same for every batch) or --offsets OFF.npy (one per batch). */
static int load_offsets(const char *command, cli_masks *m, size_t B)
{
    if (m->offset_text && m->offsets_path)
        return cli_fail(CLI_USAGE_ERROR, command, "--offset and --offsets exclude each other");
    int rc;
    if (m->offsets_path) {
        rc = load_batch_integers(command, "offsets", m->offsets_path, B, &m->offsets);
    } else {
        long long offset;
        if ((rc = cli_parse_integer(command, "offset", m->offset_text, &offset)) != CLI_OK)
            return rc;
        if (!(m->offsets = malloc(B * sizeof *m->offsets)))
            return cli_fail(CLI_RUNTIME_ERROR, command, "out of memory");
        for (size_t b = 0; b < B; b++)
            m->offsets[b] = offset;
    }
    m->masks.query_offsets = m->offsets;
    return rc;
}

/* --tree PARENTS.npy: (B, L), or (L,) for every batch; each parent -1 or an earlier query (the library says
 * which is not). */
static int load_tree(const char *command, cli_masks *m, size_t B, size_t L)
{
    npy_array a;
    char err[512];
    if (npy_load(m->tree_path, &a, err, sizeof err) != 0)
        return cli_fail(CLI_USAGE_ERROR, command, "%s: %s", m->tree_path, err);
    long long *values = NULL;
    int rc = CLI_OK;
    const bool shared = a.ndim == 1 && a.shape[0] == L;
    if (!shared && !(a.ndim == 2 && a.shape[0] == B && a.shape[1] == L))
        rc = cli_fail(CLI_USAGE_ERROR, command, "%s: --tree needs shape (%zu,%zu) or (%zu,): a parent per query",
                      m->tree_path, B, L, L);
    else if (npy_to_int64(&a, &values, err, sizeof err) != 0)
        rc = cli_fail(CLI_USAGE_ERROR, command, "%s: %s", m->tree_path, err);
    else if (!(m->tree = malloc(B * L * sizeof *m->tree)))
        rc = cli_fail(CLI_RUNTIME_ERROR, command, "out of memory");
    for (size_t r = 0; rc == CLI_OK && r < B * L; r++) {
        const long long parent = values[shared ? r % L : r];
        if (parent < -1 || parent >= (long long)L)
            rc = cli_fail(CLI_USAGE_ERROR, command, "%s: parent %lld of query %zu is outside -1..%zu", m->tree_path,
                          parent, r % L, L - 1);
        else
            m->tree[r] = (int)parent;
    }
    m->masks.tree_parents = m->tree;
    free(values);
    npy_free(&a);
    return rc;
}

/* --window L,R: two whole numbers, each -1 (unbounded) or more. */
static int parse_window(const char *command, cli_masks *m)
{
    const char *text = m->window_text, *comma = strchr(text, ',');
    char left[32] = "";
    if (comma && (size_t)(comma - text) < sizeof left)
        memcpy(left, text, (size_t)(comma - text));
    if (!comma || !cli_integer(left, &m->window.left) || !cli_integer(comma + 1, &m->window.right) ||
        m->window.left < -1 || m->window.right < -1)
        return cli_fail(CLI_USAGE_ERROR, command,
                        "--window: '%s' is not L,R: two whole numbers, each -1 (unbounded) or more", text);
    m->masks.window = &m->window;
    return CLI_OK;
}
int cli_masks_load(const char *command, cli_masks *m, size_t B, size_t H, size_t L, size_t S)
{
    m->masks = (clattn_masks)CLATTN_MASKS_INIT;
    if (m->causal && m->causal_bottom_right)
        return cli_fail(CLI_USAGE_ERROR, command, "--causal and --causal-bottom-right exclude each other");
    m->masks.causal = m->causal ? CLATTN_CAUSAL_TOP_LEFT
                                : m->causal_bottom_right ? CLATTN_CAUSAL_BOTTOM_RIGHT : CLATTN_CAUSAL_NONE;
    int rc = CLI_OK;
    if (m->mask_path)
        rc = load_mask(command, m, B, H, L, S);
    if (rc == CLI_OK && m->lengths_path)
        rc = load_lengths(command, m, B, S);
    if (rc == CLI_OK && (m->offset_text || m->offsets_path))
        rc = load_offsets(command, m, B);
    if (rc == CLI_OK && m->window_text)
        rc = parse_window(command, m);
    if (rc == CLI_OK && m->tree_path)
        rc = load_tree(command, m, B, L);
    return rc;
}

void cli_masks_free(cli_masks *m)
{
    free(m->mask);
    free(m->lengths);
    free(m->offsets);
    free(m->tree);
    m->mask = NULL;
    m->lengths = NULL;
    m->offsets = NULL;
}

/* ---- variants ---- */

int cli_variants_parse(const char *command, cli_variants *v)
{
    int rc = CLI_OK;
    if (v->kv_heads_text && (rc = cli_parse_size(command, "kv-heads", v->kv_heads_text, &v->kv_heads)) != CLI_OK)
        return rc;
    if (v->softcap_text && (rc = cli_parse_float(command, "softcap", v->softcap_text, &v->softcap)) != CLI_OK)
        return rc;
    if (v->softcap < 0.0f)
        return cli_fail(CLI_USAGE_ERROR, command, "--softcap: '%s' is negative (C >= 0; 0: off)", v->softcap_text);
    if (v->scores_text) {
        static const struct {
            const char *name;
            clattn_weights_output mode;
        } modes[] = {{"qk", CLATTN_WEIGHTS_QK},
                     {"softcapped", CLATTN_WEIGHTS_SOFTCAPPED},
                     {"masked", CLATTN_WEIGHTS_MASKED},
                     {"softmax", CLATTN_WEIGHTS_SOFTMAX}};
        const char *colon = strchr(v->scores_text, ':');
        for (size_t i = 0; colon && i < sizeof modes / sizeof modes[0]; i++)
            if (strlen(modes[i].name) == (size_t)(colon - v->scores_text) &&
                strncmp(v->scores_text, modes[i].name, strlen(modes[i].name)) == 0 && colon[1]) {
                v->scores_mode = modes[i].mode;
                v->scores_path = colon + 1;
                return CLI_OK;
            }
        return cli_fail(CLI_USAGE_ERROR, command,
                        "--scores: '%s' is not MODE:FILE with MODE qk, softcapped, masked or softmax", v->scores_text);
    }
    return CLI_OK;
}

/* Press et al.'s get_slopes: for n a power of two, slope_h = 2^(-8(h+1)/n); otherwise the slopes of
 * the power of two n0 below n, then every other slope of 2·n0 heads, 2^(-8(2k+1)/(2·n0)), for the
 * remaining n - n0 heads. */
static void alibi_slopes(size_t H, float *slopes)
{
    size_t n0 = 1;
    while (n0 * 2 <= H)
        n0 *= 2;
    for (size_t h = 0; h < H; h++)
        slopes[h] = h < n0 ? (float)exp2(-8.0 * (double)(h + 1) / (double)n0)
                           : (float)exp2(-8.0 * (double)(2 * (h - n0) + 1) / (double)(2 * n0));
}

int cli_load_per_head(const char *command, const char *flag, const char *path, size_t H, float **values)
{
    cli_tensor t;
    int rc = cli_load_tensor(command, path, 0, NPY_MAX_DIMS, &t);
    if (rc != CLI_OK)
        return rc;
    if (t.ndim != 1 || t.shape[0] != H) {
        rc = cli_fail(CLI_USAGE_ERROR, command, "%s: --%s needs shape (%zu,), one value per head", path, flag, H);
    } else {
        for (size_t h = 0; h < H && rc == CLI_OK; h++)
            if (!isfinite(t.data[h]))
                rc = cli_fail(CLI_USAGE_ERROR, command, "%s: --%s value %zu is %g, not a finite number", path, flag,
                              h, (double)t.data[h]);
    }
    if (rc == CLI_OK) {
        *values = t.data;
        t.data = NULL;
    }
    cli_tensor_free(&t);
    return rc;
}

int cli_variants_load(const char *command, cli_variants *v, size_t H)
{
    if (v->kv_heads && H % v->kv_heads != 0)
        return cli_fail(CLI_USAGE_ERROR, command, "--kv-heads: %zu does not divide the %zu query heads", v->kv_heads,
                        H);
    int rc = CLI_OK;
    if (v->sinks_path)
        rc = cli_load_per_head(command, "sinks", v->sinks_path, H, &v->sinks);
    if (rc == CLI_OK && v->logit_scale_path)
        rc = cli_load_per_head(command, "logit-scale", v->logit_scale_path, H, &v->logit_scale);
    if (rc != CLI_OK || !v->alibi_text)
        return rc;
    if (strcmp(v->alibi_text, "auto") != 0)
        return cli_load_per_head(command, "alibi", v->alibi_text, H, &v->alibi);
    if (!(v->alibi = malloc(H * sizeof *v->alibi)))
        return cli_fail(CLI_RUNTIME_ERROR, command, "out of memory");
    alibi_slopes(H, v->alibi);
    return CLI_OK;
}

void cli_variants_apply(const cli_variants *v, clattn_sdpa_desc *d)
{
    if (v->softcap_text)
        d->softcap = v->softcap;
    if (v->sinks)
        d->sinks = v->sinks;
    if (v->alibi)
        d->alibi_slopes = v->alibi;
    if (v->logit_scale)
        d->logit_scale = v->logit_scale;
    if (v->scores_path)
        d->weights_output = v->scores_mode;
    if (v->softmax_double)
        d->softmax_precision = CLATTN_SOFTMAX_DOUBLE;
    if (v->reproducible)
        d->arithmetic = CLATTN_ARITHMETIC_REPRODUCIBLE;
}

void cli_variants_apply_mha(const cli_variants *v, clattn_mha_desc *d)
{
    clattn_sdpa_desc s = CLATTN_SDPA_DESC_INIT;
    call_options_mha_to_sdpa(&s, d);
    cli_variants_apply(v, &s);
    call_options_sdpa_to_mha(d, &s);
}

void cli_variants_free(cli_variants *v)
{
    free(v->sinks);
    free(v->alibi);
    free(v->logit_scale);
    v->sinks = NULL;
    v->alibi = NULL;
    v->logit_scale = NULL;
}
