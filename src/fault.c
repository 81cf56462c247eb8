/* Test-only failure injection, compiled only with -Dfault_injection=true (never in a release): every
 * OpenCL allocation, enqueue and CLBlast call of the library is a numbered point, and the point armed
 * by clattn__fault_arm(N) fails as a device out of memory or resources would. Tests walk N over every
 * point of a call to prove that each failure is reported, leaks nothing and leaves the context usable. */
#include "fault.h"

#include "clattn/clattn.h"

#include <stdatomic.h>

static atomic_ulong armed_point, points_passed;

/* Arm point n (counting from 1 after this call); 0 disarms. Resets the count. */
CLATTN_API void clattn__fault_arm(unsigned long n);
/* How many points have been passed since the last clattn__fault_arm. */
CLATTN_API unsigned long clattn__fault_points(void);

void clattn__fault_arm(unsigned long n)
{
    atomic_store(&points_passed, 0);
    atomic_store(&armed_point, n);
}

unsigned long clattn__fault_points(void) { return atomic_load(&points_passed); }

bool fault_point_fails(void)
{
    unsigned long n = atomic_fetch_add(&points_passed, 1) + 1;
    return n == atomic_load(&armed_point);
}
