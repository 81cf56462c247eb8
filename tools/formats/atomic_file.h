/* Output files that appear whole or not at all. Used for every file the clattn tool writes (.npy, SVG).
 *
 * Where a path leads (a symbolic link is followed; a link to nothing is refused):
 *  - a regular file, or nothing yet: the file is staged, written to a temporary file created fresh
 *    (O_CREAT|O_EXCL|O_NOFOLLOW under a random name, "NAME.clattn-XXXXXXXXXXXX.tmp") in the folder of the
 *    file it replaces, synced, then renamed over it. An existing file keeps its permissions.
 *  - an existing device, FIFO or socket (anything neither a regular file nor a folder): never replaced;
 *    the data is written through to it as it comes (so /dev/stdout, /dev/null and a FIFO with a reader
 *    work), and what was written there cannot be taken back.
 *  - this process's standard output (the same file, /dev/stdout or `> o.npy`): written through the
 *    standard output itself, at its position, whatever kind of file it is.
 *  - a folder: refused.
 *
 * One file: atomic_open, write to fp, atomic_commit (or atomic_abort). Several files all or nothing:
 * atomic_prepare each (every destination checked, every temporary created, nothing opened on a stream
 * yet), then for each atomic_start, write, atomic_finish, then atomic_commit_all. */
#ifndef CLATTN_ATOMIC_FILE_H
#define CLATTN_ATOMIC_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct atomic_file {
    FILE *fp;          /* write here, between atomic_start and atomic_finish */
    char *final_path;  /* the file replaced or written: the path, or where a symbolic link there leads */
    char *tmp_path;    /* the staged file; NULL for a stream, and once placed */
    char *backup_path; /* placed over an existing file: that file, kept until settled to undo the rename */
    bool stream;       /* written through in place (a device, FIFO, socket or the standard output) */
    bool is_stdout;    /* the stream is this process's standard output */
    bool placed;       /* renamed into place, not yet settled */
} atomic_file;

/* Checks where path leads and, for a staged file, creates its temporary (fp open on it). 0, or non-zero
 * with a reason in err (not naming the path) and nothing left behind. */
int atomic_prepare(atomic_file *t, const char *path, char *err, size_t err_size);
/* Opens a stream for writing (a FIFO waits here for its reader); nothing to do for a staged file. Until
 * atomic_finish, SIGPIPE is ignored: a reader gone early is a write error (EPIPE), not a kill. */
int atomic_start(atomic_file *t, char *err, size_t err_size);
/* Flushes and closes what was written (a staged file is synced too). */
int atomic_finish(atomic_file *t, char *err, size_t err_size);
/* Places finished files all or nothing: every destination is checked again (a folder, a file that
 * became a device) before the first rename; then each staged file is renamed over its destination,
 * the file it replaces kept aside (a hard link, or a copy where links are not possible); if a rename
 * still fails, the ones done are undone (new files removed, replaced files back with their old
 * content) and *failed (when not NULL) gets the index of the file that failed. On success the kept
 * files are removed. Streams are left as they are. Every file is released either way. */
int atomic_commit_all(atomic_file *files, size_t n, char *err, size_t err_size, size_t *failed);
/* Gives up: closes, removes the temporary, undoes a placement not yet settled, releases. */
void atomic_abort(atomic_file *t);

/* One file: atomic_prepare then atomic_start; atomic_finish then atomic_commit_all of it alone. */
int atomic_open(atomic_file *t, const char *path, char *err, size_t err_size);
int atomic_commit(atomic_file *t, char *err, size_t err_size);

#endif
