/*
 * test_program_bounds.c - the program reader bounds a run's memory and work by
 * the file's own size before the check run allocates anything: a 154-byte file
 * whose inputs are (n, 1) and (1, n) with one matmul (n x n out) is refused with
 * AC_ERR_FORMAT at once, with no allocation of what its shapes ask, for any n
 * past the bound; a contraction whose output is small but whose work is not is
 * refused too; the same file at small n loads and runs.
 */
#define _POSIX_C_SOURCE 200809L
#include "ac.h"
#include "test.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

static char path[256];

static void put_u32(FILE *f, uint32_t v)
{
    unsigned char b[4];
    int i;
    for (i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
    fwrite(b, 1, 4, f);
}

static void put_i64(FILE *f, int64_t v)
{
    unsigned char b[8];
    int i;
    for (i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)v >> (8 * i));
    fwrite(b, 1, 8, f);
}

static void put_buffer(FILE *f, int kind, int64_t d0, int64_t d1)
{
    put_u32(f, (uint32_t)kind);
    put_u32(f, AC_FLOAT32);
    put_u32(f, 2);
    put_i64(f, d0);
    put_i64(f, d1);
}

/* inputs (m, k) and (k, n), one matmul or add into an (out_m, out_n) output */
static long write_program(const char *op, int64_t m, int64_t k, int64_t n, int64_t out_m, int64_t out_n)
{
    FILE *f = fopen(path, "wb");
    long size;
    fwrite("ACPROG1\n", 1, 8, f);
    put_u32(f, 3);
    put_u32(f, 1);
    put_u32(f, 2);
    put_u32(f, 1);
    put_buffer(f, AC_BUFFER_INPUT, m, k);
    put_buffer(f, AC_BUFFER_INPUT, k, n);
    put_buffer(f, AC_BUFFER_OUTPUT, out_m, out_n);
    put_u32(f, (uint32_t)strlen(op));
    fwrite(op, 1, strlen(op), f);
    put_u32(f, 2);
    put_u32(f, 1);
    put_u32(f, 0);
    put_u32(f, 0);
    put_u32(f, 1);
    put_u32(f, 2);
    put_u32(f, 0);
    put_u32(f, 1);
    put_u32(f, 2);
    size = ftell(f);
    fclose(f);
    return size;
}

static long write_matmul_program(int64_t m, int64_t k, int64_t n)
{
    return write_program("matmul", m, k, n, m, n);
}

static void test_small_matmul_program_loads_and_runs(void)
{
    const int64_t a_shape[2] = {3, 1}, b_shape[2] = {1, 3};
    AcTensor *a = ac_full(a_shape, 2, 2.0f), *b = ac_full(b_shape, 2, 3.0f), *out = NULL;
    AcProgram *p;
    CHECK(write_matmul_program(3, 1, 3) == 154);
    p = ac_program_load(path);
    CHECK(p != NULL);
    if (!p) return;
    CHECK(ac_program_run(p, (AcTensor *[]){a, b}, 2, &out, 1) == AC_OK);
    CHECK(out && out->size == 9 && ((float *)out->data)[8] == 6.0f);
    ac_tensor_free(out);
    ac_tensor_free(a);
    ac_tensor_free(b);
    ac_program_free(p);
}

static void test_shapes_past_the_files_size_are_refused_before_allocating(void)
{
    static const int64_t ns[] = {20000, 100000, 3037000499LL};
    size_t i;
    for (i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        AcMemStats before, after;
        clock_t start = clock();
        CHECK(write_matmul_program(ns[i], 1, ns[i]) == 154);
        ac_memory_stats(&before);
        CHECK(ac_program_load(path) == NULL);
        CHECK(ac_last_error_code() == AC_ERR_FORMAT);
        CHECK(i == 2 || strstr(ac_last_error(), "bytes of tensors a run") != NULL);   /* 2: n * n past int64 */
        ac_memory_stats(&after);
        CHECK(after.peak_bytes - before.bytes_in_use < (int64_t)1 << 20);   /* nothing like n * n */
        CHECK(clock() - start < CLOCKS_PER_SEC);
    }
}

static void test_work_past_the_files_size_is_refused(void)
{
    /* (1024, 8192) @ (8192, 1024): 72 MB of tensors, within the bytes' bound, but
       2^33 multiply-adds, which no 154-byte file may ask */
    CHECK(write_matmul_program(1024, 8192, 1024) == 154);
    CHECK(ac_program_load(path) == NULL);
    CHECK(ac_last_error_code() == AC_ERR_FORMAT);
    CHECK(strstr(ac_last_error(), "element operations a run") != NULL);
}

/* The recorded output is (1, 1); the op's, from its inputs, is (n, n). */
static void test_outputs_larger_than_recorded_are_refused_before_allocating(void)
{
    static const char *const ops[] = {"matmul", "add"};
    size_t i;
    for (i = 0; i < 2; i++) {
        AcMemStats before, after;
        CHECK(write_program(ops[i], 20000, 1, 20000, 1, 1) == (long)(148 + strlen(ops[i])));
        ac_memory_stats(&before);
        CHECK(ac_program_load(path) == NULL);
        CHECK(ac_last_error_code() == AC_ERR_FORMAT);
        ac_memory_stats(&after);
        CHECK(after.peak_bytes - before.bytes_in_use < (int64_t)1 << 20);
    }
}

int main(void)
{
    snprintf(path, sizeof path, "/tmp/ac_test_program_bounds_%ld.acprog", (long)getpid());
    RUN(test_small_matmul_program_loads_and_runs);
    RUN(test_shapes_past_the_files_size_are_refused_before_allocating);
    RUN(test_work_past_the_files_size_is_refused);
    RUN(test_outputs_larger_than_recorded_are_refused_before_allocating);
    remove(path);
    return TEST_REPORT();
}
