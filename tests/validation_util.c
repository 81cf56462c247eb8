/* The bad-call machinery shared by the argument-validation suites (tests/validation_util.h). */
#include "validation_util.h"

void check_status(clattn_status st, const bad_case *bc, const clattn_context *err_ctx)
{
    if (bc->expect == ANY_ERROR) {
        ck_assert_msg(st != CLATTN_SUCCESS, "%s: returned CLATTN_SUCCESS, expected an error",
                      tu_label());
    } else {
        ck_assert_msg(st == (clattn_status)bc->expect ||
                          (bc->alt != 0 && st == (clattn_status)bc->alt),
                      "%s: returned %s (%d), expected %s%s%s; last error: \"%s\"", tu_label(),
                      clattn_status_string(st), (int)st,
                      clattn_status_string((clattn_status)bc->expect), bc->alt ? " or " : "",
                      bc->alt ? clattn_status_string((clattn_status)bc->alt) : "",
                      clattn_last_error(err_ctx));
    }
    const char *e = clattn_last_error(err_ctx);
    ck_assert_msg(e != NULL && e[0] != '\0', "%s: clattn_last_error(%s) is empty after the failure",
                  tu_label(), err_ctx ? "ctx" : "NULL");
}

void check_dev_untouched(clattn_context *ctx, cl_mem m, size_t n, const char *what)
{
    if (m)
        ck_assert_msg(tu_dev_all_sentinel(ctx, m, n), "%s: output %s was written by a failing call",
                      tu_label(), what);
}

void check_host_untouched(const float *p, size_t n, const char *what)
{
    if (p)
        ck_assert_msg(tu_host_all_sentinel(p, n), "%s: output %s was written by a failing call",
                      tu_label(), what);
}
