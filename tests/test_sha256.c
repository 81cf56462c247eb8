/* SHA-256 of the program cache's keys (src/base/sha256.c) against FIPS 180-4's published digests, including
 * the message lengths around the padding boundary (55, 56, 63, 64 bytes); and the library's one FNV-1a
 * (src/base/hash.h: cache file names and checksums, the kernel cache, the ring's fingerprints) against the
 * published test vectors of FNV's authors. No OpenCL. */
#include "hash.h"
#include "sha256.h"

#include <stdio.h>
#include <string.h>

int main(void)
{
    static char million[1000000];
    memset(million, 'a', sizeof million);
    static const struct {
        const char *text;
        size_t len;
        const char *digest;
    } known[] = {
        {"", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrst"
         "nopqrstu",
         112, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
        {million, sizeof million, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
        {million, 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {million, 63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {million, 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
    };
    int failures = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        char hex[65];
        sha256_hex(known[i].text, known[i].len, hex);
        if (strcmp(hex, known[i].digest) != 0) {
            printf("FAIL: %zu bytes: %s, expected %s\n", known[i].len, hex, known[i].digest);
            failures++;
        }
    }
    static const struct {
        const char *text;
        uint64_t hash;
    } fnv[] = {{"", 0xcbf29ce484222325ull}, {"a", 0xaf63dc4c8601ec8cull}, {"foobar", 0x85944171f73967e8ull}};
    for (size_t i = 0; i < sizeof fnv / sizeof fnv[0]; i++) {
        const uint64_t h = hash_fnv1a(HASH_FNV1A_BASIS, fnv[i].text, strlen(fnv[i].text));
        if (h != fnv[i].hash) {
            printf("FAIL: FNV-1a of \"%s\": %016llx, expected %016llx\n", fnv[i].text, (unsigned long long)h,
                   (unsigned long long)fnv[i].hash);
            failures++;
        }
    }
    printf("%zu digests and %zu FNV-1a hashes checked, %d failure(s)\n", sizeof known / sizeof known[0],
           sizeof fnv / sizeof fnv[0], failures);
    return failures != 0;
}
