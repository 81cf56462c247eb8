/* Runs the first tutorial's worked example ("我 爱 人工 智能", d_model 8, d_k 4, its own weights) through
 * clattn_mha_host on the default device and prints the attention weights and output the way the
 * tutorial does. Usage: worked_example [DEVICE-SPEC] */
#include "tutorial_example.h"

#include <clattn/clattn.h>
#include <stdio.h>

#define N TUTORIAL_TOKENS
#define DM TUTORIAL_D_MODEL
#define DK TUTORIAL_D_K

static void to_float(const double *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (float)in[i];
}

/* Print s right-aligned in `width` terminal columns; CJK characters take two columns. */
static void print_cell(const char *s, int width)
{
    int columns = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p & 0xC0) == 0x80)
            continue; /* continuation byte */
        columns += (*p >= 0xE3 && *p <= 0xED) ? 2 : 1; /* U+3000..U+DFFF: CJK, two columns wide */
    }
    printf("%*s%s", width > columns ? width - columns : 0, "", s);
}

static int fail(const clattn_context *ctx, clattn_status st, const char *what)
{
    fprintf(stderr, "worked_example: %s: %s: %s\n", what, clattn_status_string(st), clattn_last_error(ctx));
    return 1;
}

int main(int argc, char **argv)
{
    float x[N * DM], wq[DM * DK], wk[DM * DK], wv[DM * DK], out[N * DK], weights[N * N];
    to_float(&tutorial_x[0][0], x, N * DM);
    to_float(&tutorial_w_q[0][0], wq, DM * DK);
    to_float(&tutorial_w_k[0][0], wk, DM * DK);
    to_float(&tutorial_w_v[0][0], wv, DM * DK);

    clattn_context *ctx = NULL;
    clattn_status st = clattn_context_create(&ctx, argc > 1 ? argv[1] : NULL);
    if (st != CLATTN_SUCCESS)
        return fail(NULL, st, "creating a context");

    clattn_mha_desc desc = {.batch = 1, .q_len = N, .model_dim = DM, .heads = 1, .qk_dim = DK};
    clattn_mha_host_weights w = {.w_q = wq, .w_k = wk, .w_v = wv};
    st = clattn_mha_host(ctx, &desc, x, NULL, &w, NULL, out, weights);
    if (st != CLATTN_SUCCESS) {
        int rc = fail(ctx, st, "self-attention");
        clattn_context_free(ctx);
        return rc;
    }

    printf("=== Self-attention on %s: the tutorial's worked example ===\n\n", clattn_context_device_name(ctx));
    printf("Attention weights (row: query, column: key):\n");
    print_cell("", 8);
    for (int j = 0; j < N; j++)
        print_cell(tutorial_words[j], 10);
    printf("\n");
    for (int i = 0; i < N; i++) {
        print_cell(tutorial_words[i], 8);
        for (int j = 0; j < N; j++)
            printf("  %8.4f", weights[i * N + j]);
        printf("\n");
    }
    printf("\nOutput (weights · V):\n");
    for (int i = 0; i < N; i++) {
        print_cell(tutorial_words[i], 8);
        for (int d = 0; d < DK; d++)
            printf("  % .8f", out[i * DK + d]);
        printf("\n");
    }
    clattn_context_free(ctx);
    return 0;
}
