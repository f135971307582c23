/*
 * test_idx.c - ac_read_idx on small IDX files written here into a temporary
 * folder: values and shapes, scoped and root results, and a clean error for
 * every kind of broken file.
 */
#define _POSIX_C_SOURCE 200809L

#include "ac.h"
#include "test.h"

#include <string.h>
#include <unistd.h>

static char folder[64];
static char path_buf[128];

static AcMemStats stats(void)
{
    AcMemStats s;
    ac_memory_stats(&s);
    return s;
}

/* Write bytes to name in the temporary folder; return the full path. */
static const char *write_file(const char *name, const unsigned char *bytes, size_t n)
{
    FILE *f;
    snprintf(path_buf, sizeof path_buf, "%s/%s", folder, name);
    f = fopen(path_buf, "wb");
    CHECK(f != NULL);
    if (!f) return path_buf;
    CHECK(fwrite(bytes, 1, n, f) == n);
    fclose(f);
    return path_buf;
}

/* An IDX header for unsigned bytes into buf; returns its length. */
static size_t idx_header(unsigned char *buf, int ndim, const uint32_t *dims)
{
    int i;
    buf[0] = 0;
    buf[1] = 0;
    buf[2] = 0x08;
    buf[3] = (unsigned char)ndim;
    for (i = 0; i < ndim; i++) {
        buf[4 + 4 * i] = (unsigned char)(dims[i] >> 24);
        buf[5 + 4 * i] = (unsigned char)(dims[i] >> 16);
        buf[6 + 4 * i] = (unsigned char)(dims[i] >> 8);
        buf[7 + 4 * i] = (unsigned char)dims[i];
    }
    return 4 + 4 * (size_t)ndim;
}

/* The read fails with code, and the message mentions fragment. */
static void check_fails(const char *path, int code, const char *fragment)
{
    AcMemStats before = stats();
    AcTensor *t = ac_read_idx(path);
    CHECK(t == NULL);
    CHECK(ac_last_error_code() == code);
    CHECK(strstr(ac_last_error(), "read_idx") != NULL);
    CHECK(strstr(ac_last_error(), fragment) != NULL);
    if (strstr(ac_last_error(), fragment) == NULL) fprintf(stderr, "  message: %s\n", ac_last_error());
    CHECK(stats().live_tensors == before.live_tensors);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    ac_clear_error();
}

static void test_reads_images_as_floats_at_root(void)
{
    uint32_t dims[3] = {2, 3, 4};
    unsigned char file[4 + 12 + 24];
    size_t head = idx_header(file, 3, dims);
    AcMemStats before = stats();
    AcTensor *t;
    int i;
    for (i = 0; i < 24; i++) file[head + (size_t)i] = (unsigned char)(i * 11);
    t = ac_read_idx(write_file("images", file, head + 24));
    CHECK(t != NULL);
    if (!t) return;
    CHECK(t->ndim == 3 && t->shape[0] == 2 && t->shape[1] == 3 && t->shape[2] == 4);
    CHECK(t->size == 24);
    CHECK(t->scope_depth == 0);
    for (i = 0; i < 24; i++) CHECK(t->data[i] == (float)((i * 11) & 0xff));
    CHECK(ac_tensor_free(t) == AC_OK);
    CHECK(stats().live_tensors == before.live_tensors);
}

static void test_reads_labels_into_the_open_scope(void)
{
    uint32_t dims[1] = {5};
    unsigned char file[8 + 5] = {0};
    size_t head = idx_header(file, 1, dims);
    AcMemStats before = stats();
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *t;
    memcpy(file + head, "\x07\x02\x01\x00\xff", 5);
    t = ac_read_idx(write_file("labels", file, head + 5));
    CHECK(t != NULL);
    if (t) {
        CHECK(t->ndim == 1 && t->shape[0] == 5);
        CHECK(t->scope_depth == 1);
        CHECK(t->data[0] == 7.0f && t->data[1] == 2.0f && t->data[2] == 1.0f);
        CHECK(t->data[3] == 0.0f && t->data[4] == 255.0f);
    }
    CHECK(ac_mem_restore(cp) == AC_OK);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
}

static void test_reads_files_larger_than_one_chunk(void)
{
    /* 3 x 100 x 157 = 47,100 bytes: several 16 KB chunks and a partial one */
    uint32_t dims[3] = {3, 100, 157};
    size_t n = 3 * 100 * 157, head, i;
    unsigned char *file = malloc(16 + n);
    AcTensor *t;
    int all_match = 1;
    CHECK(file != NULL);
    if (!file) return;
    head = idx_header(file, 3, dims);
    for (i = 0; i < n; i++) file[head + i] = (unsigned char)((i * 7 + i / 256) % 256);
    t = ac_read_idx(write_file("big", file, head + n));
    CHECK(t != NULL && t->size == (int64_t)n);
    if (t) {
        for (i = 0; i < n; i++)
            if (t->data[i] != (float)file[head + i]) all_match = 0;
        CHECK(all_match);
        ac_tensor_free(t);
    }
    free(file);
}

static void test_zero_sized_dimension_gives_an_empty_tensor(void)
{
    uint32_t dims[2] = {0, 28};
    unsigned char file[12];
    size_t head = idx_header(file, 2, dims);
    AcTensor *t = ac_read_idx(write_file("empty", file, head));
    CHECK(t != NULL);
    if (!t) return;
    CHECK(t->ndim == 2 && t->shape[0] == 0 && t->shape[1] == 28 && t->size == 0);
    ac_tensor_free(t);
}

static void test_missing_file_and_null_path(void)
{
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no-such-file", folder);
    check_fails(missing, AC_ERR_IO, "no-such-file");
    check_fails(missing, AC_ERR_IO, "No such file");
    check_fails(NULL, AC_ERR_ARG, "NULL");
    check_fails(folder, AC_ERR_IO, "cannot");   /* a directory opens but cannot be read */
}

static void test_truncated_files(void)
{
    uint32_t dims[3] = {2, 3, 4};
    unsigned char file[16 + 24] = {0};
    size_t head = idx_header(file, 3, dims);
    check_fails(write_file("empty-file", file, 0), AC_ERR_FORMAT, "too few");
    check_fails(write_file("short-magic", file, 3), AC_ERR_FORMAT, "too few");
    check_fails(write_file("short-dims", file, 10), AC_ERR_FORMAT, "dimensions");
    check_fails(write_file("short-data", file, head + 23), AC_ERR_FORMAT, "truncated");
    check_fails(write_file("short-data", file, head + 23), AC_ERR_FORMAT, "(2, 3, 4)");
    check_fails(write_file("no-data", file, head), AC_ERR_FORMAT, "truncated");
}

static void test_trailing_bytes(void)
{
    uint32_t dims[1] = {4};
    unsigned char file[8 + 6] = {0};
    size_t head = idx_header(file, 1, dims);
    check_fails(write_file("trailing", file, head + 6), AC_ERR_FORMAT, "2 bytes after");
}

static void test_bad_magic_type_and_ndim(void)
{
    uint32_t dims[1] = {4};
    unsigned char file[8 + 4] = {0};
    size_t head = idx_header(file, 1, dims);
    file[0] = 0x1f;   /* what a gzipped file starts with */
    file[1] = 0x8b;
    check_fails(write_file("gzipped", file, head + 4), AC_ERR_FORMAT, "not an IDX file");
    idx_header(file, 1, dims);
    file[2] = 0x0D;   /* float values */
    check_fails(write_file("floats", file, head + 4), AC_ERR_FORMAT, "type 0x0d");
    idx_header(file, 1, dims);
    file[3] = 9;
    check_fails(write_file("nine-dims", file, head + 4), AC_ERR_FORMAT, "9 dimensions");
}

static void test_huge_dims_fail_before_allocating(void)
{
    uint32_t dims[3] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
    uint32_t dims2[2] = {0x7FFFFFFFu, 2};
    unsigned char file[16 + 8] = {0};
    size_t head = idx_header(file, 3, dims);
    check_fails(write_file("huge", file, head + 8), AC_ERR_FORMAT, "truncated");
    head = idx_header(file, 2, dims2);
    check_fails(write_file("huge2", file, head + 8), AC_ERR_FORMAT, "truncated");
}

static void test_library_still_works_after_errors(void)
{
    uint32_t dims[2] = {1, 2};
    unsigned char file[12 + 2];
    size_t head = idx_header(file, 2, dims);
    AcTensor *t;
    file[head] = 3;
    file[head + 1] = 4;
    t = ac_read_idx(write_file("ok", file, head + 2));
    CHECK(t != NULL && t->data[0] == 3.0f && t->data[1] == 4.0f);
    CHECK(ac_last_error_code() == AC_OK);
    ac_tensor_free(t);
}

/* Remove the files this test wrote, then the folder. */
static void remove_folder(void)
{
    static const char *names[] = {"images", "labels", "big", "empty", "empty-file", "short-magic",
                                  "short-dims", "short-data", "no-data", "trailing", "gzipped",
                                  "floats", "nine-dims", "huge", "huge2", "ok"};
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path_buf, sizeof path_buf, "%s/%s", folder, names[i]);
        remove(path_buf);
    }
    rmdir(folder);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(folder, sizeof folder, "%s/ac_idx_XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    if (!mkdtemp(folder)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_reads_images_as_floats_at_root);
    RUN(test_reads_labels_into_the_open_scope);
    RUN(test_reads_files_larger_than_one_chunk);
    RUN(test_zero_sized_dimension_gives_an_empty_tensor);
    RUN(test_missing_file_and_null_path);
    RUN(test_truncated_files);
    RUN(test_trailing_bytes);
    RUN(test_bad_magic_type_and_ndim);
    RUN(test_huge_dims_fail_before_allocating);
    RUN(test_library_still_works_after_errors);
    remove_folder();
    return TEST_REPORT();
}
