/*
 * No call's state on the context (issue 37, item 2). A call's mods reach its kernels' builds as an
 * argument of the kernel cache's lookup (program_get), never through fields of the context that one call
 * sets and a later one reads. On each device and each path (fused, staged, decode), one context runs:
 * a call without mods, with mods A (a score_mod), with mods B (a mask_mod), without mods again, A
 * again, then frees both mods and runs without them once more. Each result must equal, bit for bit,
 * the first of its kind (the mods shape only their own call), A and B must change the result, and a
 * build that names the mods feature without being given mods is refused even right after a call
 * with mods on the same context — where a context that parked the last call's mods (freed by then)
 * would have built with them.
 *
 * It calls the internal lookup on the contexts it makes, so it links the library's objects alone
 * (clattn_internal_dep), as test_tuning does.
 */
#include "test_util.h"

#include "context.h" /* internal: the kernel cache's lookup */
#include "params.h"
#include "program.h"

#include <string.h>

enum { B = 1, H = 2, L = 4, S = 7, D = 8 };

static const clattn_algorithm paths[] = {CLATTN_ALGORITHM_FUSED, CLATTN_ALGORITHM_STAGED, CLATTN_ALGORITHM_DECODE};
#define N_PATHS (sizeof paths / sizeof paths[0])

static clattn_mods *make_mods(clattn_context *ctx, const char *source)
{
    clattn_mods_desc md = CLATTN_MODS_DESC_INIT;
    md.source = source;
    clattn_mods *mods = NULL;
    TU_ASSERT_OK(clattn_mods_create(ctx, &md, &mods), ctx, "clattn_mods_create");
    return mods;
}

/* One call of the shape with these mods (NULL: none); its output (tracked). */
static float *run(clattn_context *ctx, clattn_algorithm path, const clattn_mods *mods, const float *q, const float *k,
                  const float *v, const char *what)
{
    clattn_sdpa_desc desc = CLATTN_SDPA_DESC_INIT;
    desc.batch = B, desc.heads = H, desc.q_len = L, desc.kv_len = S, desc.qk_dim = D;
    desc.algorithm = path;
    desc.mods = mods;
    float *out = tu_falloc(B * H * L * D);
    TU_ASSERT_OK(clattn_sdpa_host(ctx, &desc, q, k, v, NULL, out, NULL, NULL), ctx, what);
    return out;
}

static void same(const float *got, const float *want, const char *what)
{
    ck_assert_msg(memcmp(got, want, B * H * L * D * sizeof *got) == 0, "%s: %s differs from the first such call",
                  tu_label(), what);
}

START_TEST(test_mods_stay_with_their_call)
{
    const clattn_algorithm path = paths[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    tu_set_label("path %d on %s", (int)path, tu_dev_spec[dev]);
    float *q = tu_falloc(B * H * L * D), *k = tu_falloc(B * H * S * D), *v = tu_falloc(B * H * S * D);
    tu_fill_uniform(q, B * H * L * D, 1.0f, 1);
    tu_fill_uniform(k, B * H * S * D, 1.0f, 2);
    tu_fill_uniform(v, B * H * S * D, 1.0f, 3);
    clattn_mods *a = make_mods(ctx, "float score_mod(float score, int b, int h, long q, long k) "
                                    "{ return k == 0 ? score + 3.0f : score; }");
    clattn_mods *m = make_mods(ctx, "bool mask_mod(int b, int h, long q, long k) { return k != 1; }");
    const float *plain = run(ctx, path, NULL, q, k, v, "without mods");
    const float *with_a = run(ctx, path, a, q, k, v, "with mods A");
    const float *with_m = run(ctx, path, m, q, k, v, "with mods B");
    ck_assert_msg(memcmp(with_a, plain, B * H * L * D * sizeof *plain) != 0, "%s: mods A changed nothing", tu_label());
    ck_assert_msg(memcmp(with_m, plain, B * H * L * D * sizeof *plain) != 0, "%s: mods B changed nothing", tu_label());
    same(run(ctx, path, NULL, q, k, v, "without mods, after B"), plain, "a call without mods after one with them");
    same(run(ctx, path, a, q, k, v, "with mods A again"), with_a, "a call with mods A after others");
    clattn_mods_free(a);
    clattn_mods_free(m);
    /* Right after a call with mods A, now freed: a build with the mods feature and no mods given is
     * refused (a context holding A's text would have built with it). */
    const family_build *fb = NULL;
    const clattn_status st = program_get(ctx, &family_fused, "", 4, FEATURE_BIT(ALL) | FEATURE_BIT(MODS), NULL, &fb);
    ck_assert_msg(st == CLATTN_ERROR_INVALID_VALUE && fb == NULL &&
                      strstr(clattn_last_error(ctx), "no mods given") != NULL,
                  "%s: a mods build without mods: %s (%s)", tu_label(), clattn_status_string(st),
                  clattn_last_error(ctx));
    same(run(ctx, path, NULL, q, k, v, "without mods, after freeing them"), plain, "a call after the mods went");
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("call_state");
    tu_add_loop(s, "mods_stay_with_their_call", test_mods_stay_with_their_call, N_PATHS * tu_ndev);
    return s;
}

int main(void) { return tu_main(make_suite); }
