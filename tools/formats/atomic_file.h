/* Files that appear whole or not at all: written under a temporary name in the same folder, synced,
 * then renamed over the final path. Used for every file the clattn tool writes (.npy, SVG). */
#ifndef CLATTN_ATOMIC_FILE_H
#define CLATTN_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct atomic_file {
    FILE *fp; /* write here */
    char *tmp_path;
    char *final_path; /* where the file goes: the path, or the file a symbolic link there points to */
} atomic_file;

/* 0, or non-zero with a reason in err. A path that is a symbolic link is written through (the file it
 * points to is replaced, the link stays); a link to nothing is refused. An existing file keeps its
 * permissions. */
int atomic_open(atomic_file *t, const char *path, char *err, size_t err_size);
/* Flush, sync and rename into place (path: as given to atomic_open); on failure the temporary is
 * removed. */
int atomic_commit(atomic_file *t, const char *path, char *err, size_t err_size);
/* Give up: close and remove the temporary. */
void atomic_abort(atomic_file *t);

#endif
