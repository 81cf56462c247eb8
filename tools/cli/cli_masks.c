/* Loads the mask flags of `clattn sdpa` and `clattn mha` into a clattn_masks. */
#include "cli_masks.h"
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
    if (a->dtype != NPY_F4 && a->dtype != NPY_F8)
        return cli_fail(CLI_USAGE_ERROR, command, "%s: a mask must be float ('<f4', '<f8') or boolean ('|b1')", path);
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
    for (size_t d = 0; d < 4; d++) {
        if (shape[d] != full[d] && shape[d] != 1) {
            rc = cli_fail(CLI_USAGE_ERROR, command,
                          "%s: mask shape does not broadcast to (B=%zu, H=%zu, L=%zu, S=%zu): dimension %zu is %zu",
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
    if (shape[0] == 1 && shape[1] == 1 && shape[2] == L && shape[3] == S) {
        m->mask = values; /* already (L,S): no copy */
        goto done;
    }
    /* Every product checked (mats, L, S ≥ 1): a crafted shape must not wrap the expanded mask's size. */
    if (L > SIZE_MAX / mats || S > SIZE_MAX / sizeof *m->mask / (mats * L)) {
        free(values);
        rc = cli_fail(CLI_USAGE_ERROR, command, "%s: the mask expanded to (%zu, %zu, %zu) is too large for memory",
                      m->mask_path, mats, L, S);
        goto done;
    }
    const size_t count = mats * L * S;
    m->mask = malloc(count * sizeof *m->mask);
    if (!m->mask) {
        free(values);
        rc = cli_fail(CLI_RUNTIME_ERROR, command, "out of memory expanding the mask");
        goto done;
    }
    for (size_t b = 0; b < (per_head ? B : 1); b++)
        for (size_t h = 0; h < (per_head ? H : 1); h++)
            for (size_t i = 0; i < L; i++)
                for (size_t j = 0; j < S; j++) {
                    size_t src = (((shape[0] > 1 ? b : 0) * shape[1] + (shape[1] > 1 ? h : 0)) * shape[2] +
                                  (shape[2] > 1 ? i : 0)) * shape[3] + (shape[3] > 1 ? j : 0);
                    m->mask[((b * (per_head ? H : 1) + h) * L + i) * S + j] = values[src];
                }
    free(values);
done:
    npy_free(&a);
    return rc;
}

static int load_lengths(const char *command, cli_masks *m, size_t B, size_t S)
{
    npy_array a;
    char err[512];
    if (npy_load(m->lengths_path, &a, err, sizeof err) != 0)
        return cli_fail(CLI_USAGE_ERROR, command, "%s: %s", m->lengths_path, err);
    long long *values = NULL;
    int rc = CLI_OK;
    if (a.ndim != 1 || a.shape[0] != B) {
        rc = cli_fail(CLI_USAGE_ERROR, command, "%s: key lengths must have shape (%zu,), one per batch",
                      m->lengths_path, B);
    } else if (npy_to_int64(&a, &values, err, sizeof err) != 0) {
        rc = cli_fail(CLI_USAGE_ERROR, command, "%s: %s", m->lengths_path, err);
    } else if (!(m->lengths = malloc(B * sizeof *m->lengths))) {
        rc = cli_fail(CLI_RUNTIME_ERROR, command, "out of memory");
    } else {
        for (size_t b = 0; b < B && rc == CLI_OK; b++) {
            if (values[b] < 0 || (unsigned long long)values[b] > S)
                rc = cli_fail(CLI_USAGE_ERROR, command, "%s: key length %lld of batch %zu is outside 0..%zu",
                              m->lengths_path, values[b], b, S);
            else
                m->lengths[b] = (size_t)values[b];
        }
        m->masks.key_lengths = m->lengths;
    }
    free(values);
    npy_free(&a);
    return rc;
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
    return rc;
}

void cli_masks_free(cli_masks *m)
{
    free(m->mask);
    free(m->lengths);
    m->mask = NULL;
    m->lengths = NULL;
}
