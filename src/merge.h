/* clattn_merge: partial attention results over disjoint key sets combined into the exact result. */
#ifndef CLATTN_MERGE_H
#define CLATTN_MERGE_H

#include "clattn/clattn.h"

void merge_release(clattn_context *ctx);

#endif
