/* The on-disk cache of compiled program binaries and tuning records (see cache.c for the entry format and its checks). */
#ifndef CLATTN_CACHE_H
#define CLATTN_CACHE_H

#include "clattn/clattn.h"

/* A program built from `source` with `options`, loaded from the cache, or NULL (not cached, cache
 * off, or an entry that is damaged or does not load: such an entry is never trusted). */
cl_program cache_load(clattn_context *ctx, const char *source, const char *options);
/* Store a built program's binary; failures (read-only or full disk) are ignored. */
void cache_store(clattn_context *ctx, const char *source, const char *options, cl_program program);

/* Small text records kept with the programs (measured tuning choices), keyed by name and, like
 * programs, by device, driver and library version. cache_record_load returns a malloc'd string (the
 * line without its newline), or NULL where there is none (or it is damaged, or the cache is off). */
char *cache_record_load(clattn_context *ctx, const char *name);
void cache_record_store(clattn_context *ctx, const char *name, const char *text);

#endif
