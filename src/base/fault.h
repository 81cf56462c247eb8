/* Test-only failure injection and OpenCL object counting (fault.c, built with -Dfault_injection=true,
 * never in a release). */
#ifndef CLATTN_FAULT_H
#define CLATTN_FAULT_H

#include <stdbool.h>

/* INJECT_FAULT(code): CL_SUCCESS, or an error at the point a test armed — `code`, the failure typical
 * of that point, unless the test chose another code. Placed before every OpenCL allocation and
 * enqueue, so that a test can make each of them fail in turn. */
#ifdef CLATTN_FAULT_INJECTION
int fault_point_result(int code);
#define INJECT_FAULT(code) fault_point_result(code)
#else
#define INJECT_FAULT(code) CL_SUCCESS
#endif

/* FAULT_HIDES_FP64(): whether a test asked (clattn__fault_hide_fp64) that the devices of contexts made
 * from now on be taken for devices without cl_khr_fp64; always false outside a fault-injection build. */
#ifdef CLATTN_FAULT_INJECTION
bool fault_hides_fp64(void);
#define FAULT_HIDES_FP64() fault_hides_fp64()
#else
#define FAULT_HIDES_FP64() false
#endif

#endif
