/*
 * fuzz.h - what the libFuzzer targets share: the input written to a file (the
 * readers take paths) and a check that a call gave back all the memory it took.
 * A target fails by abort(), which libFuzzer and tests/fuzz/replay.c report.
 */
#ifndef FUZZ_H
#define FUZZ_H

#define _POSIX_C_SOURCE 200809L
#include <ac.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond) \
    ((cond) ? (void)0 : (fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, \
                                 __LINE__, #cond, ac_last_error()), abort()))

/* A file of this process's own in $TMPDIR, named by suffix; removed at exit. */
static const char *fuzz_path(const char *suffix)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/aicraft-fuzz-%ld-%s",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid(), suffix);
    return path;
}

static void fuzz_remove_files(void)
{
    remove(fuzz_path("in"));
    remove(fuzz_path("out"));
}

/* The input as the file fuzz_path("in"). */
static const char *fuzz_write(const uint8_t *data, size_t size)
{
    static int registered;
    const char *path = fuzz_path("in");
    FILE *f;
    if (!registered) registered = atexit(fuzz_remove_files) == 0;
    f = fopen(path, "wb");
    FUZZ_CHECK(f != NULL);
    FUZZ_CHECK(fwrite(data, 1, size, f) == size);
    FUZZ_CHECK(fclose(f) == 0);
    return path;
}

typedef struct {
    int64_t bytes, tensors, nodes;
} FuzzMemory;

static FuzzMemory fuzz_memory(void)
{
    AcMemStats s;
    FuzzMemory m;
    FUZZ_CHECK(ac_memory_stats(&s) == AC_OK);
    m.bytes = s.bytes_in_use;
    m.tensors = s.live_tensors;
    m.nodes = s.live_nodes;
    return m;
}

static void fuzz_memory_back_to(FuzzMemory before)
{
    FuzzMemory after = fuzz_memory();
    if (after.bytes != before.bytes || after.tensors != before.tensors ||
        after.nodes != before.nodes) {
        fprintf(stderr, "memory not given back: %lld bytes, %lld tensors, %lld nodes, was %lld, "
                "%lld, %lld\n", (long long)after.bytes, (long long)after.tensors,
                (long long)after.nodes, (long long)before.bytes, (long long)before.tensors,
                (long long)before.nodes);
        abort();
    }
}

/* A failed read must say why with one of the codes a reader gives. */
static void fuzz_expect_read_error(void)
{
    int code = ac_last_error_code();
    FUZZ_CHECK(code == AC_ERR_FORMAT || code == AC_ERR_IO || code == AC_ERR_MEMORY);
    FUZZ_CHECK(ac_last_error()[0] != '\0');
}

#endif
