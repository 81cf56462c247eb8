/*
 * Every kernel's signature against its host binder. The parameter lists of cl/params.h make both the
 * kernels' parameter lists and the host tables that bind them (src/params.c); this test builds every
 * kernel family on each device with -cl-kernel-arg-info, once with no call feature and once with every
 * feature its kernels name, and holds each kernel's arguments (clGetKernelArgInfo: count, names, address
 * space, scalar types) against the table entries of the features built in. Then it binds a zeroed
 * struct through params_bind onto the kernel: every argument must be set, with the size the kernel
 * expects (clSetKernelArg checks it).
 */
#define _POSIX_C_SOURCE 200809L
#include "test_util.h"

#include "context.h" /* internal: the families and programs of src/ */
#include "params.h"
#include "program.h"

#include <stdio.h>
#include <string.h>

/* Build options that give each family's sources a complete set of definitions (small tiles; the
 * blocked score kernel's VEC > 1 so that all five staged kernels exist). */
typedef struct family_case {
    const kernel_family *family;
    const char *options;
    unsigned group;
    bool needs_fp64;
} family_case;

static const family_case cases[] = {
    {&family_fused, "-cl-std=CL1.2 -DBLOCK_N=16 -DVEC=4 -DKV=2 -DROWS=2 -DDK=16 -DDV=32", 4, false},
    {&family_fused_lanes, "-cl-std=CL1.2 -DBLOCK_N=16 -DVEC=4 -DKV=2 -DROWS=8 -DDK=16 -DDV=32", 4, false},
    {&family_decode, "-cl-std=CL1.2 -DDK=16 -DDV=32 -DVEC=4 -DKQ=2 -DRB=2 -DTILE=16 -DR_MAX=4 -DSTAGE=0 -DPREFETCH=0", 1,
     false},
    {&family_decode, "-cl-std=CL1.2 -DDK=16 -DDV=16 -DVEC=1 -DKQ=1 -DRB=1 -DTILE=16 -DR_MAX=4 -DSTAGE=1 -DPREFETCH=0", 8,
     false},
    {&family_staged, "-cl-std=CL1.2 -DVEC=4 -DKEYS=4 -DCHUNKS=4 -DSR=6 -DSV=2", 0, false},
    {&family_softmax_double, "-cl-std=CL1.2", 0, true},
    {&family_merge, "-cl-std=CL1.2 -DQ_T=1 -DK_T=2 -DO_T=0", 0, false},
    {&family_convert, "-cl-std=CL1.2 -DQ_T=3 -DO_T=1", 0, false},
    {&family_paged_check, "-cl-std=CL1.2", 0, false},
    {&family_gemm, "-cl-std=CL1.2 -DVEC=4 -DMR=4 -DNV=2 -DROW_DIM=0", 0, false},
    {&family_add_bias, "-cl-std=CL1.2", 0, false},
    {&family_block_mask, "-cl-std=CL1.2", 0, false},
    {&family_backward, "-cl-std=CL1.2 -DVEC=4 -DDK=16 -DDV=16", 0, false}, /* (VEC > 1: the lanes kernel too) */
    {&family_layer_backward, "-cl-std=CL1.2", 0, false},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* The OpenCL C type name clGetKernelArgInfo gives a scalar of this kind. */
static const char *scalar_type(param_kind kind)
{
    switch (kind) {
    case PARAM_ULONG: return "ulong";
    case PARAM_LONG: return "long";
    case PARAM_INT: return "int";
    case PARAM_UINT: return "uint";
    case PARAM_FLOAT: return "float";
    default: return NULL;
    }
}

static void arg_string(cl_kernel kernel, cl_uint i, cl_kernel_arg_info what, char *buf, size_t size)
{
    buf[0] = '\0';
    const cl_int err = clGetKernelArgInfo(kernel, i, what, size, buf, NULL);
    ck_assert_msg(err == CL_SUCCESS, "%s: clGetKernelArgInfo(%u): %d", tu_label(), i, err);
}

/* One expected argument of the kernel: an entry's buffer, or one of its scalars (a VIEW's strides). */
static void check_arg(cl_kernel kernel, cl_uint i, const char *name, param_kind kind)
{
    char got_name[128], got_type[128];
    arg_string(kernel, i, CL_KERNEL_ARG_NAME, got_name, sizeof got_name);
    arg_string(kernel, i, CL_KERNEL_ARG_TYPE_NAME, got_type, sizeof got_type);
    ck_assert_msg(strcmp(got_name, name) == 0, "%s: argument %u is \"%s\" in the kernel, \"%s\" in the table",
                  tu_label(), i, got_name, name);
    cl_kernel_arg_address_qualifier space;
    ck_assert_int_eq(clGetKernelArgInfo(kernel, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof space, &space, NULL),
                     CL_SUCCESS);
    if (kind == PARAM_MEM || kind == PARAM_VIEW) {
        ck_assert_msg(space == CL_KERNEL_ARG_ADDRESS_GLOBAL && strchr(got_type, '*'),
                      "%s: argument %u (%s) is a buffer in the table, \"%s\" in the kernel", tu_label(), i, name,
                      got_type);
        return;
    }
    ck_assert_msg(space == CL_KERNEL_ARG_ADDRESS_PRIVATE && strcmp(got_type, scalar_type(kind)) == 0,
                  "%s: argument %u (%s) is a %s in the table, \"%s\" in the kernel", tu_label(), i, name,
                  scalar_type(kind), got_type);
}

/* The kernel's arguments against the entries of `k` whose features are in `features`. */
static void check_signature(cl_kernel kernel, const kernel_params *k, feature_set features)
{
    cl_uint i = 0;
    for (size_t e = 0; e < k->count; e++) {
        const param_info *p = &k->params[e];
        if (!(features & (1u << p->feature)))
            continue;
        check_arg(kernel, i++, p->name, p->kind);
        if (p->kind == PARAM_VIEW) {
            static const char *const strides[] = {"_bs", "_hs", "_rs"};
            for (int s = 0; s < 3; s++) {
                char stride[128];
                snprintf(stride, sizeof stride, "%s%s", p->name, strides[s]);
                check_arg(kernel, i++, stride, PARAM_ULONG);
            }
        }
    }
    cl_uint args = 0;
    ck_assert_int_eq(clGetKernelInfo(kernel, CL_KERNEL_NUM_ARGS, sizeof args, &args, NULL), CL_SUCCESS);
    ck_assert_msg(args == i, "%s: the kernel has %u arguments, the table %u", tu_label(), args, i);

    /* The binder sets exactly these, each with the size the kernel takes. */
    unsigned char zeros[1024] = {0};
    kernel_args a = kernel_args_begin(kernel);
    params_bind(&a, k, zeros, features);
    ck_assert_msg(a.err == CL_SUCCESS, "%s: params_bind: argument %u: %s", tu_label(), a.failed_at,
                  clattn_status_string((clattn_status)a.err));
    ck_assert_msg(a.next == args, "%s: params_bind set %u arguments of %u", tu_label(), a.next, args);
}

static bool has_fp64(cl_device_id device)
{
    char ext[8192] = "";
    clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, sizeof ext, ext, NULL);
    return strstr(ext, "cl_khr_fp64") != NULL;
}

START_TEST(test_signatures)
{
    const family_case *fc = &cases[TU_CASE(_i)];
    const size_t dev = TU_DEVICE(_i);
    clattn_context *ctx = tu_ctx[dev];
    if (fc->needs_fp64 && !has_fp64(ctx->device))
        return; /* the double softmax never builds there (its refusal is test_softmax_precision's) */
    const kernel_family *f = fc->family;
    const feature_set every = params_features(f->kernels, f->nkernels);
    const feature_set sets[2] = {FEATURE_BIT(ALL), every};
    for (int s = 0; s < 2; s++) {
        tu_set_label("%s kernels (%s) on %s, %s", f->name, fc->options, tu_dev_spec[dev],
                     s ? "every feature" : "no feature");
        char options[1024], with_info[1100];
        program_options(f, fc->options, fc->group, sets[s], options, sizeof options);
        snprintf(with_info, sizeof with_info, "%s -cl-kernel-arg-info", options);
        cl_program program;
        clattn_status st = program_build(ctx, f->files, f->nfiles, NULL, with_info, &program);
        TU_ASSERT_OK(st, ctx, "building the family");
        size_t built = 0;
        for (size_t k = 0; k < f->nkernels; k++) {
            cl_int err;
            cl_kernel kernel = clCreateKernel(program, f->kernels[k]->name, &err);
            if (err == CL_INVALID_KERNEL_NAME && k >= f->required)
                continue;
            ck_assert_msg(err == CL_SUCCESS, "%s: clCreateKernel(%s): %d", tu_label(), f->kernels[k]->name, err);
            tu_set_label("%s (%s) on %s, %s", f->kernels[k]->name, fc->options, tu_dev_spec[dev],
                         s ? "every feature" : "no feature");
            check_signature(kernel, f->kernels[k], sets[s]);
            clReleaseKernel(kernel);
            built++;
        }
        ck_assert_msg(built == f->nkernels, "%s: %zu of the family's %zu kernels exist in this build", tu_label(),
                      built, f->nkernels);
        clReleaseProgram(program);
    }
}
END_TEST

/* Every family is among the cases, so that a new one cannot go unchecked. */
START_TEST(test_every_family_checked)
{
    for (size_t f = 0; f < kernel_family_count; f++) {
        bool found = false;
        for (size_t c = 0; c < N_CASES; c++)
            found |= cases[c].family == kernel_families[f];
        ck_assert_msg(found, "the %s family has no case in tests/test_params.c", kernel_families[f]->name);
    }
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("params");
    tu_add_loop(s, "signatures", test_signatures, N_CASES * tu_ndev);
    TCase *tc = tu_tcase("families");
    tcase_add_test(tc, test_every_family_checked);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(make_suite); }
