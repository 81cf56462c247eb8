/* The host side of cl/params.h: for each kernel, the struct its path fills (one field per parameter,
 * named as in the kernel) and the table that binds it; the call features that decide which
 * parameters a build has; and the kernel families (a program's files and kernels) that program.c
 * builds and caches. */
#ifndef CLATTN_PARAMS_H
#define CLATTN_PARAMS_H

#include "clattn/clattn.h"
#include "launch.h"

#include "../../cl/params.h" /* the lists, shared with the kernels */

#include <stddef.h>

/* Call features: bit FEATURE_x of a feature set; FEATURE_ALL is always set. */
#define FEATURE_ENUM_(name, group) FEATURE_##name,
enum call_feature { FEATURE_ALL, CLATTN_FEATURES(FEATURE_ENUM_) FEATURE_COUNT };
#undef FEATURE_ENUM_
#define FEATURE_BIT(name) (1u << FEATURE_##name)
typedef unsigned feature_set;

/* The feature's name ("CAUSAL"), for build options and messages. */
const char *feature_name(enum call_feature f);

/* How a parameter is passed. */
typedef enum param_kind { PARAM_MEM, PARAM_VIEW, PARAM_ULONG, PARAM_LONG, PARAM_INT, PARAM_UINT, PARAM_FLOAT } param_kind;

/* One entry of a list, as the host reads it. */
typedef struct param_info {
    enum call_feature feature;
    param_kind kind;
    size_t offset;    /* of its field in the kernel's struct */
    const char *name; /* as the kernel spells it */
    const char *type; /* the OpenCL C type, as the list spells it */
} param_info;

/* One kernel: its name and its parameters. */
typedef struct kernel_params {
    const char *name;
    const param_info *params;
    size_t count;
} kernel_params;

/* Host fields of each kind: sizes as size_t, converted to the kernel's width when bound. */
#define PARAM_FIELD_MEM cl_mem
#define PARAM_FIELD_VIEW tensor_view
#define PARAM_FIELD_ULONG size_t
#define PARAM_FIELD_LONG long long
#define PARAM_FIELD_INT int
#define PARAM_FIELD_UINT unsigned
#define PARAM_FIELD_FLOAT float
#define PARAM_FIELD(feature, kind, type, name, absent) PARAM_FIELD_##kind name;

/* The struct of each kernel (zero-initialise it, fill what the call has, bind it). */
typedef struct flash_params { CLATTN_FLASH_PARAMS(PARAM_FIELD) } flash_params;
typedef struct exact_weights_params { CLATTN_EXACT_WEIGHTS_PARAMS(PARAM_FIELD) } exact_weights_params;
typedef struct decode_partial_params { CLATTN_DECODE_PARTIAL_PARAMS(PARAM_FIELD) } decode_partial_params;
typedef struct decode_combine_params { CLATTN_DECODE_COMBINE_PARAMS(PARAM_FIELD) } decode_combine_params;
typedef struct score_params { CLATTN_SCORE_PARAMS(PARAM_FIELD) } score_params;
typedef struct score_tiled_params { CLATTN_SCORE_TILED_PARAMS(PARAM_FIELD) } score_tiled_params;
typedef struct transpose_k_params { CLATTN_TRANSPOSE_K_PARAMS(PARAM_FIELD) } transpose_k_params;
typedef struct softmax_params { CLATTN_SOFTMAX_PARAMS(PARAM_FIELD) } softmax_params;
typedef struct weighted_sum_params { CLATTN_WEIGHTED_SUM_PARAMS(PARAM_FIELD) } weighted_sum_params;
typedef struct merge_params { CLATTN_MERGE_PARAMS(PARAM_FIELD) } merge_params;
typedef struct sparse_params { CLATTN_SPARSE_PARAMS(PARAM_FIELD) } sparse_params;
typedef struct sparse_combine_params { CLATTN_SPARSE_COMBINE_PARAMS(PARAM_FIELD) } sparse_combine_params;
typedef struct sparse_backward_params { CLATTN_SPARSE_BACKWARD_PARAMS(PARAM_FIELD) } sparse_backward_params;
typedef struct convert_params { CLATTN_CONVERT_PARAMS(PARAM_FIELD) } convert_params;
typedef struct append_rows_params { CLATTN_APPEND_ROWS_PARAMS(PARAM_FIELD) } append_rows_params;
typedef struct paged_check_params { CLATTN_PAGED_CHECK_PARAMS(PARAM_FIELD) } paged_check_params;
typedef struct topk_params { CLATTN_TOPK_PARAMS(PARAM_FIELD) } topk_params;
typedef struct gemm_params { CLATTN_GEMM_PARAMS(PARAM_FIELD) } gemm_params;
typedef struct add_bias_params { CLATTN_ADD_BIAS_PARAMS(PARAM_FIELD) } add_bias_params;
typedef struct cut_small_params { CLATTN_CUT_SMALL_PARAMS(PARAM_FIELD) } cut_small_params;
typedef struct block_mask_build_params { CLATTN_BLOCK_MASK_BUILD_PARAMS(PARAM_FIELD) } block_mask_build_params;
typedef struct backward_delta_params { CLATTN_BACKWARD_DELTA_PARAMS(PARAM_FIELD) } backward_delta_params;
/* (Every backward kernel's parameters: the row kernels', the lanes kernel's chunk size, the staged arrays.) */
typedef struct backward_params {
    CLATTN_BACKWARD_PARAMS(PARAM_FIELD)
    size_t chunk_keys;
    cl_mem probs, dscores;
} backward_params;
typedef struct backward_dq_sum_params { CLATTN_BACKWARD_DQ_SUM_PARAMS(PARAM_FIELD) } backward_dq_sum_params;
typedef struct backward_cut_params { CLATTN_BACKWARD_CUT_PARAMS(PARAM_FIELD) } backward_cut_params;
typedef struct backward_finite_params { CLATTN_BACKWARD_FINITE_PARAMS(PARAM_FIELD) } backward_finite_params;
typedef struct strided_copy_params { CLATTN_STRIDED_COPY_PARAMS(PARAM_FIELD) } strided_copy_params;
typedef struct column_sums_params { CLATTN_COLUMN_SUMS_PARAMS(PARAM_FIELD) } column_sums_params;

/* The mask and score-term fields of `params`, a kernel struct of type `type`, copied from `masks`, a
 * device_masks (masks.h), whose fields carry the same names. */
#define PARAM_COPY_(feature, kind, type, name, absent) params_dst_->name = masks_src_->name;
#define PARAMS_SET_MASKS(type, params, masks)                                                                \
    do {                                                                                                     \
        type *const params_dst_ = (params);                                                                  \
        const device_masks *const masks_src_ = (masks);                                                      \
        CLATTN_MASK_PARAMS(PARAM_COPY_)                                                                      \
    } while (0)

/* The kernels' tables (params.c). */
extern const kernel_params params_flash, params_flash_lanes, params_exact_weights, params_decode_partial, params_decode_combine, params_score,
    params_score_tiled, params_transpose_k, params_softmax, params_softmax_double, params_weighted_sum,
    params_merge, params_sparse, params_sparse_combine, params_sparse_backward_dq, params_sparse_backward_dkdv, params_convert, params_append_rows, params_append_token_groups, params_append_token_tail, params_paged_check, params_topk, params_gemm, params_add_bias, params_cut_small,
    params_block_mask_build, params_backward_delta, params_backward_dkdv, params_backward_dq,
    params_backward_dq_sum, params_backward_cut, params_backward_finite, params_backward_lanes, params_backward_staged_weights, params_backward_staged_dq,
    params_backward_staged_dkdv, params_strided_copy, params_column_sums;

/* Bind `values` (the kernel's struct) to a's kernel in the list's order, the parameters of features
 * not in `features` left out (the build left them out too). */
void params_bind(kernel_args *a, const kernel_params *k, const void *values, feature_set features);

/* The features a build for a call with `features` has: the whole group of each (cl/params.h). */
feature_set features_built(feature_set features);

/* The K/V layout's features: RAGGED, PAGED or none. */
feature_set layout_features(const kv_layout *lay);

/* The features any parameter of these kernels names (FEATURE_ALL included). */
feature_set params_features(const kernel_params *const *kernels, size_t count);

/* A kernel family: one program (cl/params.h and cl/common.cl, then `files`) and the kernels it
 * defines, kernels[0] the one whose work-group size `group_define` (a build option, or NULL) is. */
#define FAMILY_FILES_MAX 6
#define FAMILY_KERNELS_MAX 10
typedef struct kernel_family {
    const char *name; /* in messages: "fused attention" */
    const char *files[FAMILY_FILES_MAX];
    size_t nfiles;
    const kernel_params *kernels[FAMILY_KERNELS_MAX];
    size_t nkernels;
    size_t required; /* kernels[required …] exist only in some builds (an #if in their source) */
    const char *group_define;
} kernel_family;

/* family_softmax_double's two builds of cl/softmax_double.cl: double arithmetic (cl_khr_fp64), or
 * float-float arithmetic for devices without it (src/attention/staged.c chooses). */
#define SOFTMAX_DOUBLE_FP64_OPTIONS ""
#define SOFTMAX_DOUBLE_FF_OPTIONS "-DSM_FLOAT_FLOAT=1"

/* Every family, for the tests that hold each kernel's signature against its table. */
extern const kernel_family family_fused, family_fused_lanes, family_decode, family_staged, family_softmax_double, family_merge,
    family_sparse, family_sparse_backward, family_reproducible, family_reproducible_weights,
    family_convert, family_append_tokens, family_paged_check, family_topk, family_gemm, family_add_bias, family_block_mask, family_backward, family_backward_exact, family_reproducible_lanes,
    family_layer_backward;
extern const kernel_family *const kernel_families[];
extern const size_t kernel_family_count;

#endif
