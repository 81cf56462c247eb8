/* `clattn sdpa` and `clattn mha`: attention on tensors read from .npy files. */
#include "cli.h"
#include "cli_masks.h"
#include "cli_mods.h"
#include "cli_prefix.h"
#include "commands.h"
#include "heatmap.h"

#include "formats.def"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Output options shared by both subcommands. */
typedef struct output_opts {
    const char *out, *weights, *heatmap, *tokens, *key_tokens;
} output_opts;

/* Writes the first batch's heads of weights (B,H,L,S) as an SVG heatmap to output i, labelled with
 * --tokens (queries, and keys too when --key-tokens is absent and L = S). */
int write_heatmap(const char *command, cli_outputs *out, size_t i, const float *weights, size_t B, size_t H, size_t L,
                  size_t S, const char *tokens, const char *key_tokens)
{
    size_t nq = 0, nk = 0;
    char **q_labels = tokens ? cli_split_labels(tokens, &nq) : NULL;
    char **k_labels = key_tokens ? cli_split_labels(key_tokens, &nk) : NULL;
    if (!key_tokens && L == S && q_labels) {
        k_labels = q_labels;
        nk = nq;
    }
    int rc = CLI_OK;
    FILE *fp = NULL;
    if ((q_labels && nq != L) || (k_labels && nk != S)) {
        rc = cli_fail(CLI_USAGE_ERROR, command, "--tokens gives %zu labels for %zu queries / %zu for %zu keys",
                      nq, L, nk, S);
    } else if ((rc = cli_outputs_begin(command, out, i, &fp)) == CLI_OK) {
        char title[128], err[512];
        snprintf(title, sizeof title, B > 1 ? "Attention weights (batch 0 of %zu)" : "Attention weights", B);
        heatmap_opts opts = {(const char *const *)q_labels, q_labels ? nq : 0, (const char *const *)k_labels,
                             k_labels ? nk : 0, title};
        if (heatmap_write_svg_to(fp, weights, H, L, S, &opts, err, sizeof err) != 0)
            rc = cli_fail(CLI_USAGE_ERROR, command, "%s: %s", out->path[i], err);
        else
            rc = cli_outputs_end(command, out, i);
    }
    if (k_labels != q_labels)
        cli_free_labels(k_labels, nk);
    cli_free_labels(q_labels, nq);
    return rc;
}

/* The heatmap and the .npy outputs of a run, committed together: every destination checked before
 * anything is written, and a failure leaves nothing behind. */
static int save_outputs(const char *command, const char *const *paths, const void *const *data, const size_t *ndims,
                        const size_t (*shapes)[4], const clattn_dtype *types, size_t n, const output_opts *o,
                        const float *weights, size_t B, size_t H, size_t L, size_t S)
{
    cli_outputs out = {0};
    int rc = CLI_OK;
    size_t heatmap = 0, index[10] = {0};
    if (o->heatmap)
        rc = cli_outputs_add(command, &out, o->heatmap,
                             H > 16 ? "(heatmap of the first 16 heads)" : "(heatmap of the attention weights)", &heatmap);
    for (size_t i = 0; i < n && rc == CLI_OK; i++)
        if (paths[i])
            rc = cli_outputs_add_npy(command, &out, paths[i], ndims[i], shapes[i], types ? types[i] : CLATTN_FLOAT32,
                                     &index[i]);
    if (rc == CLI_OK && o->heatmap)
        rc = write_heatmap(command, &out, heatmap, weights, B, H, L, S, o->tokens, o->key_tokens);
    for (size_t i = 0; i < n && rc == CLI_OK; i++) /* (floats, or a quantised type's bytes) */
        if (paths[i] && types && types[i] > CLATTN_BFLOAT16)
            rc = cli_outputs_write_bytes(command, &out, index[i], data[i], ndims[i], shapes[i]);
        else if (paths[i])
            rc = cli_outputs_write_npy(command, &out, index[i], data[i], ndims[i], shapes[i],
                                       types ? types[i] : CLATTN_FLOAT32);
    if (rc == CLI_OK)
        rc = cli_outputs_commit(command, &out);
    cli_outputs_discard(&out);
    return rc;
}

/* The leading dimensions of an input of rank `rank` followed by `a` and `b` (b = 0: just a). */
static size_t output_shape(size_t rank_lead, const size_t *lead, size_t a, size_t b, size_t *shape)
{
    size_t n = 0;
    for (size_t i = 0; i < rank_lead; i++)
        shape[n++] = lead[i];
    shape[n++] = a;
    if (b)
        shape[n++] = b;
    return n;
}

/* A library call refused its arguments: every value the tool passes comes from the user's flags and
 * files (the tool checks what it can first, naming the flag), so that is a usage error too. */
static int attention_failed(const char *cmd, const clattn_context *ctx, clattn_status st, const char *what)
{
    const int rc = cli_fail_status(cmd, ctx, st, what);
    /* (A buffer too small can only be an --aux array shorter than the call's positions.) */
    return st == CLATTN_ERROR_INVALID_VALUE || st == CLATTN_ERROR_SHAPE_MISMATCH || st == CLATTN_ERROR_INVALID_MASK ||
                   st == CLATTN_ERROR_BUFFER_TOO_SMALL
               ? CLI_USAGE_ERROR
               : rc;
}

/* (A,X,Y,Z) → (A,Y,X,Z), in a new buffer (NULL when memory is short): (B,L,H,D) to (B,H,L,D) and
 * back. The product is that of a tensor already in memory. */
static float *swap_middle(const float *in, size_t A, size_t X, size_t Y, size_t Z)
{
    float *out = malloc(A * X * Y * Z * sizeof *out + 1);
    if (!out)
        return NULL;
    for (size_t a = 0; a < A; a++)
        for (size_t x = 0; x < X; x++)
            for (size_t y = 0; y < Y; y++)
                memcpy(out + ((a * Y + y) * X + x) * Z, in + ((a * X + x) * Y + y) * Z, Z * sizeof *out);
    return out;
}

/* Replaces t's data (B,L,heads·D) with (B,heads,L,D). */
static int heads_first(const char *cmd, cli_tensor *t, size_t heads)
{
    float *moved = swap_middle(t->data, t->shape[0], t->shape[1], heads, t->shape[2] / heads);
    if (!moved)
        return cli_fail(CLI_RUNTIME_ERROR, cmd, "out of host memory");
    free(t->data);
    t->data = moved;
    return CLI_OK;
}

static const char sdpa_help[] =
    "usage: clattn sdpa --q Q.npy --k K.npy --v V.npy --out O.npy [options]\n"
    "\n"
    "Scaled dot-product attention O = softmax(softcap(Q·Kᵀ·scale·logit_scale) + ALiBi + masks)·V, in ONNX\n"
    "Attention's order, with the sinks in the softmax's denominator.\n"
    "Q (B,H,L,D), K (B,N,S,D), V (B,N,S,Dv), where N = H unless --kv-heads says otherwise; 3-D (H,L,D)\n"
    "and 2-D (L,D) arrays are taken as B=1 (and H=1). With --heads H, 3-D arrays are (B,L,H·D) instead,\n"
    "as ONNX and PyTorch layers produce them: Q (B,L,H·D), K (B,S,N·D), V (B,S,N·Dv).\n"
    "Arrays may be float32, float64 or float16 ('<f4', '<f8', '<f2'), or bfloat16 as '<u2' bit patterns\n"
    "with --bf16; float64 is rounded to float32 on load. Each of Q, K and V runs in its file's type\n"
    "(float16 and bfloat16 are stored as such on the device; the arithmetic is float32).\n"
    "Outputs have the inputs' rank (but with --heads: O (B,L,H·Dv), weights (B,H,L,S), lse (B,H,L));\n"
    "O is written in --out-dtype, the present in K's and V's types, dQ, dK and dV in Q's, K's and V's\n"
    "types, the rest as float32.\n"
    "\n"
    "  --out O.npy            output (B,H,L,Dv), or (B,L,H·Dv) with --heads\n"
    "  --weights P.npy        also write the attention weights (B,H,L,S)\n"
    "  --lse LSE.npy          also write the log-sum-exp of each query row (B,H,L)\n"
    "  --past-k PK.npy        a KV cache's earlier keys, K's layout with P rows (ONNX's past_key): the\n"
    "  --past-v PV.npy        keys and values attended over are concat(past, K/V), P + S of them, and\n"
    "                         every mask, --key-lengths and the weights (B,H,L,P+S) count them all\n"
    "  --prefix-k PK.npy      keys and values every batch entry shares before its own K and V (a system\n"
    "  --prefix-v PV.npy      prompt): (N,P,D) and (N,P,Dv), float32; attended over as cascade attention\n"
    "                         (the prefix read once for the whole batch: clattn_sdpa_cascade); with\n"
    "                         --causal-bottom-right (the queries are each entry's last L own rows, which\n"
    "                         see the whole prefix) or no mask; not with --heads, a past, weights, masks,\n"
    "                         variants other than --softcap and --sinks, mods, --grad-out or other types\n"
    "  --present-k PK.npy     write concat(past_k, K) (ONNX's present_key), K's layout with P + S rows\n"
    "  --present-v PV.npy     write concat(past_v, V) (ONNX's present_value)\n"
    "  --grad-out DO.npy      the backward pass: dO, the loss's gradient with respect to O (O's shape),\n"
    "                         read in --out-dtype as the library takes it (another type is rounded to it;\n"
    "                         a value it cannot hold is refused); with any of --dq, --dk, --dv (not with a\n"
    "                         past, --kv-int8 or a quantised --k-dtype/--v-dtype)\n"
    "  --dq DQ.npy            write dQ (Q's shape), --dk DK.npy dK (K's), --dv DV.npy dV (V's)\n"
    "  --bf16                 the input arrays (not masks) are bfloat16 bit patterns ('<u2')\n"
    "  --out-dtype TYPE       O's type: float32 (default), float16 or bfloat16 (written as '<u2')\n"
    "  --kv-int8              quantise K and V to int8 on the device as a cache append does (a scale per\n"
    "                         row: max |x| / 127) and attend over them (not with a past): --k-dtype int8\n"
    "                         --v-dtype int8\n"
    "  --k-dtype NAME         K's (V's) storage format: float32, float16, bfloat16, int8, q8_0, q4_0,\n"
    "  --v-dtype NAME         u8_g32, u8_g64, u8_g128, u4_g32, u4_g64, u4_g128, fp8_e4m3, fp8_e5m2, or\n"
    "                         KIVI's u4_t32, u2_t32 (float files only, no --present-k/-v) (K and V may\n"
    "                         differ; a block format's head size a multiple of its block). A float\n"
    "                         file is rounded to a float format, or quantised on the device as a cache\n"
    "                         append does (int8 and FP8 with a float32 scale per row); a uint8 file ('|u1',\n"
    "                         or '|i1') holds the format's bytes as they lie in memory, (B,N,S,row bytes)\n"
    "                         (3-D (N,S,·), 2-D (S,·); not with --heads), attended over as they are (not\n"
    "                         with a past or --grad-out)\n"
    "  --k-scales KS.npy      float32 row scales (B,N,S) of raw int8 K bytes (required) or FP8 (optional)\n"
    "  --v-scales VS.npy      the same for V\n"
    "  --present-k-scales F   with a quantised K (V), --present-k (--present-v) writes its bytes as the\n"
    "  --present-v-scales F   device holds them, '|u1' (B,N,S,row bytes); these write its row scales,\n"
    "                         float32 (B,N,S) (int8, FP8)\n"
    "  --scale S              scale of Q·Kᵀ (default 1/sqrt(D))\n"
    "  --heads H              3-D inputs are (B,L,H·D): their last dimension holds H heads\n"
    "  --kv-heads N           K and V carry N heads, each read by H/N query heads in order (grouped-query\n"
    "                         attention; 1: multi-query); N divides H\n"
    CLI_VARIANT_HELP CLI_MASK_HELP CLI_MODS_HELP
    "  --heatmap FILE.svg     SVG heatmap of the attention weights (first batch, up to 16 heads)\n"
    "  --tokens a,b,c         query labels for the heatmap (and key labels when L = S)\n"
    "  --key-tokens a,b,c     key labels for the heatmap\n"
    "  --device SPEC          P:D, cpu, gpu, accelerator or part of a name (default: CLATTN_DEVICE, first GPU)\n";

typedef struct sdpa_call {
    clattn_context *ctx;
    clattn_sdpa_desc desc;
    const void *q, *k, *v;
    const float *mask;
    float *out, *weights, *lse;
    void *out_bits; /* O in desc.out_dtype */
} sdpa_call;

/* A device buffer holding `bytes` from host (NULL: uninitialised); NULL on failure, *err set. */
static cl_mem device_buffer(clattn_context *ctx, const void *host, size_t bytes, cl_int *err)
{
    return clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                          (void *)host, err);
}

/* The row-scale rule of each storage format (src/base/formats.def): ROW_SCALES_NONE, _REQUIRED, _OPTIONAL. */
static int scale_rule(clattn_dtype t)
{
#define FORMAT_RULE(NAME, name, store, bits, block, block_bytes, scales, kv_only, tokens) t == CLATTN_##NAME ? scales:
    return CLATTN_FORMATS(FORMAT_RULE) ROW_SCALES_NONE;
#undef FORMAT_RULE
}

/* K or V on the cache path (--k-dtype/--v-dtype of a quantised format, --kv-int8, or raw bytes): a
 * device cache in `type`, filled from the file's bytes (raw) or by the library's quantising append from
 * its floats, then attended over with clattn_sdpa. */
typedef struct kv_side {
    clattn_dtype type;
    bool raw;              /* the file held the bytes */
    bool has_scales;       /* a float32 scale per row beside them */
    size_t row_bytes, dim; /* bytes and values of a row (row_bytes 0 for a token format: chunks) */
    size_t cache_bytes;    /* the whole cache's (B·kv_heads heads of S rows) */
    cli_tensor scales;     /* --k-scales / --v-scales (raw bytes only) */
    void *present;         /* the cache's bytes read back (--present-k / --present-v) */
    float *present_scales; /* its scales read back (--present-k-scales / --present-v-scales) */
} kv_side;

/* The cache path: the caches made (raw bytes uploaded; float rows appended, quantised, into the others —
 * a raw side then takes a float32 scratch cache in the append), attention over them, the outputs read
 * back, and the caches where --present-k/v ask for them. */
static clattn_status sdpa_kv_cache(sdpa_call *c, cli_tensor *kv, kv_side *side, size_t mask_elems)
{
    clattn_context *ctx = c->ctx;
    const clattn_sdpa_desc *d = &c->desc;
    const size_t rows = d->batch * d->kv_heads * d->kv_len, nq = d->batch * d->heads * d->q_len * d->qk_dim;
    const size_t no = d->batch * d->heads * d->q_len * d->v_dim, nl = d->batch * d->heads * d->q_len;
    const bool append = !side[0].raw || !side[1].raw;
    enum { Q, KN, VN, KC, VC, KS, VS, KX, VX, MASK, OUT, W, LSE, NBUF }; /* KX, VX: a raw side's scratch cache */
    size_t bytes[NBUF] = {nq * clattn_dtype_size(d->q_dtype), 0, 0, side[0].cache_bytes, side[1].cache_bytes,
                          rows * 4, rows * 4, 0, 0, mask_elems * 4, no * clattn_dtype_size(d->out_dtype),
                          nl * d->kv_len * 4, nl * 4};
    const void *init[NBUF] = {c->q, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, c->mask};
    for (int i = 0; i < 2; i++) {
        bytes[KN + i] = append ? rows * side[i].dim * 4 : 0; /* (float32 rows: every input type widens exactly) */
        bytes[KX + i] = append && side[i].raw ? bytes[KN + i] : 0;
        init[KN + i] = side[i].raw ? NULL : kv[i].data;
        init[KC + i] = side[i].raw ? kv[i].bits : NULL;
        init[KS + i] = side[i].raw ? side[i].scales.data : NULL;
        bytes[KS + i] = side[i].has_scales ? bytes[KS + i] : 0;
    }
    cl_mem b[NBUF] = {0};
    cl_int err = CL_SUCCESS;
    for (int i = 0; i < NBUF && err == CL_SUCCESS; i++)
        if (bytes[i] && (i != MASK || c->mask) && (i != W || c->weights) && (i != LSE || c->lse))
            b[i] = device_buffer(ctx, init[i], bytes[i], &err);
    clattn_status st = (clattn_status)err;
    clattn_sdpa_desc add = *d, run = *d;
    add.q_dtype = CLATTN_FLOAT32;
    add.k_dtype = side[0].raw ? CLATTN_FLOAT32 : side[0].type;
    add.v_dtype = side[1].raw ? CLATTN_FLOAT32 : side[1].type;
    add.k_scales = side[0].raw ? NULL : b[KS];
    add.v_scales = side[1].raw ? NULL : b[VS];
    run.k_dtype = side[0].type, run.v_dtype = side[1].type;
    run.k_scales = b[KS], run.v_scales = b[VS];
    size_t *zero = calloc(d->batch, sizeof *zero);
    if (st == CLATTN_SUCCESS && !zero)
        st = CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    if (st == CLATTN_SUCCESS && append)
        st = clattn_kv_append(ctx, &add, zero, d->kv_len, b[KN], b[VN], side[0].raw ? b[KX] : b[KC],
                              side[1].raw ? b[VX] : b[VC]);
    if (st == CLATTN_SUCCESS)
        st = clattn_sdpa(ctx, &run, b[Q], b[KC], b[VC], b[MASK], b[OUT], b[W], b[LSE]);
    cl_command_queue queue = clattn_context_queue(ctx);
    void *dst[NBUF] = {[OUT] = c->out_bits, [W] = c->weights, [LSE] = c->lse, [KC] = side[0].present,
                       [VC] = side[1].present, [KS] = side[0].present_scales, [VS] = side[1].present_scales};
    for (int i = 0; i < NBUF && st == CLATTN_SUCCESS; i++)
        if (dst[i] && b[i])
            st = (clattn_status)clEnqueueReadBuffer(queue, b[i], CL_TRUE, 0, bytes[i], dst[i], 0, NULL, NULL);
    clFinish(queue);
    for (int i = 0; i < NBUF; i++)
        if (b[i])
            clReleaseMemObject(b[i]);
    free(zero);
    return st;
}

/* What --k-dtype, --v-dtype (or --kv-int8) make of K and V once loaded: a float format's file rounded
 * to it; the cache path's sides set up — raw bytes' rows turned into values (checked against Q's head
 * size for K, whole blocks for V), the scales files read and checked. *cache: the cache path runs. */
static int kv_types_apply(const char *cmd, const char *const *path, const char *const *scales_path, cli_tensor *t,
                          const bool *given, const bool *raw, bool packed, kv_side *side, bool *cache)
{
    static const char *const flag[2] = {"k-dtype", "v-dtype"}, *const scales_flag[2] = {"k-scales", "v-scales"};
    *cache = false;
    for (int i = 0; i < 2; i++)
        *cache = *cache || raw[i] || (given[i] && side[i].type > CLATTN_BFLOAT16);
    for (int i = 0; i < 2; i++) {
        cli_tensor *kv = &t[i + 1];
        if (!given[i])
            side[i].type = kv->type;
        if (raw[i] && packed)
            return cli_fail(CLI_USAGE_ERROR, cmd, "%s: raw bytes are (B,N,S,row bytes): they do not go with --heads",
                            path[i + 1]);
        if (!*cache && given[i]) { /* a float format: the file's values rounded to it */
            int rc = cli_tensor_convert(cmd, flag[i], path[i + 1], kv, side[i].type);
            if (rc != CLI_OK)
                return rc;
        }
        if (scales_path[i] && (!raw[i] || scale_rule(side[i].type) == ROW_SCALES_NONE))
            return cli_fail(CLI_USAGE_ERROR, cmd, raw[i] ? "--%s: %s has no row scales (int8 has, FP8 may)"
                                                         : "--%s: goes with raw %s bytes (a '|u1' file); float rows are "
                                                           "quantised with scales the device computes",
                            scales_flag[i], raw[i] ? clattn_dtype_name(side[i].type) : i ? "V" : "K");
        if (raw[i] && !scales_path[i] && scale_rule(side[i].type) == ROW_SCALES_REQUIRED)
            return cli_fail(CLI_USAGE_ERROR, cmd, "--%s is required: raw %s bytes need their float32 row scales "
                            "(%s's shape without its last dimension)", scales_flag[i],
                            clattn_dtype_name(side[i].type), path[i + 1]);
        const size_t r = kv->ndim, block = clattn_dtype_block(side[i].type);
        const size_t block_bytes = clattn_dtype_bytes(side[i].type, block), row = kv->shape[r - 1];
        if (raw[i] && !block_bytes) /* (a token format's bytes are chunks: docs/kv-formats.md) */
            return cli_fail(CLI_USAGE_ERROR, cmd, "%s: raw %s bytes are not read (a head's rows share a chunk); give "
                            "float rows, which the device quantises", path[i + 1], clattn_dtype_name(side[i].type));
        if (raw[i]) {
            const size_t q_dim = t[0].shape[t[0].ndim - 1]; /* (no --heads: Q's last dimension) */
            const size_t want = clattn_dtype_bytes(side[i].type, q_dim);
            if (i == 0 && row != want)
                return want ? cli_fail(CLI_USAGE_ERROR, cmd, "%s: rows of %zu bytes, but Q's head size %zu takes %zu "
                                       "bytes a row in %s", path[1], row, q_dim, want, clattn_dtype_name(side[0].type))
                            : cli_fail(CLI_USAGE_ERROR, cmd, "%s: Q's head size %zu is not a multiple of %s's block "
                                       "of %zu", path[1], q_dim, clattn_dtype_name(side[0].type), block);
            if (row % block_bytes)
                return cli_fail(CLI_USAGE_ERROR, cmd, "%s: rows of %zu bytes are not whole %s blocks of %zu bytes",
                                path[i + 1], row, clattn_dtype_name(side[i].type), block_bytes);
            kv->shape[r - 1] = row / block_bytes * block;
        }
        side[i].raw = raw[i];
        if (*cache) /* (the present is in the cache's type; a float file's values stay floats in kv->data) */
            kv->type = side[i].type;
        side[i].dim = packed ? 0 : kv->shape[r - 1]; /* (with --heads: set once the heads are known) */
        side[i].has_scales = *cache && (scale_rule(side[i].type) == ROW_SCALES_REQUIRED ||
                                        (scale_rule(side[i].type) == ROW_SCALES_OPTIONAL && (!raw[i] || scales_path[i])));
        if (scales_path[i]) {
            int rc = cli_load_tensor(cmd, scales_path[i], 1, 3, &side[i].scales);
            bool same = rc == CLI_OK && side[i].scales.ndim + 1 == r;
            for (size_t a = 0; same && a + 1 < r; a++)
                same = side[i].scales.shape[a] == kv->shape[a];
            if (rc != CLI_OK)
                return rc;
            if (!same)
                return cli_fail(CLI_USAGE_ERROR, cmd, "--%s %s: a float32 scale per row of %s: its shape without the "
                                "last dimension", scales_flag[i], scales_path[i], path[i + 1]);
        }
    }
    return CLI_OK;
}

/* Q (B,H,L,D), K (B,N,S,D) and V (B,N,S,Dv) as the arrays give them. */
typedef struct sdpa_dims {
    bool packed; /* --heads: 3-D arrays (B,L,H·D) */
    size_t B, H, N, L, S, D, Dv;
} sdpa_dims;

/* The dimensions of t[] = Q, K, V: 4-D, 3-D (H,L,D), 2-D (L,D), or with heads (--heads) 3-D (B,L,H·D).
 * Once H is known, checks --kv-heads and reads --sinks and --alibi. */
static int sdpa_dims_of(const char *cmd, const char *const *path, const cli_tensor *t, size_t heads, cli_variants *var,
                        sdpa_dims *d)
{
    const cli_tensor *q = &t[0], *k = &t[1], *v = &t[2];
    const size_t r = q->ndim;
    if (k->ndim != r || v->ndim != r)
        return cli_fail(CLI_USAGE_ERROR, cmd, "Q, K and V must have the same rank (%zu, %zu, %zu)", r, k->ndim,
                        v->ndim);
    if (heads && r != 3)
        return cli_fail(CLI_USAGE_ERROR, cmd, "--heads: takes 3-D inputs (B,L,H·D), but %s has %zu dimensions",
                        path[0], r);
    d->packed = heads != 0;
    d->B = d->packed || r == 4 ? q->shape[0] : 1;
    d->H = d->packed ? heads : r >= 3 ? q->shape[r - 3] : 1;
    d->L = q->shape[r - 2];
    d->S = k->shape[r - 2];
    if (d->packed && q->shape[2] % heads != 0)
        return cli_fail(CLI_USAGE_ERROR, cmd, "%s: %zu heads do not divide its width %zu", path[0], heads, q->shape[2]);
    d->D = q->shape[r - 1] / (d->packed ? heads : 1);
    int rc = cli_variants_load(cmd, var, d->H);
    if (rc != CLI_OK)
        return rc;
    d->N = var->kv_heads ? var->kv_heads : d->H;
    const size_t per_row = d->packed ? d->N : 1; /* K/V heads side by side in a row */

    for (size_t i = 1; i < 3; i++)
        if ((d->packed || r == 4) && t[i].shape[0] != d->B)
            return cli_fail(CLI_USAGE_ERROR, cmd, "%s: batch dimension %zu differs from %s's %zu", path[i],
                            t[i].shape[0], path[0], d->B);
    for (size_t i = 1; i < 3; i++)
        if (!d->packed && r >= 3 && t[i].shape[r - 3] != d->N)
            return cli_fail(CLI_USAGE_ERROR, cmd, var->kv_heads ? "%s: has %zu heads, but --kv-heads is %zu"
                                                                : "%s: has %zu heads, but Q has %zu (see --kv-heads)",
                            path[i], t[i].shape[r - 3], d->N);
    if (k->shape[r - 1] != per_row * d->D)
        return d->packed ? cli_fail(CLI_USAGE_ERROR, cmd, "%s: width %zu is not %zu K/V heads of Q's head size %zu",
                                    path[1], k->shape[r - 1], d->N, d->D)
                         : cli_fail(CLI_USAGE_ERROR, cmd, "%s: head size %zu differs from Q's %zu", path[1],
                                    k->shape[r - 1], d->D);
    if (v->shape[r - 2] != d->S)
        return cli_fail(CLI_USAGE_ERROR, cmd, "%s: %zu keys, but K has %zu (K and V disagree)", path[2],
                        v->shape[r - 2], d->S);
    if (v->shape[r - 1] % per_row != 0)
        return cli_fail(CLI_USAGE_ERROR, cmd, "%s: %zu K/V heads do not divide its width %zu", path[2], per_row,
                        v->shape[r - 1]);
    d->Dv = v->shape[r - 1] / per_row;
    return CLI_OK;
}

/* --past-k/--past-v: K's and V's layout (after --heads, (B,N,P,·)) with P rows; *past_len gets P. */
static int past_check(const char *cmd, const char *const *past_path, const cli_tensor *past, const cli_tensor *kv,
                      bool packed, size_t *past_len)
{
    *past_len = 0;
    if (!past_path[0] != !past_path[1])
        return cli_fail(CLI_USAGE_ERROR, cmd, "--past-k and --past-v go together");
    if (!past_path[0])
        return CLI_OK;
    const size_t r = kv[0].ndim, seq = packed ? 1 : r - 2; /* the sequence dimension */
    *past_len = past[0].shape[seq];
    for (size_t i = 0; i < 2; i++) {
        if (past[i].ndim != r)
            return cli_fail(CLI_USAGE_ERROR, cmd, "%s: has %zu dimensions, K and V have %zu", past_path[i],
                            past[i].ndim, r);
        for (size_t a = 0; a < r; a++)
            if (a != seq && past[i].shape[a] != kv[i].shape[a])
                return cli_fail(CLI_USAGE_ERROR, cmd, "%s: dimension %zu is %zu, but %s's is %zu", past_path[i], a,
                                past[i].shape[a], i ? "V" : "K", kv[i].shape[a]);
        if (past[i].shape[seq] != *past_len)
            return cli_fail(CLI_USAGE_ERROR, cmd, "%s: %zu rows, but %s has %zu", past_path[1], past[1].shape[seq],
                            past_path[0], *past_len);
    }
    return CLI_OK;
}

/* --scores MODE:FILE writes the weights output at an earlier point: it takes --weights' place. */
static int take_scores(const char *cmd, const cli_variants *var, output_opts *o)
{
    if (!var->scores_path)
        return CLI_OK;
    if (o->weights)
        return cli_fail(CLI_USAGE_ERROR, cmd, "--scores and --weights both write the (B,H,L,S) output: give one");
    if (o->heatmap)
        return cli_fail(CLI_USAGE_ERROR, cmd, "--heatmap draws the attention weights: it does not go with --scores");
    o->weights = var->scores_path;
    return CLI_OK;
}

/* --grad-out: dO, shaped as the output (the query's leading dimensions, then L and Dv; with --heads
 * (B, L, H·Dv)), in the output's type (`out_type`, as the library reads dO): a file of another type is
 * converted (rounded to nearest even when narrower; a value that overflows it is refused). */
static int grad_out_load(const char *cmd, const char *path, const cli_tensor *q, const sdpa_dims *d, bool bf16,
                         clattn_dtype out_type, cli_tensor *g)
{
    int rc = cli_load_tensor_as(cmd, path, 2, 4, bf16, g);
    if (rc != CLI_OK || (rc = cli_tensor_convert(cmd, "grad-out", path, g, out_type)) != CLI_OK)
        return rc;
    bool same = g->ndim == q->ndim;
    for (size_t i = 0; same && i + 2 < q->ndim; i++)
        same = g->shape[i] == q->shape[i];
    same = same && g->shape[g->ndim - 2] == d->L &&
           g->shape[g->ndim - 1] == (d->packed ? d->H * d->Dv : d->Dv);
    if (!same)
        return cli_fail(CLI_USAGE_ERROR, cmd, "--grad-out %s: dO must have the output's shape (%s)", path,
                        d->packed ? "B, L, H·Dv" : "Q's leading dimensions, L, Dv");
    return CLI_OK;
}

/* --prefix-k/--prefix-v: both, and none of what cascade attention does not take (the library refuses the
 * variants and masks it does not take, naming them). */
static int prefix_usage(const char *cmd, const char *const *path, bool past, bool types, bool backward, bool heads,
                        const output_opts *o, const cli_mods *mods)
{
    const char *bad = !path[0] || !path[1] ? "give both --prefix-k and --prefix-v"
                      : past ? "a past or present (--past-k, --present-k …)"
                      : types ? "other types (--bf16, --kv-int8, --k-dtype, --v-dtype, --out-dtype)"
                      : backward ? "--grad-out" : heads ? "--heads" : o->weights || o->heatmap ? "--weights or --heatmap"
                      : mods->file || mods->block_sparse ? "--mods or --block-sparse" : NULL;
    if (!bad)
        return CLI_OK;
    return cli_fail(CLI_USAGE_ERROR, cmd, path[0] && path[1] ? "--prefix-k/--prefix-v: not with %s" : "%s", bad);
}

/* The prefix's files, (N,P,D) and (N,P,Dv) (or with a leading 1), float32, agreeing with K and V. */
static int prefix_load(const char *cmd, const char *const *path, const sdpa_dims *d, const cli_tensor *t,
                       cli_tensor *prefix)
{
    for (int i = 0; i < 2; i++) {
        int rc = cli_load_tensor_as(cmd, path[i], 3, 4, false, &prefix[i]);
        if (rc != CLI_OK)
            return rc;
        cli_tensor *p = &prefix[i];
        if (p->ndim == 4 && p->shape[0] == 1) /* (1,N,P,·) as (N,P,·) */
            memmove(p->shape, p->shape + 1, 3 * sizeof p->shape[0]), p->ndim = 3;
        const size_t dim = i ? d->Dv : d->D;
        if (p->ndim != 3 || p->shape[0] != d->N || p->shape[2] != dim || p->type != CLATTN_FLOAT32 ||
            t[i + 1].type != CLATTN_FLOAT32 || (i && p->shape[1] != prefix[0].shape[1]))
            return cli_fail(CLI_USAGE_ERROR, cmd, "%s: a prefix is float32 (%zu, P, %zu), as K and V are, the same P for "
                            "both", path[i], d->N, dim);
    }
    return CLI_OK;
}

int cmd_sdpa(int argc, char **argv)
{
    const char *cmd = "sdpa";
    const char *path[3] = {NULL}; /* Q, K, V */
    const char *past_path[2] = {NULL}, *present_path[2] = {NULL}, *prefix_path[2] = {NULL}; /* K, V */
    const char *lse_path = NULL, *scale_text = NULL, *heads_text = NULL, *device = NULL, *out_dtype_text = NULL;
    const char *grad_out_path = NULL, *grad_path[3] = {NULL}; /* dQ, dK, dV */
    float *grads[3] = {NULL}; /* dQ, dK, dV as floats, once computed */
    void *grad_bits[3] = {NULL};                   /* the same in Q's, K's and V's storage types */
    cli_tensor grad_out = {0};
    output_opts o = {0};
    cli_masks m = {0};
    cli_variants var = {0};
    cli_mods mods = {0};
    bool help = false, bf16 = false, kv_int8 = false;
    const char *kv_dtype_text[2] = {NULL}, *scales_path[2] = {NULL}, *present_scales_path[2] = {NULL}; /* K, V */
    const cli_option opts[] = {
        {"q", NULL, &path[0]},          {"k", NULL, &path[1]},         {"v", NULL, &path[2]},
        {"k-dtype", NULL, &kv_dtype_text[0]}, {"v-dtype", NULL, &kv_dtype_text[1]},
        {"k-scales", NULL, &scales_path[0]}, {"v-scales", NULL, &scales_path[1]},
        {"present-k-scales", NULL, &present_scales_path[0]}, {"present-v-scales", NULL, &present_scales_path[1]},
        {"bf16", &bf16, NULL},          {"kv-int8", &kv_int8, NULL},   {"out-dtype", NULL, &out_dtype_text},
        {"out", NULL, &o.out},          {"weights", NULL, &o.weights}, {"lse", NULL, &lse_path},
        {"scale", NULL, &scale_text},   {"heads", NULL, &heads_text},  {"heatmap", NULL, &o.heatmap},
        {"tokens", NULL, &o.tokens},    {"key-tokens", NULL, &o.key_tokens}, {"device", NULL, &device},
        {"past-k", NULL, &past_path[0]}, {"past-v", NULL, &past_path[1]},
        {"prefix-k", NULL, &prefix_path[0]}, {"prefix-v", NULL, &prefix_path[1]},
        {"present-k", NULL, &present_path[0]}, {"present-v", NULL, &present_path[1]},
        {"grad-out", NULL, &grad_out_path}, {"dq", NULL, &grad_path[0]}, {"dk", NULL, &grad_path[1]},
        {"dv", NULL, &grad_path[2]},
        CLI_VARIANT_OPTIONS(&var),      CLI_MASK_OPTIONS(&m),          CLI_MODS_OPTIONS(&mods),
    };
    int rc = cli_mods_take(cmd, &argc, argv, 2, &mods);
    if (rc == CLI_OK)
        rc = cli_parse(cmd, argc, argv, 2, opts, sizeof opts / sizeof opts[0], &help);
    if (rc != CLI_OK || help) {
        fputs(sdpa_help, help && rc == CLI_OK ? stdout : stderr);
        return rc;
    }
    if ((rc = cli_mods_check(cmd, &mods)) != CLI_OK)
        return rc;
    if (!path[0] || !path[1] || !path[2] || !o.out)
        return cli_fail(CLI_USAGE_ERROR, cmd, "--%s is required (see --help)",
                        !path[0] ? "q" : !path[1] ? "k" : !path[2] ? "v" : "out");
    if ((rc = cli_variants_parse(cmd, &var)) != CLI_OK || (rc = take_scores(cmd, &var, &o)) != CLI_OK)
        return rc;
    /* The backward pass: dO in, any of dQ, dK, dV out, after the forward (no cache: its rows have none). */
    const bool backward = grad_out_path != NULL, any_grad = grad_path[0] || grad_path[1] || grad_path[2];
    if (backward != any_grad)
        return cli_fail(CLI_USAGE_ERROR, cmd, backward ? "--grad-out needs one of --dq, --dk, --dv to write"
                                                       : "--dq, --dk and --dv are the gradients for --grad-out: give it");
    if (backward && (past_path[0] || past_path[1] || present_path[0] || present_path[1] || kv_int8))
        return cli_fail(CLI_USAGE_ERROR, cmd, "--grad-out: the backward pass takes no past, present or --kv-int8");
    static const char *const out_flags[] = {"out", "weights", "lse", "heatmap", "present-k", "present-v",
                                            "dq", "dk", "dv", "present-k-scales", "present-v-scales"};
    if ((rc = cli_check_distinct_outputs(cmd, out_flags,
                                         (const char *const[]){o.out, o.weights, lse_path, o.heatmap, present_path[0],
                                                               present_path[1], grad_path[0], grad_path[1],
                                                               grad_path[2], present_scales_path[0],
                                                               present_scales_path[1]},
                                         11)) != CLI_OK)
        return rc;
    const bool with_prefix = prefix_path[0] || prefix_path[1];
    if (with_prefix && (rc = prefix_usage(cmd, prefix_path, past_path[0] || past_path[1] || present_path[0] ||
                                                    present_path[1], kv_int8 || kv_dtype_text[0] || kv_dtype_text[1] ||
                                                    bf16 || out_dtype_text, backward, heads_text != NULL, &o, &mods)) != CLI_OK)
        return rc;
    /* --k-dtype, --v-dtype (--kv-int8: int8 for both). */
    kv_side side[2] = {{0}};
    bool kv_given[2] = {false}, raw[2] = {false}, cache = false;
    for (int i = 0; i < 2; i++) {
        static const char *const flag[2] = {"k-dtype", "v-dtype"};
        if (kv_dtype_text[i] && (rc = cli_parse_format(cmd, flag[i], kv_dtype_text[i], &side[i].type)) != CLI_OK)
            return rc;
        if (kv_int8 && kv_dtype_text[i] && side[i].type != CLATTN_INT8)
            return cli_fail(CLI_USAGE_ERROR, cmd, "--kv-int8 and --%s %s disagree", flag[i], kv_dtype_text[i]);
        if (kv_int8)
            side[i].type = CLATTN_INT8;
        kv_given[i] = kv_int8 || kv_dtype_text[i];
        if (present_scales_path[i] && !present_path[i])
            return cli_fail(CLI_USAGE_ERROR, cmd, "--present-%c-scales goes with --present-%c", "kv"[i], "kv"[i]);
    }
    if ((kv_given[0] || kv_given[1] || scales_path[0] || scales_path[1]) && (past_path[0] || past_path[1] || backward))
        return cli_fail(CLI_USAGE_ERROR, cmd, "%s does not go with a past (--past-k, --past-v) or --grad-out",
                        kv_int8 ? "--kv-int8" : kv_given[0] || kv_given[1] ? "--k-dtype/--v-dtype" : "--k-scales/--v-scales");
    sdpa_call c = {0};
    c.desc = (clattn_sdpa_desc)CLATTN_SDPA_DESC_INIT;
    size_t heads = 0; /* --heads: 3-D inputs are (B,L,H·D) */
    /* --scale 0 is legitimate: every score 0, uniform weights over the visible keys. */
    if ((scale_text && (rc = cli_parse_float(cmd, "scale", scale_text, &c.desc.scale)) != CLI_OK) ||
        (heads_text && (rc = cli_parse_size(cmd, "heads", heads_text, &heads)) != CLI_OK) ||
        (out_dtype_text && (rc = cli_parse_dtype(cmd, "out-dtype", out_dtype_text, &c.desc.out_dtype)) != CLI_OK))
        return rc;

    cli_tensor t[3] = {{0}}, past[2] = {{0}}, prefix[2] = {{0}};
    float *present[2] = {NULL};
    void *present_bits[2] = {NULL};
    clattn_context *ctx = NULL;
    sdpa_dims d = {0};
    size_t P = 0; /* past rows */
    for (size_t i = 0; i < 3 && rc == CLI_OK; i++)
        rc = i && kv_given[i - 1] ? cli_load_kv(cmd, path[i], i == 1 ? "k-dtype" : "v-dtype", bf16, &t[i], &raw[i - 1])
                                  : cli_load_tensor_as(cmd, path[i], 2, 4, bf16, &t[i]);
    if (rc == CLI_OK)
        rc = kv_types_apply(cmd, path, scales_path, t, kv_given, raw, heads != 0, side, &cache);
    for (size_t i = 0; i < 2 && rc == CLI_OK; i++)
        if (past_path[i]) {
            rc = cli_load_tensor_as(cmd, past_path[i], 2, 4, bf16, &past[i]);
            if (rc == CLI_OK && past[i].type != t[i + 1].type) /* a cache and its new rows share a type */
                rc = cli_fail(CLI_USAGE_ERROR, cmd, "%s is %s but %s is %s: a past and its new rows share a type",
                              past_path[i], clattn_dtype_name(past[i].type), path[i + 1],
                              clattn_dtype_name(t[i + 1].type));
        }
    if (rc != CLI_OK || (rc = sdpa_dims_of(cmd, path, t, heads, &var, &d)) != CLI_OK ||
        (rc = past_check(cmd, past_path, past, &t[1], d.packed, &P)) != CLI_OK)
        goto done;
    if (with_prefix && (rc = prefix_load(cmd, prefix_path, &d, t, prefix)) != CLI_OK)
        goto done;
    /* With a past, attention runs over T = P + S keys: the masks and the weights count them all. */
    const bool with_past = !cache && (past_path[0] || present_path[0] || present_path[1]);
    const size_t B = d.B, H = d.H, L = d.L, S = d.S, Dv = d.Dv, T = P + S;
    for (int i = 0; i < 2 && cache; i++) { /* the cache path's rows, now that the heads are known */
        side[i].dim = i ? Dv : d.D;
        side[i].row_bytes = clattn_dtype_bytes(side[i].type, side[i].dim);
        side[i].cache_bytes = B * d.N * clattn_dtype_head_bytes(side[i].type, S, side[i].dim);
        if (!side[i].cache_bytes) {
            rc = cli_fail(CLI_USAGE_ERROR, cmd, "%s: head size %zu is not a multiple of %s's %s of %zu", path[i + 1],
                          side[i].dim, clattn_dtype_name(side[i].type), clattn_dtype_block(side[i].type) > 1 ? "block" : "packing",
                          clattn_dtype_block(side[i].type) > 1 ? clattn_dtype_block(side[i].type) : 4);
            goto done;
        }
        if (!side[i].row_bytes && present_path[i]) { /* (a token format: K's rows share their chunk's bytes) */
            rc = cli_fail(CLI_USAGE_ERROR, cmd, "--present-%c: %s's bytes are a head's chunk, not rows: not written",
                          "kv"[i], clattn_dtype_name(side[i].type));
            goto done;
        }
        if (present_scales_path[i] && !side[i].has_scales) {
            rc = cli_fail(CLI_USAGE_ERROR, cmd, "--present-%c-scales: %s rows have no scales here", "kv"[i],
                          clattn_dtype_name(side[i].type));
            goto done;
        }
        if (d.packed && ((present_path[i] && side[i].type > CLATTN_BFLOAT16) || present_scales_path[i])) {
            rc = cli_fail(CLI_USAGE_ERROR, cmd, "--present-%c: a quantised cache is written (B,N,S,row bytes), not "
                          "with --heads", "kv"[i]);
            goto done;
        }
    }
    if ((present_scales_path[0] && !cache) || (present_scales_path[1] && !cache)) {
        rc = cli_fail(CLI_USAGE_ERROR, cmd, "--present-k-scales and --present-v-scales go with quantised K/V caches "
                      "(--k-dtype int8, fp8_e4m3, ...)");
        goto done;
    }
    if ((rc = cli_masks_load(cmd, &m, B, H, L, T)) != CLI_OK)
        goto done;
    if (backward && (rc = grad_out_load(cmd, grad_out_path, &t[0], &d, bf16, c.desc.out_dtype, &grad_out)) != CLI_OK)
        goto done;
    for (size_t i = 0; i < 3 && d.packed && rc == CLI_OK; i++)
        rc = heads_first(cmd, &t[i], i == 0 ? H : d.N);
    if (backward && d.packed && rc == CLI_OK)
        rc = heads_first(cmd, &grad_out, H);
    for (size_t i = 0; i < 2 && d.packed && P && rc == CLI_OK; i++)
        rc = heads_first(cmd, &past[i], d.N);
    if (rc != CLI_OK || (rc = cli_open_context(cmd, device, &ctx)) != CLI_OK ||
        (rc = cli_mods_make(cmd, ctx, &mods)) != CLI_OK)
        goto done;

    c.ctx = ctx;
    c.desc.mods = mods.mods;
    c.desc.batch = B;
    c.desc.heads = H;
    c.desc.kv_heads = d.N;
    c.desc.q_len = L;
    c.desc.kv_len = S;
    c.desc.qk_dim = d.D;
    c.desc.v_dim = Dv;
    c.desc.masks = &m.masks;
    if ((rc = cli_mods_block_mask(cmd, ctx, &mods, &m.masks, B, H, L, T)) != CLI_OK)
        goto done;
    c.desc.block_mask = mods.mask;
    cli_variants_apply(&var, &c.desc);
    c.desc.q_dtype = t[0].type;
    c.desc.k_dtype = t[1].type;
    c.desc.v_dtype = t[2].type;
    c.q = cli_tensor_storage(&t[0]);
    c.k = cache ? t[1].bits : cli_tensor_storage(&t[1]); /* (the cache path reads the floats, or raw bytes) */
    c.v = cache ? t[2].bits : cli_tensor_storage(&t[2]);
    const void *past_bits[2] = {P ? cli_tensor_storage(&past[0]) : NULL, P ? cli_tensor_storage(&past[1]) : NULL};
    c.mask = m.mask;
    c.out_bits = cli_alloc_floats(B * H, L, Dv); /* (room for any output type) */
    if (o.weights || o.heatmap)
        c.weights = cli_alloc_floats(B * H, L, T);
    if (lse_path || backward)
        c.lse = cli_alloc_floats(B * H, L, 1);
    if (backward) { /* (room for any storage type) */
        grad_bits[0] = cli_alloc_floats(B * H, L, d.D);
        grad_bits[1] = cli_alloc_floats(B * d.N, S, d.D);
        grad_bits[2] = cli_alloc_floats(B * d.N, S, Dv);
    }
    bool present_ok = true;
    for (size_t i = 0; i < 2; i++) {
        if (present_path[i])
            present_ok = present_ok && (present_bits[i] = cli_alloc_floats(B * d.N, T, i ? Dv : d.D)) != NULL;
        side[i].present = present_bits[i]; /* (room for any type: no format takes more than a float a value) */
        if (present_scales_path[i])
            present_ok = present_ok && (side[i].present_scales = cli_alloc_floats(B * d.N, T, 1)) != NULL;
    }
    if (!c.q || (!cache && (!c.k || !c.v)) || (P && (!past_bits[0] || !past_bits[1])) || !c.out_bits || !present_ok ||
        ((o.weights || o.heatmap) && !c.weights) || ((lse_path || backward) && !c.lse) ||
        (backward && (!grad_bits[0] || !grad_bits[1] || !grad_bits[2])) || (present_path[0] && !present_bits[0]) ||
        (present_path[1] && !present_bits[1])) {
        rc = cli_fail(CLI_RUNTIME_ERROR, cmd, "out of host memory for the outputs");
        goto done;
    }
    size_t mask_elems = 0;
    if (m.mask)
        mask_elems = (m.masks.additive == CLATTN_MASK_B_H_L_S ? B * H : 1) * L * m.mask_cols;
    cli_progress *progress = cli_progress_start("clattn sdpa: running");
    clattn_status st = with_prefix ? cli_prefix_attention(ctx, &c.desc, prefix[0].data, prefix[1].data, prefix[0].shape[1],
                                                          c.q, c.k, c.v, c.out_bits, c.lse)
                       : cache     ? sdpa_kv_cache(&c, &t[1], side, mask_elems)
                       : with_past ? clattn_sdpa_with_past_host(ctx, &c.desc, P, past_bits[0], past_bits[1], c.q, c.k,
                                                                c.v, c.mask, present_bits[0], present_bits[1], c.out_bits,
                                                                c.weights, c.lse)
                                   : clattn_sdpa_host(ctx, &c.desc, c.q, c.k, c.v, c.mask, c.out_bits, c.weights, c.lse);
    if (st == CLATTN_SUCCESS && backward)
        st = clattn_sdpa_backward_host(ctx, &c.desc, c.q, c.k, c.v, c.mask, c.out_bits, c.lse,
                                       cli_tensor_storage(&grad_out), grad_bits[0], grad_bits[1], grad_bits[2], NULL);
    cli_progress_stop(progress);
    cli_report_warning(cmd, ctx);
    if (st != CLATTN_SUCCESS) {
        rc = attention_failed(cmd, ctx, st, backward ? "attention and its backward pass" : "attention");
        goto done;
    }
    /* The typed results as floats for what follows (reordering heads); they are written in their types. */
    c.out = cli_widen(c.out_bits, B * H * L * Dv, c.desc.out_dtype);
    for (size_t i = 0; i < 2; i++) /* (a quantised cache's bytes are written as they are) */
        if (present_bits[i] && t[i + 1].type <= CLATTN_BFLOAT16 &&
            !(present[i] = cli_widen(present_bits[i], B * d.N * T * (i ? Dv : d.D), t[i + 1].type)))
            c.out = NULL;
    if (!c.out) {
        rc = cli_fail(CLI_RUNTIME_ERROR, cmd, "out of host memory for the outputs");
        goto done;
    }
    const char *paths[10] = {o.out, o.weights, lse_path, present_path[0], present_path[1], grad_path[0], grad_path[1],
                             grad_path[2], present_scales_path[0], present_scales_path[1]};
    size_t ndims[10], shapes[10][4];
    const size_t grad_heads[3] = {H, d.N, d.N}, grad_rows[3] = {L, S, S}, grad_cols[3] = {d.D, d.D, Dv};
    for (size_t i = 0; i < 3 && backward; i++) /* each gradient in its input's type: as floats (exact) */
        if (!(grads[i] = cli_widen(grad_bits[i], B * grad_heads[i] * grad_rows[i] * grad_cols[i], t[i].type))) {
            rc = cli_fail(CLI_RUNTIME_ERROR, cmd, "out of host memory for the outputs");
            goto done;
        }
    for (size_t i = 0; i < 3 && d.packed && backward; i++) { /* the gradients in their inputs' layout */
        float *moved = swap_middle(grads[i], B, grad_heads[i], grad_rows[i], grad_cols[i]);
        free(grads[i]);
        if (!(grads[i] = moved)) {
            rc = cli_fail(CLI_RUNTIME_ERROR, cmd, "out of host memory for the outputs");
            goto done;
        }
    }
    if (d.packed) {
        /* O back to (B,L,H·Dv), the present to (B,T,N·D); the weights and log-sum-exp keep their heads:
         * (B,H,L,T), (B,H,L). */
        float *rows = swap_middle(c.out, B, H, L, Dv);
        for (size_t i = 0; i < 2 && rows; i++)
            if (present[i]) {
                float *moved = swap_middle(present[i], B, d.N, T, i ? Dv : d.D);
                free(present[i]);
                present[i] = moved;
                if (!moved) {
                    free(rows);
                    rows = NULL;
                }
            }
        if (!rows) {
            rc = cli_fail(CLI_RUNTIME_ERROR, cmd, "out of host memory for the outputs");
            goto done;
        }
        free(c.out);
        c.out = rows;
        const size_t lead[2] = {B, H};
        ndims[0] = output_shape(1, lead, L, H * Dv, shapes[0]);
        ndims[1] = output_shape(2, lead, L, T, shapes[1]);
        ndims[2] = output_shape(2, lead, L, 0, shapes[2]);
        ndims[3] = output_shape(1, lead, T, d.N * d.D, shapes[3]);
        ndims[4] = output_shape(1, lead, T, d.N * Dv, shapes[4]);
        for (size_t i = 0; i < 3; i++)
            ndims[5 + i] = output_shape(1, lead, grad_rows[i], grad_heads[i] * grad_cols[i], shapes[5 + i]);
    } else {
        const size_t lead = t[0].ndim - 2;
        ndims[0] = output_shape(lead, t[0].shape, L, Dv, shapes[0]);
        ndims[1] = output_shape(lead, t[0].shape, L, T, shapes[1]);
        ndims[2] = output_shape(lead, t[0].shape, L, 0, shapes[2]);
        ndims[3] = output_shape(lead, t[1].shape, T, d.D, shapes[3]);
        ndims[4] = output_shape(lead, t[2].shape, T, Dv, shapes[4]);
        for (size_t i = 0; i < 3; i++)
            ndims[5 + i] = output_shape(t[i].ndim - 2, t[i].shape, grad_rows[i], grad_cols[i], shapes[5 + i]);
        for (size_t i = 0; i < 2 && cache; i++) { /* a quantised cache's rows in bytes, its scales (…, S) */
            if (t[i + 1].type > CLATTN_BFLOAT16)
                shapes[3 + i][ndims[3 + i] - 1] = side[i].row_bytes;
            ndims[8 + i] = output_shape(lead, t[i + 1].shape, T, 0, shapes[8 + i]);
        }
    }
    const void *data[10] = {c.out,    c.weights, c.lse,    t[1].type > CLATTN_BFLOAT16 ? present_bits[0] : present[0],
                            t[2].type > CLATTN_BFLOAT16 ? present_bits[1] : present[1],
                            grads[0], grads[1], grads[2], side[0].present_scales, side[1].present_scales};
    /* O in --out-dtype, the present in K's and V's types (a quantised one's bytes), each gradient in its
     * input's (written exactly), the scales as float32. */
    const clattn_dtype types[10] = {c.desc.out_dtype, CLATTN_FLOAT32, CLATTN_FLOAT32, t[1].type, t[2].type,
                                    t[0].type,        t[1].type,      t[2].type,      CLATTN_FLOAT32, CLATTN_FLOAT32};
    rc = save_outputs(cmd, paths, data, ndims, (const size_t(*)[4])shapes, types, 10, &o, c.weights, B, H, L, T);
done:
    free(c.out);
    free(c.out_bits);
    free(c.weights);
    free(c.lse);
    for (size_t i = 0; i < 3; i++) {
        free(grads[i]);
        free(grad_bits[i]);
    }
    cli_tensor_free(&grad_out);
    cli_mods_free(&mods);
    clattn_context_free(ctx);
    cli_masks_free(&m);
    cli_variants_free(&var);
    for (size_t i = 0; i < 3; i++)
        cli_tensor_free(&t[i]);
    for (size_t i = 0; i < 2; i++) {
        cli_tensor_free(&past[i]);
        cli_tensor_free(&prefix[i]);
        free(present[i]);
        free(present_bits[i]);
        cli_tensor_free(&side[i].scales);
        free(side[i].present_scales);
    }
    return rc;
}

/* ---- mha ---- */

static const char mha_help[] =
    "usage: clattn mha --x X.npy --wq WQ.npy --wk WK.npy --wv WV.npy --heads H --out O.npy [options]\n"
    "\n"
    "A multi-head attention layer in the tutorials' convention Q = X·W_Q (W_Q of shape (d_model, H·d_k);\n"
    "a PyTorch nn.Linear weight is the transpose). X is (B,L,d_model) or (L,d_model).\n"
    "Arrays may be float32, float64 or float16 ('<f2'), or bfloat16 as '<u2' bit patterns with --bf16;\n"
    "X and KV share one type, the weights and biases another; the layer runs in them (float32 arithmetic).\n"
    "\n"
    "  --bf16                 the input arrays (not masks) are bfloat16 bit patterns ('<u2')\n"
    "  --out-dtype TYPE       the output's type: float32 (default), float16 or bfloat16 ('<u2')\n"
    "  --kv KV.npy            keys/values input (B,S,d_kv) for cross-attention (default: X)\n"
    "  --wq/--wk/--wv W.npy   projection weights (d_model, H·d_k), (d_kv, N·d_k), (d_kv, N·d_v), where\n"
    "                         N = H, or N = --kv-heads\n"
    "  --bq/--bk/--bv B.npy   optional projection biases (H·d_k,), (N·d_k,), (N·d_v,)\n"
    "  --wo WO.npy            optional output projection (H·d_v, d_out); --bo its bias (d_out,)\n"
    "  --heads H              number of heads; must divide the width of W_Q\n"
    "  --kv-heads N           K and V have N heads, each read by H/N query heads in order (grouped-query\n"
    "                         attention; 1: multi-query): W_K and W_V have N heads' columns; N divides H\n"
    "  --out O.npy            output (B,L,d_out), or the concatenated heads (B,L,H·d_v) without --wo\n"
    "  --weights P.npy        also write the attention weights (B,H,L,S) ((H,L,S) for 2-D X)\n"
    "  --scale S              scale of Q·Kᵀ (default 1/sqrt(d_k))\n" CLI_VARIANT_HELP CLI_MASK_HELP CLI_MODS_HELP
    "  --heatmap FILE.svg     SVG heatmap of the attention weights (first batch, up to 16 heads)\n"
    "  --tokens a,b,c         query labels for the heatmap (and key labels for self-attention)\n"
    "  --key-tokens a,b,c     key labels for the heatmap\n"
    "  --device SPEC          P:D, cpu, gpu, accelerator or part of a name\n";

typedef struct mha_call {
    clattn_context *ctx;
    clattn_mha_desc desc;
    const void *x, *kv;
    const float *mask;
    clattn_mha_host_weights w;
    float *out, *weights;
    void *out_bits; /* the output in desc.out_dtype */
} mha_call;

/* A weight of shape (rows, cols) or, with cols = 0, a bias of shape (rows,). */
static int check_shape(const char *cmd, const char *path, const cli_tensor *t, size_t rows, size_t cols,
                       const char *what)
{
    if (cols ? (t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols) : (t->ndim == 1 && t->shape[0] == rows))
        return CLI_OK;
    if (cols)
        return cli_fail(CLI_USAGE_ERROR, cmd, "%s: expected shape (%zu, %zu) for %s", path, rows, cols, what);
    return cli_fail(CLI_USAGE_ERROR, cmd, "%s: expected shape (%zu,) for %s", path, rows, what);
}

int cmd_mha(int argc, char **argv)
{
    const char *cmd = "mha";
    enum { X, KV, WQ, WK, WV, WO, BQ, BK, BV, BO, NT };
    const char *path[NT] = {0};
    const char *heads_text = NULL, *scale_text = NULL, *device = NULL, *out_dtype_text = NULL;
    output_opts o = {0};
    cli_masks m = {0};
    cli_variants var = {0};
    cli_mods mods = {0};
    bool help = false, bf16 = false;
    const cli_option opts[] = {
        {"bf16", &bf16, NULL},   {"out-dtype", NULL, &out_dtype_text},
        {"x", NULL, &path[X]},   {"kv", NULL, &path[KV]}, {"wq", NULL, &path[WQ]}, {"wk", NULL, &path[WK]},
        {"wv", NULL, &path[WV]}, {"wo", NULL, &path[WO]}, {"bq", NULL, &path[BQ]}, {"bk", NULL, &path[BK]},
        {"bv", NULL, &path[BV]}, {"bo", NULL, &path[BO]}, {"heads", NULL, &heads_text},
        {"out", NULL, &o.out},   {"weights", NULL, &o.weights}, {"scale", NULL, &scale_text},
        {"heatmap", NULL, &o.heatmap}, {"tokens", NULL, &o.tokens}, {"key-tokens", NULL, &o.key_tokens},
        {"device", NULL, &device}, CLI_VARIANT_OPTIONS(&var), CLI_MASK_OPTIONS(&m), CLI_MODS_OPTIONS(&mods),
    };
    int rc = cli_mods_take(cmd, &argc, argv, 2, &mods);
    if (rc == CLI_OK)
        rc = cli_parse(cmd, argc, argv, 2, opts, sizeof opts / sizeof opts[0], &help);
    if (rc != CLI_OK || help) {
        fputs(mha_help, help && rc == CLI_OK ? stdout : stderr);
        return rc;
    }
    if ((rc = cli_mods_check(cmd, &mods)) != CLI_OK)
        return rc;
    if (!path[X] || !path[WQ] || !path[WK] || !path[WV] || !heads_text || !o.out)
        return cli_fail(CLI_USAGE_ERROR, cmd, "--%s is required (see --help)",
                        !path[X] ? "x" : !path[WQ] ? "wq" : !path[WK] ? "wk" : !path[WV] ? "wv" : !heads_text ? "heads" : "out");
    if (path[BO] && !path[WO])
        return cli_fail(CLI_USAGE_ERROR, cmd, "--bo needs --wo");
    if ((rc = cli_variants_parse(cmd, &var)) != CLI_OK || (rc = take_scores(cmd, &var, &o)) != CLI_OK)
        return rc;
    static const char *const out_flags[] = {"out", "weights", "heatmap"};
    if ((rc = cli_check_distinct_outputs(cmd, out_flags, (const char *const[]){o.out, o.weights, o.heatmap}, 3)) !=
        CLI_OK)
        return rc;
    mha_call c = {0};
    c.desc = (clattn_mha_desc)CLATTN_MHA_DESC_INIT;
    size_t H;
    if ((rc = cli_parse_size(cmd, "heads", heads_text, &H)) != CLI_OK ||
        (scale_text && (rc = cli_parse_float(cmd, "scale", scale_text, &c.desc.scale)) != CLI_OK) ||
        (out_dtype_text && (rc = cli_parse_dtype(cmd, "out-dtype", out_dtype_text, &c.desc.out_dtype)) != CLI_OK))
        return rc;

    cli_tensor t[NT] = {{0}};
    clattn_context *ctx = NULL;
    for (int i = 0; i < NT && rc == CLI_OK; i++)
        if (path[i])
            rc = cli_load_tensor_as(cmd, path[i], i <= KV ? 2 : i <= WO ? 2 : 1, i <= KV ? 3 : i <= WO ? 2 : 1, bf16,
                                    &t[i]);
    /* One storage type for X and KV, one for the weights and biases (the descriptor has one of each). */
    for (int i = 0; i < NT && rc == CLI_OK; i++) {
        const int first = i <= KV ? X : WQ;
        if (path[i] && t[i].type != t[first].type)
            rc = cli_fail(CLI_USAGE_ERROR, cmd, "%s is %s but %s is %s: %s share one type", path[i],
                          clattn_dtype_name(t[i].type), path[first], clattn_dtype_name(t[first].type),
                          first == X ? "X and KV" : "the weights and biases");
    }
    if (rc != CLI_OK)
        goto done;
    const size_t r = t[X].ndim;
    const size_t B = r == 3 ? t[X].shape[0] : 1, L = t[X].shape[r - 2], d_model = t[X].shape[r - 1];
    const cli_tensor *kv = path[KV] ? &t[KV] : &t[X];
    if (kv->ndim != r || (r == 3 && kv->shape[0] != B)) {
        rc = cli_fail(CLI_USAGE_ERROR, cmd, "%s: rank or batch differs from %s's", path[KV], path[X]);
        goto done;
    }
    const size_t S = kv->shape[r - 2], d_kv = kv->shape[r - 1];
    if (t[WQ].shape[0] != d_model) {
        rc = cli_fail(CLI_USAGE_ERROR, cmd, "%s: has %zu rows but X has d_model = %zu", path[WQ], t[WQ].shape[0], d_model);
        goto done;
    }
    if ((rc = cli_variants_load(cmd, &var, H)) != CLI_OK)
        goto done;
    const size_t N = var.kv_heads ? var.kv_heads : H; /* K/V heads */
    if (t[WQ].shape[1] % H != 0 || t[WV].shape[1] % N != 0) {
        const int bad = t[WQ].shape[1] % H != 0 ? WQ : WV;
        rc = cli_fail(CLI_USAGE_ERROR, cmd, "%s: %zu heads do not divide its width %zu", path[bad], bad == WQ ? H : N,
                      t[bad].shape[1]);
        goto done;
    }
    const size_t dk = t[WQ].shape[1] / H, dv = t[WV].shape[1] / N;
    size_t d_out = path[WO] ? t[WO].shape[1] : H * dv;
    const bool gqa = var.kv_heads != 0;
    const char *wk_what = gqa ? "W_K (d_kv, N·d_k)" : "W_K (d_kv, H·d_k), or see --kv-heads";
    const char *wv_what = gqa ? "W_V (d_kv, N·d_v)" : "W_V (d_kv, H·d_v)";
    if ((rc = check_shape(cmd, path[WK], &t[WK], d_kv, N * dk, wk_what)) != CLI_OK ||
        (rc = check_shape(cmd, path[WV], &t[WV], d_kv, N * dv, wv_what)) != CLI_OK ||
        (path[WO] && (rc = check_shape(cmd, path[WO], &t[WO], H * dv, d_out, "W_O (H·d_v, d_out)")) != CLI_OK) ||
        (path[BQ] && (rc = check_shape(cmd, path[BQ], &t[BQ], H * dk, 0, "b_Q")) != CLI_OK) ||
        (path[BK] && (rc = check_shape(cmd, path[BK], &t[BK], N * dk, 0, "b_K")) != CLI_OK) ||
        (path[BV] && (rc = check_shape(cmd, path[BV], &t[BV], N * dv, 0, "b_V")) != CLI_OK) ||
        (path[BO] && (rc = check_shape(cmd, path[BO], &t[BO], d_out, 0, "b_O")) != CLI_OK))
        goto done;
    if ((rc = cli_masks_load(cmd, &m, B, H, L, S)) != CLI_OK || (rc = cli_open_context(cmd, device, &ctx)) != CLI_OK ||
        (rc = cli_mods_make(cmd, ctx, &mods)) != CLI_OK)
        goto done;

    c.ctx = ctx;
    c.desc.batch = B;
    c.desc.q_len = L;
    c.desc.kv_len = S;
    c.desc.model_dim = d_model;
    c.desc.kv_dim = d_kv;
    c.desc.heads = H;
    c.desc.kv_heads = N;
    c.desc.qk_dim = dk;
    c.desc.v_dim = dv;
    c.desc.out_dim = d_out;
    c.desc.masks = &m.masks;
    c.desc.mods = mods.mods;
    if ((rc = cli_mods_block_mask(cmd, ctx, &mods, &m.masks, B, H, L, S)) != CLI_OK)
        goto done;
    c.desc.block_mask = mods.mask;
    cli_variants_apply_mha(&var, &c.desc);
    c.desc.x_dtype = t[X].type;
    c.desc.weight_dtype = t[WQ].type;
    const void *bits[NT] = {0};
    bool bits_ok = true;
    for (int i = 0; i < NT; i++)
        if (path[i])
            bits_ok = bits_ok && (bits[i] = cli_tensor_storage(&t[i])) != NULL;
    c.x = bits[X];
    c.kv = bits[KV];
    c.mask = m.mask;
    c.w = (clattn_mha_host_weights){sizeof c.w, bits[WQ], bits[BQ], bits[WK], bits[BK],
                                    bits[WV], bits[BV], bits[WO], bits[BO]};
    c.out_bits = cli_alloc_floats(B, L, d_out); /* (room for any output type) */
    if (o.weights || o.heatmap)
        c.weights = cli_alloc_floats(B * H, L, S);
    if (!bits_ok || !c.out_bits || ((o.weights || o.heatmap) && !c.weights)) {
        rc = cli_fail(CLI_RUNTIME_ERROR, cmd, "out of host memory for the outputs");
        goto done;
    }
    cli_progress *progress = cli_progress_start("clattn mha: running");
    clattn_status st = clattn_mha_host(ctx, &c.desc, c.x, c.kv, &c.w, c.mask, c.out_bits, c.weights);
    cli_progress_stop(progress);
    cli_report_warning(cmd, ctx);
    if (st != CLATTN_SUCCESS) {
        rc = attention_failed(cmd, ctx, st, "attention layer");
        goto done;
    }
    if (!(c.out = cli_widen(c.out_bits, B * L * d_out, c.desc.out_dtype))) {
        rc = cli_fail(CLI_RUNTIME_ERROR, cmd, "out of host memory for the outputs");
        goto done;
    }
    /* Outputs keep X's rank: (B,L,d_out) and (B,H,L,S), or (L,d_out) and (H,L,S) for 2-D X. */
    const char *paths[2] = {o.out, o.weights};
    const void *data[2] = {c.out, c.weights};
    size_t ndims[2] = {3, 4}, shapes[2][4] = {{B, L, d_out}, {B, H, L, S}};
    if (r == 2) {
        ndims[0] = 2;
        ndims[1] = 3;
        memmove(shapes[0], shapes[0] + 1, 2 * sizeof(size_t));
        memmove(shapes[1], shapes[1] + 1, 3 * sizeof(size_t));
    }
    const clattn_dtype types[2] = {c.desc.out_dtype, CLATTN_FLOAT32};
    rc = save_outputs(cmd, paths, data, ndims, (const size_t(*)[4])shapes, types, 2, &o, c.weights, B, H, L, S);
done:
    free(c.out);
    free(c.out_bits);
    free(c.weights);
    cli_mods_free(&mods);
    clattn_context_free(ctx);
    cli_masks_free(&m);
    cli_variants_free(&var);
    for (int i = 0; i < NT; i++)
        cli_tensor_free(&t[i]);
    return rc;
}
