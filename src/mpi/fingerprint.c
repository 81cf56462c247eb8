/* The ranks' fingerprints (fingerprint.h). */
#include "fingerprint.h"

#include "hash.h"

#include <stdalign.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* What every rank must agree on: every option of call_options.def that changes a result (its `result`
 * column), in the table's order, then the ring's layout; names beside them for the message. */
static const char *const field_names[RING_FIELDS] = {
#define CLATTN_OPTION(name, kind, type, def, limit, range, calls, result, ...) RING_NAME_IF_##result(#name)
#define CLATTN_SDPA_OPTION CLATTN_OPTION
#define CLATTN_MASKS_OPTION(name, kind, type, def, limit, range, calls, result, ...) RING_NAME_IF_##result("masks." #name)
#include "call_options.def"
#undef CLATTN_OPTION
#undef CLATTN_SDPA_OPTION
#undef CLATTN_MASKS_OPTION
    "layout"};

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

/* The mods by what names their functions (clattn_mods_id: equal across processes), 0 without. */
static uint64_t mods_print(const clattn_mods *mods)
{
    const char *id = clattn_mods_id(mods);
    return id ? hash_bytes(id, strlen(id)) : 0;
}

/* A block mask by its counts of empty, partial and full blocks (what the public API tells of it), 0 without. */
static uint64_t block_mask_print(const clattn_block_mask *mask)
{
    size_t counts[3] = {0, 0, 0};
    if (!mask || clattn_block_mask_counts(mask, counts) != CLATTN_SUCCESS)
        return mask ? 1 : 0;
    return hash_bytes(counts, sizeof counts);
}

/* Each kind's value as a number (arrays and objects by a hash of their contents). */
#define RING_PRINT_OPT_DIM(v, d) ((uint64_t)(v))
#define RING_PRINT_OPT_DIM0(v, d) ((uint64_t)(v))
#define RING_PRINT_OPT_SIZE(v, d) ((uint64_t)(v))
#define RING_PRINT_OPT_KV_HEADS(v, d) ((uint64_t)(v))
#define RING_PRINT_OPT_ENUM(v, d) ((uint64_t)(v))
#define RING_PRINT_OPT_DTYPE(v, d) ((uint64_t)(v))
#define RING_PRINT_OPT_ORIGIN(v, d) ((uint64_t)(v))
#define RING_PRINT_OPT_RESERVED(v, d) ((uint64_t)(v))
#define RING_PRINT_OPT_SCALE(v, d) float_bits(v)
#define RING_PRINT_OPT_CAP(v, d) float_bits(v)
#define RING_PRINT_OPT_PER_HEAD(v, d) hash_bytes((v), (d)->heads * sizeof *(v))
#define RING_PRINT_OPT_LENGTHS(v, d) hash_bytes((v), (d)->batch * sizeof *(v))
#define RING_PRINT_OPT_OFFSETS(v, d) hash_bytes((v), (d)->batch * sizeof *(v))
#define RING_PRINT_OPT_WINDOW(v, d) hash_bytes((v), sizeof *(v))
#define RING_PRINT_OPT_TREE(v, d) hash_bytes((v), (d)->batch * (d)->q_len * sizeof *(v))
#define RING_PRINT_OPT_MODS(v, d) mods_print(v)
#define RING_PRINT_OPT_BLOCK_MASK(v, d) block_mask_print(v)
#define RING_PRINT_OPT_MASKS(v, d) ((uint64_t)((v) != NULL)) /* (its fields follow, one by one) */
#define RING_PRINT_OPT_BUFFER(v, d) ((uint64_t)((v) != NULL))

void ring_fingerprint_fill(const clattn_sdpa_desc *desc, clattn_ring_layout layout, ring_fingerprint *fp)
{
    /* Defaults resolved, so that ranks that say one thing two ways agree. */
    clattn_sdpa_desc n = *desc;
    const clattn_sdpa_desc *d = &n;
    n.kv_heads = d->kv_heads ? d->kv_heads : d->heads;
    n.v_dim = d->v_dim ? d->v_dim : d->qk_dim;
    const clattn_masks none = CLATTN_MASKS_INIT, *m = d->masks ? d->masks : &none;
    uint64_t *f = fp->field;
    unsigned i = 0;
    ring_platform(fp->platform);
#define RING_FILL_IF_0(value)
#define RING_FILL_IF_1(value) f[i++] = (value);
#define CLATTN_OPTION(name, kind, type, def, limit, range, calls, result, ...)                                      \
    RING_FILL_IF_##result(RING_PRINT_##kind(d->name, d))
#define CLATTN_SDPA_OPTION CLATTN_OPTION
#define CLATTN_MASKS_OPTION(name, kind, type, def, limit, range, calls, result, ...)                                \
    RING_FILL_IF_##result(RING_PRINT_##kind(m->name, d))
#include "call_options.def"
#undef CLATTN_OPTION
#undef CLATTN_SDPA_OPTION
#undef CLATTN_MASKS_OPTION
    f[i++] = (uint64_t)layout;
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
                snprintf(detail, cap, "rank %d's %s is %llu, rank 0's is %llu (arrays and objects: hashes of them)", i,
                         field_names[f], (unsigned long long)all[i].field[f], (unsigned long long)all[0].field[f]);
                return CLATTN_ERROR_SHAPE_MISMATCH;
            }
    return CLATTN_SUCCESS;
}
