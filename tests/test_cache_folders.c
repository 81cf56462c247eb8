/*
 * The program cache's folder cases (test_cache's second half; cache_test.h): an unusable cache folder
 * only means "no cache", concurrent stores leave one whole entry, the HOME fallback, and what the cache
 * trusts (private folders and files of this user).
 */
#define _XOPEN_SOURCE 700
#include "cache_test.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------- */
/* 5. unusable cache folder                                                                        */
/* ---------------------------------------------------------------------------------------------- */

enum { BAD_XDG_IS_FILE, BAD_XDG_PARENT_IS_FILE, BAD_CLATTN_IS_FILE, BAD_COUNT };

static const char *const bad_names[BAD_COUNT] = {
    "XDG_CACHE_HOME is a regular file",
    "XDG_CACHE_HOME's parent is a regular file",
    "$XDG_CACHE_HOME/clattn is a regular file",
};

START_TEST(test_unusable)
{
    size_t kind = TU_CASE(_i), dev = TU_DEVICE(_i);
    tu_set_label("unusable cache folder (%s) on %s", bad_names[kind], tu_dev_spec[dev]);
    prepare_problem();
    const char *tmp = make_tmp_dir();
    unsetenv("CLATTN_CACHE");
    char file[2048], xdg[PATH_MAX];
    snprintf(file, sizeof file, "%s/%s", tmp, kind == BAD_CLATTN_IS_FILE ? "clattn" : "plain-file");
    static const unsigned char content[] = "not a folder\n";
    tu_write_file(file, content, sizeof content - 1);
    if (kind == BAD_XDG_IS_FILE)
        snprintf(xdg, sizeof xdg, "%s", file);
    else if (kind == BAD_XDG_PARENT_IS_FILE)
        snprintf(xdg, sizeof xdg, "%s/sub", file);
    else
        snprintf(xdg, sizeof xdg, "%s", tmp);
    ck_assert(setenv("XDG_CACHE_HOME", xdg, 1) == 0);

    clattn_context *ctx = new_ctx(dev);
    run_checked(ctx, NULL, NULL);
    ck_assert_msg(clattn_last_error(ctx)[0] == '\0', "%s: clattn_last_error: %s", tu_label(), clattn_last_error(ctx));
    run_checked(ctx, NULL, NULL);
    ck_assert_msg(clattn_last_error(ctx)[0] == '\0', "%s: clattn_last_error: %s", tu_label(), clattn_last_error(ctx));
    free_ctx(ctx);
    ck_assert_msg(clattn_last_error(NULL)[0] == '\0', "%s: clattn_last_error(NULL): %s", tu_label(),
                  clattn_last_error(NULL));

    /* The file is untouched and nothing else appeared. */
    size_t len;
    unsigned char *now = read_all(file, &len);
    ck_assert_msg(len == sizeof content - 1 && memcmp(now, content, len) == 0, "%s: %s was modified", tu_label(),
                  file);
    scan sc;
    scan_dir(tmp, &sc);
    ck_assert_msg(sc.n_bin == 0 && sc.n_tmp == 0 && sc.n_other == 1, "%s: files appeared in %s", tu_label(), tmp);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 6. concurrent stores                                                                            */
/* ---------------------------------------------------------------------------------------------- */

#define THREADS 4
#define ROUNDS 2

typedef struct worker {
    const char *spec;
    pthread_barrier_t *barrier;
    float *o, *l;
    clattn_status create_st, st;
    char error[512];
} worker;

/* No check assertions here: they must run in the test's own thread. */
static void *worker_main(void *arg)
{
    worker *w = arg;
    clattn_context *ctx = NULL;
    w->create_st = clattn_context_create(&ctx, w->spec);
    if (w->create_st != CLATTN_SUCCESS)
        snprintf(w->error, sizeof w->error, "%s", clattn_last_error(NULL));
    pthread_barrier_wait(w->barrier); /* all threads build and store at once */
    if (w->create_st == CLATTN_SUCCESS) {
        w->st = clattn_sdpa_host(ctx, &prob.d, prob.q, prob.k, prob.v, NULL, w->o, NULL, w->l);
        if (w->st != CLATTN_SUCCESS)
            snprintf(w->error, sizeof w->error, "%s", clattn_last_error(ctx));
        clattn_context_free(ctx);
    }
    return NULL;
}

START_TEST(test_concurrent)
{
    size_t dev = (size_t)_i;
    tu_set_label("concurrent stores on %s: sequential reference", tu_dev_spec[dev]);
    /* How many entries one context leaves (and the PoCL compile cache warmed, so that the threads'
     * builds end close together). */
    char folder[PATH_MAX];
    fresh_case(folder);
    fresh_run(dev, NULL, NULL);
    scan sc;
    check_folder(folder, PROGRAMS, &sc);
    const size_t programs = sc.n_bin;

    for (int round = 0; round < ROUNDS; round++) {
        tu_set_label("concurrent stores on %s: round %d, %d threads", tu_dev_spec[dev], round, THREADS);
        const char *root = fresh_cache_env();
        cache_folder(folder, root, 0);
        pthread_barrier_t barrier;
        ck_assert(pthread_barrier_init(&barrier, NULL, THREADS) == 0);
        worker w[THREADS];
        pthread_t th[THREADS];
        for (int t = 0; t < THREADS; t++) {
            memset(&w[t], 0, sizeof w[t]);
            w[t].spec = tu_dev_spec[dev];
            w[t].barrier = &barrier;
            w[t].o = tu_host_alloc(NO, NULL);
            w[t].l = tu_host_alloc(NL, NULL);
        }
        int started = 0;
        for (int t = 0; t < THREADS; t++)
            if (pthread_create(&th[t], NULL, worker_main, &w[t]) == 0)
                started++;
            else
                break;
        if (started != THREADS) {
            /* The barrier would never open: nothing to join safely. */
            ck_abort_msg("%s: pthread_create failed after %d threads", tu_label(), started);
        }
        for (int t = 0; t < THREADS; t++)
            pthread_join(th[t], NULL);
        pthread_barrier_destroy(&barrier);
        for (int t = 0; t < THREADS; t++) {
            ck_assert_msg(w[t].create_st == CLATTN_SUCCESS, "%s: thread %d: clattn_context_create: %s: %s", tu_label(),
                          t, clattn_status_string(w[t].create_st), w[t].error);
            ck_assert_msg(w[t].st == CLATTN_SUCCESS, "%s: thread %d: clattn_sdpa_host: %s: %s", tu_label(), t,
                          clattn_status_string(w[t].st), w[t].error);
            tu_host_check_guard(w[t].o, NO, "out");
            tu_host_check_guard(w[t].l, NL, "lse");
            check_close_named("out", w[t].o, prob.ro, NO, NULL);
            check_close_named("lse", w[t].l, prob.rl, NL, NULL);
        }
        check_folder(folder, programs, &sc);

        /* What the threads left serves a new context. */
        fresh_run(dev, NULL, NULL);
        check_folder(folder, programs, &sc);
        tu_rm_rf(root);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* 7. HOME fallback                                                                                */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_home)
{
    size_t dev = (size_t)_i;
    prepare_problem();
    unsetenv("CLATTN_CACHE");
    char folder[PATH_MAX];
    scan sc;

    /* XDG_CACHE_HOME unset, then set but empty (the XDG spec: treat as unset). */
    for (int empty = 0; empty < 2; empty++) {
        tu_set_label("HOME fallback on %s, XDG_CACHE_HOME %s", tu_dev_spec[dev], empty ? "empty" : "unset");
        const char *home = make_tmp_dir();
        ck_assert(setenv("HOME", home, 1) == 0);
        if (empty)
            ck_assert(setenv("XDG_CACHE_HOME", "", 1) == 0);
        else
            unsetenv("XDG_CACHE_HOME");
        fresh_run(dev, NULL, NULL);
        cache_folder(folder, home, 1);
        check_folder(folder, PROGRAMS, &sc);
        scan_dir(home, &sc);
        ck_assert_msg(sc.n_bin == 0 && sc.n_tmp == 0 && sc.n_other == 1, "%s: unexpected files in $HOME", tu_label());
        fresh_run(dev, NULL, NULL); /* loads it */
        check_folder(folder, PROGRAMS, &sc);
    }

    /* Neither set: no cache, still correct. */
    tu_set_label("HOME fallback on %s, neither HOME nor XDG_CACHE_HOME set", tu_dev_spec[dev]);
    unsetenv("HOME");
    unsetenv("XDG_CACHE_HOME");
    fresh_run(dev, NULL, NULL);
}
END_TEST

/* What the cache trusts: a private folder and private regular files of this user, nothing else. */
START_TEST(test_trust)
{
    size_t dev = (size_t)_i;
    prepare_problem();
    char folder[PATH_MAX];
    scan sc;
    struct stat st;

    /* The folder clattn creates is private. */
    tu_set_label("cache trust on %s: a new folder", tu_dev_spec[dev]);
    const char *root = fresh_cache_env();
    fresh_run(dev, NULL, NULL);
    cache_folder(folder, root, 0);
    check_folder(folder, PROGRAMS, &sc);
    ck_assert_int_eq(stat(folder, &st), 0);
    ck_assert_msg((st.st_mode & 0777) == 0700, "%s: the folder has mode %o, not 0700", tu_label(),
                  (unsigned)(st.st_mode & 0777));

    /* An entry that is not private, or not ours, or a link, is not loaded: it is rebuilt and replaced
     * by a private file of ours (a trusted entry would be loaded and left as it is). */
    static const char *const tampering[] = {"group-writable", "world-writable", "a symbolic link", "another owner"};
    for (size_t t = 0; t < sizeof tampering / sizeof tampering[0]; t++) {
        tu_set_label("cache trust on %s: an entry that is %s", tu_dev_spec[dev], tampering[t]);
        scan_dir(folder, &sc);
        const char *victim = sc.bin[0];
        if (t == 0 || t == 1) {
            ck_assert_int_eq(chmod(victim, t == 0 ? 0660 : 0606), 0);
        } else if (t == 2) {
            char elsewhere[PATH_MAX];
            snprintf(elsewhere, sizeof elsewhere, "%s/moved.bin", make_tmp_dir());
            ck_assert_int_eq(rename(victim, elsewhere), 0);
            ck_assert_int_eq(symlink(elsewhere, victim), 0);
        } else {
            if (geteuid() != 0) {
                printf("  %s: not root, cannot give the entry another owner: not checked\n", tu_label());
                continue;
            }
            ck_assert_int_eq(chown(victim, 12345, (gid_t)-1), 0);
        }
        fresh_run(dev, NULL, NULL);
        ck_assert_int_eq(lstat(victim, &st), 0);
        ck_assert_msg(S_ISREG(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 0077) == 0,
                      "%s: the entry was used instead of rebuilt (mode %o, owner %u)", tu_label(),
                      (unsigned)st.st_mode, (unsigned)st.st_uid);
        check_folder(folder, PROGRAMS, &sc);
    }

    /* A folder others can write, or a link, is not used at all, with a warning. */
    static const char *const folders[] = {"writable by other users", "a symbolic link"};
    for (size_t t = 0; t < 2; t++) {
        tu_set_label("cache trust on %s: a folder that is %s", tu_dev_spec[dev], folders[t]);
        root = fresh_cache_env();
        cache_folder(folder, root, 0);
        const char *target = make_tmp_dir(); /* private, but reached through a link */
        if (t == 0) {
            ck_assert_int_eq(mkdir(folder, 0700), 0);
            ck_assert_int_eq(chmod(folder, 0777), 0);
        } else {
            ck_assert_int_eq(symlink(target, folder), 0);
        }
        clattn_context *ctx = new_ctx(dev);
        run_checked(ctx, NULL, NULL);
        ck_assert_msg(strstr(clattn_last_warning(ctx), folders[t]) != NULL, "%s: warning \"%s\"", tu_label(),
                      clattn_last_warning(ctx));
        free_ctx(ctx);
        scan_dir(t == 0 ? folder : target, &sc);
        ck_assert_msg(sc.n_bin == 0 && sc.n_tmp == 0, "%s: %zu entries were written there", tu_label(), sc.n_bin);
    }

    /* A relative XDG_CACHE_HOME is ignored (XDG base-directory specification): $HOME/.cache is used. */
    tu_set_label("cache trust on %s: a relative XDG_CACHE_HOME", tu_dev_spec[dev]);
    const char *home = make_tmp_dir();
    ck_assert(setenv("HOME", home, 1) == 0);
    ck_assert(setenv("XDG_CACHE_HOME", "clattn-relative-cache", 1) == 0);
    fresh_run(dev, NULL, NULL);
    cache_folder(folder, home, 1);
    check_folder(folder, PROGRAMS, &sc);
    ck_assert_msg(access("clattn-relative-cache", F_OK) != 0, "%s: a relative folder was created", tu_label());
}
END_TEST

void cache_add_folder_cases(Suite *s)
{
    const cache_case cases[] = {
        {"unusable", test_unusable, BAD_COUNT}, {"concurrent", test_concurrent, 1}, {"home", test_home, 1},
        {"trust", test_trust, 1},
    };
    cache_add_cases(s, cases, sizeof cases / sizeof cases[0]);
}
