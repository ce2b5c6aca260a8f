/* Helpers shared by the C tests: a failing check names its line. */
#ifndef LOOPTIME_TEST_COMMON_H
#define LOOPTIME_TEST_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "looptime.h"

static int failures = 0;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n",        \
                    __FILE__, __LINE__, #cond, looptime_last_error());           \
            failures++;                                                          \
        }                                                                        \
    } while (0)

/* The code is `want` and the message mentions `needle`. */
#define CHECK_ERR(call, want, needle)                                            \
    do {                                                                         \
        int got_ = (call);                                                       \
        if (got_ != (want) || strstr(looptime_last_error(), (needle)) == NULL) { \
            fprintf(stderr, "%s:%d: %s returned %d (want %d), message '%s' "     \
                    "(want it to mention '%s')\n", __FILE__, __LINE__, #call,    \
                    got_, (want), looptime_last_error(), (needle));              \
            failures++;                                                          \
        }                                                                        \
    } while (0)

static inline int file_exists(const char *dir, const char *name) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 && st.st_size > 0;
}

static inline int count_lines(const char *dir, const char *name) {
    char path[4096];
    FILE *f;
    int c, n = 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    while ((c = fgetc(f)) != EOF) {
        n += c == '\n';
    }
    fclose(f);
    return n;
}

/* Whether the file `dir/name` contains `needle` (files of a few KB). */
static inline int file_contains(const char *dir, const char *name, const char *needle) {
    char path[4096];
    static char buf[1 << 16];
    FILE *f;
    size_t n;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return strstr(buf, needle) != NULL;
}

static inline int finish_tests(const char *name) {
    if (failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

#endif
