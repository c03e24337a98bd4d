/* fuzz_common.h: what the libFuzzer targets share: a private folder for the files an input
 * becomes, and writing bytes to a file there. */
#ifndef KVPLAN_FUZZ_COMMON_H
#define KVPLAN_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A folder made once per process (each fuzzing job has its own). */
static inline const char *fuzz_dir(void)
{
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/kvplan-fuzz-XXXXXX");
        if (!mkdtemp(dir)) { perror("mkdtemp"); abort(); }
    }
    return dir;
}

/* Writes n bytes to dir/name and returns the path (static storage per slot). */
static inline const char *fuzz_file(int slot, const char *name, const uint8_t *data, size_t n)
{
    static char paths[4][128];
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(paths[slot], "wb");
    if (!f) { perror(paths[slot]); abort(); }
    if (n && fwrite(data, 1, n, f) != n) abort();
    fclose(f);
    return paths[slot];
}

/* A NUL-terminated copy of the input (caller frees). */
static inline char *fuzz_text(const uint8_t *data, size_t n)
{
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, data, n);
    s[n] = 0;
    return s;
}

#endif
