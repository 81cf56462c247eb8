/* Scratch folders for the tests of tools/. */
#define _POSIX_C_SOURCE 200809L
#include "tmp_folder.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int is_dot(const char *name) { return strcmp(name, ".") == 0 || strcmp(name, "..") == 0; }

void tmp_folder_remove(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d)) != NULL) {
        if (is_dot(e->d_name))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        remove(path);
    }
    closedir(d);
    rmdir(dir);
}

size_t tmp_folder_count(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return (size_t)-1;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += !is_dot(e->d_name);
    closedir(d);
    return n;
}
