/* The backward tests' non-linear score_mod and its derivative, s + 0.3·sin(s)·(h + 1): as OpenCL C for the
 * library (tests/test_backward.c) and as the fp64 reference's callbacks (both backward tests). */
#ifndef CLATTN_TESTS_SMOOTH_MOD_H
#define CLATTN_TESTS_SMOOTH_MOD_H

#include <math.h>

static const char smooth_source[] =
    "float score_mod(float s, int b, int h, long q, long k) { return s + 0.3f * sin(s) * (float)(h + 1); }\n"
    "float score_mod_grad(float s, int b, int h, long q, long k) { return 1.0f + 0.3f * cos(s) * (float)(h + 1); }\n";

static double ref_smooth(double s, int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)q, (void)k, (void)u;
    return s + 0.3 * sin(s) * (double)(h + 1);
}

static double ref_smooth_grad(double s, int b, int h, long long q, long long k, const void *u)
{
    (void)b, (void)q, (void)k, (void)u;
    return 1.0 + 0.3 * cos(s) * (double)(h + 1);
}

#endif
