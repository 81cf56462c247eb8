/* The per-device parameters of the kernel families: one table per family (tuning_tables.c) with each
 * device class's defaults (beside the measurement that chose them), the range of every value, and the
 * candidates clattn_tune measures; their spelling ("64x64x4", "clattn:6x3") as options and tuning
 * records write them. tuning.c looks a context's values up: options, else record, else table. */
#ifndef CLATTN_TUNING_TABLES_H
#define CLATTN_TUNING_TABLES_H

#include "device.h"
#include "options.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum tuning_family { TUNING_GEMM, TUNING_FUSED, TUNING_DECODE, TUNING_STAGED, TUNING_FAMILIES } tuning_family;

#define TUNING_MAX_VALUES 7

/* A family's values in its table's order; 0 where a value's range allows it means "the device's" (its
 * SIMD width, a tile that follows from it), filled in by tuning_complete. */
typedef struct tuning_values {
    unsigned v[TUNING_MAX_VALUES];
} tuning_values;

typedef struct tuning_value_range {
    const char *name; /* what the value is, for messages and clattn tune */
    unsigned lo, hi;
} tuning_value_range;

typedef struct tuning_table {
    const char *name;   /* the family's key in options.tuning ("fused") and in clattn tune's report */
    const char *record; /* the name of its tuning record in the program cache */
    unsigned count;     /* values */
    unsigned least;     /* fewest a spelling may give; the rest come from the device class's defaults */
    tuning_value_range range[TUNING_MAX_VALUES];
    tuning_values defaults[DEVICE_CLASSES];
    const tuning_values *candidates[DEVICE_CLASSES]; /* the class's default among them (once completed) */
    unsigned candidate_count[DEVICE_CLASSES];
} tuning_table;

extern const tuning_table tuning_tables[TUNING_FAMILIES];

/* The GEMM's first value. */
enum { TUNING_GEMM_CLATTN = 1, TUNING_GEMM_CLBLAST = 2 };

/* Read a spelling of family f's values (decimal values joined by 'x'; the GEMM's "clblast", "clattn" or
 * "clattn:RxV"): a prefix of its values, each in range, over `base`. False, *out untouched, when it is not
 * one. */
bool tuning_parse(tuning_family f, const char *text, const tuning_values *base, tuning_values *out);
/* The spelling tuning_parse reads back: every value, but trailing zeros ("the device's") left out down
 * to the family's fewest. */
void tuning_format(tuning_family f, const tuning_values *v, char *out, size_t size);
/* The family whose name is the `len` characters at `name`, or TUNING_FAMILIES. */
tuning_family tuning_family_named(const char *name, size_t len);

/* What a context's options say: options.tuning, with options.tile and options.gemm over its fused and
 * gemm entries (each the API's value, else its environment variable's). */
typedef struct tuning_options {
    int device_class; /* "class=…": that class's defaults for this device; -1: its own class's */
    unsigned fixed;   /* bit f: family f's values are set by the options */
    tuning_values values[TUNING_FAMILIES]; /* as given, over the class's defaults (0: the device's) */
} tuning_options;

/* Read o's tuning options for a device: a malformed options.tuning is CLATTN_ERROR_INVALID_VALUE, a
 * malformed CLATTN_TUNING a warning on ctx (and ignored). */
clattn_status tuning_options_resolve(clattn_context *ctx, const device_caps *caps, const context_options *o,
                                     tuning_options *out);

/* The defaults of the device's class (or of the class the options name: NULL, none), and every "the
 * device's" zero of *v resolved for this device. */
tuning_values tuning_defaults(const device_caps *caps, const tuning_options *o, tuning_family f);
/* The class whose tables the device takes: the device's own, or the one the options name (class=…). */
device_class tuning_class(const device_caps *caps, const tuning_options *o);
void tuning_complete(const device_caps *caps, const tuning_options *o, tuning_family f, tuning_values *v);
/* The candidates clattn_tune measures for family f on this device (*count of them). */
const tuning_values *tuning_candidates(const device_caps *caps, const tuning_options *o, tuning_family f,
                                       unsigned *count);

#endif
