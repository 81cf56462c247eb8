/* Files written under a temporary name and renamed into place, so that no reader ever sees a
 * half-written file. The temporary is created with open(O_EXCL) rather than mkstemp so that it gets
 * the usual 0666-minus-umask permissions. */
#define _XOPEN_SOURCE 700 /* open, fdopen, fileno, fsync, getpid, realpath, lstat, fchmod */
#include "atomic_file.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fail(char *err, size_t err_size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && err_size)
        vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
    return -1;
}

int atomic_open(atomic_file *t, const char *path, char *err, size_t err_size)
{
    t->fp = NULL;
    t->tmp_path = NULL;
    /* Through a symbolic link to the file it names, so that the link is kept and its target written. */
    struct stat st;
    const bool exists = lstat(path, &st) == 0;
    t->final_path = exists && S_ISLNK(st.st_mode) ? realpath(path, NULL) : strdup(path);
    if (!t->final_path && exists && S_ISLNK(st.st_mode))
        return fail(err, err_size, "is a symbolic link to a missing file: %s", strerror(errno));
    if (!t->final_path)
        return fail(err, err_size, "out of memory");
    path = t->final_path;
    const bool keep_mode = stat(path, &st) == 0 && S_ISREG(st.st_mode);
    const size_t cap = strlen(path) + 48;
    t->tmp_path = malloc(cap);
    if (!t->tmp_path)
        return fail(err, err_size, "out of memory");
    int fd = -1;
    for (unsigned attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(t->tmp_path, cap, "%s.tmp-%ld-%u", path, (long)getpid(), attempt);
        fd = open(t->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        const int e = errno;
        fail(err, err_size, "cannot create a temporary file in its folder: %s", strerror(e));
        atomic_abort(t);
        return -1;
    }
    if (keep_mode && fchmod(fd, st.st_mode & 07777) != 0) {
        const int e = errno;
        close(fd);
        atomic_abort(t);
        return fail(err, err_size, "cannot keep the existing file's permissions: %s", strerror(e));
    }
    t->fp = fdopen(fd, "wb");
    if (!t->fp) {
        const int e = errno;
        close(fd);
        atomic_abort(t);
        return fail(err, err_size, "cannot write: %s", strerror(e));
    }
    return 0;
}

void atomic_abort(atomic_file *t)
{
    if (t->fp)
        fclose(t->fp);
    if (t->tmp_path)
        remove(t->tmp_path);
    free(t->tmp_path);
    free(t->final_path);
    t->fp = NULL;
    t->tmp_path = NULL;
    t->final_path = NULL;
}

/* Flush, sync (so a crash cannot leave an empty file under the final name) and rename into place. */
int atomic_commit(atomic_file *t, const char *path, char *err, size_t err_size)
{
    int e = 0;
    const char *what = "cannot write";
    if (fflush(t->fp) != 0 || ferror(t->fp))
        e = errno ? errno : EIO;
    else if (fsync(fileno(t->fp)) != 0 && errno != EINVAL) /* EINVAL: nothing to sync on this file */
        e = errno;
    if (!e) {
        FILE *fp = t->fp;
        t->fp = NULL;
        if (fclose(fp) != 0)
            e = errno;
    }
    (void)path; /* the file atomic_open resolved (through a link) */
    if (!e && rename(t->tmp_path, t->final_path) != 0) {
        e = errno;
        what = "cannot rename the finished file into place";
    }
    if (e) {
        atomic_abort(t);
        return fail(err, err_size, "%s: %s", what, strerror(e));
    }
    free(t->tmp_path);
    free(t->final_path);
    t->tmp_path = NULL;
    t->final_path = NULL;
    return 0;
}

