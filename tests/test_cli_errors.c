/* The clattn tool's refusals and its outputs: every bad flag, value, file and shape it must refuse exits 2
 * with one line naming the culprit (flag-parsing errors add the command's usage), and leaves no output file
 * behind — nor a missing output folder made; outputs written through links, their modes kept. Then the
 * regressions these tests found in the tool, fixed since. */
#define _POSIX_C_SOURCE 200809L /* symlink, lstat */

#include "cli_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every case runs in a fresh folder with valid inputs; outputs go to "o/", which must stay empty. */
static void valid_inputs(void)
{
    rng.state = 500;
    save_f32("q.npy", rand_floats(2 * 3 * 4 * 8, 1), 4, (size_t[]){2, 3, 4, 8});
    save_f32("k.npy", rand_floats(2 * 3 * 6 * 8, 1), 4, (size_t[]){2, 3, 6, 8});
    save_f32("v.npy", rand_floats(2 * 3 * 6 * 5, 1), 4, (size_t[]){2, 3, 6, 5});
    save_f32("x.npy", rand_floats(2 * 4 * 8, 1), 3, (size_t[]){2, 4, 8});
    save_f32("wq.npy", rand_floats(8 * 6, 1), 2, (size_t[]){8, 6});
    save_f32("wk.npy", rand_floats(8 * 6, 1), 2, (size_t[]){8, 6});
    save_f32("wv.npy", rand_floats(8 * 6, 1), 2, (size_t[]){8, 6});
    ck_assert(mkdir(P("o"), 0700) == 0);
}

/* sdpa with the valid inputs, Q, K or V replaced when given, outputs in o/. */
static void sdpa_args(argl *a, const char *q, const char *k, const char *v)
{
    add(a, "sdpa", "--q", q ? q : P("q.npy"), "--k", k ? k : P("k.npy"), "--v", v ? v : P("v.npy"), "--out",
        P("o/out.npy"), "--weights", P("o/w.npy"), "--lse", P("o/lse.npy"), NULL);
}

static void mha_args(argl *a, const char *heads)
{
    add(a, "mha", "--x", P("x.npy"), "--wq", P("wq.npy"), "--wk", P("wk.npy"), "--wv", P("wv.npy"), "--heads",
        heads, "--out", P("o/y.npy"), "--weights", P("o/a.npy"), NULL);
}

/* Each make() fills the arguments and returns what the first line of stderr must contain. */
typedef struct err_case {
    const char *name;
    const char *(*make)(argl *a);
    bool usage_follows; /* flag-parsing errors print the command's usage after the message */
    const char *also;   /* NULL, or more that stderr must contain */
} err_case;

static const char *e_unknown_flag(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--bogus", NULL); return "--bogus"; }
static const char *e_missing_value(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", NULL); return "--scale"; }
static const char *e_flag_with_value(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--causal=yes", NULL);
    return "--causal";
}
static const char *e_positional(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "stray.npy", NULL); return "stray.npy"; }
static const char *e_scale_text(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", "abc", NULL); return "abc"; }
static const char *e_scale_suffix(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", "0.5x", NULL); return "0.5x"; }
static const char *e_scale_inf(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", "inf", NULL); return "inf"; }
static const char *e_scale_nan(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", "nan", NULL); return "nan"; }
static const char *e_heads_zero(argl *a) { mha_args(a, "0"); return "--heads"; }
static const char *e_heads_negative(argl *a) { mha_args(a, "-2"); return "-2"; }
static const char *e_heads_text(argl *a) { mha_args(a, "two"); return "two"; }
static const char *e_mha_scale(argl *a) { mha_args(a, "2"); add(a, "--scale", "fast", NULL); return "fast"; }
static const char *e_missing_v(argl *a)
{
    add(a, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--out", P("o/out.npy"), NULL);
    return "--v";
}
static const char *e_missing_out(argl *a)
{
    add(a, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--weights", P("o/w.npy"), NULL);
    return "--out";
}
static const char *e_missing_heads(argl *a)
{
    add(a, "mha", "--x", P("x.npy"), "--wq", P("wq.npy"), "--wk", P("wk.npy"), "--wv", P("wv.npy"), "--out",
        P("o/y.npy"), NULL);
    return "--heads";
}
static const char *e_no_file(argl *a) { sdpa_args(a, P("missing.npy"), 0, 0); return P("missing.npy"); }
static const char *e_directory(argl *a)
{
    ck_assert(mkdir(P("adir"), 0700) == 0);
    sdpa_args(a, 0, P("adir"), 0);
    return P("adir");
}
static const char *e_truncated(argl *a)
{
    size_t len;
    char *img = track(tu_read_file(P("q.npy"), &len));
    tu_write_file(P("trunc.npy"), img, len - 7);
    sdpa_args(a, P("trunc.npy"), 0, 0);
    return P("trunc.npy");
}
static const char *e_header_cut(argl *a)
{
    size_t len;
    char *img = track(tu_read_file(P("k.npy"), &len));
    tu_write_file(P("cut.npy"), img, 40);
    sdpa_args(a, 0, P("cut.npy"), 0);
    return P("cut.npy");
}
static const char *e_fortran(argl *a)
{
    float d[2 * 3 * 6 * 5] = {0};
    sdpa_args(a, 0, 0, save_raw("fortran.npy", 1, "<f4", "True", "(2, 3, 6, 5)", d, sizeof d));
    return P("fortran.npy");
}
static const char *e_big_endian(argl *a)
{
    float d[2 * 3 * 4 * 8] = {0};
    sdpa_args(a, save_raw("be.npy", 1, ">f4", "False", "(2, 3, 4, 8)", d, sizeof d), 0, 0);
    return P("be.npy");
}
static const char *e_dtype_i2(argl *a)
{
    int16_t d[2 * 3 * 4 * 8] = {0};
    sdpa_args(a, save_raw("i2.npy", 1, "<i2", "False", "(2, 3, 4, 8)", d, sizeof d), 0, 0);
    return P("i2.npy");
}
static const char *e_dtype_int_tensor(argl *a)
{
    int32_t d[2 * 3 * 6 * 8] = {0};
    sdpa_args(a, 0, save_raw("i4.npy", 1, "<i4", "False", "(2, 3, 6, 8)", d, sizeof d), 0);
    return P("i4.npy");
}
static const char *e_bad_magic(argl *a)
{
    size_t len;
    char *img = track(tu_read_file(P("q.npy"), &len));
    img[1] = 'M';
    tu_write_file(P("magic.npy"), img, len);
    sdpa_args(a, P("magic.npy"), 0, 0);
    return P("magic.npy");
}
static const char *e_not_npy(argl *a)
{
    tu_write_file(P("text.npy"), "1 2 3\n4 5 6\n", 12);
    sdpa_args(a, 0, 0, P("text.npy"));
    return P("text.npy");
}
/* /dev/zero never ends: it is refused after its first bytes, not read to an end. */
static const char *e_dev_zero(argl *a)
{
    sdpa_args(a, "/dev/zero", 0, 0);
    return "/dev/zero: not a .npy file";
}
static const char *e_v2_huge_header(argl *a)
{
    static const unsigned char img[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xF0, 0xFF, 0xFF, 0xFF};
    tu_write_file(P("huge.npy"), img, sizeof img);
    sdpa_args(a, P("huge.npy"), 0, 0);
    return P("huge.npy");
}
static const char *e_shape_overflow(argl *a)
{
    float d[16] = {0};
    sdpa_args(a, 0, save_raw("overflow.npy", 1, "<f4", "False", "(4294967296, 4294967296, 16)", d, sizeof d), 0);
    return P("overflow.npy");
}
static const char *e_rank_1(argl *a)
{
    sdpa_args(a, f32_file("q1.npy", 1, (size_t[]){8}), 0, 0);
    return P("q1.npy");
}
static const char *e_empty(argl *a)
{
    sdpa_args(a, f32_file("empty.npy", 4, (size_t[]){2, 3, 0, 8}), 0, 0);
    return P("empty.npy");
}
static const char *e_kv_disagree(argl *a)
{
    sdpa_args(a, 0, 0, f32_file("v5.npy", 4, (size_t[]){2, 3, 5, 5}));
    return P("v5.npy");
}
static const char *e_head_size(argl *a)
{
    sdpa_args(a, 0, f32_file("k7.npy", 4, (size_t[]){2, 3, 6, 7}), 0);
    return P("k7.npy");
}
static const char *e_batch_differs(argl *a)
{
    sdpa_args(a, 0, f32_file("k1.npy", 4, (size_t[]){1, 3, 6, 8}), 0);
    return P("k1.npy");
}
static const char *e_rank_differs(argl *a)
{
    sdpa_args(a, 0, 0, f32_file("v3.npy", 3, (size_t[]){3, 6, 5}));
    return "rank";
}
static const char *e_wq_rows(argl *a)
{
    add(a, "mha", "--x", P("x.npy"), "--wq", f32_file("wq7.npy", 2, (size_t[]){7, 6}), "--wk", P("wk.npy"), "--wv",
        P("wv.npy"), "--heads", "2", "--out", P("o/y.npy"), NULL);
    return P("wq7.npy");
}
static const char *e_wk_shape(argl *a)
{
    add(a, "mha", "--x", P("x.npy"), "--wq", P("wq.npy"), "--wk", f32_file("wk9.npy", 2, (size_t[]){8, 9}), "--wv",
        P("wv.npy"), "--heads", "3", "--out", P("o/y.npy"), NULL);
    return P("wk9.npy");
}
static const char *e_heads_divide(argl *a) { mha_args(a, "4"); return P("wq.npy"); }
static const char *e_heads_divide_wv(argl *a)
{
    add(a, "mha", "--x", P("x.npy"), "--wq", P("wq.npy"), "--wk", P("wk.npy"), "--wv",
        f32_file("wv4.npy", 2, (size_t[]){8, 4}), "--heads", "3", "--out", P("o/y.npy"), NULL);
    return P("wv4.npy");
}
static const char *e_bias_length(argl *a)
{
    mha_args(a, "2");
    add(a, "--bq", f32_file("bq5.npy", 1, (size_t[]){5}), NULL);
    return P("bq5.npy");
}
static const char *e_wo_rows(argl *a)
{
    mha_args(a, "2");
    add(a, "--wo", f32_file("wo.npy", 2, (size_t[]){5, 8}), NULL);
    return P("wo.npy");
}
static const char *e_bo_without_wo(argl *a)
{
    mha_args(a, "2");
    add(a, "--bo", f32_file("bo.npy", 1, (size_t[]){6}), NULL);
    return "--bo";
}
static const char *e_kv_batch(argl *a)
{
    mha_args(a, "2");
    add(a, "--kv", f32_file("kv.npy", 3, (size_t[]){3, 5, 8}), NULL);
    return P("kv.npy");
}
static const char *e_kv_rank(argl *a)
{
    mha_args(a, "2");
    add(a, "--kv", f32_file("kv2.npy", 2, (size_t[]){5, 8}), NULL);
    return P("kv2.npy");
}
static const char *e_key_length_gt_s(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--key-lengths", save_i64("len.npy", (const long long[]){6, 7}, 2), NULL);
    return P("len.npy");
}
static const char *e_key_length_negative(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--key-lengths", save_i32("lenneg.npy", (const long long[]){-1, 3}, 2), NULL);
    return P("lenneg.npy");
}
static const char *e_key_lengths_count(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--key-lengths", save_i64("len3.npy", (const long long[]){1, 2, 3}, 3), NULL);
    return P("len3.npy");
}
static const char *e_key_lengths_float(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--key-lengths", f32_file("lenf.npy", 1, (size_t[]){2}), NULL);
    return P("lenf.npy");
}
static const char *e_mask_shape(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--mask", f32_file("mask47.npy", 2, (size_t[]){4, 7}), NULL);
    return P("mask47.npy");
}
static const char *e_mask_heads(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--mask", f32_file("mask2h.npy", 3, (size_t[]){2, 4, 6}), NULL);
    return P("mask2h.npy");
}
static const char *e_mask_rank(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--mask", f32_file("mask1.npy", 1, (size_t[]){6}), NULL);
    return P("mask1.npy");
}
static const char *e_mask_mha(argl *a)
{
    mha_args(a, "2");
    add(a, "--mask", f32_file("maskm.npy", 2, (size_t[]){4, 9}), NULL);
    return P("maskm.npy");
}
static const char *e_both_causal(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--causal", "--causal-bottom-right", NULL);
    return "--causal";
}
static const char *e_tokens_count(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--heatmap", P("o/h.svg"), "--tokens", "a,b,c", NULL);
    return "--tokens";
}
static const char *e_key_tokens_count(argl *a)
{
    mha_args(a, "2");
    add(a, "--heatmap", P("o/h.svg"), "--tokens", "我,爱,人工,智能", "--key-tokens", "x,y", NULL);
    return "--tokens";
}
static const char *e_bad_device(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--device", "7:0", NULL);
    return "7:0";
}
static const char *e_bad_device_name(argl *a)
{
    mha_args(a, "2");
    add(a, "--device", "no-such-gpu", NULL);
    return "no-such-gpu";
}
/* A later output in a missing folder: the earlier ones must be taken back. */
static const char *e_weights_dir_missing(argl *a)
{
    add(a, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o/ok.npy"), "--weights",
        P("nonexistent/dir/w.npy"), NULL);
    return P("nonexistent/dir/w.npy");
}
static const char *e_lse_dir_missing(argl *a)
{
    add(a, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o/ok.npy"), "--weights",
        P("o/w.npy"), "--lse", P("nonexistent/lse.npy"), NULL);
    return P("nonexistent/lse.npy");
}
static const char *e_out_dir_missing_heatmap(argl *a)
{
    add(a, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--heatmap", P("o/h.svg"), "--out",
        P("nonexistent/o.npy"), NULL);
    return P("nonexistent/o.npy");
}
static const char *e_mha_weights_dir_missing(argl *a)
{
    add(a, "mha", "--x", P("x.npy"), "--wq", P("wq.npy"), "--wk", P("wk.npy"), "--wv", P("wv.npy"), "--heads", "3",
        "--heatmap", P("o/h.svg"), "--out", P("o/y.npy"), "--weights", P("nonexistent/a.npy"), NULL);
    return P("nonexistent/a.npy");
}
static const char *e_heatmap_dir_missing(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--heatmap", P("nonexistent/h.svg"), NULL);
    return P("nonexistent/h.svg");
}

/* Outputs, option values and numbers (the tool refuses what it would otherwise misread). */
static const char *e_same_output(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    a->v[11] = P("o/out.npy"); /* --weights (a->v[10]) now names --out's file */
    return "--out and --weights name the same file";
}
static const char *e_same_output_spelled(argl *a)
{
    add(a, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o/x.npy"), "--lse",
        fmt("%s/o/../o/x.npy", dir), NULL);
    return "--out and --lse name the same file";
}
static const char *e_value_is_option(argl *a)
{
    add(a, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", "--causal", NULL);
    return "needs a value, not the option '--causal'";
}
static const char *e_repeated(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", "1", "--scale", "2", NULL); return "given twice"; }
static const char *e_scale_blank(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", " 1", NULL); return "' 1'"; }
static const char *e_scale_plus(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scale", "+1", NULL); return "'+1'"; }
static const char *e_heads_blank(argl *a) { mha_args(a, " 2"); return "' 2'"; }

/* The 0.3 variants' flags. valid_inputs has H = 3 (sdpa) and W_Q of width 6 (mha). */
static const char *e_kv_heads_zero(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--kv-heads", "0", NULL); return "--kv-heads"; }
/* K and V of as many heads as --kv-heads says, which does not divide Q's 3. */
static const char *e_kv_heads_not_dividing(argl *a, const char *n)
{
    const size_t heads = strtoul(n, NULL, 10);
    sdpa_args(a, 0, f32_file(fmt("k%zuh.npy", heads), 4, (size_t[]){2, heads, 6, 8}),
              f32_file(fmt("v%zuh.npy", heads), 4, (size_t[]){2, heads, 6, 5}));
    add(a, "--kv-heads", n, NULL);
    return "--kv-heads";
}
static const char *e_kv_heads_divide(argl *a) { return e_kv_heads_not_dividing(a, "2"); }
static const char *e_kv_heads_above(argl *a) { return e_kv_heads_not_dividing(a, "6"); }
static const char *e_kv_heads_divide_mha(argl *a) { mha_args(a, "3"); add(a, "--kv-heads", "2", NULL); return "--kv-heads"; }
static const char *e_kv_heads_k_differs(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--kv-heads", "1", NULL); return "--kv-heads"; }
static const char *e_k_heads_without_flag(argl *a)
{
    sdpa_args(a, 0, f32_file("k1h.npy", 4, (size_t[]){2, 1, 6, 8}), f32_file("v1h.npy", 4, (size_t[]){2, 1, 6, 5}));
    return "--kv-heads";
}
static const char *e_window_one(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--window", "3", NULL); return "--window"; }
static const char *e_window_below(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--window", "1,-2", NULL); return "--window"; }
static const char *e_window_three(argl *a) { mha_args(a, "2"); add(a, "--window", "1,2,3", NULL); return "--window"; }
static const char *e_window_text(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--window", "1,x", NULL); return "--window"; }
static const char *e_scores_mode(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--scores", "raw:s.npy", NULL); return "--scores"; }
static const char *e_scores_and_weights(argl *a)
{
    sdpa_args(a, 0, 0, 0); /* which gives --weights */
    add(a, "--scores", fmt("qk:%s", P("s.npy")), NULL);
    return "--scores";
}
static const char *e_softcap_negative(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--softcap", "-1", NULL); return "--softcap"; }
static const char *e_softcap_nan(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--softcap", "nan", NULL); return "--softcap"; }
static const char *e_softcap_inf(argl *a) { mha_args(a, "2"); add(a, "--softcap", "inf", NULL); return "--softcap"; }
static const char *e_sinks_length(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--sinks", f32_file("sinks2.npy", 1, (size_t[]){2}), NULL);
    return "--sinks";
}
static const char *e_sinks_not_finite(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--sinks", save_f32("sinksinf.npy", (const float[]){0, INFINITY, 1}, 1, (size_t[]){3}), NULL);
    return "--sinks";
}
static const char *e_sinks_length_mha(argl *a)
{
    mha_args(a, "2");
    add(a, "--sinks", f32_file("sinks3.npy", 1, (size_t[]){3}), NULL);
    return "--sinks";
}
static const char *e_alibi_length(argl *a)
{
    mha_args(a, "3");
    add(a, "--alibi", f32_file("alibi2.npy", 1, (size_t[]){2}), NULL);
    return "--alibi";
}
static const char *e_alibi_rank(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--alibi", f32_file("alibi31.npy", 2, (size_t[]){3, 1}), NULL);
    return "--alibi";
}
static const char *e_offsets_length(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--offsets", save_i64("off3.npy", (const long long[]){1, 2, 3}, 3), NULL);
    return "--offsets";
}
static const char *e_offsets_length_mha(argl *a)
{
    mha_args(a, "2");
    add(a, "--offsets", save_i32("off1.npy", (const long long[]){1}, 1), NULL);
    return "--offsets";
}
static const char *e_offset_and_offsets(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--offset", "1", "--offsets", save_i64("off2.npy", (const long long[]){1, 2}, 2), NULL);
    return "--offset and --offsets";
}
static const char *e_offset_text(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--offset", "2.5", NULL); return "--offset"; }
/* Beyond what the library takes (±2^61): its refusal of a user's value is a usage error too. */
static const char *e_offset_beyond(argl *a)
{
    sdpa_args(a, 0, 0, 0);
    add(a, "--offset", "4000000000000000000", NULL);
    return "query_offsets";
}
static const char *e_heads_on_4d(argl *a) { sdpa_args(a, 0, 0, 0); add(a, "--heads", "3", NULL); return "--heads"; }
static const char *e_heads_layout_width(argl *a)
{
    sdpa_args(a, f32_file("q3.npy", 3, (size_t[]){2, 4, 8}), f32_file("k3.npy", 3, (size_t[]){2, 6, 8}),
              f32_file("v3.npy", 3, (size_t[]){2, 6, 6}));
    add(a, "--heads", "3", NULL);
    return P("q3.npy");
}
static const char *e_heads_layout_k_width(argl *a)
{
    sdpa_args(a, f32_file("q3.npy", 3, (size_t[]){2, 4, 8}), f32_file("k3.npy", 3, (size_t[]){2, 6, 6}),
              f32_file("v3.npy", 3, (size_t[]){2, 6, 6}));
    add(a, "--heads", "2", NULL);
    return P("k3.npy");
}

static const err_case err_cases[] = {
    {"--out and --weights the same file", e_same_output, false, NULL},
    {"--out and --lse the same file, spelled differently", e_same_output_spelled, false, NULL},
    {"--out followed by an option", e_value_is_option, true, NULL},
    {"--scale twice", e_repeated, true, NULL},
    {"--scale with a leading blank", e_scale_blank, false, NULL},
    {"--scale with a plus sign", e_scale_plus, false, NULL},
    {"--heads with a leading blank", e_heads_blank, false, NULL},
    {"unknown flag", e_unknown_flag, true, NULL},
    {"flag missing its value", e_missing_value, true, NULL},
    {"flag given a value", e_flag_with_value, true, NULL},
    {"stray argument", e_positional, true, NULL},
    {"--scale abc", e_scale_text, false, NULL},
    {"--scale 0.5x", e_scale_suffix, false, NULL},
    {"--scale inf", e_scale_inf, false, NULL},
    {"--scale nan", e_scale_nan, false, NULL},
    {"--heads 0", e_heads_zero, false, NULL},
    {"--heads -2", e_heads_negative, false, NULL},
    {"--heads two", e_heads_text, false, NULL},
    {"mha --scale fast", e_mha_scale, false, NULL},
    {"missing --v", e_missing_v, false, NULL},
    {"missing --out", e_missing_out, false, NULL},
    {"missing --heads", e_missing_heads, false, NULL},
    {"nonexistent input", e_no_file, false, NULL},
    {"input is a folder", e_directory, false, NULL},
    {"truncated data", e_truncated, false, NULL},
    {"truncated header", e_header_cut, false, NULL},
    {"Fortran order", e_fortran, false, NULL},
    {"big-endian >f4", e_big_endian, false, NULL},
    {"dtype <i2", e_dtype_i2, false, NULL},
    {"integer tensor <i4", e_dtype_int_tensor, false, NULL},
    {"bad magic", e_bad_magic, false, NULL},
    {"text file", e_not_npy, false, NULL},
    {"/dev/zero", e_dev_zero, false, NULL},
    {"v2 header length 0xFFFFFFF0", e_v2_huge_header, false, NULL},
    {"shape product overflows", e_shape_overflow, false, NULL},
    {"1-D Q", e_rank_1, false, NULL},
    {"empty Q", e_empty, false, NULL},
    {"K and V disagree in S", e_kv_disagree, false, NULL},
    {"head size Q vs K", e_head_size, false, NULL},
    {"batch differs", e_batch_differs, false, NULL},
    {"rank differs", e_rank_differs, false, NULL},
    {"W_Q rows != d_model", e_wq_rows, false, NULL},
    {"W_K shape", e_wk_shape, false, NULL},
    {"heads do not divide W_Q", e_heads_divide, false, NULL},
    {"heads do not divide W_V", e_heads_divide_wv, false, NULL},
    {"bias length", e_bias_length, false, NULL},
    {"W_O rows", e_wo_rows, false, NULL},
    {"--bo without --wo", e_bo_without_wo, false, NULL},
    {"KV batch", e_kv_batch, false, NULL},
    {"KV rank", e_kv_rank, false, NULL},
    {"key length > S", e_key_length_gt_s, false, NULL},
    {"key length < 0", e_key_length_negative, false, NULL},
    {"key lengths count", e_key_lengths_count, false, NULL},
    {"key lengths float", e_key_lengths_float, false, NULL},
    {"mask shape", e_mask_shape, false, NULL},
    {"mask heads", e_mask_heads, false, NULL},
    {"mask rank 1", e_mask_rank, false, NULL},
    {"mha mask shape", e_mask_mha, false, NULL},
    {"--causal with --causal-bottom-right", e_both_causal, false, NULL},
    {"--tokens count", e_tokens_count, false, NULL},
    {"--key-tokens count", e_key_tokens_count, false, NULL},
    {"--device 7:0", e_bad_device, false, "0:0"}, /* and lists the devices that exist */
    {"--device no-such-gpu", e_bad_device_name, false, "0:0"},
    {"--weights in a missing folder", e_weights_dir_missing, false, NULL},
    {"--lse in a missing folder", e_lse_dir_missing, false, NULL},
    {"--out in a missing folder after --heatmap", e_out_dir_missing_heatmap, false, NULL},
    {"mha --weights in a missing folder", e_mha_weights_dir_missing, false, NULL},
    {"--heatmap in a missing folder", e_heatmap_dir_missing, false, NULL},
    {"--kv-heads 0", e_kv_heads_zero, false, NULL},
    {"--kv-heads not dividing H", e_kv_heads_divide, false, NULL},
    {"--kv-heads above H", e_kv_heads_above, false, NULL},
    {"mha --kv-heads not dividing H", e_kv_heads_divide_mha, false, NULL},
    {"--kv-heads other than K's heads", e_kv_heads_k_differs, false, NULL},
    {"K of fewer heads without --kv-heads", e_k_heads_without_flag, false, NULL},
    {"--window with one number", e_window_one, false, NULL},
    {"--window side below -1", e_window_below, false, NULL},
    {"mha --window with three numbers", e_window_three, false, NULL},
    {"--window not a number", e_window_text, false, NULL},
    {"--scores with an unknown mode", e_scores_mode, false, NULL},
    {"--scores with --weights", e_scores_and_weights, false, NULL},
    {"--softcap negative", e_softcap_negative, false, NULL},
    {"--softcap nan", e_softcap_nan, false, NULL},
    {"mha --softcap inf", e_softcap_inf, false, NULL},
    {"--sinks of the wrong length", e_sinks_length, false, NULL},
    {"--sinks not finite", e_sinks_not_finite, false, NULL},
    {"mha --sinks of the wrong length", e_sinks_length_mha, false, NULL},
    {"mha --alibi of the wrong length", e_alibi_length, false, NULL},
    {"--alibi of rank 2", e_alibi_rank, false, NULL},
    {"--offsets of the wrong length", e_offsets_length, false, NULL},
    {"mha --offsets of the wrong length", e_offsets_length_mha, false, NULL},
    {"--offset with --offsets", e_offset_and_offsets, false, NULL},
    {"--offset 2.5", e_offset_text, false, NULL},
    {"--offset beyond the library's range", e_offset_beyond, false, NULL},
    {"--heads with 4-D inputs", e_heads_on_4d, false, NULL},
    {"--heads not dividing Q's width", e_heads_layout_width, false, NULL},
    {"--heads: K's width not kv_heads·D", e_heads_layout_k_width, false, NULL},
};
#define N_ERR_CASES (sizeof err_cases / sizeof err_cases[0])

START_TEST(test_errors)
{
    const err_case *c = &err_cases[_i];
    valid_inputs();
    argl a = {{0}, 0};
    const char *needle = c->make(&a);
    run_args(&a, NULL);
    ck_assert_msg(R.status == EXIT_USAGE, "%s: `%s` exited %d, expected 2\n--- stderr:\n%.3000s", c->name, R.cmd,
                  R.status, R.err);
    const char *prefix = fmt("clattn %s: ", a.v[1]);
    ck_assert_msg(strncmp(R.err, prefix, strlen(prefix)) == 0, "%s: stderr does not start with \"%s\":\n%.3000s",
                  c->name, prefix, R.err);
    const size_t first_len = strcspn(R.err, "\n");
    ck_assert_msg(contains_n(R.err, first_len, needle),
                  "%s: the first line of stderr does not name \"%s\":\n%.3000s", c->name, needle, R.err);
    if (c->usage_follows)
        expect_in("stderr", R.err, fmt("usage: clattn %s", a.v[1]));
    else
        ck_assert_msg(count_lines(R.err) == 1 && R.err[first_len] == '\n',
                      "%s: stderr is not exactly one line:\n%.3000s", c->name, R.err);
    if (c->also)
        expect_in("stderr", R.err, c->also);
    const char *left = list_dir(P("o"));
    ck_assert_msg(left[0] == '\0', "%s: `%s` failed but left files behind:\n%s", c->name, R.cmd, left);
    ck_assert_msg(!exists(P("nonexistent")), "%s: a missing output folder was created", c->name);
}
END_TEST

/* Outputs: an existing file keeps its permissions; a symbolic link is written through (the link
 * stays, its target gets the result); a link to nothing is refused and left alone. */
START_TEST(test_outputs_links_and_modes)
{
    valid_inputs();
    struct stat st;
    const char *kept = P("kept.npy");
    tu_write_file(kept, "x", 1);
    ck_assert_int_eq(chmod(kept, 0640), 0);
    EXPECT(EXIT_OK, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", kept);
    ck_assert_int_eq(stat(kept, &st), 0);
    ck_assert_msg((st.st_mode & 0777) == 0640 && st.st_size > 1, "kept.npy: mode %o, %lld bytes", (unsigned)st.st_mode,
                  (long long)st.st_size);

    const char *target = P("target.npy"), *link = P("link.npy");
    tu_write_file(target, "x", 1);
    ck_assert_int_eq(symlink(target, link), 0);
    EXPECT(EXIT_OK, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", link);
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert_msg(S_ISLNK(st.st_mode), "the link was replaced by a file");
    ck_assert_int_eq(stat(target, &st), 0);
    ck_assert_msg(st.st_size > 1, "the link's target was not written");

    const char *dangling = P("dangling.npy");
    ck_assert_int_eq(symlink(P("nowhere/x.npy"), dangling), 0);
    CLATTN("sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", dangling);
    ck_assert_msg(R.status != EXIT_OK, "a link to nothing was written through:\n%s", R.err);
    expect_in("stderr", R.err, "symbolic link to a missing file");
    ck_assert_int_eq(lstat(dangling, &st), 0);
    ck_assert_msg(S_ISLNK(st.st_mode), "the dangling link was replaced");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Regressions: bugs these tests found in the tool, fixed since                                    */
/* ---------------------------------------------------------------------------------------------- */

/* --scale 1e39 is a finite double but not a finite float: a usage error (2), not a library failure. */
START_TEST(test_regression_scale_beyond_float)
{
    valid_inputs();
    EXPECT(EXIT_USAGE, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o/out.npy"),
           "--scale", "1e39");
    expect_in("stderr", R.err, "1e39");
    EXPECT(EXIT_USAGE, "mha", "--x", P("x.npy"), "--wq", P("wq.npy"), "--wk", P("wk.npy"), "--wv", P("wv.npy"),
           "--heads", "2", "--out", P("o/y.npy"), "--scale", "-1e39");
    expect_in("stderr", R.err, "-1e39");
    ck_assert_str_eq(list_dir(P("o")), "");
}
END_TEST

/* A --mask of an unsupported dtype: the message must name the file, like every other input error. */
START_TEST(test_regression_mask_dtype_message)
{
    valid_inputs();
    int32_t d[4 * 6] = {0};
    const char *m = save_raw("mask_i4.npy", 1, "<i4", "False", "(4, 6)", d, sizeof d);
    EXPECT(EXIT_USAGE, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o/out.npy"),
           "--mask", m);
    ck_assert_msg(count_lines(R.err) == 1, "one line: %s", R.err);
    expect_in("stderr", R.err, m);
    ck_assert_str_eq(list_dir(P("o")), "");
}
END_TEST

/* demo: a failed run leaves no output behind; here --heatmap cannot be written, so --save must not
 * leave its nine .npy files either. */
START_TEST(test_regression_demo_partial_outputs)
{
    const char *save = P("saved");
    EXPECT(EXIT_USAGE, "demo", "--save", save, "--heatmap", P("nonexistent/h.svg"));
    expect_in("stderr", R.err, P("nonexistent/h.svg"));
    ck_assert_msg(!exists(save) || list_dir(save)[0] == '\0', "`%s` failed (exit 2) but left in %s:\n%s", R.cmd,
                  save, list_dir(save));
}
END_TEST

/* A failed run must not destroy a file that was already at an output path before it started: the
 * all-or-nothing clean-up should take back only what this run created (npy_save_f32 itself promises
 * "on failure path is left as it was"). */
START_TEST(test_regression_failed_run_deletes_existing_output)
{
    valid_inputs();
    const char *old = P("o/old.npy");
    tu_write_file(old, "previous results", 16);
    EXPECT(EXIT_USAGE, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", old, "--weights",
           P("nonexistent/w.npy"));
    char *content = tu_read_file(old, NULL);
    track(content ? content : malloc(1));
    ck_assert_msg(content && strcmp(content, "previous results") == 0,
                  "`%s` failed (exit 2) and %s, which existed before the run, is %s", R.cmd, old,
                  content ? "overwritten" : "gone");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static Suite *errors_suite(void)
{
    Suite *s = suite_create("clattn cli errors");
    TCase *tc = cli_tcase("errors");
    tcase_add_loop_test(tc, test_errors, 0, (int)N_ERR_CASES);
    suite_add_tcase(s, tc);
    tc = cli_tcase("outputs");
    tcase_add_test(tc, test_outputs_links_and_modes);
    suite_add_tcase(s, tc);
    tc = cli_tcase("regressions");
    tcase_add_test(tc, test_regression_scale_beyond_float);
    tcase_add_test(tc, test_regression_mask_dtype_message);
    tcase_add_test(tc, test_regression_demo_partial_outputs);
    tcase_add_test(tc, test_regression_failed_run_deletes_existing_output);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return cli_main("test_cli_errors", errors_suite, 60); }
