/* FNV-1a, 64 bits: the library's one non-cryptographic hash (the kernel cache's lookup, the on-disk
 * cache's file names and checksums, the MPI ring's fingerprints of arrays). Header-only, so that
 * libclattn_mpi, which links only libclattn's public API, uses this same code. Not for anything an
 * attacker chooses to collide: the on-disk cache's keys are SHA-256 (sha256.h), compared whole. */
#ifndef CLATTN_HASH_H
#define CLATTN_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a's offset basis (the hash of nothing) and prime. */
#define HASH_FNV1A_BASIS 0xcbf29ce484222325ull
#define HASH_FNV1A_PRIME 0x100000001b3ull

/* h (HASH_FNV1A_BASIS to start, or the hash so far) extended by n bytes of data. */
static inline uint64_t hash_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * HASH_FNV1A_PRIME;
    return h;
}

#endif
