/* The ranks' fingerprints (fingerprint.h). */
#include "fingerprint.h"

#include "../hash.h"

#include <stdalign.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* What every rank must agree on, as numbers; names beside them for the message. */
static const char *const field_names[RING_FIELDS] = {
    "batch", "heads", "kv_heads", "q_len", "kv_len", "qk_dim", "v_dim", "scale", "softcap", "algorithm",
    "causal", "key_lengths", "query_offsets", "window", "sinks", "alibi_slopes", "storage types", "layout",
    "weights_output"};
enum { FIRST_HASHED = 11, LAST_HASHED = 15 };

#if defined(__x86_64__) || defined(_M_X64)
#define RING_ARCH "x86_64"
#elif defined(__aarch64__) || defined(_M_ARM64)
#define RING_ARCH "aarch64"
#elif defined(__i386__) || defined(_M_IX86)
#define RING_ARCH "i386"
#elif defined(__arm__)
#define RING_ARCH "arm"
#elif defined(__powerpc64__)
#define RING_ARCH "ppc64"
#elif defined(__s390x__)
#define RING_ARCH "s390x"
#elif defined(__riscv) && defined(__riscv_xlen)
#define RING_ARCH "riscv" /* (the word width follows in void*) */
#else
#define RING_ARCH "unknown-architecture"
#endif

void ring_platform(char out[RING_PLATFORM_BYTES])
{
    const uint32_t probe = 0x01020304u;
    unsigned char first;
    memcpy(&first, &probe, 1);
    const char *order = first == 0x04 ? "little-endian" : first == 0x01 ? "big-endian" : "mixed-endian";
    memset(out, 0, RING_PLATFORM_BYTES);
    snprintf(out, RING_PLATFORM_BYTES, "%s %s void*%zu size_t%zu long%zu int64-align%zu fingerprint%zu", RING_ARCH,
             order, sizeof(void *), sizeof(size_t), sizeof(long), alignof(int64_t), sizeof(ring_fingerprint));
}

/* FNV-1a over an array the caller passes by pointer (its contents must agree too). */
static uint64_t hash_bytes(const void *p, size_t bytes)
{
    return p ? hash_fnv1a(HASH_FNV1A_BASIS, p, bytes) | 1 : 0; /* never 0, the "absent" value */
}

static uint64_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

void ring_fingerprint_fill(const clattn_sdpa_desc *d, clattn_ring_layout layout, ring_fingerprint *fp)
{
    const clattn_masks *m = d->masks;
    const size_t kv_heads = d->kv_heads ? d->kv_heads : d->heads;
    uint64_t *f = fp->field;
    unsigned i = 0;
    ring_platform(fp->platform);
    f[i++] = d->batch;
    f[i++] = d->heads;
    f[i++] = kv_heads;
    f[i++] = d->q_len;
    f[i++] = d->kv_len;
    f[i++] = d->qk_dim;
    f[i++] = d->v_dim ? d->v_dim : d->qk_dim;
    f[i++] = float_bits(d->scale);
    f[i++] = float_bits(d->softcap);
    f[i++] = (uint64_t)d->algorithm;
    f[i++] = m ? (uint64_t)m->causal : 0;
    f[i++] = m && m->key_lengths ? hash_bytes(m->key_lengths, d->batch * sizeof *m->key_lengths) : 0;
    f[i++] = m && m->query_offsets ? hash_bytes(m->query_offsets, d->batch * sizeof *m->query_offsets) : 0;
    f[i++] = m && m->window ? hash_bytes(m->window, sizeof *m->window) : 0;
    f[i++] = d->sinks ? hash_bytes(d->sinks, d->heads * sizeof *d->sinks) : 0;
    f[i++] = d->alibi_slopes ? hash_bytes(d->alibi_slopes, d->heads * sizeof *d->alibi_slopes) : 0;
    f[i++] = (uint64_t)d->q_dtype | (uint64_t)d->k_dtype << 8 | (uint64_t)d->v_dtype << 16 | (uint64_t)d->out_dtype << 24;
    f[i++] = (uint64_t)layout;
    f[i++] = (uint64_t)d->weights_output;
}

clattn_status ring_fingerprints_verdict(ring_fingerprint *all, int ranks, size_t least_rows, int *failed_rank,
                                        char *detail, size_t cap)
{
    for (int i = 0; i < ranks; i++) {
        all[i].platform[RING_PLATFORM_BYTES - 1] = '\0';
        all[i].detail[sizeof all[i].detail - 1] = '\0';
    }
    /* Before any number is read: another rank's numbers mean something else on another platform. */
    for (int i = 1; i < ranks; i++)
        if (memcmp(all[i].platform, all[0].platform, RING_PLATFORM_BYTES) != 0) {
            *failed_rank = i;
            snprintf(detail, cap, "rank %d runs on \"%s\", rank 0 on \"%s\": a ring's ranks exchange raw bytes and "
                     "must be of one platform", i, all[i].platform, all[0].platform);
            return CLATTN_ERROR_COMMUNICATION;
        }
    for (int i = 0; i < ranks; i++)
        if (all[i].status != CLATTN_SUCCESS) {
            const bool too_many = strstr(all[i].detail, "every rank needs") != NULL;
            *failed_rank = too_many && least_rows ? (int)least_rows : i;
            snprintf(detail, cap, "rank %d: %s", i, all[i].detail);
            return (clattn_status)all[i].status;
        }
    for (int i = 1; i < ranks; i++)
        for (unsigned f = 0; f < RING_FIELDS; f++)
            if (all[i].field[f] != all[0].field[f]) {
                *failed_rank = i;
                snprintf(detail, cap, "rank %d's %s is %llu, rank 0's is %llu%s", i, field_names[f],
                         (unsigned long long)all[i].field[f], (unsigned long long)all[0].field[f],
                         f >= FIRST_HASHED && f <= LAST_HASHED ? " (hashes of the arrays)" : "");
                return CLATTN_ERROR_SHAPE_MISMATCH;
            }
    return CLATTN_SUCCESS;
}
