/* Test-only failure injection (fault.c, built with -Dfault_injection=true, never in a release). */
#ifndef CLATTN_FAULT_H
#define CLATTN_FAULT_H

#include <stdbool.h>

/* INJECT_FAULT(code): CL_SUCCESS, or `code` at the point a test armed. Placed before every OpenCL
 * allocation and enqueue, so that a test can make each of them fail in turn. */
#ifdef CLATTN_FAULT_INJECTION
bool fault_point_fails(void);
#define INJECT_FAULT(code) (fault_point_fails() ? (code) : CL_SUCCESS)
#else
#define INJECT_FAULT(code) CL_SUCCESS
#endif

#endif
