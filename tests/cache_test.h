/*
 * What the two halves of test_cache share (test_cache.c: the fixture, the problem, the folder and entry
 * checks, and the cases store, reuse, damaged, disabled; test_cache_folders.c: unusable, concurrent, home,
 * trust).
 */
#ifndef CLATTN_CACHE_TEST_H
#define CLATTN_CACHE_TEST_H

#include "test_util.h"

#include <limits.h>
#include <stddef.h>

#define MAX_CTX 8

/* A fresh empty folder, removed by the fixture. */
const char *make_tmp_dir(void);
/* XDG_CACHE_HOME = a fresh folder, CLATTN_CACHE unset. Returns the folder. */
const char *fresh_cache_env(void);
/* A context on device dev that the fixture frees (free_ctx frees it sooner). */
clattn_context *new_ctx(size_t dev);
void free_ctx(clattn_context *ctx);

/* The SDPA problem every case runs. */
#define PB 1
#define PH 2
#define PL 37
#define PS 53
#define PD 24
#define NQ (PB * PH * PL * PD)
#define NK (PB * PH * PS * PD)
#define NO (PB * PH * PL * PD)
#define NL (PB * PH * PL)

typedef struct problem {
    clattn_sdpa_desc d;
    clattn_masks m; /* d.masks points here */
    float *q, *k, *v;
    double *ro, *rl;
} problem;
extern problem prob;
void prepare_problem(void);
/* Fused SDPA on ctx, checked against the reference; the outputs (tracked) for bit comparisons. */
void run_checked(clattn_context *ctx, float **out_o, float **out_l);
/* A fresh context on device dev, one checked run, context freed. */
void fresh_run(size_t dev, float **out_o, float **out_l);

/* Looking at the cache folder. */
/* The start of most cases: the problem prepared, XDG_CACHE_HOME a fresh folder (returned), its cache
 * folder in `folder` (PATH_MAX bytes). */
const char *fresh_case(char *folder);

#define MAX_ENTRIES 16

typedef struct scan {
    int exists;     /* the folder exists */
    size_t n_bin;   /* <32 hex>.bin */
    size_t n_tmp;   /* *.tmp */
    size_t n_other; /* anything else */
    char bin[MAX_ENTRIES][PATH_MAX];
    char other[PATH_MAX]; /* the first "other" name */
} scan;
void scan_dir(const char *dir, scan *sc);
/* $root/clattn (or $root/.cache/clattn for the HOME fallback). */
void cache_folder(char *out, const char *root, int home);
/* The whole file (tracked); fails the test when it cannot be read. */
unsigned char *read_all(const char *path, size_t *len);
/* Exactly `want` valid entries (want 0: any number ≥ 1), no temporaries, nothing else. */
void check_folder(const char *folder, size_t want, scan *sc);
/* The fused path with one head size builds one program: one entry. */
#define PROGRAMS 1

/* A test case of the suite: its test and its iterations per device; cache_add_cases adds each with the
 * fixture (the environment, XDG_CACHE_HOME, HOME and CLATTN_CACHE, saved; the contexts of new_ctx freed). */
typedef struct cache_case {
    const char *name;
    const TTest *fn;
    size_t per_device;
} cache_case;
void cache_add_cases(Suite *s, const cache_case *cases, size_t n);
/* test_cache_folders.c's test cases: unusable, concurrent, home, trust. */
void cache_add_folder_cases(Suite *s);

#endif
