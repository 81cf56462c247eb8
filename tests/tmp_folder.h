/* Scratch folders for the tests of tools/ (no OpenCL): made per test, emptied and removed after. */
#ifndef CLATTN_TMP_FOLDER_H
#define CLATTN_TMP_FOLDER_H

#include <stddef.h>

/* Removes the plain files directly inside dir, then dir itself; a missing dir is fine. */
void tmp_folder_remove(const char *dir);
/* Entries of dir, "." and ".." not counted; -1 cast to size_t when dir cannot be opened. */
size_t tmp_folder_count(const char *dir);

#endif
