/* --mods, --aux and --define: the source, auxiliary tensors and constants of a clattn_mods. */
#include "cli_mods.h"

#include <stdlib.h>
#include <string.h>

int cli_mods_take(const char *command, int *argc, char **argv, int first, cli_mods *m)
{
    int kept = first;
    for (int i = first; i < *argc; i++) {
        const char *arg = argv[i];
        const bool aux = strncmp(arg, "--aux", 5) == 0 && (arg[5] == '\0' || arg[5] == '=');
        const bool define = strncmp(arg, "--define", 8) == 0 && (arg[8] == '\0' || arg[8] == '=');
        if (!aux && !define) {
            argv[kept++] = argv[i];
            continue;
        }
        const char *eq = strchr(arg, '=');
        const char *value = eq ? eq + 1 : i + 1 < *argc ? argv[++i] : NULL;
        if (!value)
            return cli_fail(CLI_USAGE_ERROR, command, "option '%s' needs a value", arg);
        size_t *count = aux ? &m->naux : &m->ndefines;
        const size_t most = aux ? CLATTN_MODS_MAX_AUX : CLI_MODS_MAX_DEFINES;
        if (*count == most)
            return cli_fail(CLI_USAGE_ERROR, command, "option '--%s' is given more than %zu times",
                            aux ? "aux" : "define", most);
        (aux ? m->aux_text : m->defines)[(*count)++] = value;
    }
    *argc = kept;
    return CLI_OK;
}

int cli_mods_check(const char *command, const cli_mods *m)
{
    if (!m->file && (m->naux || m->ndefines || m->block_mask))
        return cli_fail(CLI_USAGE_ERROR, command, "--%s needs --mods FILE.cl (the functions it is for)",
                        m->naux ? "aux" : m->ndefines ? "define" : "block-mask");
    if (m->block_mask && m->block_sparse)
        return cli_fail(CLI_USAGE_ERROR, command, "--block-mask and --block-sparse: give one");
    if (m->block_size && !m->block_mask && !m->block_sparse)
        return cli_fail(CLI_USAGE_ERROR, command, "--block-size needs --block-mask or --block-sparse");
    return CLI_OK;
}

/* --block-size Q[,K]. */
static int parse_block_size(const char *command, const char *text, size_t *q, size_t *k)
{
    *q = *k = 128;
    if (!text)
        return CLI_OK;
    char first[32];
    const char *comma = strchr(text, ',');
    snprintf(first, sizeof first, "%.*s", comma ? (int)(comma - text) : (int)strlen(text), text);
    int rc = cli_parse_size(command, "block-size", first, q);
    if (rc == CLI_OK)
        rc = comma ? cli_parse_size(command, "block-size", comma + 1, k) : (*k = *q, CLI_OK);
    if (rc == CLI_OK && (*q == 0 || *k == 0))
        rc = cli_fail(CLI_USAGE_ERROR, command, "--block-size: blocks hold at least one position and key");
    return rc;
}

int cli_mods_block_mask(const char *command, clattn_context *ctx, cli_mods *m, const clattn_masks *masks, size_t B,
                        size_t H, size_t L, size_t S)
{
    if (!m->block_mask && !m->block_sparse)
        return CLI_OK;
    clattn_block_mask_desc bd = CLATTN_BLOCK_MASK_DESC_INIT;
    int rc = parse_block_size(command, m->block_size, &bd.block_q, &bd.block_k);
    if (rc != CLI_OK)
        return rc;
    size_t *starts = NULL, *blocks = NULL;
    npy_array layout = {0};
    if (m->block_mask) { /* the grid: every query position of the call (they start at 0 or later) */
        long long last = (long long)L;
        for (size_t b = 0; b < B; b++) {
            const long long offset = masks->query_offsets ? masks->query_offsets[b]
                                     : masks->causal == CLATTN_CAUSAL_BOTTOM_RIGHT ? (long long)S - (long long)L : 0;
            if (offset + (long long)L > last)
                last = offset + (long long)L;
        }
        bd.batch = B, bd.heads = H, bd.q_len = (size_t)last, bd.kv_len = S;
        bd.mods = m->mods;
    } else {
        char err[256];
        long long *v = NULL;
        if (npy_load(m->block_sparse, &layout, err, sizeof err) != 0 || layout.ndim != 2 ||
            npy_to_int64(&layout, &v, err, sizeof err) != 0) {
            rc = cli_fail(CLI_USAGE_ERROR, command, "--block-sparse %s: %s", m->block_sparse,
                          layout.ndim != 2 && !err[0] ? "not a 2-D array" : err);
            npy_free(&layout);
            return rc;
        }
        const size_t qb = layout.shape[0], kb = layout.shape[1];
        starts = calloc(qb + 1, sizeof *starts);
        blocks = calloc(qb * kb + 1, sizeof *blocks);
        for (size_t r = 0; starts && blocks && r < qb; r++) {
            starts[r + 1] = starts[r];
            for (size_t c = 0; c < kb; c++)
                if (v[r * kb + c])
                    blocks[starts[r + 1]++] = c;
        }
        free(v);
        bd.q_len = qb * bd.block_q, bd.kv_len = kb * bd.block_k;
        bd.layout_starts = starts, bd.layout_blocks = blocks;
        npy_free(&layout);
        if (!starts || !blocks) {
            free(starts);
            free(blocks);
            return cli_fail(CLI_RUNTIME_ERROR, command, "out of host memory for the layout");
        }
    }
    clattn_status st = clattn_block_mask_create(ctx, &bd, &m->mask);
    free(starts);
    free(blocks);
    if (st != CLATTN_SUCCESS) {
        cli_fail_status(command, ctx, st, m->block_mask ? "clattn_block_mask_create (--block-mask)"
                                                         : "clattn_block_mask_create (--block-sparse)");
        return CLI_USAGE_ERROR;
    }
    return CLI_OK;
}

/* An npy element type as an auxiliary tensor type; float64 is narrowed to float32 first. */
static bool aux_type_of(npy_dtype t, clattn_aux_type *out)
{
    switch (t) {
    case NPY_F4: case NPY_F8: *out = CLATTN_AUX_FLOAT; return true;
    case NPY_F2: *out = CLATTN_AUX_HALF; return true;
    case NPY_I4: *out = CLATTN_AUX_INT; return true;
    case NPY_I8: *out = CLATTN_AUX_LONG; return true;
    case NPY_B1: *out = CLATTN_AUX_UCHAR; return true;
    case NPY_U2: *out = CLATTN_AUX_USHORT; return true;
    }
    return false;
}

/* "NAME=FILE.npy[:INDEX]" into the aux entry i (name, index; the file loaded into m->arrays[i]). */
static int load_aux(const char *command, cli_mods *m, size_t i, clattn_mod_aux *a)
{
    const char *text = m->aux_text[i], *eq = strchr(text, '=');
    if (!eq || eq == text || (size_t)(eq - text) >= sizeof m->names[i])
        return cli_fail(CLI_USAGE_ERROR, command, "--aux '%s' is not NAME=FILE.npy[:INDEX]", text);
    memcpy(m->names[i], text, (size_t)(eq - text));
    m->names[i][eq - text] = '\0';
    static const struct {
        const char *word;
        clattn_aux_index index;
    } indexes[] = {{"query", CLATTN_AUX_BY_QUERY}, {"key", CLATTN_AUX_BY_KEY}, {"position", CLATTN_AUX_BY_POSITION},
                   {"head", CLATTN_AUX_BY_HEAD},   {"batch", CLATTN_AUX_BY_BATCH}};
    char path[4096];
    snprintf(path, sizeof path, "%s", eq + 1);
    a->index = CLATTN_AUX_BY_LENGTH;
    char *colon = strrchr(path, ':');
    for (size_t k = 0; colon && k < sizeof indexes / sizeof indexes[0]; k++)
        if (strcmp(colon + 1, indexes[k].word) == 0) {
            a->index = indexes[k].index;
            *colon = '\0';
        }
    char err[256];
    npy_array *arr = &m->arrays[i];
    if (npy_load(path, arr, err, sizeof err) != 0)
        return cli_fail(CLI_USAGE_ERROR, command, "--aux %s: %s", m->names[i], err);
    if (!aux_type_of(arr->dtype, &a->type) || arr->count == 0)
        return cli_fail(CLI_USAGE_ERROR, command, "--aux %s: %s holds %zu elements of %s; an auxiliary tensor is "
                        "a non-empty array of f4, f8, f2, i4, i8, b1 or u2", m->names[i], path, arr->count,
                        npy_dtype_name(arr->dtype));
    if (arr->dtype == NPY_F8) { /* narrowed in place: float32 is what the functions read */
        float *f;
        if (npy_to_float(arr, &f, err, sizeof err) != 0)
            return cli_fail(CLI_USAGE_ERROR, command, "--aux %s: %s", m->names[i], err);
        free(arr->data);
        arr->data = f;
        arr->dtype = NPY_F4;
    }
    a->name = m->names[i];
    a->length = a->index == CLATTN_AUX_BY_LENGTH ? arr->count : 0;
    return CLI_OK;
}

int cli_mods_make(const char *command, clattn_context *ctx, cli_mods *m)
{
    if (!m->file)
        return CLI_OK;
    FILE *f = fopen(m->file, "rb");
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (m->source = malloc((size_t)n + 1)) && fread(m->source, 1, (size_t)n, f) == (size_t)n)
        m->source[n] = '\0';
    else
        n = -1;
    if (f)
        fclose(f);
    if (n < 0)
        return cli_fail(CLI_USAGE_ERROR, command, "--mods: cannot read %s", m->file);
    clattn_mod_aux aux[CLATTN_MODS_MAX_AUX];
    for (size_t i = 0; i < m->naux; i++) {
        int rc = load_aux(command, m, i, &aux[i]);
        if (rc != CLI_OK)
            return rc;
        const size_t bytes = m->arrays[i].count * npy_dtype_size(m->arrays[i].dtype);
        cl_int err;
        m->buffers[i] = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes,
                                       m->arrays[i].data, &err);
        if (err != CL_SUCCESS)
            return cli_fail(CLI_RUNTIME_ERROR, command, "--aux %s: clCreateBuffer of %zu bytes failed (%d)",
                            m->names[i], bytes, (int)err);
        aux[i].buffer = m->buffers[i];
    }
    clattn_mods_desc md = CLATTN_MODS_DESC_INIT;
    md.source = m->source;
    md.defines = m->defines;
    md.define_count = m->ndefines;
    md.aux = aux;
    md.aux_count = m->naux;
    clattn_status st = clattn_mods_create(ctx, &md, &m->mods);
    if (st != CLATTN_SUCCESS) {
        cli_fail_status(command, ctx, st, "clattn_mods_create (--mods, --aux, --define)");
        return CLI_USAGE_ERROR; /* the user's source or flags */
    }
    return CLI_OK;
}

void cli_mods_free(cli_mods *m)
{
    clattn_block_mask_free(m->mask);
    clattn_mods_free(m->mods);
    for (size_t i = 0; i < CLATTN_MODS_MAX_AUX; i++) {
        if (m->buffers[i])
            clReleaseMemObject(m->buffers[i]);
        npy_free(&m->arrays[i]);
    }
    free(m->source);
}
