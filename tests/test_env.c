/* Environment variables and scratch folders for tests that change them (cache, tiling): saved in a
 * test's setup, put back in its teardown, even when the test failed part-way. */
#define _XOPEN_SOURCE 700 /* setenv, strdup, nftw */
#include "test_env.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAVED_MAX 8

static const char *saved_names[SAVED_MAX];
static char *saved_values[SAVED_MAX];
static size_t saved_count;

void tu_env_save(const char *const *names, size_t n)
{
    tu_env_restore();
    for (size_t i = 0; i < n && i < SAVED_MAX; i++) {
        const char *v = getenv(names[i]);
        saved_names[i] = names[i];
        saved_values[i] = v ? strdup(v) : NULL;
        saved_count = i + 1;
    }
}

void tu_env_restore(void)
{
    for (size_t i = 0; i < saved_count; i++) {
        if (saved_values[i])
            setenv(saved_names[i], saved_values[i], 1);
        else
            unsetenv(saved_names[i]);
        free(saved_values[i]);
        saved_values[i] = NULL;
    }
    saved_count = 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void tu_rm_rf(const char *path)
{
    if (path && path[0])
        nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
