/* The struct_size rule of clattn.h's extensible structs (versioned_rule.h), worded for a context. */
#include "versioned.h"

#include "error.h"
#include "versioned_rule.h"

clattn_status versioned_copy(clattn_context *ctx, const void *src, size_t ours, size_t fields_end, size_t oldest,
                             const char *name, const char *init_macro, void *dst)
{
    size_t given = 0, byte = 0;
    switch (versioned_check(src, ours, fields_end, oldest, &given, &byte)) {
    case VERSIONED_BAD_SIZE:
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "%s.struct_size is %zu, not the size of a %s: initialise it with %s", name, given, name,
                         init_macro);
    case VERSIONED_RESERVED_SET:
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "%s sets its reserved bytes (byte %zu), which must be 0",
                         name, byte);
    case VERSIONED_UNKNOWN_FIELD:
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "%s sets a field at byte %zu that this clattn (%s, whose %s has %zu bytes) does not know: "
                         "the program was built against a newer header",
                         name, byte, CLATTN_VERSION_STRING, name, ours);
    case VERSIONED_OK:
        break;
    }
    versioned_take(src, given, ours, dst);
    return CLATTN_SUCCESS;
}
