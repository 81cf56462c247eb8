/* End-to-end tests of how the clattn tool writes its output files (README, "The clattn tool"): it spawns
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
 * killed when the tool is done, so no case can hang. Exit status 77 (meson's SKIP) when `clattn devices`
 * finds no OpenCL platform. */
#define _XOPEN_SOURCE 700 /* posix_spawn, nanosleep, clock_gettime, mknod, mkfifo, symlink, link */

#define TU_NO_OPENCL /* this process never calls OpenCL: the OpenCL-free part of the test utility */
#include "test_util.h"
#include "npy.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { EXIT_OK = 0, EXIT_USAGE = 2, EXIT_NO_PLATFORM = 3 };

#define RUN_TIMEOUT_S 240   /* one process (a cold kernel compile under load can take minutes) */
#define READER_GRACE_S 30   /* a FIFO's reader, once the tool is done */

static const char *exe;  /* the clattn binary */
static const char *root; /* scratch folder: captures and one sub-folder per case */
static char dir[1100];   /* the current case's folder */
static unsigned case_no;

/* ---------------------------------------------------------------------------------------------- */
/* Paths and files (tracked allocations are freed after each case)                                */
/* ---------------------------------------------------------------------------------------------- */

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    const int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    char *s = tu_track_malloc((size_t)n + 1);
    va_start(ap, f);
    vsnprintf(s, (size_t)n + 1, f, ap);
    va_end(ap);
    return s;
}

/* A path inside the current case's folder. */
static const char *P(const char *name) { return fmt("%s/%s", dir, name); }

static void case_setup(void)
{
    snprintf(dir, sizeof dir, "%s/case%03u", root, ++case_no);
    ck_assert_msg(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
}

static void case_teardown(void) { tu_release_host(); }

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

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
    DIR *d = opendir(folder);
    ck_assert_msg(d != NULL, "opendir %s: %s", folder, strerror(errno));
    const char *names[64];
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && n < 64)
            names[n++] = fmt("%s", e->d_name);
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    const char *joined = "";
    for (size_t i = 0; i < n; i++)
        joined = fmt("%s%s%s", joined, i ? " " : "", names[i]);
    return joined;
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
/* Running processes (from tests/test_cli.c's helpers, cut down)                                   */
/* ---------------------------------------------------------------------------------------------- */

/* The last process run: exit status (128 + signal when killed), stdout (unless sent elsewhere) and
 * stderr, command line. */
static struct {
    int status;
    char *out, *err;
    char cmd[4096];
} R;

/* The environment with "NAME=value" entries of extra set (NULL: none). */
static char **environment(const char *const *extra)
{
    size_t n_env = 0, n_extra = 0;
    while (environ[n_env])
        n_env++;
    while (extra && extra[n_extra])
        n_extra++;
    char **envp = tu_track_malloc((n_env + n_extra + 1) * sizeof *envp);
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++) {
        bool overridden = false;
        for (size_t j = 0; j < n_extra && !overridden; j++) {
            const size_t name_len = strcspn(extra[j], "=");
            overridden = strncmp(environ[i], extra[j], name_len) == 0 && environ[i][name_len] == '=';
        }
        if (!overridden)
            envp[k++] = environ[i];
    }
    for (size_t j = 0; j < n_extra; j++)
        envp[k++] = (char *)extra[j];
    envp[k] = NULL;
    return envp;
}

/* Waits for pid until deadline_s from now; kills it past that. Its status, or -1 when killed for time. */
static int wait_deadline(pid_t pid, int deadline_s)
{
    struct timespec start, now, nap = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int st = 0;;) {
        const pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 255;
        ck_assert_msg(w == 0 || errno == EINTR, "waitpid: %s", strerror(errno));
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > deadline_s) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
}

/* Spawns argv (argv[0] looked up in PATH unless it has a '/'), stdin from /dev/null, stdout into
 * stdout_path (NULL: captured into R.out), stderr into R.err; env_extra: "NAME=value" entries. */
static int run_to(const char *const *argv, const char *const *env_extra, const char *stdout_path)
{
    const char *out_path = fmt("%s/.stdout", root), *err_path = fmt("%s/.stderr", root);
    size_t used = 0;
    R.cmd[0] = '\0';
    for (size_t i = 0; argv[i] && used + 1 < sizeof R.cmd; i++)
        used += (size_t)snprintf(R.cmd + used, sizeof R.cmd - used, i ? " %s" : "%s",
                                 i == 0 && strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[i]);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, stdout_path ? stdout_path : out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid;
    const int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environment(env_extra));
    posix_spawn_file_actions_destroy(&fa);
    ck_assert_msg(rc == 0, "cannot start %s: %s", argv[0], strerror(rc));
    R.status = wait_deadline(pid, RUN_TIMEOUT_S);
    ck_assert_msg(R.status >= 0, "`%s` did not finish within %d s (killed)", R.cmd, RUN_TIMEOUT_S);
    R.out = stdout_path ? fmt("%s", "") : slurp(out_path, NULL);
    R.err = slurp(err_path, NULL);
    ck_assert_msg(R.out && R.err, "cannot read the captured output of `%s`", R.cmd);
    return R.status;
}

/* An argument list under construction. */
typedef struct argl {
    const char *v[64];
    size_t n;
} argl;

static void add(argl *a, ...)
{
    va_list ap;
    va_start(ap, a);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;) {
        ck_assert(a->n + 2 < sizeof a->v / sizeof a->v[0]);
        a->v[a->n++] = s;
    }
    va_end(ap);
    a->v[a->n] = NULL;
}

static void expect_status(int want)
{
    ck_assert_msg(R.status == want, "`%s` exited %d, expected %d\n--- stderr:\n%.3000s--- stdout:\n%.1500s", R.cmd,
                  R.status, want, R.err, R.out);
}

static void expect_in(const char *what, const char *text, const char *needle)
{
    ck_assert_msg(strstr(text, needle) != NULL, "`%s`: %s does not mention \"%s\":\n%.3000s", R.cmd, what, needle,
                  text);
}

/* clattn ARGS... (NULL-terminated), stdout captured. */
#define CLATTN(...) run_to((const char *const[]){exe, __VA_ARGS__, NULL}, NULL, NULL)

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
        const size_t n = shapes[t][1] * shapes[t][2] * shapes[t][3];
        tu_fill_uniform(data, n, 1.0f, 40u + (unsigned)t);
        char err[512];
        ck_assert_msg(npy_save_f32(P(names[t]), data, 4, shapes[t], err, sizeof err) == 0, "%s", err);
    }
}

static void sdpa(argl *a)
{
    add(a, exe, "sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), NULL);
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
    const bool own = mknod(dev, S_IFCHR | 0666, makedev(1, 3)) == 0;
    if (!own)
        ck_assert_int_eq(symlink("/dev/null", dev), 0);
    CLATTN("sdpa", "--q", P("q.npy"), "--k", P("k.npy"), "--v", P("v.npy"), "--out", dev, "--lse", P("lse.npy"));
    expect_status(EXIT_OK);
    expect_in("stdout", R.out, fmt("wrote %s (1, 2, 3, 4) float32", dev));
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
    char err[512];
    ck_assert_msg(npy_save_f32(P("q.npy"), q, 4, (size_t[]){1, 1, ROWS, D}, err, sizeof err) == 0, "%s", err);
    tu_fill_uniform(kv, KEYS * D, 1.0f, 82);
    ck_assert_msg(npy_save_f32(P("k.npy"), kv, 4, (size_t[]){1, 1, KEYS, D}, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(npy_save_f32(P("v.npy"), kv, 4, (size_t[]){1, 1, KEYS, D}, err, sizeof err) == 0, "%s", err);
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
        add(&a, exe, "demo", "--save", save, "--heatmap", heatmap_fails ? bad : old, NULL);
        if (!heatmap_fails) {
            ck_assert_int_eq(mkdir(save, 0700), 0);
            ck_assert_int_eq(mkdir(fmt("%s/out.npy", save), 0700), 0);
            left = "old.npy save";
        }
    } else if (is_mha) {
        static const size_t wshape[2] = {5, 6}, xshape[3] = {1, 3, 5};
        float w[5 * 6];
        char err[512];
        const char *names[4] = {"x.npy", "wq.npy", "wk.npy", "wv.npy"};
        for (int i = 0; i < 4; i++) {
            tu_fill_uniform(w, 30, 1.0f, 70u + (unsigned)i);
            ck_assert_msg(npy_save_f32(P(names[i]), w, i ? 2 : 3, i ? wshape : xshape, err, sizeof err) == 0, "%s",
                          err);
        }
        /* Written in this order: heatmap, out, weights. */
        const bool out_fails = strcmp(c->flag, "mha --out") == 0;
        add(&a, exe, "mha", "--x", P("x.npy"), "--wq", P("wq.npy"), "--wk", P("wk.npy"), "--wv", P("wv.npy"),
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
    run_to(a.v, NULL, NULL);
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
    TCase *tc = tcase_create("streams");
    tcase_add_checked_fixture(tc, case_setup, case_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_device_written_through);
    tcase_add_test(tc, test_fifo_written_through);
    tcase_add_test(tc, test_stdout_written_through);
    tcase_add_test(tc, test_stream_not_written_when_another_output_is_refused);
    tcase_add_test(tc, test_reader_gone_early);
    suite_add_tcase(s, tc);

    tc = tcase_create("temporaries");
    tcase_add_checked_fixture(tc, case_setup, case_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_planted_temporary_left_alone);
    suite_add_tcase(s, tc);

    tc = tcase_create("checked first");
    tcase_add_checked_fixture(tc, case_setup, case_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_two_names_of_one_file);
    tcase_add_loop_test(tc, test_output_failing_last, 0, N_FAILING);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    exe = getenv("CLATTN_EXE");
    if (!exe || !*exe) {
        fprintf(stderr, "test_cli_files: CLATTN_EXE must name the clattn binary (set by tests/meson.build)\n");
        return 1;
    }
    root = tu_scratch_make("test_cli_files");
    if (!root) {
        fprintf(stderr, "test_cli_files: cannot make a scratch folder: %s\n", strerror(errno));
        return 1;
    }
    /* No OpenCL platform or device: skip (meson shows SKIP). */
    const char *const probe[] = {exe, "devices", NULL};
    pid_t pid;
    int status = -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (posix_spawn(&pid, exe, &fa, NULL, (char *const *)probe, environ) == 0 && waitpid(pid, &status, 0) == pid)
        status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    posix_spawn_file_actions_destroy(&fa);
    if (status == EXIT_NO_PLATFORM) {
        tu_scratch_remove_all();
        return tu_no_device_exit("clattn devices found none");
    }
    SRunner *sr = srunner_create(cli_files_suite());
    srunner_set_fork_status(sr, CK_NOFORK); /* (every deadline is this file's own) */
    srunner_run_all(sr, CK_NORMAL);
    const int rc = tu_srunner_exit(sr); /* (no check run is a failure too) */
    srunner_free(sr);
    tu_scratch_remove_all();
    return rc;
}
