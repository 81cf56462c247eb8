/* The kernels' parameter tables, made from cl/params.h's lists, their binding, and the kernel families
 * (which files make a program, which kernels it defines). */
#include "params.h"

#include <stddef.h>

#define PARAM_KIND_MEM PARAM_MEM
#define PARAM_KIND_VIEW PARAM_VIEW
#define PARAM_KIND_ULONG PARAM_ULONG
#define PARAM_KIND_LONG PARAM_LONG
#define PARAM_KIND_INT PARAM_INT
#define PARAM_KIND_UINT PARAM_UINT
#define PARAM_KIND_FLOAT PARAM_FLOAT
/* One table row; PARAM_STRUCT names the kernel's struct while its table is written. */
#define PARAM_ROW(feature, kind, type, name, absent) \
    {FEATURE_##feature, PARAM_KIND_##kind, offsetof(PARAM_STRUCT, name), #name, #type},
#define PARAM_TABLE(kernel_name, list)                                                                       \
    {kernel_name, (const param_info[]){list(PARAM_ROW)}, sizeof((const param_info[]){list(PARAM_ROW)}) /    \
                                                             sizeof(param_info)}

#define PARAM_STRUCT flash_params
const kernel_params params_flash = PARAM_TABLE("clattn_flash_attention", CLATTN_FLASH_PARAMS);
const kernel_params params_flash_lanes = PARAM_TABLE("clattn_flash_lanes", CLATTN_FLASH_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT exact_weights_params
const kernel_params params_exact_weights = PARAM_TABLE("clattn_exact_weights", CLATTN_EXACT_WEIGHTS_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT decode_partial_params
const kernel_params params_decode_partial = PARAM_TABLE("clattn_decode_partial", CLATTN_DECODE_PARTIAL_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT decode_combine_params
const kernel_params params_decode_combine = PARAM_TABLE("clattn_decode_combine", CLATTN_DECODE_COMBINE_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT score_params
const kernel_params params_score = PARAM_TABLE("clattn_score", CLATTN_SCORE_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT score_tiled_params
const kernel_params params_score_tiled = PARAM_TABLE("clattn_score_tiled", CLATTN_SCORE_TILED_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT transpose_k_params
const kernel_params params_transpose_k = PARAM_TABLE("clattn_transpose_k", CLATTN_TRANSPOSE_K_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT softmax_params
const kernel_params params_softmax = PARAM_TABLE("clattn_softmax", CLATTN_SOFTMAX_PARAMS);
const kernel_params params_softmax_double = PARAM_TABLE("clattn_softmax_double", CLATTN_SOFTMAX_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT weighted_sum_params
const kernel_params params_weighted_sum = PARAM_TABLE("clattn_weighted_sum", CLATTN_WEIGHTED_SUM_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT merge_params
const kernel_params params_merge = PARAM_TABLE("clattn_merge", CLATTN_MERGE_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT flash_params
#undef PARAM_STRUCT
#define PARAM_STRUCT sparse_params
const kernel_params params_sparse = PARAM_TABLE("clattn_sparse", CLATTN_SPARSE_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT sparse_combine_params
const kernel_params params_sparse_combine = PARAM_TABLE("clattn_sparse_combine", CLATTN_SPARSE_COMBINE_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT sparse_backward_params
const kernel_params params_sparse_backward_dq = PARAM_TABLE("clattn_sparse_backward_dq", CLATTN_SPARSE_BACKWARD_PARAMS);
const kernel_params params_sparse_backward_dkdv = PARAM_TABLE("clattn_sparse_backward_dkdv",
                                                              CLATTN_SPARSE_BACKWARD_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT convert_params
const kernel_params params_convert = PARAM_TABLE("clattn_convert", CLATTN_CONVERT_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT append_rows_params
const kernel_params params_append_rows = PARAM_TABLE("clattn_append_rows", CLATTN_APPEND_ROWS_PARAMS);
const kernel_params params_append_token_groups = PARAM_TABLE("clattn_append_token_groups", CLATTN_APPEND_ROWS_PARAMS);
const kernel_params params_append_token_tail = PARAM_TABLE("clattn_append_token_tail", CLATTN_APPEND_ROWS_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT paged_check_params
const kernel_params params_paged_check = PARAM_TABLE("clattn_paged_check", CLATTN_PAGED_CHECK_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT topk_params
const kernel_params params_topk = PARAM_TABLE("clattn_topk", CLATTN_TOPK_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT gemm_params
const kernel_params params_gemm = PARAM_TABLE("clattn_gemm", CLATTN_GEMM_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT add_bias_params
const kernel_params params_add_bias = PARAM_TABLE("clattn_add_bias", CLATTN_ADD_BIAS_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT cut_small_params
const kernel_params params_cut_small = PARAM_TABLE("clattn_cut_small", CLATTN_CUT_SMALL_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT block_mask_build_params
const kernel_params params_block_mask_build = PARAM_TABLE("clattn_block_mask_build", CLATTN_BLOCK_MASK_BUILD_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT backward_delta_params
const kernel_params params_backward_delta = PARAM_TABLE("clattn_backward_delta", CLATTN_BACKWARD_DELTA_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT backward_params
const kernel_params params_backward_dkdv = PARAM_TABLE("clattn_backward_dkdv", CLATTN_BACKWARD_PARAMS);
const kernel_params params_backward_dq = PARAM_TABLE("clattn_backward_dq", CLATTN_BACKWARD_PARAMS);
const kernel_params params_backward_lanes = PARAM_TABLE("clattn_backward_lanes", CLATTN_BACKWARD_LANES_PARAMS);
const kernel_params params_backward_staged_weights =
    PARAM_TABLE("clattn_backward_staged_weights", CLATTN_BACKWARD_STAGED_PARAMS);
const kernel_params params_backward_staged_dq = PARAM_TABLE("clattn_backward_staged_dq", CLATTN_BACKWARD_STAGED_PARAMS);
const kernel_params params_backward_staged_dkdv =
    PARAM_TABLE("clattn_backward_staged_dkdv", CLATTN_BACKWARD_STAGED_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT backward_finite_params
const kernel_params params_backward_finite = PARAM_TABLE("clattn_backward_finite", CLATTN_BACKWARD_FINITE_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT backward_dq_sum_params
const kernel_params params_backward_dq_sum = PARAM_TABLE("clattn_backward_dq_sum", CLATTN_BACKWARD_DQ_SUM_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT backward_cut_params
const kernel_params params_backward_cut = PARAM_TABLE("clattn_backward_cut", CLATTN_BACKWARD_CUT_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT strided_copy_params
const kernel_params params_strided_copy = PARAM_TABLE("clattn_strided_copy", CLATTN_STRIDED_COPY_PARAMS);
#undef PARAM_STRUCT
#define PARAM_STRUCT column_sums_params
const kernel_params params_column_sums = PARAM_TABLE("clattn_column_sums", CLATTN_COLUMN_SUMS_PARAMS);
#undef PARAM_STRUCT

#define FEATURE_NAME_(name, group) #name,
static const char *const feature_names[FEATURE_COUNT] = {"ALL", CLATTN_FEATURES(FEATURE_NAME_)};
#undef FEATURE_NAME_

const char *feature_name(enum call_feature f) { return (unsigned)f < FEATURE_COUNT ? feature_names[f] : "?"; }

void params_bind(kernel_args *a, const kernel_params *k, const void *values, feature_set features)
{
    const unsigned char *base = values;
    features |= FEATURE_BIT(ALL);
    for (size_t i = 0; i < k->count; i++) {
        const param_info *p = &k->params[i];
        if (!(features & (1u << p->feature)))
            continue;
        const void *field = base + p->offset;
        switch (p->kind) {
        case PARAM_MEM: karg_mem(a, *(const cl_mem *)field); break;
        case PARAM_VIEW: karg_view(a, *(const tensor_view *)field); break;
        case PARAM_ULONG: karg_ulong(a, *(const size_t *)field); break;
        case PARAM_LONG: {
            const cl_long v = *(const long long *)field;
            karg(a, sizeof v, &v);
            break;
        }
        case PARAM_INT: karg_int(a, *(const int *)field); break;
        case PARAM_UINT: {
            const cl_uint v = *(const unsigned *)field;
            karg(a, sizeof v, &v);
            break;
        }
        case PARAM_FLOAT: karg_float(a, *(const float *)field); break;
        }
    }
}

/* Each feature's group (cl/params.h's CLATTN_FEATURES). */
enum feature_group { GROUP_OWN, GROUP_MASKS, GROUP_LAYOUT };
#define FEATURE_GROUP_(name, group) GROUP_##group,
static const enum feature_group feature_groups[FEATURE_COUNT] = {GROUP_OWN, CLATTN_FEATURES(FEATURE_GROUP_)};
#undef FEATURE_GROUP_

feature_set features_built(feature_set features)
{
    feature_set built = features;
    for (int f = 0; f < FEATURE_COUNT; f++)
        for (int g = 0; g < FEATURE_COUNT && feature_groups[f] != GROUP_OWN; g++)
            if ((features & (1u << f)) && feature_groups[g] == feature_groups[f])
                built |= 1u << g;
    return built;
}

feature_set layout_features(const kv_layout *lay)
{
    return (lay->q_starts ? FEATURE_BIT(RAGGED) : 0) | (lay->block_table ? FEATURE_BIT(PAGED) : 0);
}

feature_set params_features(const kernel_params *const *kernels, size_t count)
{
    feature_set f = FEATURE_BIT(ALL);
    for (size_t k = 0; k < count; k++)
        for (size_t i = 0; i < kernels[k]->count; i++)
            f |= 1u << kernels[k]->params[i].feature;
    return f;
}

/* The families. Every program starts with params.h and common.cl (program.c); masks.cl and vec.cl come
 * first where a family applies masks or works in vectors. */
const kernel_family family_fused = {"fused attention", {"masks.cl", "vec.cl", "flash_attention.cl"}, 3,
                                    {&params_flash}, 1, 1, "BLOCK_M"};
/* The same attention with the rows in the SIMD lanes (CPUs: the tuning's choice). */
const kernel_family family_fused_lanes = {"fused attention, rows in lanes",
                                          {"masks.cl", "vec.cl", "flash_lanes.cl"},
                                          3,
                                          {&params_flash_lanes},
                                          1,
                                          1,
                                          "BLOCK_M"};
const kernel_family family_decode = {"decode", {"masks.cl", "vec.cl", "decode_tile.cl", "decode.cl"}, 4,
                                     {&params_decode_partial, &params_decode_combine}, 2, 2, "WG"};
/* The blocked score kernel and K's transpose exist where VEC > 1 (CPUs). */
const kernel_family family_staged = {"staged attention",
                                     {"masks.cl", "vec.cl", "score.cl", "softmax.cl", "weighted_sum.cl"}, 5,
                                     {&params_score, &params_softmax, &params_weighted_sum, &params_transpose_k,
                                      &params_score_tiled},
                                     5, 3, NULL};
/* Built in double (cl_khr_fp64) or in float-float arithmetic: SOFTMAX_DOUBLE_*_OPTIONS (params.h). */
const kernel_family family_softmax_double = {"double softmax", {"softmax_double.cl"}, 1,
                                             {&params_softmax_double}, 1, 1, NULL};
const kernel_family family_merge = {"merge", {"merge.cl"}, 1, {&params_merge}, 1, 1, NULL};
const kernel_family family_sparse = {"sparse attention", {"vec.cl", "sparse.cl"}, 2,
                                     {&params_sparse, &params_sparse_combine}, 2, 2, NULL};
/* Reproducible attention (issue 41): the fused kernel built with -DCLATTN_EXACT=1, after the exact functions
 * (soft-capping in masks.cl takes them; FP_CONTRACT OFF: cl/common.cl). */
const kernel_family family_reproducible = {"reproducible attention",
                                           {"exact_math.cl", "masks.cl", "vec.cl", "exact_tiles.cl", "flash_attention.cl"},
                                           5,
                                           {&params_flash},
                                           1,
                                           1,
                                           "BLOCK_M"};
/* Its weights output: each pair's score as the fused kernels form it (cl/exact_weights.cl). */
const kernel_family family_reproducible_weights = {"reproducible weights",
                                                   {"exact_math.cl", "masks.cl", "vec.cl", "exact_tiles.cl",
                                                    "exact_weights.cl"},
                                                   5,
                                                   {&params_exact_weights},
                                                   1,
                                                   1,
                                                   NULL};
/* The same bits with the rows in the SIMD lanes (CPUs whose tuning puts them there). */
const kernel_family family_reproducible_lanes = {"reproducible attention, rows in lanes",
                                                 {"exact_math.cl", "masks.cl", "vec.cl", "exact_tiles.cl", "flash_lanes.cl"},
                                                 5,
                                                 {&params_flash_lanes},
                                                 1,
                                                 1,
                                                 "BLOCK_M"};
/* The sparse call's gradients (float32 tensors: clattn_sdpa_sparse_backward widens 16-bit ones first). */
const kernel_family family_sparse_backward = {"sparse backward", {"vec.cl", "sparse_backward.cl"}, 2,
                                              {&params_sparse_backward_dq, &params_sparse_backward_dkdv}, 2, 2, NULL};
const kernel_family family_convert = {"conversion", {"convert.cl"}, 1, {&params_convert, &params_append_rows}, 2,
                                      2, NULL};
/* Appends to a token-format cache: the groups completed, then the tail (cl/append_tokens.cl). */
const kernel_family family_append_tokens = {"token-format append", {"append_tokens.cl"}, 1,
                                            {&params_append_token_groups, &params_append_token_tail}, 2, 2, NULL};
const kernel_family family_paged_check = {"block-id check", {"paged.cl"}, 1, {&params_paged_check}, 1, 1, NULL};
const kernel_family family_topk = {"top-k selection", {"topk.cl"}, 1, {&params_topk}, 1, 1, NULL};
const kernel_family family_gemm = {"GEMM", {"vec.cl", "gemm.cl"}, 2, {&params_gemm}, 1, 1, NULL};
const kernel_family family_add_bias = {"bias", {"projection.cl"}, 1, {&params_add_bias, &params_cut_small}, 2, 2, NULL};
/* A block mask's states from mask_mod (the masks file for the mods' glue and the state names). */
const kernel_family family_block_mask = {"block mask", {"masks.cl", "block_mask.cl"}, 2, {&params_block_mask_build},
                                         1, 1, NULL};

/* The backward pass (the masks file: the forward's scores, recomputed); the keys-in-lanes kernel (the last) exists
 * where VEC > 1 (CPUs). */
const kernel_family family_backward = {"backward",
                                       {"masks.cl", "vec.cl", "backward.cl", "backward_lanes.cl", "backward_staged.cl"},
                                       5,
                                       {&params_backward_delta, &params_backward_dkdv, &params_backward_dq,
                                        &params_backward_dq_sum, &params_backward_staged_weights,
                                        &params_backward_staged_dq, &params_backward_staged_dkdv,
                                        &params_backward_finite, &params_backward_cut, &params_backward_lanes},
                                       10,
                                       9,
                                       NULL};
/* The same in reproducible arithmetic (-DCLATTN_EXACT=1 -DVEC=1: the row kernels), after the exact functions. */
const kernel_family family_backward_exact = {"backward, reproducible",
                                             {"exact_math.cl", "masks.cl", "vec.cl", "backward.cl", "backward_lanes.cl",
                                              "backward_staged.cl"},
                                             6,
                                             {&params_backward_delta, &params_backward_dkdv, &params_backward_dq,
                                              &params_backward_dq_sum, &params_backward_staged_weights,
                                              &params_backward_staged_dq, &params_backward_staged_dkdv,
                                              &params_backward_finite, &params_backward_cut, &params_backward_lanes},
                                             10,
                                             9,
                                             NULL};
/* The layer's backward pass: its copies between layouts and its bias gradients. */
const kernel_family family_layer_backward = {"layer backward", {"layer_backward.cl"}, 1,
                                             {&params_strided_copy, &params_column_sums}, 2, 2, NULL};

const kernel_family *const kernel_families[] = {&family_fused, &family_fused_lanes, &family_decode,      &family_staged,
                                                &family_softmax_double, &family_merge, &family_sparse, &family_sparse_backward, &family_reproducible, &family_reproducible_lanes, &family_reproducible_weights, &family_convert,
                                                &family_append_tokens,
                                                &family_paged_check,    &family_topk,  &family_gemm,  &family_add_bias,
                                                &family_block_mask,     &family_backward, &family_backward_exact, &family_layer_backward};
const size_t kernel_family_count = sizeof kernel_families / sizeof kernel_families[0];
