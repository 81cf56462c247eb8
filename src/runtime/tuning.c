/* The one lookup of a kernel family's parameters: options, then tuning record (or clattn_tune's choice
 * in this context), then the device class's table row. What a context has read or been told is kept
 * beside its programs (a path state per family), so a record is read once per context. */
#include "tuning.h"

#include "cache.h"
#include "context.h"
#include "error.h"
#include "program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tuned {
    bool read; /* the record was looked for */
    bool set;  /* values holds the record's, or clattn_tune's choice */
    tuning_values values;
} tuned;

static tuned *tuned_of(clattn_context *ctx, tuning_family f)
{
    return program_path_state(ctx, &tuning_tables[f], sizeof(tuned), NULL);
}

bool tuning_fixed(const clattn_context *ctx, tuning_family f) { return (ctx->tuning.fixed >> f) & 1u; }

/* The family's record, read once; a damaged one is ignored with a warning. */
static void read_record(clattn_context *ctx, tuning_family f, tuned *t)
{
    if (t->read)
        return;
    t->read = true;
    char *record = cache_record_load(ctx, tuning_tables[f].record);
    if (!record)
        return;
    const tuning_values base = tuning_defaults(&ctx->caps, &ctx->tuning, f);
    char *newline = strchr(record, '\n');
    if (newline)
        *newline = '\0';
    t->set = tuning_parse(f, record, &base, &t->values);
    if (!t->set)
        set_warning(ctx, "the tuning record of the %s parameters for %s is damaged; run clattn tune again",
                    tuning_tables[f].name, ctx->caps.name);
    free(record);
}

clattn_status tuning_lookup(clattn_context *ctx, tuning_family f, tuning_values *out, tuning_source *source)
{
    tuning_source from = TUNING_FROM_TABLE;
    if (tuning_fixed(ctx, f)) {
        *out = ctx->tuning.values[f];
        from = TUNING_FROM_OPTIONS;
    } else {
        tuned *t = tuned_of(ctx, f);
        if (!t)
            return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
        read_record(ctx, f, t);
        *out = t->set ? t->values : tuning_defaults(&ctx->caps, &ctx->tuning, f);
        if (t->set)
            from = TUNING_FROM_RECORD;
    }
    tuning_complete(&ctx->caps, &ctx->tuning, f, out);
    if (source)
        *source = from;
    return CLATTN_SUCCESS;
}

clattn_status tuning_use(clattn_context *ctx, tuning_family f, const tuning_values *v)
{
    tuned *t = tuned_of(ctx, f);
    if (!t)
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    t->read = v != NULL; /* a choice: no record replaces it; none: the record is looked for again */
    t->set = v != NULL;
    if (v)
        t->values = *v;
    return CLATTN_SUCCESS;
}

void tuning_record(clattn_context *ctx, tuning_family f, const tuning_values *v)
{
    char line[64];
    tuning_format(f, v, line, sizeof line - 1);
    strcat(line, "\n");
    cache_record_store(ctx, tuning_tables[f].record, line);
}
