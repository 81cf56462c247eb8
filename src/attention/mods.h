/* Programmable attention: the caller's score_mod / mask_mod source (clattn_mods_create), checked and
 * compiled once into a probe, then joined to every kernel of a call that uses it (cl/masks.cl calls the
 * functions; program.c puts the text before the kernels). */
#ifndef CLATTN_MODS_H
#define CLATTN_MODS_H

#include "program.h"
#include "validate.h"

/* For one call: the mods belong to ctx, and each auxiliary tensor is long enough for the call's
 * batches, heads and positions (sizes and masks of s, its per-sequence offsets included); then their
 * buffers (NULL past the last) into aux. */
clattn_status mods_bind(clattn_context *ctx, const clattn_mods *mods, const sdpa_shape *s, cl_mem aux[4]);

/* The mods' text and digest as program_get builds a family with them (valid while the mods live), or
 * NULL for NULL: a call passes its own mods to each build, nothing is kept on the context. */
const program_mods *mods_program(const clattn_mods *mods);

/* The mods as a call on ctx takes them: themselves on their own context; on another (a device group's
 * member) their copy there, made on first use and kept with them, its auxiliary tensors copied from
 * theirs at each call (through the host). ctx's last error on failure. */
clattn_status mods_on_context(const clattn_mods *mods, clattn_context *ctx, const clattn_mods **out);

/* Whether the mods define mask_mod (score_mod, score_mod_grad); the context they were made on. */
bool mods_has_mask(const clattn_mods *mods);
bool mods_has_score(const clattn_mods *mods);
bool mods_has_score_grad(const clattn_mods *mods);
const clattn_context *mods_context(const clattn_mods *mods);

#endif
