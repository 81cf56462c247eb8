/* `clattn ring`: ring attention across the ranks of an MPI job (mpirun -n P clattn ring …), through
 * libclattn_mpi. Each rank reads its shard of Q, K and V (a file per rank, "{rank}" in the path) or the
 * whole tensors (taking its rows), attends on its own device, and writes its slice of the output, or rank
 * 0 gathers the slices into one file. Every failure is agreed on by all ranks, so that none hangs. */
#include "cli.h"
#include "cli_masks.h"
#include "commands.h"

#include <clattn/clattn_mpi.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char ring_help[] =
    "usage: mpirun -n P clattn ring --q Q.npy --k K.npy --v V.npy --out OUT.npy [options]\n"
    "\n"
    "Ring attention across P processes: each rank holds a slice of the queries and of the keys and values,\n"
    "the K/V slices travel around the ring while each rank's device computes on the one it holds, and the\n"
    "partial results merge through their log-sum-exps (exactly). Every rank's device memory is\n"
    "O((L + S)/P · D).\n"
    "\n"
    "Q is (B,H,L,Dqk), K (B,N,S,Dqk), V (B,N,S,Dv), float32 .npy (N = K/V heads, dividing H; K and V in\n"
    "another format with --k-dtype/--v-dtype). A path with\n"
    "\"{rank}\" is a file per rank holding that rank's rows in shard order (see --layout); without it every\n"
    "rank reads the whole tensor and takes its rows.\n"
    "\n"
    "options:\n"
    "  --out FILE             with {rank}: each rank writes its slice (B,H,rows,Dv); without: needs --gather\n"
    "  --lse FILE             the log-sum-exps, (B,H,rows) or gathered (B,H,L)\n"
    "  --gather               rank 0 writes the whole output (B,H,L,Dv) (and --lse) in sequence order\n"
    "  --layout NAME          zigzag (default: rank r holds runs r and 2P-1-r of 2P, balanced under a\n"
    "                         causal mask) or contiguous (rank r holds the r-th of P runs)\n"
    "  --timeout SECONDS      the longest any rank waits for another (default 60)\n"
    "  --scale X              multiply Q·Kᵀ by X (default 1/sqrt(Dqk))\n"
    "  --k-dtype NAME         K's (V's) storage format, sent around the ring as its bytes: float16 or\n"
    "  --v-dtype NAME         bfloat16 (a float file rounded to it), or q8_0, q4_0, u8_g32/64/128,\n"
    "                         u4_g32/64/128, fp8_e4m3, fp8_e5m2 as raw bytes ('|u1' files, (B,N,S,row\n"
    "                         bytes), as clattn sdpa reads them; no int8: its row scales are a device buffer)\n"
    "  --device SPEC          this rank's device; \"{rank}\" in it is replaced by the rank (0:{rank})\n"
    "  --causal, --causal-bottom-right, --key-lengths, --offset, --offsets, --window: as for clattn sdpa\n"
    "                         (positions of the whole sequences; no --mask)\n"
    "  --kv-heads N, --softcap C, --sinks SINKS.npy, --alibi SLOPES.npy|auto, --logit-scale SC.npy,\n"
    "  --reproducible         as for clattn sdpa: each rank's rows the bits of one device's call (the slices\n"
    "                         pass as always; each rank keeps them and attends its rows over every key once)\n"
    "  --softmax-double       refused: the ring's kernels and merges are float32\n"
    "\n"
    "Rank 0 prints each rank's time, the time it waited for a slice beyond its kernels, its device memory and\n"
    "the bytes it sent.\n";

/* path with "{rank}" replaced (a new string), or a copy of it. */
static char *with_rank(const char *path, int rank)
{
    const char *at = path ? strstr(path, "{rank}") : NULL;
    const size_t len = path ? strlen(path) : 0;
    char *out = malloc(len + 16);
    if (!out)
        return NULL;
    if (!at)
        snprintf(out, len + 16, "%s", path ? path : "");
    else
        snprintf(out, len + 16, "%.*s%d%s", (int)(at - path), path, rank, at + 6);
    return out;
}

/* Every rank's rc agreed: the worst (largest) wins, so that all ranks stop together. */
static int agree(int rc)
{
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return rc;
}

/* One input: this rank's shard of a 4-D tensor (B, heads, n, width values), from its own file or the
 * whole, in its storage format: float32 (Q always), float16/bfloat16 bit patterns, or a quantised
 * format's raw bytes (--k-dtype/--v-dtype). */
typedef struct ring_input {
    cli_tensor t;
    bool sharded;     /* the file held the rank's rows only */
    clattn_dtype type;
    size_t row_bytes; /* one row of `width` values in `type` */
    const void *data; /* the whole file's rows in `type` */
    void *rows;       /* the rank's rows (data when sharded) */
} ring_input;

/* `flag` (NULL for Q) names the input's --k-dtype/--v-dtype; `type` is its format (float32 by default). */
static int load_input(const char *cmd, const char *path, const char *flag, clattn_dtype type, int rank,
                      ring_input *in)
{
    char *mine = with_rank(path, rank);
    if (!mine)
        return cli_fail(CLI_RUNTIME_ERROR, cmd, "out of memory");
    in->sharded = strstr(path, "{rank}") != NULL;
    in->type = type;
    bool raw = false;
    const bool quantised = type > CLATTN_BFLOAT16;
    if (quantised && clattn_dtype_size(type) == 0 && clattn_dtype_block(type) == 1) { /* (a token format) */
        free(mine);
        return cli_fail(CLI_USAGE_ERROR, cmd, "--%s %s: ring attention takes no token format (a head's rows share "
                        "their bytes)", flag, clattn_dtype_name(type));
    }
    int rc = quantised ? cli_load_kv(cmd, mine, flag, false, &in->t, &raw) : cli_load_tensor(cmd, mine, 4, 4, &in->t);
    if (rc == CLI_OK && quantised && (!raw || in->t.ndim != 4))
        rc = cli_fail(CLI_USAGE_ERROR, cmd, "%s: --%s %s takes the raw bytes, a '|u1' file of (B,N,S,row bytes)%s",
                      mine, flag, clattn_dtype_name(type), raw ? "" : " (the ring does not quantise float rows)");
    if (rc == CLI_OK && !flag && in->t.type != CLATTN_FLOAT32)
        rc = cli_fail(CLI_USAGE_ERROR, cmd, "%s: ring attention takes a float32 Q", mine);
    if (rc == CLI_OK && !quantised)
        rc = cli_tensor_convert(cmd, flag ? flag : "q", mine, &in->t, type);
    if (rc == CLI_OK && quantised) { /* rows of bytes as rows of values */
        const size_t block = clattn_dtype_block(type), block_bytes = clattn_dtype_bytes(type, block);
        if (in->t.shape[3] % block_bytes)
            rc = cli_fail(CLI_USAGE_ERROR, cmd, "%s: rows of %zu bytes are not whole %s blocks of %zu bytes", mine,
                          in->t.shape[3], clattn_dtype_name(type), block_bytes);
        in->t.shape[3] = in->t.shape[3] / block_bytes * block;
    }
    if (rc == CLI_OK) {
        in->row_bytes = clattn_dtype_bytes(type, in->t.shape[3]);
        in->data = quantised ? in->t.bits : cli_tensor_storage(&in->t);
        if (!in->data)
            rc = cli_fail(CLI_RUNTIME_ERROR, cmd, "out of memory");
    }
    free(mine);
    return rc;
}

/* The sequence length: the whole file's, or the sum of every rank's rows. */
static size_t global_rows(const ring_input *in)
{
    unsigned long long rows = in->t.shape[2];
    if (in->sharded)
        MPI_Allreduce(MPI_IN_PLACE, &rows, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return (size_t)rows;
}

/* The rank's rows of an input: checked against the shard (a sharded file), or taken from the whole. */
static int shard_input(const char *cmd, const char *path, ring_input *in, size_t n, int ranks, int rank,
                       clattn_ring_layout layout)
{
    clattn_ring_shard sh;
    if ((size_t)ranks > n)
        return cli_fail(CLI_USAGE_ERROR, cmd, "%s: %zu rows for %d ranks: every rank needs at least one", path, n, ranks);
    clattn_ring_shard_of(n, ranks, rank, layout, &sh);
    if (in->sharded) {
        if (in->t.shape[2] != sh.rows)
            return cli_fail(CLI_USAGE_ERROR, cmd, "%s: rank %d holds %zu rows, its shard of %zu has %zu", path, rank,
                            in->t.shape[2], n, sh.rows);
        in->rows = (void *)in->data;
        return CLI_OK;
    }
    /* The shard's runs of rows of each (batch, head) slice, as bytes (a quantised row's blocks whole). */
    const size_t slices = in->t.shape[0] * in->t.shape[1];
    in->rows = malloc(slices * sh.rows * in->row_bytes + 1);
    if (!in->rows)
        return cli_fail(CLI_RUNTIME_ERROR, cmd, "out of memory");
    char *to = in->rows;
    for (size_t i = 0; i < slices; i++)
        for (int c = 0; c < 2; c++) {
            memcpy(to, (const char *)in->data + (i * n + sh.start[c]) * in->row_bytes, sh.len[c] * in->row_bytes);
            to += sh.len[c] * in->row_bytes;
        }
    return CLI_OK;
}

/* Rank 0 receives every rank's slice (slices × rows × width floats each) and reassembles the whole;
 * the others send theirs. */
static int gather(const char *cmd, const float *mine, size_t slices, size_t n, size_t width, int ranks, int rank,
                  clattn_ring_layout layout, float **whole)
{
    *whole = NULL;
    int rc = CLI_OK;
    if (rank == 0 && !(*whole = cli_alloc_floats(slices, n, width)))
        rc = cli_fail(CLI_RUNTIME_ERROR, cmd, "out of memory for the gathered output");
    if ((rc = agree(rc)) != CLI_OK)
        return rc;
    clattn_ring_shard sh;
    clattn_ring_shard_of(n, ranks, rank, layout, &sh);
    if (rank != 0) {
        MPI_Send(mine, (int)(slices * sh.rows * width), MPI_FLOAT, 0, 7, MPI_COMM_WORLD);
        return CLI_OK;
    }
    clattn_ring_shard_put(&sh, slices, n, width, mine, *whole);
    for (int r = 1; r < ranks && rc == CLI_OK; r++) {
        clattn_ring_shard other;
        clattn_ring_shard_of(n, ranks, r, layout, &other);
        float *part = cli_alloc_floats(slices, other.rows, width);
        if (!part) {
            rc = cli_fail(CLI_RUNTIME_ERROR, cmd, "out of memory");
            MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR); /* the senders would wait for ever */
        }
        MPI_Recv(part, (int)(slices * other.rows * width), MPI_FLOAT, r, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        clattn_ring_shard_put(&other, slices, n, width, part, *whole);
        free(part);
    }
    return rc;
}

/* Rank 0's report: each rank's numbers, gathered. */
static void report(const clattn_ring_stats *st, int ranks, int rank, size_t L, size_t S, clattn_ring_layout layout)
{
    double mine[6] = {st->seconds, st->wait_seconds, (double)st->device_peak_bytes, (double)st->bytes_sent,
                      (double)st->pairs, (double)st->host_bytes};
    double *all = rank == 0 ? malloc((size_t)ranks * sizeof mine) : NULL;
    if (agree(rank == 0 && !all ? CLI_RUNTIME_ERROR : CLI_OK) != CLI_OK)
        return; /* no room on rank 0 for the report: every rank skips the gather */
    MPI_Gather(mine, 6, MPI_DOUBLE, all, 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank != 0)
        return;
    printf("clattn ring: %d rank%s, L %zu, S %zu, %s layout\n", ranks, ranks > 1 ? "s" : "", L, S,
           layout == CLATTN_RING_ZIGZAG ? "zigzag" : "contiguous");
    for (int r = 0; r < ranks; r++) {
        const double *a = all + 6 * r;
        printf("  rank %d: %.3f s, waited %.3f s beyond its kernels, device peak %.2f MiB, host %.2f MiB, "
               "sent %.2f MiB, %.0f pairs\n", r, a[0], a[1], a[2] / 1048576.0, a[5] / 1048576.0, a[3] / 1048576.0,
               a[4]);
    }
    free(all);
}

/* This rank's file for an output path: the whole tensor at path on rank 0 with --gather (nothing on the
 * other ranks: *name stays NULL), else its own slice at path with "{rank}" replaced. */
static int output_name(const char *cmd, const char *path, bool gathered, int rank, char **name)
{
    *name = NULL;
    if (gathered && rank != 0)
        return CLI_OK;
    if (gathered && (*name = malloc(strlen(path) + 1)))
        strcpy(*name, path);
    else if (!gathered)
        *name = with_rank(path, rank);
    if (!*name)
        return cli_fail(CLI_RUNTIME_ERROR, cmd, "out of memory");
    return CLI_OK;
}

/* The shape of this rank's file: (B,H,rows,width), or (B,H,rows) for the log-sum-exp. */
static size_t file_shape(size_t B, size_t H, size_t n, size_t width, bool gathered, int ranks, int rank,
                         clattn_ring_layout layout, bool is_lse, size_t shape[4])
{
    clattn_ring_shard sh;
    clattn_ring_shard_of(n, ranks, rank, layout, &sh);
    shape[0] = B;
    shape[1] = H;
    shape[2] = gathered ? n : sh.rows;
    shape[3] = width;
    return is_lse ? 3 : 4;
}

/* Writes output i (added by this rank, or by rank 0 alone with --gather): this rank's rows, or every
 * rank's gathered on rank 0 (a collective call then: every rank makes it). */
static int write_slice_or_whole(const char *cmd, cli_outputs *outs, size_t i, const float *mine, size_t B, size_t H,
                                size_t n, size_t width, bool gathered, int ranks, int rank, clattn_ring_layout layout,
                                bool is_lse)
{
    size_t shape[4];
    const size_t ndim = file_shape(B, H, n, width, gathered, ranks, rank, layout, is_lse, shape);
    if (!gathered)
        return cli_outputs_write_npy(cmd, outs, i, mine, ndim, shape, CLATTN_FLOAT32);
    float *whole = NULL;
    int rc = gather(cmd, mine, B * H, n, width, ranks, rank, layout, &whole);
    if (rc == CLI_OK && rank == 0)
        rc = cli_outputs_write_npy(cmd, outs, i, whole, ndim, shape, CLATTN_FLOAT32);
    free(whole);
    return rc;
}

int cmd_ring(int argc, char **argv)
{
    const char *cmd = "ring";
    const char *path[3] = {NULL}, *out_path = NULL, *lse_path = NULL, *layout_text = NULL, *timeout_text = NULL;
    const char *scale_text = NULL, *device = NULL, *dtype_text[2] = {NULL, NULL};
    bool help = false, gathered = false;
    cli_masks m = {0};
    cli_variants var = {0};
    const cli_option opts[] = {
        {"q", NULL, &path[0]},         {"k", NULL, &path[1]},          {"v", NULL, &path[2]},
        {"out", NULL, &out_path},      {"lse", NULL, &lse_path},       {"gather", &gathered, NULL},
        {"layout", NULL, &layout_text}, {"timeout", NULL, &timeout_text}, {"scale", NULL, &scale_text},
        {"device", NULL, &device},     {"k-dtype", NULL, &dtype_text[0]}, {"v-dtype", NULL, &dtype_text[1]},
        CLI_VARIANT_OPTIONS(&var),      CLI_MASK_OPTIONS(&m),
    };
    int rc = cli_parse(cmd, argc, argv, 2, opts, sizeof opts / sizeof opts[0], &help);
    if (rc != CLI_OK || help) {
        fputs(ring_help, help && rc == CLI_OK ? stdout : stderr);
        return rc;
    }
    /* Usage errors that every rank finds alike: reported before MPI starts. */
    clattn_ring_layout layout = CLATTN_RING_ZIGZAG;
    float timeout = 60.0f;
    clattn_sdpa_desc desc = CLATTN_SDPA_DESC_INIT;
    if (!path[0] || !path[1] || !path[2] || !out_path)
        return cli_fail(CLI_USAGE_ERROR, cmd, "--%s is required (see --help)",
                        !path[0] ? "q" : !path[1] ? "k" : !path[2] ? "v" : "out");
    if (layout_text && strcmp(layout_text, "zigzag") != 0 && strcmp(layout_text, "contiguous") != 0)
        return cli_fail(CLI_USAGE_ERROR, cmd, "--layout: '%s' is not zigzag or contiguous", layout_text);
    if (layout_text && strcmp(layout_text, "contiguous") == 0)
        layout = CLATTN_RING_CONTIGUOUS;
    if (!gathered && (!strstr(out_path, "{rank}") || (lse_path && !strstr(lse_path, "{rank}"))))
        return cli_fail(CLI_USAGE_ERROR, cmd, "--out and --lse name a file per rank (\"{rank}\" in the path), or "
                        "give --gather");
    if (m.mask_path)
        return cli_fail(CLI_USAGE_ERROR, cmd, "ring attention takes no --mask (causal masks, key lengths, offsets "
                        "and windows work)");
    if (var.scores_text)
        return cli_fail(CLI_USAGE_ERROR, cmd, "ring attention returns no scores or weights (--scores)");
    if (var.softmax_double) /* (its fused kernel and log-sum-exp merges are float32) */
        return cli_fail(CLI_USAGE_ERROR, cmd, "ring attention computes its softmax in float32 (--softmax-double)");
    if ((timeout_text && ((rc = cli_parse_float(cmd, "timeout", timeout_text, &timeout)) != CLI_OK)) ||
        (scale_text && (rc = cli_parse_float(cmd, "scale", scale_text, &desc.scale)) != CLI_OK) ||
        (rc = cli_variants_parse(cmd, &var)) != CLI_OK)
        return rc;
    if (!(timeout > 0.0f))
        return cli_fail(CLI_USAGE_ERROR, cmd, "--timeout: a positive number of seconds");
    static const char *const dtype_flag[2] = {"k-dtype", "v-dtype"};
    clattn_dtype kv_type[2] = {CLATTN_FLOAT32, CLATTN_FLOAT32};
    for (int i = 0; i < 2; i++) {
        if (dtype_text[i] && (rc = cli_parse_format(cmd, dtype_flag[i], dtype_text[i], &kv_type[i])) != CLI_OK)
            return rc;
        if (kv_type[i] == CLATTN_INT8)
            return cli_fail(CLI_USAGE_ERROR, cmd, "--%s int8: its row scales are a device buffer, which ring "
                            "attention does not take (q8_0 carries its own)", dtype_flag[i]);
    }

    int initialized = 0, rank = 0, ranks = 1;
    MPI_Initialized(&initialized);
    if (!initialized)
        MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);

    ring_input in[3];
    memset(in, 0, sizeof in);
    clattn_context *ctx = NULL;
    clattn_ring *ring = NULL;
    float *out = NULL, *lse = NULL;
    char *names[2] = {NULL, NULL}; /* this rank's output files' names */
    for (int i = 0; i < 3 && rc == CLI_OK; i++)
        rc = load_input(cmd, path[i], i ? dtype_flag[i - 1] : NULL, i ? kv_type[i - 1] : CLATTN_FLOAT32, rank, &in[i]);
    if ((rc = agree(rc)) != CLI_OK)
        goto done;
    const size_t L = global_rows(&in[0]), S = global_rows(&in[1]), S_v = global_rows(&in[2]);
    const size_t B = in[0].t.shape[0], H = in[0].t.shape[1], Dqk = in[0].t.shape[3];
    const size_t N = in[1].t.shape[1], Dv = in[2].t.shape[3];
    if (in[1].t.shape[0] != B || in[2].t.shape[0] != B || in[2].t.shape[1] != N || in[1].t.shape[3] != Dqk ||
        S_v != S || !N || H % N != 0)
        rc = cli_fail(CLI_USAGE_ERROR, cmd, "shapes: Q (B,H,L,Dqk), K (B,N,S,Dqk) and V (B,N,S,Dv) with N dividing H "
                      "(rank %d: Q (%zu,%zu,·,%zu), K (%zu,%zu,·,%zu), V (%zu,%zu,·,%zu))", rank, B, H, Dqk,
                      in[1].t.shape[0], N, in[1].t.shape[3], in[2].t.shape[0], in[2].t.shape[1], Dv);
    for (int i = 0; i < 3 && rc == CLI_OK; i++)
        rc = shard_input(cmd, path[i], &in[i], i ? S : L, ranks, rank, layout);
    if (rc == CLI_OK && (rc = cli_masks_load(cmd, &m, B, H, L, S)) == CLI_OK)
        rc = cli_variants_load(cmd, &var, H);
    if (rc == CLI_OK && var.kv_heads && var.kv_heads != N)
        rc = cli_fail(CLI_USAGE_ERROR, cmd, "--kv-heads %zu, but K has %zu heads", var.kv_heads, N);
    if ((rc = agree(rc)) != CLI_OK)
        goto done;

    char *spec = device ? with_rank(device, rank) : NULL;
    rc = cli_open_context(cmd, spec, &ctx);
    free(spec);
    /* Every rank has its device before the ring's collective creation starts. */
    if ((rc = agree(rc)) != CLI_OK)
        goto done;
    const clattn_status created = clattn_ring_create(&ring, ctx, MPI_COMM_WORLD, timeout);
    if (created != CLATTN_SUCCESS) {
        rc = cli_fail(CLI_RUNTIME_ERROR, cmd, "rank %d: %s: %s", rank, clattn_status_string(created),
                      clattn_ring_last_error(NULL));
        if (created == CLATTN_ERROR_TIMEOUT)
            MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR); /* a rank is gone: the job cannot end cleanly */
    }
    if ((rc = agree(rc)) != CLI_OK)
        goto done;
    clattn_ring_shard qs;
    clattn_ring_shard_of(L, ranks, rank, layout, &qs);
    /* What travels to rank 0 (--gather) is one MPI message per rank: its count must fit an int. */
    if (gathered && (B * H * (L / (size_t)ranks + 1) > (size_t)INT_MAX / (Dv ? Dv : 1)))
        rc = cli_fail(CLI_USAGE_ERROR, cmd, "--gather: a rank's slice of the output passes an MPI message's %d "
                      "floats (write a file per rank: \"{rank}\" in --out)", INT_MAX);
    if ((rc = agree(rc)) != CLI_OK)
        goto done;
    out = cli_alloc_floats(B * H, qs.rows, Dv);
    lse = cli_alloc_floats(B * H, qs.rows, 1);
    if ((rc = agree(!out || !lse ? cli_fail(CLI_RUNTIME_ERROR, cmd, "out of memory") : CLI_OK)) != CLI_OK)
        goto done;
    desc.batch = B;
    desc.heads = H;
    desc.kv_heads = N;
    desc.q_len = L;
    desc.kv_len = S;
    desc.qk_dim = Dqk;
    desc.v_dim = Dv;
    desc.masks = &m.masks;
    desc.k_dtype = kv_type[0];
    desc.v_dtype = kv_type[1];
    cli_variants_apply(&var, &desc);
    clattn_ring_stats stats = CLATTN_RING_STATS_INIT;
    const clattn_status st =
        clattn_ring_sdpa_host(ring, &desc, layout, in[0].rows, in[1].rows, in[2].rows, out, lse, &stats);
    if (st != CLATTN_SUCCESS) {
        /* Every rank has the same answer: rank 0 says it. */
        if (rank == 0)
            cli_fail(CLI_RUNTIME_ERROR, cmd, "%s (rank %d failed): %s", clattn_status_string(st),
                     clattn_ring_failed_rank(ring), clattn_ring_last_error(ring));
        rc = CLI_RUNTIME_ERROR;
        if (st == CLATTN_ERROR_TIMEOUT)
            MPI_Abort(MPI_COMM_WORLD, CLI_RUNTIME_ERROR); /* a rank is gone: the job cannot end cleanly */
        goto done;
    }
    report(&stats, ranks, rank, L, S, layout);
    /* Every destination checked (on every rank, before any writes) before anything is written. */
    cli_outputs outs = {0};
    size_t index[2] = {0};
    static const char *const out_flags[2] = {"out", "lse"};
    rc = output_name(cmd, out_path, gathered, rank, &names[0]);
    if (rc == CLI_OK && lse_path)
        rc = output_name(cmd, lse_path, gathered, rank, &names[1]);
    if (rc == CLI_OK)
        rc = cli_check_distinct_outputs(cmd, out_flags, (const char *const[]){names[0], names[1]}, 2);
    for (int i = 0; i < 2 && rc == CLI_OK; i++)
        if (names[i]) {
            size_t shape[4];
            const size_t ndim = file_shape(B, H, L, i ? 1 : Dv, gathered, ranks, rank, layout, i == 1, shape);
            rc = cli_outputs_add_npy(cmd, &outs, names[i], ndim, shape, CLATTN_FLOAT32, &index[i]);
        }
    if ((rc = agree(rc)) == CLI_OK)
        rc = agree(write_slice_or_whole(cmd, &outs, index[0], out, B, H, L, Dv, gathered, ranks, rank, layout, false));
    if (rc == CLI_OK && lse_path)
        rc = write_slice_or_whole(cmd, &outs, index[1], lse, B, H, L, 1, gathered, ranks, rank, layout, true);
    /* A rank whose file could not be written makes every rank discard its own before any is renamed into
     * place (a rename that fails at the very end is reported by its rank alone). */
    if ((rc = agree(rc)) == CLI_OK)
        rc = agree(cli_outputs_commit(cmd, &outs));
    cli_outputs_discard(&outs); /* after a commit: frees what it left, removes nothing committed */
done:
    for (int i = 0; i < 3; i++) {
        if (in[i].rows != in[i].data)
            free(in[i].rows);
        cli_tensor_free(&in[i].t);
    }
    free(out);
    free(lse);
    free(names[0]);
    free(names[1]);
    cli_masks_free(&m);
    cli_variants_free(&var);
    clattn_ring_free(ring);
    clattn_context_free(ctx);
    if (!initialized)
        MPI_Finalize();
    return rc;
}
