/* Environment variables and scratch folders for tests that change them (tests/test_env.c). */
#ifndef CLATTN_TEST_ENV_H
#define CLATTN_TEST_ENV_H

#include <stddef.h>

/* Remember the current values (or absence) of these variables; names must outlive the restore. */
void tu_env_save(const char *const *names, size_t n);
/* Put every remembered variable back as it was, unsetting those that were absent. */
void tu_env_restore(void);
/* Remove a folder and everything below it. */
void tu_rm_rf(const char *path);

#endif
