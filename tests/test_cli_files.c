/* End-to-end tests of how the clattn tool writes its output files (docs/cli.md): it spawns
 * the built binary (CLATTN_EXE) as a user runs it and looks at what is left in the folders.
 *
 *  - a destination that exists and is not a regular file is written through, never replaced: a
 *    character device, a FIFO with a reader, /dev/stdout (a regular file or a pipe behind it); a reader
 *    that goes away early fails the run (exit 2), its other outputs taken back;
 *  - temporaries are fresh files under random names: a link or a file planted at the name earlier
 *    versions used (NAME.clattn-PID.tmp, the pid fixed by exec) is never followed nor written;
 *  - every destination is checked before anything is written: two names of one file (the same
 *    spelling, a hard link, a symbolic link), a folder, a folder that does not exist, a path under a
 *    regular file (the tests run as root, who may write anywhere, so "unwritable" is made that way);
 *    for each kind of output (--out, --weights, --lse, --scores, --present-k/v, --heatmap, mha's, demo's
 *    --save and --heatmap) failing last, the others are not left behind: new files absent, files that
 *    existed with their old content, no temporary, no folder the run made.
 *
 * Every spawned process has a deadline (killed past it), and a FIFO's reader is a process of its own
 * killed when the tool is done, so no case can hang. What the cli tests share is in cli_util.h. */
#define _XOPEN_SOURCE 700 /* posix_spawnp, mknod, mkfifo, symlink, link */

#include "cli_util.h"

#include <dirent.h>
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

extern char **environ;

#define RUN_TIMEOUT_S 240   /* one process (a cold kernel compile under load can take minutes) */
#define READER_GRACE_S 30   /* a FIFO's reader, once the tool is done */

/* ---------------------------------------------------------------------------------------------- */
/* Files and folders                                                                               */
/* ---------------------------------------------------------------------------------------------- */

/* The whole file (NULL when it cannot be read), its size in *len. */
static char *slurp(const char *path, size_t *len)
{
    char *c = tu_read_file(path, len);
    return c ? tu_track(c) : NULL;
}

static void expect_content(const char *path, const char *want)
{
    const char *got = slurp(path, NULL);
    ck_assert_msg(got && strcmp(got, want) == 0, "%s: expected \"%s\", found %s", path, want,
                  got ? fmt("\"%.200s\"", got) : "nothing");
}

/* Two files hold the same bytes. */
static void expect_same_bytes(const char *path, const char *reference)
{
    size_t n = 0, m = 0;
    const char *a = slurp(path, &n), *b = slurp(reference, &m);
    ck_assert_msg(a && b, "cannot read %s or %s", path, reference);
    ck_assert_msg(n == m && memcmp(a, b, n) == 0, "%s (%zu bytes) differs from %s (%zu bytes)", path, n, reference, m);
}

/* The names in a folder, sorted, one space between them. */
static const char *names_in(const char *folder)
{
    char *names = fmt("%s", list_dir(folder));
    for (char *c = names; *c; c++)
        if (*c == '\n')
            *c = c[1] ? ' ' : '\0';
    return names;
}

/* The path of the (first) entry of folder whose name starts with prefix; NULL when none. */
static const char *named_like(const char *folder, const char *prefix)
{
    DIR *d = opendir(folder);
    ck_assert_msg(d != NULL, "opendir %s: %s", folder, strerror(errno));
    const char *found = NULL;
    for (struct dirent *e; !found && (e = readdir(d)) != NULL;)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            found = fmt("%s/%s", folder, e->d_name);
    closedir(d);
    return found;
}

static void expect_names(const char *folder, const char *want)
{
    const char *got = names_in(folder);
    ck_assert_msg(strcmp(got, want) == 0, "%s holds [%s], expected [%s]", folder, got, want);
}

/* ---------------------------------------------------------------------------------------------- */
/* Inputs                                                                                          */
/* ---------------------------------------------------------------------------------------------- */

/* Q (1,2,3,5), K (1,2,7,5), V (1,2,7,4): odd sizes, L ≠ S, Dv ≠ Dqk. */
static void inputs(void)
{
    static const size_t shapes[3][4] = {{1, 2, 3, 5}, {1, 2, 7, 5}, {1, 2, 7, 4}};
    static const char *const names[3] = {"q.npy", "k.npy", "v.npy"};
    float data[2 * 7 * 5];
    for (int t = 0; t < 3; t++) {
        tu_fill_uniform(data, product(4, shapes[t]), 1.0f, 40u + (unsigned)t);
        save_f32(names[t], data, 4, shapes[t]);
    }
}

static void sdpa(argl *a)
{
    add(a, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), NULL);
}

/* The reference bytes of --out: the same run into a plain new file, with --weights into ref-w.npy when
 * weights (the weights may take another path, whose rounding differs). */
static const char *reference_out(bool weights)
{
    const char *ref = P("ref.npy");
    if (weights)
        CLATTN("sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", ref, "--weights",
               P("ref-w.npy"));
    else
        CLATTN("sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", ref);
    expect_status(EXIT_OK);
    return ref;
}

/* ---------------------------------------------------------------------------------------------- */
/* Destinations that are not regular files: written through, never replaced                        */
/* ---------------------------------------------------------------------------------------------- */

/* A character device (a copy of /dev/null made with mknod, as root; /dev/null behind a symbolic link
 * where mknod is not allowed) is written through and stays a device; the run's other output lands as
 * usual and nothing else is left beside them. */
START_TEST(test_device_written_through)
{
    inputs();
    const char *dev = P("fakenull");
    /* (formatted before dev meets mknod: UBSan's null check there left GCC 12 a null path to warn of) */
    const char *wrote = fmt("wrote %s (1, 2, 3, 4) float32", dev);
    const bool own = mknod(dev, S_IFCHR | 0666, makedev(1, 3)) == 0;
    if (!own)
        ck_assert_int_eq(symlink("/dev/null", dev), 0);
    CLATTN("sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", dev, "--lse", P("lse.npy"));
    expect_status(EXIT_OK);
    expect_in("stdout", R.out, wrote);
    struct stat st;
    ck_assert_int_eq(stat(dev, &st), 0);
    ck_assert_msg(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3), "%s was replaced (mode %o)", dev,
                  (unsigned)st.st_mode);
    ck_assert_int_eq(lstat(dev, &st), 0);
    ck_assert(own ? S_ISCHR(st.st_mode) : S_ISLNK(st.st_mode));
    expect_names(dir, "fakenull k.npy lse.npy q.npy v.npy");
}
END_TEST

/* A FIFO with a reader gets the .npy as it comes and stays a FIFO. The reader is a process of its own
 * (`cat`, through sh so that its open of the FIFO happens after the spawn returns), killed if it is
 * still there READER_GRACE_S after the tool ended. */
START_TEST(test_fifo_written_through)
{
    inputs();
    const char *ref = reference_out(true);
    const char *fifo = P("ff"), *got = P("ff.read");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    const char *const reader_argv[] = {"sh", "-c", "exec cat < \"$0\" > \"$1\"", fifo, got, NULL};
    pid_t reader;
    ck_assert_int_eq(posix_spawnp(&reader, "sh", NULL, NULL, (char *const *)reader_argv, environ), 0);
    CLATTN("sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", fifo, "--weights", P("w.npy"));
    const int reader_status = wait_deadline(reader, R.status == EXIT_OK ? READER_GRACE_S : 0);
    expect_status(EXIT_OK);
    ck_assert_msg(reader_status == 0, "the FIFO's reader ended with %d (-1: killed: nothing was written)",
                  reader_status);
    expect_same_bytes(got, ref);
    struct stat st;
    ck_assert_int_eq(lstat(fifo, &st), 0);
    ck_assert_msg(S_ISFIFO(st.st_mode), "%s is no longer a FIFO (mode %o)", fifo, (unsigned)st.st_mode);
    ck_assert(exists(P("w.npy")));
    expect_names(dir, "ff ff.read k.npy q.npy ref-w.npy ref.npy v.npy w.npy");
}
END_TEST

/* --out /dev/stdout: the .npy goes to the standard output whatever it is — a regular file (`> o.npy`)
 * or a pipe — byte for byte, and the "wrote" lines go to stderr out of its way. */
START_TEST(test_stdout_written_through)
{
    inputs();
    const char *ref = reference_out(false);
    const char *file = P("redirected.npy");
    run_to((const char *const[]){exe, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out",
                                 "/dev/stdout", "--lse", P("lse.npy"), NULL},
           NULL, file);
    expect_status(EXIT_OK);
    expect_same_bytes(file, ref);
    expect_in("stderr", R.err, "wrote /dev/stdout (1, 2, 3, 4) float32");
    expect_in("stderr", R.err, fmt("wrote %s (1, 2, 3) float32", P("lse.npy")));

    const char *piped = P("piped.npy");
    const char *script = "\"$0\" \"$@\" | cat > \"$PIPED\"";
    run_to((const char *const[]){"sh", "-c", script, exe, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v",
                                 P("v.npy"), "--out", "/dev/stdout", NULL},
           (const char *const[]){fmt("PIPED=%s", piped), NULL}, NULL);
    expect_status(EXIT_OK);
    expect_same_bytes(piped, ref);
    expect_in("stderr", R.err, "wrote /dev/stdout");
    expect_names(dir, "k.npy lse.npy piped.npy q.npy redirected.npy ref.npy v.npy");
}
END_TEST

/* A reader that goes away early (`| true`, which reads nothing) makes the write fail: exit 2 naming
 * the broken pipe, and the run's other output (--lse) is taken back, no temporary left — not a process
 * killed by SIGPIPE with its temporaries behind. --out is 1.3 MB, more than a pipe holds, so the write
 * meets the closed pipe whatever the order in which the two processes run. */
START_TEST(test_reader_gone_early)
{
    enum { ROWS = 40000, D = 8, KEYS = 7 };
    float *q = tu_falloc((size_t)ROWS * D), kv[KEYS * D];
    tu_fill_uniform(q, (size_t)ROWS * D, 1.0f, 81);
    save_f32("q.npy", q, 4, (size_t[]){1, 1, ROWS, D});
    tu_fill_uniform(kv, KEYS * D, 1.0f, 82);
    save_f32("k.npy", kv, 4, (size_t[]){1, 1, KEYS, D});
    save_f32("v.npy", kv, 4, (size_t[]){1, 1, KEYS, D});
    const char *status_file = P("status");
    run_to((const char *const[]){"sh", "-c", "{ \"$0\" \"$@\"; echo $? > \"$STATUS\"; } | true", exe, "sdpa", "--q",
                                 P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", "/dev/stdout", "--lse",
                                 P("lse.npy"), NULL},
           (const char *const[]){fmt("STATUS=%s", status_file), NULL}, NULL);
    expect_status(EXIT_OK); /* (true's) */
    expect_content(status_file, "2\n");
    expect_in("stderr", R.err, "/dev/stdout: cannot write: Broken pipe");
    expect_names(dir, "k.npy q.npy status v.npy");
}
END_TEST

/* A stream is not written before every destination was checked: --lse is a folder, so nothing reaches
 * the standard output. */
START_TEST(test_stream_not_written_when_another_output_is_refused)
{
    inputs();
    ck_assert_int_eq(mkdir(P("adir"), 0700), 0);
    const char *file = P("redirected.npy");
    run_to((const char *const[]){exe, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out",
                                 "/dev/stdout", "--lse", P("adir"), NULL},
           NULL, file);
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, fmt("%s: is a folder", P("adir")));
    size_t len = 99;
    ck_assert_ptr_nonnull(slurp(file, &len));
    ck_assert_msg(len == 0, "%zu bytes reached the standard output", len);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Temporary names                                                                                 */
/* ---------------------------------------------------------------------------------------------- */

/* A symbolic link planted at NAME.clattn-PID.tmp, the name earlier versions staged --out under (the
 * pid is known: sh plants it, then execs the tool in the same process), is never followed: the file it
 * points to keeps its content, the link stays, and --out is a regular file with the result. The same
 * with a regular file planted there: left as it was. */
START_TEST(test_planted_temporary_left_alone)
{
    inputs();
    const char *ref = reference_out(false);
    const char *victim = P("victim.txt"), *out = P("o.npy");
    tu_write_file(victim, "victim", 6);
    const char *plant_link = "ln -s \"$VICTIM\" \"$OUT.clattn-$$.tmp\" && exec \"$0\" \"$@\"";
    run_to((const char *const[]){"sh", "-c", plant_link, exe, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v",
                                 P("v.npy"), "--out", out, NULL},
           (const char *const[]){fmt("VICTIM=%s", victim), fmt("OUT=%s", out), NULL}, NULL);
    expect_status(EXIT_OK);
    expect_content(victim, "victim");
    struct stat st;
    ck_assert_int_eq(lstat(out, &st), 0);
    ck_assert_msg(S_ISREG(st.st_mode), "%s is not a regular file (mode %o)", out, (unsigned)st.st_mode);
    expect_same_bytes(out, ref);
    const char *planted = named_like(dir, "o.npy.clattn-");
    ck_assert_msg(planted != NULL, "the planted link is gone: %s", names_in(dir));
    ck_assert_int_eq(lstat(planted, &st), 0);
    ck_assert_msg(S_ISLNK(st.st_mode), "%s is no longer the planted link", planted);
    ck_assert_int_eq(unlink(planted), 0);
    ck_assert_int_eq(unlink(out), 0);

    const char *plant_file = "printf planted > \"$OUT.clattn-$$.tmp\" && exec \"$0\" \"$@\"";
    run_to((const char *const[]){"sh", "-c", plant_file, exe, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v",
                                 P("v.npy"), "--out", out, NULL},
           (const char *const[]){fmt("OUT=%s", out), NULL}, NULL);
    expect_status(EXIT_OK);
    expect_same_bytes(out, ref);
    planted = named_like(dir, "o.npy.clattn-");
    ck_assert_msg(planted != NULL, "the planted file is gone: %s", names_in(dir));
    expect_content(planted, "planted");
    expect_names(dir, fmt("k.npy o.npy %s q.npy ref.npy v.npy victim.txt", planted + strlen(dir) + 1));
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Every destination checked before anything is written                                            */
/* ---------------------------------------------------------------------------------------------- */

/* Two outputs that are one file — the same name, a hard link, a symbolic link — are refused before
 * anything runs; the file keeps its content. */
START_TEST(test_two_names_of_one_file)
{
    inputs();
    const char *x = P("x.npy"), *hard = P("hard.npy"), *soft = P("soft.npy");
    CLATTN("sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", x, "--lse", x);
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "--out and --lse name the same file");
    ck_assert(!exists(x));

    tu_write_file(x, "old", 3);
    ck_assert_int_eq(link(x, hard), 0);
    ck_assert_int_eq(symlink(x, soft), 0);
    CLATTN("sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", P("o.npy"), "--weights", x,
           "--lse", hard);
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "--weights and --lse name the same file");
    CLATTN("sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", soft, "--present-k", x);
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "--out and --present-k name the same file");
    CLATTN("demo", "--save", dir, "--heatmap", P("out.npy"));
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "--heatmap and --save name the same file");
    expect_content(x, "old");
    expect_names(dir, "hard.npy k.npy q.npy soft.npy v.npy x.npy");
}
END_TEST

/* One output that cannot be written, the others fine: each output kind in turn fails last (after the
 * outputs written before it), as a folder, a path under a regular file (a destination no one, root
 * included, can write) or a path in a missing folder. Nothing is left: new files absent, the file
 * that existed (old.npy, given as one of the others) with its old content, no temporary. */
typedef struct failing_case {
    const char *name;
    const char *flag;  /* the failing output */
    const char *value; /* its value: "%s" is the bad path */
    const char *how;   /* "folder", "under-file", "missing" */
} failing_case;

static const failing_case failing[] = {
    {"--out a folder", "--out", "%s", "folder"},
    {"--weights a folder", "--weights", "%s", "folder"},
    {"--lse a folder", "--lse", "%s", "folder"},
    {"--scores a folder", "--scores", "qk:%s", "folder"},
    {"--present-k a folder", "--present-k", "%s", "folder"},
    {"--present-v a folder", "--present-v", "%s", "folder"},
    {"--heatmap a folder", "--heatmap", "%s", "folder"},
    {"--present-v under a regular file", "--present-v", "%s", "under-file"},
    {"--lse in a missing folder", "--lse", "%s", "missing"},
    {"mha --weights a folder", "mha --weights", "%s", "folder"},
    {"mha --out a folder", "mha --out", "%s", "folder"},
    {"demo --save with out.npy a folder", "demo --save", "%s", "folder"},
    {"demo --heatmap a folder", "demo --heatmap", "%s", "folder"},
};
enum { N_FAILING = sizeof failing / sizeof failing[0] };

START_TEST(test_output_failing_last)
{
    const failing_case *c = &failing[_i];
    inputs();
    const char *o = P("o");
    ck_assert_int_eq(mkdir(o, 0700), 0);
    const char *old = P("o/old.npy");
    tu_write_file(old, "old content", 11);
    const char *bad = strcmp(c->how, "folder") == 0       ? P("o/bad")
                      : strcmp(c->how, "under-file") == 0 ? P("o/plain.txt/bad.npy")
                                                          : P("o/missing/bad.npy");
    const bool save_fails = strcmp(c->flag, "demo --save") == 0; /* (its out.npy is the folder) */
    if (strcmp(c->how, "folder") == 0 && !save_fails)
        ck_assert_int_eq(mkdir(bad, 0700), 0);
    if (strcmp(c->how, "under-file") == 0)
        tu_write_file(P("o/plain.txt"), "plain", 5);
    const char *left = strcmp(c->how, "under-file") == 0 ? "old.npy plain.txt" : "old.npy";
    if (strcmp(c->how, "folder") == 0 && !save_fails)
        left = "bad old.npy";

    argl a = {{0}, 0};
    const bool is_demo = strncmp(c->flag, "demo ", 5) == 0, is_mha = strncmp(c->flag, "mha ", 4) == 0;
    const char *save = P("o/save");
    if (is_demo) {
        /* demo writes the heatmap, then x … out.npy into --save: the last of them fails. */
        const bool heatmap_fails = strcmp(c->flag, "demo --heatmap") == 0;
        add(&a, "demo", "--save", save, "--heatmap", heatmap_fails ? bad : old, NULL);
        if (!heatmap_fails) {
            ck_assert_int_eq(mkdir(save, 0700), 0);
            ck_assert_int_eq(mkdir(fmt("%s/out.npy", save), 0700), 0);
            left = "old.npy save";
        }
    } else if (is_mha) {
        static const size_t wshape[2] = {5, 6}, xshape[3] = {1, 3, 5};
        float w[5 * 6];
        const char *names[4] = {"x.npy", "wq.npy", "wk.npy", "wv.npy"};
        for (int i = 0; i < 4; i++) {
            tu_fill_uniform(w, 30, 1.0f, 70u + (unsigned)i);
            save_f32(names[i], w, i ? 2 : 3, i ? wshape : xshape);
        }
        /* Written in this order: heatmap, out, weights. */
        const bool out_fails = strcmp(c->flag, "mha --out") == 0;
        add(&a, "mha", "--x", P("x.npy"), "--wq", P("wq.npy"), "--wk", P("wk.npy"), "--wv", P("wv.npy"),
            "--heads", "2", "--heatmap", old, "--out", out_fails ? bad : P("o/y.npy"), "--weights",
            out_fails ? P("o/a.npy") : bad, NULL);
    } else {
        /* Written in this order: heatmap, out, weights (or scores), lse, present-k, present-v. Every
         * output but the failing one is given; old.npy is one of those written before it. */
        sdpa(&a);
        static const char *const flags[] = {"--heatmap", "--out", "--weights", "--lse", "--present-k", "--present-v"};
        static const char *const files[] = {"h.svg", "out.npy", "w.npy", "lse.npy", "pk.npy", "pv.npy"};
        const bool scores = strcmp(c->flag, "--scores") == 0;
        bool old_given = false;
        for (size_t i = 0; i < 6; i++) {
            if (scores && (i == 0 || i == 2))
                continue; /* (--scores takes --weights' place and goes without --heatmap) */
            if (strcmp(flags[i], c->flag) == 0)
                continue;
            const bool is_old = !old_given && strcmp(flags[i], "--heatmap") != 0;
            old_given |= is_old;
            add(&a, flags[i], is_old ? old : P(fmt("o/%s", files[i])), NULL);
        }
        add(&a, c->flag, fmt(c->value, bad), NULL);
    }
    run_args(&a, NULL);
    ck_assert_msg(R.status == EXIT_USAGE, "%s: `%s` exited %d, expected 2\n--- stderr:\n%.3000s--- stdout:\n%.1500s",
                  c->name, R.cmd, R.status, R.err, R.out);
    const char *named = is_demo && strcmp(c->flag, "demo --save") == 0 ? fmt("%s/out.npy", save) : bad;
    expect_in("stderr", R.err, named);
    ck_assert_msg(strstr(R.out, "wrote ") == NULL, "%s: `%s` says it wrote:\n%s", c->name, R.cmd, R.out);
    expect_content(old, "old content");
    expect_names(o, left);
    if (is_demo && strcmp(c->flag, "demo --save") == 0)
        expect_names(save, "out.npy");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static Suite *cli_files_suite(void)
{
    Suite *s = suite_create("clattn cli files");
    TCase *tc = cli_tcase("streams");
    tcase_add_test(tc, test_device_written_through);
    tcase_add_test(tc, test_fifo_written_through);
    tcase_add_test(tc, test_stdout_written_through);
    tcase_add_test(tc, test_stream_not_written_when_another_output_is_refused);
    tcase_add_test(tc, test_reader_gone_early);
    suite_add_tcase(s, tc);

    tc = cli_tcase("temporaries");
    tcase_add_test(tc, test_planted_temporary_left_alone);
    suite_add_tcase(s, tc);

    tc = cli_tcase("checked first");
    tcase_add_test(tc, test_two_names_of_one_file);
    tcase_add_loop_test(tc, test_output_failing_last, 0, N_FAILING);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return cli_main("test_cli_files", cli_files_suite, RUN_TIMEOUT_S); }
