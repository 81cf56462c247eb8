/* Context options: the program's choice through the API, else the environment, else the default. The
 * environment is read here, at context creation, and nowhere else: a program that calls setenv while
 * another thread runs attention races with no read of ours. */
#define _GNU_SOURCE /* secure_getenv */
#include "options.h"

#include "error.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *options_env(const char *name)
{
#if defined(__GLIBC__)
    return secure_getenv(name);
#else
    return getenv(name);
#endif
}

static char *dup_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *copy = malloc(n);
    if (copy)
        memcpy(copy, s, n);
    return copy;
}

size_t options_parse_numbers(const char *text, unsigned long *out, size_t max)
{
    size_t count = 0;
    const char *p = text;
    for (;;) {
        if (count == max || !isdigit((unsigned char)*p))
            return 0;
        unsigned long v = 0;
        while (isdigit((unsigned char)*p) && v < 100000)
            v = v * 10 + (unsigned long)(*p++ - '0');
        out[count++] = v;
        if (*p == '\0')
            return count;
        if (*p++ != 'x')
            return 0;
    }
}

bool options_parse_tile(const char *text, unsigned *m, unsigned *n, unsigned *rows)
{
    unsigned long parts[3] = {0, 0, 0};
    const size_t count = options_parse_numbers(text, parts, 3);
    if (count < 2 || parts[0] < 1 || parts[0] > 1024 || parts[1] < 1 || parts[1] > 256 ||
        (count == 3 && (parts[2] < 1 || parts[2] > 8)))
        return false;
    *m = (unsigned)parts[0];
    *n = (unsigned)parts[1];
    *rows = count == 3 ? (unsigned)parts[2] : 0;
    return true;
}

/* A spec-style option: the API's value, else its environment variable; "" or unset: not set. A value
 * `parse` refuses is CLATTN_ERROR_INVALID_VALUE from the API, a warning (and the default) from the
 * environment. `rule` says what is accepted, `fallback` what happens instead. */
static clattn_status resolve_spec(clattn_context *ctx, const char *api_value, const char *option, const char *env,
                                  bool (*parse)(const char *, context_options *), const char *rule,
                                  const char *fallback, context_options *out)
{
    const char *value = api_value ? api_value : options_env(env);
    if (!value || !*value || parse(value, out))
        return CLATTN_SUCCESS;
    if (api_value)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "options.%s \"%.32s\" %s", option, value, rule);
    set_warning(ctx, "%s=\"%.32s\" %s; %s", env, value, rule, fallback);
    return CLATTN_SUCCESS;
}

static bool parse_tile_into(const char *text, context_options *out)
{
    return out->tile_set = options_parse_tile(text, &out->tile_m, &out->tile_n, &out->tile_rows);
}

static bool parse_gemm_into(const char *text, context_options *out) { return options_parse_gemm(text, &out->gemm); }

bool options_parse_gemm(const char *text, gemm_choice *out)
{
    gemm_choice c = {GEMM_DEFAULT, 0, 0};
    unsigned long tile[2];
    if (strcmp(text, "clblast") == 0) {
        c.impl = GEMM_CLBLAST;
    } else if (strcmp(text, "clattn") == 0) {
        c.impl = GEMM_CLATTN;
    } else {
        if (strncmp(text, "clattn:", 7) != 0 || options_parse_numbers(text + 7, tile, 2) != 2 || tile[0] < 1 ||
            tile[0] > 16 || tile[1] < 1 || tile[1] > 8)
            return false;
        c = (gemm_choice){GEMM_CLATTN, (unsigned)tile[0], (unsigned)tile[1]};
    }
    *out = c;
    return true;
}

void options_format_gemm(const gemm_choice *c, char *out, size_t size)
{
    if (c->impl == GEMM_CLBLAST)
        snprintf(out, size, "clblast");
    else if (c->rows)
        snprintf(out, size, "clattn:%ux%u", c->rows, c->vectors);
    else
        snprintf(out, size, "clattn");
}

static bool equals_any(const char *value, const char *const *words, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(value, words[i]) == 0)
            return true;
    return false;
}

/* CLATTN_CACHE: 0/off/false/no turn the cache off; unset, empty, 1/on/true/yes leave it on; anything
 * else leaves it on with a warning (a typo must not pass unnoticed). */
static bool env_cache_enabled(clattn_context *ctx)
{
    static const char *const off[] = {"0", "off", "false", "no"}, *const on[] = {"1", "on", "true", "yes"};
    const char *env = options_env("CLATTN_CACHE");
    if (!env || !*env || equals_any(env, on, 4))
        return true;
    if (equals_any(env, off, 4))
        return false;
    set_warning(ctx, "CLATTN_CACHE=\"%.32s\" is not one of 0/off/false/no or 1/on/true/yes; the cache stays on", env);
    return true;
}

/* $XDG_CACHE_HOME/clattn, else $HOME/.cache/clattn; NULL (and no error) when neither is set. */
static clattn_status default_cache_dir(clattn_context *ctx, char **out)
{
    /* A relative XDG_CACHE_HOME is invalid (the XDG base-directory specification says to ignore it). */
    const char *xdg = options_env("XDG_CACHE_HOME"), *home = options_env("HOME");
    if (xdg && xdg[0] != '/')
        xdg = NULL;
    const char *base = xdg && *xdg ? xdg : home && *home ? home : NULL;
    *out = NULL;
    if (!base)
        return CLATTN_SUCCESS;
    const char *suffix = base == xdg ? "/clattn" : "/.cache/clattn";
    size_t size = strlen(base) + strlen(suffix) + 1;
    if (!(*out = malloc(size)))
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "copying the cache folder's name");
    snprintf(*out, size, "%s%s", base, suffix);
    return CLATTN_SUCCESS;
}

/* A copy of `value`, or NULL for NULL and "". */
static clattn_status copy_folder(clattn_context *ctx, const char *value, const char *what, char **out)
{
    *out = NULL;
    if (!value || !*value)
        return CLATTN_SUCCESS;
    if (!(*out = dup_string(value)))
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "copying %s", what);
    return CLATTN_SUCCESS;
}

clattn_status options_resolve(clattn_context *ctx, const clattn_context_options *api, context_options *out)
{
    static const clattn_context_options defaults = CLATTN_CONTEXT_OPTIONS_INIT;
    if (!api)
        api = &defaults;
    memset(out, 0, sizeof *out);
    clattn_status st = CLATTN_SUCCESS;
    if (api->cache != CLATTN_CACHE_DEFAULT && api->cache != CLATTN_CACHE_ON && api->cache != CLATTN_CACHE_OFF)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "options.cache has the unknown value %d", (int)api->cache);
    if (api->cache == CLATTN_CACHE_DEFAULT) {
        out->cache_enabled = env_cache_enabled(ctx);
    } else {
        out->cache_enabled = api->cache == CLATTN_CACHE_ON;
    }
    if (out->cache_enabled)
        st = api->cache_dir ? copy_folder(ctx, api->cache_dir, "options.cache_dir", &out->cache_dir)
                            : default_cache_dir(ctx, &out->cache_dir);
    if (st == CLATTN_SUCCESS)
        st = copy_folder(ctx, api->kernel_dir ? api->kernel_dir : options_env("CLATTN_KERNEL_DIR"), "the kernel folder",
                         &out->kernel_dir);
    if (st == CLATTN_SUCCESS)
        st = resolve_spec(ctx, api->tile, "tile", "CLATTN_TILE", parse_tile_into,
                          "is not MxN or MxNxR (1 ≤ M ≤ 1024, 1 ≤ N ≤ 256, 1 ≤ R ≤ 8)", "using the defaults", out);
    if (st == CLATTN_SUCCESS)
        st = resolve_spec(ctx, api->gemm, "gemm", "CLATTN_GEMM", parse_gemm_into,
                          "is not clblast, clattn or clattn:RxV (1 ≤ R ≤ 16, 1 ≤ V ≤ 8)",
                          "using the measured or default GEMM", out);
    /* CLATTN_SOFTMAX_DOUBLE=float-float: the double softmax's float-float build even where the device has
     * fp64 (the tests run the emulation on every device so); "auto" or unset: as the device allows. */
    const char *softmax_double = options_env("CLATTN_SOFTMAX_DOUBLE");
    out->softmax_float_float = softmax_double && strcmp(softmax_double, "float-float") == 0;
    if (softmax_double && *softmax_double && !out->softmax_float_float && strcmp(softmax_double, "auto") != 0)
        set_warning(ctx, "CLATTN_SOFTMAX_DOUBLE=\"%.32s\" is not float-float or auto; ignored", softmax_double);
    const char *reproducible = options_env("CLATTN_REPRODUCIBLE");
    out->reproducible = reproducible && strcmp(reproducible, "1") == 0;
    if (reproducible && *reproducible && !out->reproducible && strcmp(reproducible, "0") != 0)
        set_warning(ctx, "CLATTN_REPRODUCIBLE=\"%.32s\" is not 1 or 0; ignored", reproducible);
    /* options.tuning: its grammar is the parameter tables' (tuning_tables.c), read there. */
    const char *tuning = api->tuning ? api->tuning : options_env("CLATTN_TUNING");
    out->tuning_from_env = !api->tuning;
    if (st == CLATTN_SUCCESS && tuning && *tuning && !(out->tuning = dup_string(tuning)))
        st = set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "copying options.tuning");
    if (st != CLATTN_SUCCESS)
        options_free(out);
    return st;
}

void options_free(context_options *options)
{
    free(options->cache_dir);
    free(options->kernel_dir);
    free(options->tuning);
    options->cache_dir = options->kernel_dir = options->tuning = NULL;
}
