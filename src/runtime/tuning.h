/* A context's parameters of each kernel family, looked up in one order: the context's options
 * (options.tuning, options.tile, options.gemm or their environment variables), else what clattn_tune
 * chose in this context or recorded for this device (the family's tuning record, read once), else the
 * device class's defaults (tuning_tables.c); every "the device's" value resolved. */
#ifndef CLATTN_TUNING_H
#define CLATTN_TUNING_H

#include "tuning_tables.h"

typedef enum tuning_source { TUNING_FROM_OPTIONS, TUNING_FROM_RECORD, TUNING_FROM_TABLE } tuning_source;

/* Family f's values for a call on ctx (source: where they came from; may be NULL). A damaged record is
 * ignored with a warning. Fails only when out of host memory. */
clattn_status tuning_lookup(clattn_context *ctx, tuning_family f, tuning_values *out, tuning_source *source);
/* Whether the options fix family f's values (clattn_tune then measures nothing of it). */
bool tuning_fixed(const clattn_context *ctx, tuning_family f);
/* For tuning: from now on family f uses *v in this context (NULL: the record's or the table's again). */
clattn_status tuning_use(clattn_context *ctx, tuning_family f, const tuning_values *v);
/* Store *v as family f's tuning record for this device, for later contexts. */
void tuning_record(clattn_context *ctx, tuning_family f, const tuning_values *v);

#endif
