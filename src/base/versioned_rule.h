/* The struct_size rule of clattn.h's extensible structs as a verdict, header-only: libclattn
 * (versioned.c) words its errors through its contexts, and libclattn_mpi (src/mpi/), a client of
 * libclattn's public API that cannot call versioned_copy, words its own; both apply this one rule. */
#ifndef CLATTN_VERSIONED_RULE_H
#define CLATTN_VERSIONED_RULE_H

#include "clattn/clattn.h"

#include <stddef.h>
#include <string.h>

/* The first published layouts (0.2.0) of the structs whose fields grew since: the oldest struct_size
 * each reader accepts. clattn_sdpa_desc then ended with `softcap` (called `reserved`, and 0). */
#define SDPA_DESC_SIZE_0_2 (offsetof(clattn_sdpa_desc, softcap) + sizeof(float))
#define MASKS_SIZE_0_2 (offsetof(clattn_masks, reserved) + sizeof(unsigned))

/* Later versions append a few fields at a time: a struct_size this much beyond ours is garbage. */
#define VERSIONED_GROWTH_MAX 4096

typedef enum versioned_verdict {
    VERSIONED_OK = 0,
    VERSIONED_BAD_SIZE,     /* below `oldest`, not a multiple of size_t's size, or implausibly large */
    VERSIONED_RESERVED_SET, /* a reserved byte of ours (from fields_end on) is not 0 */
    VERSIONED_UNKNOWN_FIELD /* a byte past ours is not 0: the caller uses a field of a newer header */
} versioned_verdict;

/* Whether the caller's struct `src` (first member: its size_t struct_size, returned in *given) can be
 * read by a reader whose struct has `ours` bytes, reserved from `fields_end` on; *bad_byte names the
 * offending byte of the last two verdicts. Only the bytes struct_size names are read, and none of them
 * when the size itself is wrong. */
static inline versioned_verdict versioned_check(const void *src, size_t ours, size_t fields_end, size_t oldest,
                                                size_t *given, size_t *bad_byte)
{
    memcpy(given, src, sizeof *given);
    if (*given < oldest || *given % sizeof(size_t) != 0 || *given > ours + VERSIONED_GROWTH_MAX)
        return VERSIONED_BAD_SIZE;
    const unsigned char *bytes = src;
    for (size_t i = fields_end; i < *given; i++)
        if (bytes[i] != 0) {
            *bad_byte = i;
            return i < ours ? VERSIONED_RESERVED_SET : VERSIONED_UNKNOWN_FIELD;
        }
    return VERSIONED_OK;
}

/* After VERSIONED_OK: the struct copied into `dst` (ours bytes), the fields an older one lacks 0, their
 * documented default. */
static inline void versioned_take(const void *src, size_t given, size_t ours, void *dst)
{
    const size_t n = given < ours ? given : ours;
    memcpy(dst, src, n);
    memset((unsigned char *)dst + n, 0, ours - n);
}

#endif
