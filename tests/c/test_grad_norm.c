/*
 * test_grad_norm.c - ac_total_norm: the norm of several tensors as one vector
 * against a double reference for orders 1, 2, 3 and inf, tensors longer than
 * one chunk of the kernel, the same bits for any thread count, NaN and inf
 * passed through; ac_clip_grads_with_norm's scaling; and every bad argument
 * of both refused.
 */
#include "ac.h"
#include "test.h"

#include <math.h>
#include <string.h>

/* The reference: every element of both tensors, in double. */
static double reference_norm(AcTensor *const *t, int count, double p)
{
    double total = 0.0;
    int64_t i;
    int k;
    for (k = 0; k < count; k++)
        for (i = 0; i < t[k]->size; i++) {
            double a = fabs((double)t[k]->data[i]);
            if (isinf(p)) total = a > total ? a : total;
            else total += pow(a, p);
        }
    return isinf(p) ? total : pow(total, 1.0 / p);
}

static void test_total_norm_matches_double_reference(void)
{
    const int64_t long_shape[2] = {300, 250}, short_shape[1] = {7};
    AcTensor *t[3];
    const double orders[4] = {1.0, 2.0, 3.0, INFINITY};
    int i;
    t[0] = leaf_randn(long_shape, 2, 1.0f);   /* 75,000 elements: several chunks */
    t[1] = NULL;                              /* skipped, as a parameter without a grad */
    t[2] = leaf_randn(short_shape, 1, 3.0f);
    for (i = 0; i < 4; i++) {
        AcTensor *both[2];
        double norm = -1.0, expected;
        both[0] = t[0];
        both[1] = t[2];
        expected = reference_norm(both, 2, orders[i]);
        CHECK(ac_total_norm((const AcTensor *const *)t, 3, orders[i], &norm) == AC_OK);
        CHECK_NEAR(norm, expected, 1e-12 * expected);
    }
    ac_tensor_free(t[0]);
    ac_tensor_free(t[2]);
}

static void test_total_norm_same_bits_for_any_thread_count(void)
{
    const int64_t shape[1] = {1000003};
    AcTensor *t = leaf_randn(shape, 1, 1.0f);
    double first[4], norm;
    const double orders[4] = {1.0, 2.0, 2.5, INFINITY};
    int threads, i;
    for (threads = 1; threads <= 3; threads++) {
        ac_set_num_threads(threads);
        for (i = 0; i < 4; i++) {
            CHECK(ac_total_norm((const AcTensor *const *)&t, 1, orders[i], &norm) == AC_OK);
            if (threads == 1) first[i] = norm;
            else CHECK(memcmp(&norm, &first[i], sizeof norm) == 0);
        }
    }
    ac_set_num_threads(1);
    ac_tensor_free(t);
}

static void test_total_norm_passes_nan_and_inf_through(void)
{
    const float with_inf[3] = {1.0f, INFINITY, -2.0f}, with_nan[3] = {1.0f, NAN, 5.0f};
    const int64_t n = 3;
    AcTensor *t[2];
    double norm;
    t[0] = ac_tensor_from_data(with_inf, &n, 1);
    t[1] = ac_tensor_from_data(with_nan, &n, 1);
    CHECK(ac_total_norm((const AcTensor *const *)t, 1, 2.0, &norm) == AC_OK && isinf(norm));
    CHECK(ac_total_norm((const AcTensor *const *)t, 1, INFINITY, &norm) == AC_OK && isinf(norm));
    CHECK(ac_total_norm((const AcTensor *const *)t, 2, 2.0, &norm) == AC_OK && isnan(norm));
    CHECK(ac_total_norm((const AcTensor *const *)t, 2, INFINITY, &norm) == AC_OK && isnan(norm));
    ac_tensor_free(t[0]);
    ac_tensor_free(t[1]);
}

static void test_total_norm_refuses_bad_arguments(void)
{
    const int64_t n = 4;
    AcTensor *t = ac_tensor_new(&n, 1), *ids = ac_tensor_new_typed(&n, 1, AC_INT64);
    double norm = 7.0;
    CHECK(ac_total_norm((const AcTensor *const *)&t, 1, 2.0, NULL) == AC_ERR_ARG);
    CHECK(ac_total_norm(NULL, 1, 2.0, &norm) == AC_ERR_ARG);
    CHECK(ac_total_norm((const AcTensor *const *)&t, -1, 2.0, &norm) == AC_ERR_ARG);
    CHECK(ac_total_norm((const AcTensor *const *)&t, 1, 0.0, &norm) == AC_ERR_ARG);
    CHECK(strstr(ac_last_error(), "total_norm: norm_type must be > 0") != NULL);
    CHECK(ac_total_norm((const AcTensor *const *)&t, 1, NAN, &norm) == AC_ERR_ARG);
    CHECK(ac_total_norm((const AcTensor *const *)&ids, 1, 2.0, &norm) < 0);
    CHECK(norm == 7.0);   /* untouched */
    CHECK(ac_total_norm(NULL, 0, 2.0, &norm) == AC_OK && norm == 0.0);
    ac_tensor_free(t);
    ac_tensor_free(ids);
}

static void test_clip_grads_with_norm_scales_in_place_below_one(void)
{
    const int64_t long_shape[1] = {70001}, short_shape[1] = {3};
    AcTensor *t[3], *before;
    const float coef = (float)(2.0 / (8.0 + 1e-6));
    int64_t i;
    t[0] = leaf_randn(long_shape, 1, 1.0f);
    t[1] = NULL;
    t[2] = leaf_randn(short_shape, 1, 1.0f);
    before = ac_tensor_clone(t[0]);
    CHECK(ac_clip_grads_with_norm(t, 3, 8.0, 7.0) == AC_OK);   /* coef above 1: untouched */
    CHECK(memcmp(t[0]->data, before->data, (size_t)before->size * sizeof(float)) == 0);
    CHECK(ac_clip_grads_with_norm(t, 3, 2.0, 8.0) == AC_OK);
    for (i = 0; i < t[0]->size; i++) CHECK(t[0]->data[i] == before->data[i] * coef);
    CHECK(ac_clip_grads_with_norm(t + 2, 1, 1.0, NAN) == AC_OK);   /* as PyTorch's clamp: NaN */
    for (i = 0; i < 3; i++) CHECK(isnan(t[2]->data[i]));
    ac_tensor_free(before);
    ac_tensor_free(t[0]);
    ac_tensor_free(t[2]);
}

static void test_clip_grads_with_norm_refuses_bad_arguments(void)
{
    const int64_t n = 4;
    AcTensor *ids = ac_tensor_new_typed(&n, 1, AC_INT64);
    CHECK(ac_clip_grads_with_norm(NULL, 1, 1.0, 2.0) == AC_ERR_ARG);
    CHECK(ac_clip_grads_with_norm(&ids, -2, 1.0, 2.0) == AC_ERR_ARG);
    CHECK(strstr(ac_last_error(), "clip_grads_with_norm: count -2") != NULL);
    CHECK(ac_clip_grads_with_norm(&ids, 1, 1.0, 2.0) < 0);
    CHECK(ac_clip_grads_with_norm(NULL, 0, 1.0, 2.0) == AC_OK);
    ac_tensor_free(ids);
}

int main(void)
{
    RUN(test_total_norm_matches_double_reference);
    RUN(test_total_norm_same_bits_for_any_thread_count);
    RUN(test_total_norm_passes_nan_and_inf_through);
    RUN(test_total_norm_refuses_bad_arguments);
    RUN(test_clip_grads_with_norm_scales_in_place_below_one);
    RUN(test_clip_grads_with_norm_refuses_bad_arguments);
    return TEST_REPORT();
}
