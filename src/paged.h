/* Paged KV caches: the state of their helper kernels (cl/paged.cl). */
#ifndef CLATTN_PAGED_H
#define CLATTN_PAGED_H

#include "clattn/clattn.h"

void paged_release(clattn_context *ctx);

#endif
