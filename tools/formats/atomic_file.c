/* Files written under a temporary name and renamed into place, so that no reader ever sees a
 * half-written file, and destinations that are not regular files written through, never replaced.
 * The temporary is created with open(O_EXCL) under a name of our own rather than with mkstemp so that
 * it gets the usual 0666-minus-umask permissions; O_EXCL|O_NOFOLLOW and a random name mean that nothing
 * planted beforehand (a symbolic link, a file) is ever opened or written. */
#define _XOPEN_SOURCE 700 /* open, fdopen, fileno, fsync, realpath, lstat, fchmod, link, dup, clock_gettime */
#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NAME_ATTEMPTS 100
#define BASE_KEPT 200 /* of the final name, in a staged name: with the suffix it stays within NAME_MAX */

static int fail(char *err, size_t err_size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && err_size)
        vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
    return -1;
}

/* 12 characters nobody can guess beforehand: from /dev/urandom, or, where it cannot be read, from the
 * clock, the process id and a counter mixed (splitmix64). */
static void random_part(char out[13])
{
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char bytes[12];
    bool got = false;
    const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        got = read(fd, bytes, sizeof bytes) == (ssize_t)sizeof bytes;
        close(fd);
    }
    if (!got) {
        static uint64_t counter;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 12) ^ ++counter;
        for (size_t i = 0; i < sizeof bytes; i++) {
            uint64_t z = (x += 0x9E3779B97F4A7C15u);
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
            bytes[i] = (unsigned char)(z ^ (z >> 31));
        }
    }
    for (size_t i = 0; i < sizeof bytes; i++)
        out[i] = alphabet[bytes[i] % (sizeof alphabet - 1)];
    out[12] = '\0';
}

/* "FOLDER/NAME.clattn-XXXXXXXXXXXX.KIND" beside final (NAME cut to BASE_KEPT bytes); NULL: no memory. */
static char *name_beside(const char *final, const char *kind)
{
    const char *slash = strrchr(final, '/');
    const size_t dir_len = slash ? (size_t)(slash - final) + 1 : 0;
    const size_t base_len = strlen(final + dir_len) < BASE_KEPT ? strlen(final + dir_len) : BASE_KEPT;
    const size_t cap = dir_len + base_len + strlen(kind) + 24;
    char *name = malloc(cap), part[13];
    if (!name)
        return NULL;
    random_part(part);
    snprintf(name, cap, "%.*s%.*s.clattn-%s.%s", (int)dir_len, final, (int)base_len, final + dir_len, part, kind);
    return name;
}

/* A new file beside final that did not exist a moment ago (never a link followed): its descriptor and
 * *path, or -1 with errno. */
static int create_beside(const char *final, const char *kind, char **path)
{
    for (unsigned attempt = 0; attempt < NAME_ATTEMPTS; attempt++) {
        char *name = name_beside(final, kind);
        if (!name) {
            errno = ENOMEM;
            return -1;
        }
        const int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0) {
            *path = name;
            return fd;
        }
        const int e = errno;
        free(name);
        if (e != EEXIST) {
            errno = e;
            return -1;
        }
    }
    errno = EEXIST;
    return -1;
}

/* While a stream is written, SIGPIPE is ignored: a reader that goes away early (`--out /dev/stdout |
 * head -c 1`) makes the write fail with EPIPE, reported, and the run's other outputs are taken back,
 * where the signal would have killed the process with its temporaries left behind. Streams are written
 * one at a time. */
static struct sigaction pipe_before;
static bool pipe_ignored;

static void ignore_sigpipe(void)
{
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    if (!pipe_ignored && sigaction(SIGPIPE, &ignore, &pipe_before) == 0)
        pipe_ignored = true;
}

static void restore_sigpipe(void)
{
    if (pipe_ignored)
        sigaction(SIGPIPE, &pipe_before, NULL);
    pipe_ignored = false;
}

/* Closes and forgets everything, removing the temporary and any kept file (the caller undid or settled
 * a placement first). */
static void release(atomic_file *t)
{
    const bool streaming = t->stream && t->fp;
    if (t->fp)
        fclose(t->fp); /* (a stream's last bytes flushed while SIGPIPE is still ignored) */
    if (streaming)
        restore_sigpipe();
    if (t->tmp_path)
        unlink(t->tmp_path);
    if (t->backup_path)
        unlink(t->backup_path);
    free(t->tmp_path);
    free(t->backup_path);
    free(t->final_path);
    memset(t, 0, sizeof *t);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

int atomic_prepare(atomic_file *t, const char *path, char *err, size_t err_size)
{
    memset(t, 0, sizeof *t);
    if (!path || !*path)
        return fail(err, err_size, "no file name");
    struct stat lst, st, out;
    const bool is_link = lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode);
    const bool exists = stat(path, &st) == 0;
    const int stat_errno = exists ? 0 : errno;
    if (!exists && (stat_errno != ENOENT || is_link))
        return fail(err, err_size, "%s",
                    stat_errno == ENOENT ? "is a symbolic link to a missing file" : strerror(stat_errno));
    if (exists && S_ISDIR(st.st_mode))
        return fail(err, err_size, "is a folder");
    if (exists) {
        /* Never replaced: this process's standard output (whatever it is: /dev/stdout, or `> o.npy` given
         * again as the output), a device, a FIFO, a socket. */
        t->is_stdout = fstat(STDOUT_FILENO, &out) == 0 && same_file(&out, &st);
        t->stream = t->is_stdout || !S_ISREG(st.st_mode);
    }
    /* A link to a regular file: the file it leads to is replaced (the link stays). A stream is opened by
     * its own name (/dev/stdout leads to "pipe:[…]", which no path reaches). */
    t->final_path = is_link && !t->stream ? realpath(path, NULL) : strdup(path);
    if (!t->final_path)
        return fail(err, err_size, "%s", is_link && errno != ENOMEM ? strerror(errno) : "out of memory");
    if (t->stream)
        return 0;
    const int fd = create_beside(t->final_path, "tmp", &t->tmp_path);
    if (fd < 0) {
        const int e = errno;
        release(t);
        return fail(err, err_size, "cannot create a temporary file in its folder: %s", strerror(e));
    }
    if (exists && fchmod(fd, st.st_mode & 07777) != 0) {
        const int e = errno;
        close(fd);
        release(t);
        return fail(err, err_size, "cannot keep the existing file's permissions: %s", strerror(e));
    }
    if (!(t->fp = fdopen(fd, "wb"))) {
        const int e = errno;
        close(fd);
        release(t);
        return fail(err, err_size, "cannot write: %s", strerror(e));
    }
    return 0;
}

int atomic_start(atomic_file *t, char *err, size_t err_size)
{
    if (!t->stream || t->fp)
        return 0;
    fflush(stdout); /* what was printed comes first, on the standard output or a terminal both reach */
    /* No O_CREAT, no O_TRUNC: a stream that has gone is not made a regular file, and a device is not
     * truncated. */
    const int fd = t->is_stdout ? dup(STDOUT_FILENO) : open(t->final_path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, err_size, "cannot open for writing: %s", strerror(errno));
    struct stat st;
    if (!t->is_stdout && (fstat(fd, &st) != 0 || S_ISREG(st.st_mode))) {
        close(fd);
        return fail(err, err_size, "was replaced by a regular file while clattn ran");
    }
    if (!(t->fp = fdopen(fd, "wb"))) {
        const int e = errno;
        close(fd);
        return fail(err, err_size, "cannot write: %s", strerror(e));
    }
    ignore_sigpipe();
    return 0;
}

int atomic_finish(atomic_file *t, char *err, size_t err_size)
{
    if (!t->fp)
        return t->stream ? fail(err, err_size, "internal: finished before it was started") : 0;
    int e = 0;
    errno = 0;
    if (fflush(t->fp) != 0 || ferror(t->fp))
        e = errno ? errno : EIO;
    else if (!t->stream && fsync(fileno(t->fp)) != 0 && errno != EINVAL) /* (a crash cannot leave it empty) */
        e = errno;
    FILE *fp = t->fp;
    t->fp = NULL;
    if (fclose(fp) != 0 && !e)
        e = errno;
    if (t->stream)
        restore_sigpipe();
    return e ? fail(err, err_size, "cannot write: %s", strerror(e)) : 0;
}

/* What can be refused is refused before the first rename. */
static int check_destination(const atomic_file *t, char *err, size_t err_size)
{
    struct stat st;
    if (t->stream)
        return 0;
    if (stat(t->final_path, &st) != 0)
        return errno == ENOENT ? 0 : fail(err, err_size, "%s", strerror(errno));
    if (S_ISDIR(st.st_mode))
        return fail(err, err_size, "is a folder");
    if (!S_ISREG(st.st_mode))
        return fail(err, err_size, "became a device or FIFO while clattn ran; not replaced");
    return 0;
}

/* The file at final_path kept aside under a new name, to put back if a later rename fails: a hard
 * link, or a copy where the file system has none. Nothing there: nothing kept. */
static int keep_previous(atomic_file *t, char *err, size_t err_size)
{
    struct stat st;
    if (lstat(t->final_path, &st) != 0)
        return errno == ENOENT ? 0 : fail(err, err_size, "%s", strerror(errno));
    int e = EEXIST;
    for (unsigned attempt = 0; attempt < NAME_ATTEMPTS && e == EEXIST; attempt++) {
        char *name = name_beside(t->final_path, "old");
        if (!name)
            return fail(err, err_size, "out of memory");
        if (link(t->final_path, name) == 0) { /* (link never follows a link at the new name) */
            t->backup_path = name;
            return 0;
        }
        e = errno;
        free(name);
    }
    int in = open(t->final_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    int out = in >= 0 ? create_beside(t->final_path, "old", &t->backup_path) : -1;
    char buf[65536];
    e = in < 0 || out < 0 ? errno : 0;
    while (!e) {
        const ssize_t got = read(in, buf, sizeof buf);
        if (got == 0)
            break;
        if (got < 0) {
            e = errno == EINTR ? 0 : errno;
            continue;
        }
        for (ssize_t done = 0; !e && done < got;) {
            const ssize_t put = write(out, buf + done, (size_t)(got - done));
            if (put >= 0)
                done += put;
            else if (errno != EINTR)
                e = errno;
        }
    }
    if (!e && fchmod(out, st.st_mode & 07777) != 0)
        e = errno;
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0 && !e)
        e = errno;
    if (e && t->backup_path) {
        unlink(t->backup_path);
        free(t->backup_path);
        t->backup_path = NULL;
    }
    return e ? fail(err, err_size, "cannot keep the previous file to undo with: %s", strerror(e)) : 0;
}

static int place(atomic_file *t, char *err, size_t err_size)
{
    if (t->stream)
        return 0;
    if (keep_previous(t, err, err_size))
        return -1;
    if (rename(t->tmp_path, t->final_path) != 0) {
        const int e = errno;
        if (t->backup_path) {
            unlink(t->backup_path);
            free(t->backup_path);
            t->backup_path = NULL;
        }
        return fail(err, err_size, "cannot rename the finished file into place: %s", strerror(e));
    }
    free(t->tmp_path);
    t->tmp_path = NULL;
    t->placed = true;
    return 0;
}

/* Takes a placement back: the previous file returns, or a file that was new goes. */
static void undo(atomic_file *t)
{
    if (!t->placed)
        return;
    if (t->backup_path) {
        /* (should this rename fail, the previous file stays under its kept name rather than go) */
        rename(t->backup_path, t->final_path);
        free(t->backup_path);
        t->backup_path = NULL;
    } else {
        unlink(t->final_path);
    }
    t->placed = false;
}

int atomic_commit_all(atomic_file *files, size_t n, char *err, size_t err_size, size_t *failed)
{
    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; i++)
        if ((files[i].fp && atomic_finish(&files[i], err, err_size)) || check_destination(&files[i], err, err_size))
            bad = i;
    size_t placed = 0;
    while (bad == n && placed < n) {
        if (place(&files[placed], err, err_size))
            bad = placed;
        else
            placed++;
    }
    if (bad != n)
        while (placed-- > 0)
            undo(&files[placed]);
    for (size_t i = 0; i < n; i++) {
        files[i].placed = false; /* settled (release removes the kept file) or undone */
        release(&files[i]);
    }
    if (failed)
        *failed = bad;
    return bad == n ? 0 : -1;
}

void atomic_abort(atomic_file *t)
{
    undo(t);
    release(t);
}

int atomic_open(atomic_file *t, const char *path, char *err, size_t err_size)
{
    if (atomic_prepare(t, path, err, err_size))
        return -1;
    if (atomic_start(t, err, err_size)) {
        atomic_abort(t);
        return -1;
    }
    return 0;
}

int atomic_commit(atomic_file *t, char *err, size_t err_size)
{
    return atomic_commit_all(t, 1, err, err_size, NULL);
}
