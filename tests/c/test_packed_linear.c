/*
 * test_packed_linear.c - the packed Linear layer (ac_packed_linear_*): each row's
 * bits the same in a batch of any size, on every kernel set this CPU runs, and
 * ac_linear's results, for one to many rows and odd widths;
 * a copy, untouched by later writes to the weight; no leaks inside a scope or at
 * root; and the argument checks.
 */
#define _POSIX_C_SOURCE 200809L

#include "ac.h"
#include "kernels/gemm.h"
#include "test.h"

#include <string.h>

static const char *const SETS[] = {"generic", "avx2", "avx512"};
#define N_SETS 3

static AcTensor *randn2(int64_t rows, int64_t cols)
{
    int64_t shape[2];
    shape[0] = rows;
    shape[1] = cols;
    return ac_randn(shape, 2);
}

static int same_bits(const AcTensor *a, const AcTensor *b)
{
    return a && b && a->size == b->size && memcmp(a->data, b->data, (size_t)a->size * sizeof(float)) == 0;
}

/* Every element of a within tol * (1 + |b|) of b's. */
static int close_to(const AcTensor *a, const AcTensor *b, float tol)
{
    int64_t i;
    if (!a || !b || a->size != b->size) return 0;
    for (i = 0; i < a->size; i++)
        if (!(fabsf(a->data[i] - b->data[i]) <= tol * (1.0f + fabsf(b->data[i])))) return 0;
    return 1;
}

/* On every set this CPU runs: the first `rows` rows of a batch of 100 have the bits
   they have in the whole batch; ac_linear's bits from five rows on, its values to
   rounding below (it sums a few rows in another order). */
static void test_every_set_gives_each_row_its_bits(void)
{
    static const int64_t outs[] = {1, 10, 37, 128, 130};
    static const int64_t ins[] = {1, 13, 64, 784};
    static const int64_t rows[] = {1, 2, 4, 5, 12, 33, 100};
    size_t a, b, c;
    int set;
    for (set = 0; set < N_SETS; set++) {
        if (!gemm_use_kernels(SETS[set])) continue;
        for (a = 0; a < sizeof outs / sizeof outs[0]; a++) {
            for (b = 0; b < sizeof ins / sizeof ins[0]; b++) {
                AcTensor *w = randn2(outs[a], ins[b]), *bias = randn2(1, outs[a]);
                AcTensor *bias1 = ac_reshape(bias, &outs[a], 1), *x = randn2(100, ins[b]);
                AcPackedLinear *p = ac_packed_linear_new(w, b % 2 ? NULL : bias1);
                AcTensor *whole = ac_packed_linear_forward(p, x);
                CHECK(p != NULL && whole != NULL);
                for (c = 0; p && whole && c < sizeof rows / sizeof rows[0]; c++) {
                    AcCheckpoint cp = ac_mem_checkpoint();
                    int64_t shape[2];
                    AcTensor *part, *want, *got, *expected;
                    shape[0] = rows[c];
                    shape[1] = ins[b];
                    part = ac_tensor_from_data(x->data, shape, 2);
                    want = ac_linear(part, w, b % 2 ? NULL : bias1);
                    got = ac_packed_linear_forward(p, part);
                    shape[1] = outs[a];
                    expected = ac_tensor_from_data(whole->data, shape, 2);
                    CHECK(same_bits(got, expected));
                    /* summing k products in another order: within about k ulps */
                    CHECK(rows[c] > 4 ? same_bits(got, want)
                                      : close_to(got, want, 1e-6f * (float)(ins[b] + 1)));
                    ac_mem_restore(cp);
                }
                ac_tensor_free(whole);
                ac_packed_linear_free(p);
                ac_tensor_free(x);
                ac_tensor_free(bias1);
                ac_tensor_free(bias);
                ac_tensor_free(w);
            }
        }
    }
    gemm_use_kernels(NULL);
}

static void test_a_copy_that_leaks_nothing(void)
{
    AcMemStats before, packed, after;
    AcTensor *w = randn2(128, 784), *x = randn2(32, 784), *want, *got;
    AcPackedLinear *p;
    int i;
    ac_memory_stats(&before);
    p = ac_packed_linear_new(w, NULL);
    ac_memory_stats(&packed);
    CHECK(packed.bytes_in_use - before.bytes_in_use == ac_packed_linear_nbytes(p));
    CHECK(ac_packed_linear_nbytes(p) >= 128 * 784 * 4);
    CHECK(ac_packed_linear_nbytes(p) <= 128 * 784 * 4 + 4096);    /* 128 columns: 4 full panels */
    want = ac_packed_linear_forward(p, x);
    w->data[0] += 1.0f;            /* the layer holds its own copy */
    got = ac_packed_linear_forward(p, x);
    CHECK(same_bits(want, got));
    ac_tensor_free(got);
    for (i = 0; i < 50; i++) {
        AcCheckpoint cp = ac_mem_checkpoint();
        CHECK(ac_packed_linear_forward(p, x) != NULL);
        ac_mem_restore(cp);
    }
    ac_packed_linear_free(p);
    ac_tensor_free(want);
    ac_memory_stats(&after);
    CHECK(after.bytes_in_use == before.bytes_in_use);
    ac_tensor_free(x);
    ac_tensor_free(w);
}

static void test_bad_arguments(void)
{
    AcTensor *w = randn2(3, 4), *x = randn2(2, 5), *b = randn2(1, 3), *leaf = randn2(2, 4);
    int64_t three = 3, four = 4;
    AcTensor *b1 = ac_reshape(b, &three, 1), *bad_bias = ac_reshape(w, &four, 1);
    AcPackedLinear *p = ac_packed_linear_new(w, b1);
    CHECK(p != NULL);
    CHECK(ac_packed_linear_new(NULL, NULL) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_packed_linear_new(b1, NULL) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(ac_packed_linear_new(w, w) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(bad_bias == NULL || (ac_packed_linear_new(w, bad_bias) == NULL &&
                               ac_last_error_code() == AC_ERR_SHAPE));
    CHECK(ac_packed_linear_forward(NULL, x) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_packed_linear_forward(p, NULL) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_packed_linear_forward(p, x) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    ac_tensor_set_requires_grad(leaf, 1);
    CHECK(ac_packed_linear_forward(p, leaf) == NULL && ac_last_error_code() == AC_ERR_STATE);
    CHECK(ac_packed_linear_in_features(NULL) < 0 && ac_packed_linear_out_features(NULL) < 0);
    CHECK(ac_packed_linear_has_bias(NULL) < 0 && ac_packed_linear_nbytes(NULL) < 0);
    CHECK(ac_packed_linear_in_features(p) == 4 && ac_packed_linear_out_features(p) == 3);
    CHECK(ac_packed_linear_has_bias(p) == 1);
    CHECK(ac_packed_linear_free(NULL) == AC_OK);
    ac_packed_linear_free(p);
    ac_tensor_free(bad_bias);
    ac_tensor_free(b1);
    ac_tensor_free(leaf);
    ac_tensor_free(b);
    ac_tensor_free(x);
    ac_tensor_free(w);
}

int main(void)
{
    ac_manual_seed(11);
    RUN(test_every_set_gives_each_row_its_bits);
    RUN(test_a_copy_that_leaks_nothing);
    RUN(test_bad_arguments);
    return TEST_REPORT();
}
