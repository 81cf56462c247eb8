/* SHA-256 (FIPS 180-4), for the program cache's keys: a source text is named by a hash that nobody
 * can make collide on purpose, unlike the checksums used for integrity. */
#ifndef CLATTN_SHA256_H
#define CLATTN_SHA256_H

#include <stddef.h>

/* The digest of data[0..n) as 64 lowercase hex characters and a NUL in hex[65]. */
void sha256_hex(const void *data, size_t n, char hex[65]);

#endif
