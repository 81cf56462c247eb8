/* Reading the caller's versioned structs (descriptors, masks, weights, options): each starts with a
 * struct_size member, so that a struct can gain fields without breaking binaries built against an
 * older header (see "Extensible structs" in clattn.h). */
#ifndef CLATTN_VERSIONED_H
#define CLATTN_VERSIONED_H

#include "clattn/clattn.h"

#include <stddef.h>

/* Copy the caller's struct `src` (whose first member is its size_t struct_size) into `dst`, of this
 * library's size `ours`, whose bytes from `fields_end` on are reserved members that must be 0:
 *  - struct_size below `oldest` (the first published layout; 0 when left uninitialised), not a
 *    multiple of size_t's size, or implausibly large (garbage: the bytes it names are never read) is
 *    an error that names `name` and its INIT macro;
 *  - a smaller (older) struct is copied and the fields it lacks are zero, their documented default;
 *  - a larger (newer) struct is accepted only when every byte past `ours` is zero, i.e. the caller
 *    uses no field this library does not know.
 * src must not be NULL. */
clattn_status versioned_copy(clattn_context *ctx, const void *src, size_t ours, size_t fields_end, size_t oldest,
                             const char *name, const char *init_macro, void *dst);

#endif
