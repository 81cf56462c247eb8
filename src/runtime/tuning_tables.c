/* The kernel families' per-device parameters: for each family, what each device class (device.h) gets
 * when neither options nor a tuning record say otherwise, with the measurement that chose it, and the
 * candidates clattn_tune measures. Measurements are PoCL 3.1 on a 2-core AVX-512 Xeon unless said. */
#include "tuning_tables.h"

#include "error.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define COUNT(a) (unsigned)(sizeof(a) / sizeof((a)[0]))

/* ---- projection GEMM: {implementation, rows, vectors, VEC} -------------------------------------
 * CPUs: clattn's kernel (CLBlast's kernels are tuned for GPUs: about 30 GFLOP/s on PoCL where clattn's
 * reaches BLAS speed) with tiles of 6 rows × 3 vectors of 16 (18 of AVX-512's 32 vector registers as
 * accumulators: 255 GFLOP/s on 512×768·768×2304 where 8×2 gave 206 and 4×5 226); narrower SIMD (16
 * registers) 6 × 2 (vectors 0). llvmpipe: the same kernel (its work-items' vector code runs as is).
 * GPUs: CLBlast, and 4 × 4 scalars per work-item when clattn's kernel runs. Candidates: CLBlast, then
 * tiles whose accumulators fit a register file (18 and 24 suit 32 registers, 8–12 suit 16; on GPUs a
 * work-item's tile is a few scalars). */
#define CLBLAST_ {{TUNING_GEMM_CLBLAST, 6, 0, 0}}
#define CLATTN_6 {{TUNING_GEMM_CLATTN, 6, 0, 0}} /* vectors 0: 3 or 2 by the SIMD width */
static const tuning_values gemm_cpu[] = {
    CLBLAST_,           {{TUNING_GEMM_CLATTN, 4, 2}}, {{TUNING_GEMM_CLATTN, 6, 2}}, {{TUNING_GEMM_CLATTN, 8, 2}},
    {{TUNING_GEMM_CLATTN, 4, 3}}, {{TUNING_GEMM_CLATTN, 6, 3}}, {{TUNING_GEMM_CLATTN, 8, 3}},
    {{TUNING_GEMM_CLATTN, 4, 4}},
};
static const tuning_values gemm_gpu[] = {
    {{TUNING_GEMM_CLBLAST, 4, 4, 1}}, {{TUNING_GEMM_CLATTN, 2, 2, 1}}, {{TUNING_GEMM_CLATTN, 4, 2, 1}},
    {{TUNING_GEMM_CLATTN, 4, 4, 1}},  {{TUNING_GEMM_CLATTN, 8, 4, 1}}, {{TUNING_GEMM_CLATTN, 8, 8, 1}},
};

/* ---- fused kernel: {work-items per group M, keys per tile N, rows per work-item R, VEC, row layout} ---
 * Row layout 1: each work-item's R rows along d (cl/flash_attention.cl); 2: R vectors of VEC rows in the
 * SIMD lanes (cl/flash_lanes.cl; where VEC is 1 or N not a multiple of 8, the first); 0: the second where
 * VEC > 1.
 * CPUs: VEC the native SIMD width (PoCL runs a work-item's vector code as written, where spreading rows
 * over lanes would need its work-item vectoriser), and the rows in the lanes (cl/flash_lanes.cl): 16
 * work-items of R = 2 vectors of rows (32 rows with AVX-512, each key tile copied once for 512) over
 * tiles of 64 keys — at L = S = 2048, H = 8 about 1.15x faster than the rows along d (cl/flash_attention.cl's
 * CPU shape: 64 work-items of 4 rows, 2 key vectors a step), which stays a candidate;
 * 8 work-items, tiles of 128 keys or 3 row vectors measured within noise of, or slower than, the default.
 * GPUs and llvmpipe (whose work-items are its lanes, and whose Mesa 22.3 miscompiled the CPU shape): VEC
 * 1, 64 work-items of one row, tiles of 32 keys (VEC 1 has no lanes to put rows in).
 * Candidates: on CPUs a few around the default and the rows along d (each is a compile of seconds on
 * PoCL, so few); on GPUs groups of 32–128 and tiles of 16–64 keys. */
static const tuning_values fused_cpu[] = {{{16, 64, 2, 0, 2}}, {{8, 64, 2, 0, 2}}, {{64, 64, 4, 0, 1}}};
static const tuning_values fused_gpu[] = {
    {{64, 32, 1, 1}}, {{128, 32, 1, 1}}, {{32, 32, 1, 1}}, {{64, 16, 1, 1}}, {{64, 64, 1, 1}},
};

/* ---- decode kernels: {splits per compute unit, rows per group, keys per tile, work-items per group,
 * VEC, keys per step, rows in lanes from} -----------------------------------------------------------
 * The keys are split until there are `splits` work-groups per compute unit (uneven slices even out),
 * never below 256 keys a split; a group takes up to `rows` packed query rows (the query heads that
 * share a K/V head, times L). CPUs: one work-item per group streams its keys in place at the native
 * SIMD width, 4 rows × 4 keys of dot products a step, the next tile prefetched (decode L = 1..8: in
 * place with prefetching beat staging the tiles in local memory by 20–40%, and without prefetching the
 * cores waited on each row). GPUs and llvmpipe: 64 work-items stage each tile with coalesced reads and
 * spread the output columns over their lanes. In place, a group of at least `rows in lanes from` packed
 * rows (0: the SIMD width) forms its scores with the rows in the lanes (cl/decode.cl's ROWS_T): grouped-
 * query decode with 16 rows a K/V head, L = 4, ran 1.3x faster so, where 8 rows in 16 lanes ran slower
 * than along d. Candidates: fewer and more splits, fewer rows a group, and the rows never in the lanes
 * (1024; clattn_tune's decode probe has 16 rows a group). */
static const tuning_values decode_cpu[] = {
    {{4, 16, 32, 1, 0, 4, 0}}, {{1, 16, 32, 1, 0, 4, 0}}, {{16, 16, 32, 1, 0, 4, 0}}, {{4, 4, 32, 1, 0, 4, 0}},
    {{4, 16, 32, 1, 0, 4, 1024}},
};
static const tuning_values decode_lanes[] = {
    {{4, 16, 32, 64, 0, 1}}, {{1, 16, 32, 64, 0, 1}}, {{16, 16, 32, 64, 0, 1}}, {{4, 4, 32, 64, 0, 1}},
};
static const tuning_values decode_gpu[] = {
    {{4, 16, 32, 64, 1, 1}}, {{1, 16, 32, 64, 1, 1}}, {{16, 16, 32, 64, 1, 1}}, {{4, 4, 32, 64, 1, 1}},
    {{4, 16, 32, 128, 1, 1}},
};

/* ---- staged kernels: {scores per work-item, output vectors per work-item of the weighted sum, the
 * blocked score kernel's rows, its vectors, VEC} ---------------------------------------------------
 * CPUs and llvmpipe: VEC lanes inside each work-item, 4 scores and 4 vectors of outputs a work-item,
 * and the scores blocked like clattn's GEMM (6 rows × 3 vectors of 16 with 32 vector registers, 6 × 2
 * with 16: vectors 0). GPUs: one element per work-item (no blocked kernel). */
static const tuning_values staged_cpu[] = {
    {{4, 4, 6, 0, 0}}, {{8, 4, 6, 0, 0}}, {{4, 8, 6, 0, 0}}, {{4, 4, 4, 0, 0}},
};
static const tuning_values staged_gpu[] = {{{1, 1, 6, 0, 1}}, {{2, 1, 6, 0, 1}}, {{1, 2, 6, 0, 1}}, {{4, 4, 6, 0, 1}}};

#define CLASSES(cpu, lanes, gpu) {cpu, lanes, gpu}, {COUNT(cpu), COUNT(lanes), COUNT(gpu)}

const tuning_table tuning_tables[TUNING_FAMILIES] = {
    [TUNING_GEMM] = {"gemm", "projection GEMM choice, format 1", 4, 1,
                     {{"implementation", TUNING_GEMM_CLATTN, TUNING_GEMM_CLBLAST}, {"rows", 1, 16},
                      {"vectors", 0, 8}, {"VEC", 0, 16}},
                     {CLATTN_6, CLATTN_6, gemm_gpu[0]},
                     CLASSES(gemm_cpu, gemm_cpu, gemm_gpu)},
    [TUNING_FUSED] = {"fused", "fused tile choice, format 2", 5, 2,
                      {{"work-items per group", 1, 1024}, {"keys per tile", 1, 256}, {"rows per work-item", 1, 8},
                       {"VEC", 0, 16}, {"row layout", 0, 2}},
                      {fused_cpu[0], fused_gpu[0], fused_gpu[0]},
                      CLASSES(fused_cpu, fused_gpu, fused_gpu)},
    [TUNING_DECODE] = {"decode", "decode parameters, format 1", 7, 1,
                       {{"splits per compute unit", 1, 64}, {"rows per group", 1, 64}, {"keys per tile", 1, 256},
                        {"work-items per group", 1, 1024}, {"VEC", 0, 16}, {"keys per step", 1, 8},
                        {"rows in lanes from", 0, 1024}},
                       {decode_cpu[0], decode_lanes[0], decode_gpu[0]},
                       CLASSES(decode_cpu, decode_lanes, decode_gpu)},
    [TUNING_STAGED] = {"staged", "staged parameters, format 1", 5, 1,
                       {{"scores per work-item", 1, 16}, {"output vectors per work-item", 1, 16},
                        {"blocked score rows", 1, 16}, {"blocked score vectors", 0, 8}, {"VEC", 0, 16}},
                       {staged_cpu[0], staged_cpu[0], staged_gpu[0]},
                       CLASSES(staged_cpu, staged_cpu, staged_gpu)},
};

tuning_family tuning_family_named(const char *name, size_t len)
{
    for (int f = 0; f < TUNING_FAMILIES; f++)
        if (strlen(tuning_tables[f].name) == len && strncmp(tuning_tables[f].name, name, len) == 0)
            return (tuning_family)f;
    return TUNING_FAMILIES;
}

/* A value is in range, and a VEC a vector width OpenCL C has (0: the device's). */
static bool value_fits(const tuning_value_range *r, unsigned long v)
{
    if (v < r->lo || v > r->hi)
        return false;
    return strcmp(r->name, "VEC") != 0 || (v & (v - 1)) == 0;
}

/* Decimal values joined by 'x' into v[first..]: as many as are given (at least the family's fewest),
 * each within its range. */
static bool parse_values(const tuning_table *t, const char *text, unsigned first, tuning_values *v)
{
    unsigned long x[TUNING_MAX_VALUES];
    const size_t n = options_parse_numbers(text, x, t->count - first);
    if (n == 0 || first + n < t->least)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!value_fits(&t->range[first + i], x[i]))
            return false;
    for (size_t i = 0; i < n; i++)
        v->v[first + i] = (unsigned)x[i];
    return true;
}

bool tuning_parse(tuning_family f, const char *text, const tuning_values *base, tuning_values *out)
{
    tuning_values v = *base;
    if (f == TUNING_GEMM) { /* clblast | clattn | clattn:RxV, as options.gemm */
        gemm_choice c;
        if (!options_parse_gemm(text, &c))
            return false;
        v.v[0] = c.impl == GEMM_CLBLAST ? TUNING_GEMM_CLBLAST : TUNING_GEMM_CLATTN;
        if (c.impl == GEMM_CLATTN) /* "clattn" alone: rows 0, the class's tile (tuning_complete) */
            v.v[1] = c.rows, v.v[2] = c.vectors;
    } else if (!parse_values(&tuning_tables[f], text, 0, &v)) {
        return false;
    }
    *out = v;
    return true;
}

void tuning_format(tuning_family f, const tuning_values *v, char *out, size_t size)
{
    const tuning_table *t = &tuning_tables[f];
    if (f == TUNING_GEMM) { /* options.gemm's spelling; a tile only where both its numbers are known */
        const gemm_choice c = {v->v[0] == TUNING_GEMM_CLBLAST ? GEMM_CLBLAST : GEMM_CLATTN,
                               v->v[1] && v->v[2] ? v->v[1] : 0, v->v[2]};
        options_format_gemm(&c, out, size);
        return;
    }
    unsigned n = t->count;
    while (n > t->least && v->v[n - 1] == 0)
        n--;
    size_t at = 0;
    if (size)
        out[0] = '\0';
    for (unsigned i = 0; i < n && at < size; i++)
        at += (size_t)snprintf(out + at, size - at, i ? "x%u" : "%u", v->v[i]);
}

device_class tuning_class(const device_caps *caps, const tuning_options *o)
{
    return o && o->device_class >= 0 ? (device_class)o->device_class : device_class_of(caps);
}

tuning_values tuning_defaults(const device_caps *caps, const tuning_options *o, tuning_family f)
{
    return tuning_tables[f].defaults[tuning_class(caps, o)];
}

const tuning_values *tuning_candidates(const device_caps *caps, const tuning_options *o, tuning_family f,
                                       unsigned *count)
{
    const device_class c = tuning_class(caps, o);
    *count = tuning_tables[f].candidate_count[c];
    return tuning_tables[f].candidates[c];
}

/* Tiles of vectors that follow from the SIMD width: 3 with AVX-512's 32 registers, else 2. */
static unsigned vectors_for(unsigned vec) { return vec >= 16 ? 3 : 2; }

void tuning_complete(const device_caps *caps, const tuning_options *o, tuning_family f, tuning_values *v)
{
    const tuning_table *t = &tuning_tables[f];
    const tuning_values d = tuning_defaults(caps, o, f);
    for (unsigned i = 0; i < t->count; i++)
        if (strcmp(t->range[i].name, "VEC") == 0 && v->v[i] == 0)
            v->v[i] = device_simd_width(caps);
    switch (f) {
    case TUNING_GEMM:
        if (v->v[1] == 0) /* "clattn": the class's tile */
            v->v[1] = d.v[1], v->v[2] = d.v[2];
        if (v->v[2] == 0)
            v->v[2] = v->v[3] > 1 ? vectors_for(v->v[3]) : 4;
        break;
    case TUNING_FUSED:
        if (v->v[4] == 0) /* rows in the lanes where there are lanes */
            v->v[4] = v->v[3] > 1 ? 2 : 1;
        break;
    case TUNING_DECODE:
        if (v->v[6] == 0) /* rows in the lanes once they fill them */
            v->v[6] = v->v[4];
        break;
    case TUNING_STAGED:
        if (v->v[3] == 0)
            v->v[3] = vectors_for(v->v[4]);
        break;
    default:
        break;
    }
}

/* One "family=values" or "class=name" entry of `len` characters at `e` into *out; false: malformed. */
static bool read_entry(const device_caps *caps, const char *e, size_t len, bool classes, tuning_options *out)
{
    const char *eq = memchr(e, '=', len);
    if (!eq || eq == e)
        return false;
    char value[64];
    const size_t name_len = (size_t)(eq - e), value_len = len - name_len - 1;
    if (value_len == 0 || value_len >= sizeof value)
        return false;
    memcpy(value, eq + 1, value_len);
    value[value_len] = '\0';
    if (name_len == 5 && strncmp(e, "class", 5) == 0) {
        for (int c = 0; c < DEVICE_CLASSES; c++)
            if (strcmp(value, device_class_name((device_class)c)) == 0) {
                if (classes)
                    out->device_class = c;
                return true;
            }
        return false;
    }
    const tuning_family f = tuning_family_named(e, name_len);
    if (f == TUNING_FAMILIES)
        return false;
    if (classes) /* the first pass reads only the class, over which the values are given */
        return true;
    const tuning_values base = tuning_defaults(caps, out, f);
    if (!tuning_parse(f, value, &base, &out->values[f]))
        return false;
    out->fixed |= 1u << f;
    return true;
}

/* The comma-separated entries of `text`, in two passes: the class first, then the families. */
static bool read_entries(const device_caps *caps, const char *text, tuning_options *out)
{
    for (int pass = 0; pass < 2; pass++)
        for (const char *e = text; *e;) {
            const char *end = strchr(e, ',');
            const size_t len = end ? (size_t)(end - e) : strlen(e);
            if (!read_entry(caps, e, len, pass == 0, out))
                return false;
            e += len + (end ? 1 : 0);
            if (end && !*e)
                return false; /* a trailing comma */
        }
    return true;
}

clattn_status tuning_options_resolve(clattn_context *ctx, const device_caps *caps, const context_options *o,
                                     tuning_options *out)
{
    *out = (tuning_options){.device_class = -1};
    if (o->tuning && !read_entries(caps, o->tuning, out)) {
        static const char rule[] = "is not a list of family=values (families gemm, fused, decode, staged; "
                                   "values in range) or class=cpu|cpu-lanes|gpu";
        *out = (tuning_options){.device_class = -1};
        if (!o->tuning_from_env)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "options.tuning \"%.64s\" %s", o->tuning, rule);
        set_warning(ctx, "CLATTN_TUNING=\"%.64s\" %s; using the measured or default parameters", o->tuning, rule);
    }
    if (o->tile_set) {
        tuning_values *v = &out->values[TUNING_FUSED];
        if (!(out->fixed & (1u << TUNING_FUSED)))
            *v = tuning_defaults(caps, out, TUNING_FUSED);
        v->v[0] = o->tile_m, v->v[1] = o->tile_n;
        if (o->tile_rows)
            v->v[2] = o->tile_rows;
        v->v[4] = 1; /* R rows a work-item: the rows along d, as the tile option meant before 0.9 */
        out->fixed |= 1u << TUNING_FUSED;
    }
    if (o->gemm.impl != GEMM_DEFAULT) {
        tuning_values *v = &out->values[TUNING_GEMM];
        if (!(out->fixed & (1u << TUNING_GEMM)))
            *v = tuning_defaults(caps, out, TUNING_GEMM);
        v->v[0] = o->gemm.impl == GEMM_CLBLAST ? TUNING_GEMM_CLBLAST : TUNING_GEMM_CLATTN;
        if (o->gemm.impl == GEMM_CLATTN)
            v->v[1] = o->gemm.rows, v->v[2] = o->gemm.vectors;
        out->fixed |= 1u << TUNING_GEMM;
    }
    return CLATTN_SUCCESS;
}
