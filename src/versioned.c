/* The struct_size rule of clattn.h's extensible structs, in one place. */
#include "versioned.h"

#include "error.h"

#include <string.h>

/* Later versions append a few fields at a time: a struct_size this much beyond ours is garbage. */
#define GROWTH_MAX 4096

clattn_status versioned_copy(clattn_context *ctx, const void *src, size_t ours, size_t fields_end, size_t oldest,
                             const char *name, const char *init_macro, void *dst)
{
    size_t given;
    memcpy(&given, src, sizeof given);
    if (given < oldest || given % sizeof(size_t) != 0 || given > ours + GROWTH_MAX)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "%s.struct_size is %zu, not the size of a %s: initialise it with %s", name, given, name,
                         init_macro);
    const unsigned char *bytes = src;
    for (size_t i = fields_end; i < given; i++) {
        if (bytes[i] == 0)
            continue;
        if (i < ours)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "%s sets its reserved bytes (byte %zu), which must be 0",
                             name, i);
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "%s sets a field at byte %zu that this clattn (%s, whose %s has %zu bytes) does not know: "
                         "the program was built against a newer header",
                         name, i, CLATTN_VERSION_STRING, name, ours);
    }
    const size_t n = given < ours ? given : ours;
    memcpy(dst, src, n);
    memset((unsigned char *)dst + n, 0, ours - n);
    return CLATTN_SUCCESS;
}
