/* `clattn demo`: the first tutorial's worked example ("我 爱 人工 智能", d_model 8, d_k 4, the tutorial's
 * own weights) run stage by stage on the device — three projections, then attention — and printed the
 * way the tutorial prints it. */
#include "cli.h"
#include "commands.h"
#include "tutorial_example.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N TUTORIAL_TOKENS
#define DM TUTORIAL_D_MODEL
#define DK TUTORIAL_D_K

/* Prints s right-aligned in `width` terminal columns; CJK characters take two columns. */
static void print_cell(const char *s, int width)
{
    int columns = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p & 0xC0) == 0x80)
            continue; /* UTF-8 continuation byte */
        columns += (*p >= 0xE3 && *p <= 0xED) ? 2 : 1; /* U+3000..U+DFFF: CJK, two columns wide */
    }
    printf("%*s%s", width > columns ? width - columns : 0, "", s);
}

static void print_rows(const char *title, const float *m, int cols)
{
    printf("%s\n", title);
    for (int i = 0; i < N; i++) {
        print_cell(tutorial_words[i], 6);
        printf(": [");
        for (int j = 0; j < cols; j++)
            printf("%s% .8f", j ? " " : "", m[i * cols + j]);
        printf("]\n");
    }
    printf("\n");
}

static void print_weights(const float *w)
{
    printf("Attention weights 注意力权重 (row: query, column: key):\n");
    print_cell("", 6);
    for (int j = 0; j < N; j++)
        print_cell(tutorial_words[j], 8);
    printf("\n");
    for (int i = 0; i < N; i++) {
        print_cell(tutorial_words[i], 6);
        for (int j = 0; j < N; j++)
            printf("  %.4f", w[i * N + j]);
        printf("\n");
    }
    printf("\n");
}

typedef struct demo_tensors {
    float x[N * DM], wq[DM * DK], wk[DM * DK], wv[DM * DK];
    float q[N * DK], k[N * DK], v[N * DK], weights[N * N], out[N * DK];
} demo_tensors;

/* Projections and attention through the library's stage entry points on device buffers. */
static clattn_status run_demo(clattn_context *ctx, demo_tensors *t, const char **what)
{
    enum { X, WQ, WK, WV, Q, K, V, P, O, NB };
    const size_t floats[NB] = {N * DM, DM * DK, DM * DK, DM * DK, N * DK, N * DK, N * DK, N * N, N * DK};
    float *host[NB] = {t->x, t->wq, t->wk, t->wv, t->q, t->k, t->v, t->weights, t->out};
    cl_mem buf[NB] = {0};
    cl_int err = CL_SUCCESS;
    clattn_status st = CLATTN_SUCCESS;
    *what = "creating buffers";
    for (int i = 0; i < NB && err == CL_SUCCESS; i++)
        buf[i] = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE | (i <= WV ? CL_MEM_COPY_HOST_PTR : 0),
                                floats[i] * sizeof(float), i <= WV ? host[i] : NULL, &err);
    if (err != CL_SUCCESS) {
        st = (clattn_status)err;
        goto done;
    }
    clattn_sdpa_desc desc = CLATTN_SDPA_DESC_INIT;
    desc.batch = desc.heads = 1;
    desc.q_len = desc.kv_len = N;
    desc.qk_dim = DK;
    *what = "projection";
    if ((st = clattn_projection(ctx, N, DM, DK, buf[X], buf[WQ], NULL, buf[Q])) != CLATTN_SUCCESS ||
        (st = clattn_projection(ctx, N, DM, DK, buf[X], buf[WK], NULL, buf[K])) != CLATTN_SUCCESS ||
        (st = clattn_projection(ctx, N, DM, DK, buf[X], buf[WV], NULL, buf[V])) != CLATTN_SUCCESS)
        goto done;
    *what = "attention";
    if ((st = clattn_sdpa(ctx, &desc, buf[Q], buf[K], buf[V], NULL, buf[O], buf[P], NULL)) != CLATTN_SUCCESS)
        goto done;
    *what = "reading results";
    for (int i = Q; i < NB && err == CL_SUCCESS; i++)
        err = clEnqueueReadBuffer(clattn_context_queue(ctx), buf[i], CL_TRUE, 0, floats[i] * sizeof(float), host[i],
                                  0, NULL, NULL);
    st = (clattn_status)err;
done:
    clattn_finish(ctx);
    for (int i = 0; i < NB; i++)
        if (buf[i])
            clReleaseMemObject(buf[i]);
    return st;
}

/* --save DIR and --heatmap FILE, committed together: every destination checked before anything is
 * written, and a failure leaves no output behind (nor DIR, when this run made it). */
static int save_all(const char *dir, const char *heatmap, const demo_tensors *t)
{
    const struct { const char *name; const float *data; size_t rows, cols; } files[] = {
        {"x", t->x, N, DM},  {"wq", t->wq, DM, DK}, {"wk", t->wk, DM, DK},        {"wv", t->wv, DM, DK},
        {"q", t->q, N, DK},  {"k", t->k, N, DK},    {"v", t->v, N, DK},           {"weights", t->weights, N, N},
        {"out", t->out, N, DK},
    };
    enum { NFILES = sizeof files / sizeof files[0] };
    char paths[NFILES][4096];
    const char *names[NFILES + 1] = {heatmap}, *flags[NFILES + 1] = {"heatmap"};
    for (size_t i = 0; dir && i < NFILES; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/%s.npy", dir, files[i].name);
        names[i + 1] = paths[i];
        flags[i + 1] = "save";
    }
    int rc = cli_check_distinct_outputs("demo", flags, names, dir ? NFILES + 1 : 1);
    cli_outputs out = {0};
    bool made_dir = false;
    if (rc == CLI_OK && dir) {
        made_dir = mkdir(dir, 0777) == 0;
        if (!made_dir && errno != EEXIST)
            rc = cli_fail(CLI_USAGE_ERROR, "demo", "%s: cannot create the folder: %s", dir, strerror(errno));
    }
    size_t index[NFILES + 1];
    for (size_t i = 0; i < NFILES + 1 && rc == CLI_OK; i++)
        if (names[i])
            rc = i == 0 ? cli_outputs_add("demo", &out, heatmap, "(heatmap of the attention weights)", &index[0])
                        : cli_outputs_add_npy("demo", &out, names[i], 2,
                                              (const size_t[]){files[i - 1].rows, files[i - 1].cols}, CLATTN_FLOAT32,
                                              &index[i]);
    if (rc == CLI_OK && heatmap) {
        char tokens[64];
        snprintf(tokens, sizeof tokens, "%s,%s,%s,%s", tutorial_words[0], tutorial_words[1], tutorial_words[2],
                 tutorial_words[3]);
        rc = write_heatmap("demo", &out, index[0], t->weights, 1, 1, N, N, tokens, NULL);
    }
    for (size_t i = 0; dir && i < NFILES && rc == CLI_OK; i++)
        rc = cli_outputs_write_npy("demo", &out, index[i + 1], files[i].data, 2,
                                   (const size_t[]){files[i].rows, files[i].cols}, CLATTN_FLOAT32);
    if (rc == CLI_OK)
        rc = cli_outputs_commit("demo", &out);
    cli_outputs_discard(&out);
    if (rc != CLI_OK && made_dir)
        rmdir(dir); /* (empty again: its files were taken back) */
    return rc;
}

static const char demo_help[] =
    "usage: clattn demo [--save DIR] [--heatmap FILE.svg] [--device SPEC]\n"
    "\n"
    "Runs the first tutorial's worked example: the sentence \"我 爱 人工 智能\" as four 8-dimensional\n"
    "vectors, W_Q, W_K, W_V of shape (8, 4) from np.random.seed(42), randn(8, 4) * 0.1. Prints Q, K, V,\n"
    "the attention weights and the output, computed on the device stage by stage.\n"
    "  --save DIR          write x, wq, wk, wv, q, k, v, weights and out as .npy files into DIR\n"
    "  --heatmap FILE.svg  SVG heatmap of the attention weights, tokens as labels\n"
    "  --device SPEC       P:D, cpu, gpu, accelerator or part of a name\n";

int cmd_demo(int argc, char **argv)
{
    const char *save_dir = NULL, *heatmap = NULL, *device = NULL;
    bool help = false;
    const cli_option opts[] = {{"save", NULL, &save_dir}, {"heatmap", NULL, &heatmap}, {"device", NULL, &device}};
    int rc = cli_parse("demo", argc, argv, 2, opts, 3, &help);
    if (rc != CLI_OK || help) {
        fputs(demo_help, help && rc == CLI_OK ? stdout : stderr);
        return rc;
    }
    demo_tensors t;
    for (int i = 0; i < N * DM; i++)
        t.x[i] = (float)tutorial_x[i / DM][i % DM];
    for (int i = 0; i < DM * DK; i++) {
        t.wq[i] = (float)tutorial_w_q[i / DK][i % DK];
        t.wk[i] = (float)tutorial_w_k[i / DK][i % DK];
        t.wv[i] = (float)tutorial_w_v[i / DK][i % DK];
    }
    clattn_context *ctx;
    if ((rc = cli_open_context("demo", device, &ctx)) != CLI_OK)
        return rc;
    const char *what;
    clattn_status st = run_demo(ctx, &t, &what);
    cli_report_warning("demo", ctx);
    if (st != CLATTN_SUCCESS) {
        rc = cli_fail_status("demo", ctx, st, what);
        clattn_context_free(ctx);
        return rc;
    }
    printf("=== Self-attention: Q, K, V 计算演示 (on %s) ===\n\n", clattn_context_device_name(ctx));
    clattn_context_free(ctx);
    print_rows("Q = X·W_Q (查询 query: what am I looking for):", t.q, DK);
    print_rows("K = X·W_K (键 key: what do I have):", t.k, DK);
    print_rows("V = X·W_V (值 value: my actual content):", t.v, DK);
    print_weights(t.weights);
    print_rows("Output = weights·V (融合上下文的输出):", t.out, DK);
    if (save_dir || heatmap)
        rc = save_all(save_dir, heatmap, &t);
    return rc;
}
