/*
 * test_order.c - the order statistics, scans and small linear algebra from C
 * (ops/order.c, ops/scan.c, ops/linalg.c): int64 ordered exactly past 2^53,
 * kthvalue/median/mode picks and their gradient, unique with inverse and
 * counts, searchsorted, bincount, prod/cumprod gradients with zeros, det and
 * inv, matrix norms from singular values; every entry point's bad arguments
 * refused, and no memory left behind in a scope.
 */
#include "ac.h"
#include "test.h"

#include <string.h>

static AcTensor *ints(const int64_t *values, int64_t n)
{
    return ac_tensor_from_typed(values, &n, 1, AC_INT64);
}

static AcTensor *floats(const float *values, const int64_t *shape, int ndim)
{
    return ac_tensor_from_data(values, shape, ndim);
}

static int64_t at64(const AcTensor *t, int64_t i) { return ((const int64_t *)(const void *)t->data)[i]; }

static void test_int64_order_is_exact(void)
{
    const int64_t big = (int64_t)1 << 60;
    const int64_t v[5] = {big + 3, big + 1, big + 2, big + 1, -big};
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *x = ints(v, 5), *idx = NULL, *inv = NULL, *counts = NULL, *k, *u, *s, *sorted, *m;
    const int64_t sv[5] = {-big, big + 1, big + 1, big + 2, big + 3};
    k = ac_kthvalue(x, 2, 0, 0, &idx);
    CHECK(k && k->dtype == AC_INT64 && at64(k, 0) == big + 1 && (at64(idx, 0) == 1 || at64(idx, 0) == 3));
    m = ac_mode(x, 0, 0, &idx);
    CHECK(m && at64(m, 0) == big + 1 && at64(idx, 0) == 3);
    u = ac_unique(x, 0, &inv, &counts);
    CHECK(u && u->size == 4 && at64(u, 0) == -big && at64(u, 3) == big + 3);
    CHECK(inv && at64(inv, 0) == 3 && at64(inv, 4) == 0 && counts && at64(counts, 1) == 2);
    sorted = ints(sv, 5);
    s = ac_searchsorted(sorted, x, 1);
    CHECK(s && at64(s, 0) == 5 && at64(s, 1) == 3 && at64(s, 4) == 1);
    CHECK(ac_mem_restore(cp) == AC_OK);
}

static void test_median_picks_and_gradient(void)
{
    const int64_t shape[2] = {2, 3};
    const float v[6] = {3.0f, 1.0f, 2.0f, 5.0f, NAN, 4.0f};
    AcTensor *x = floats(v, shape, 2), *idx = NULL, *med, *nanmed, *idx2 = NULL, *loss;
    AcCheckpoint cp = ac_mem_checkpoint();     /* x at root: a leaf outlives the step */
    ac_tensor_set_requires_grad(x, 1);
    med = ac_median_dim(x, 1, 0, 0, &idx);
    nanmed = ac_median_dim(x, -1, 1, 1, &idx2);
    CHECK(med && med->data[0] == 2.0f && isnan(med->data[1]) && at64(idx, 1) == 1);
    CHECK(nanmed && nanmed->ndim == 2 && nanmed->data[1] == 4.0f && at64(idx2, 1) == 2);
    loss = ac_sum(nanmed, NULL, 0, 0);
    CHECK(loss && ac_backward(loss) == AC_OK);
    CHECK(x->grad && x->grad->data[2] == 1.0f && x->grad->data[5] == 1.0f && x->grad->data[0] == 0.0f);
    CHECK(ac_mem_restore(cp) == AC_OK);
    ac_tensor_free(x);
}

static void test_prod_and_cumprod_gradients_with_zeros(void)
{
    const int64_t shape[1] = {4};
    const float v[4] = {2.0f, 0.0f, 3.0f, 5.0f};
    AcTensor *x = floats(v, shape, 1), *p, *c, *loss;
    AcCheckpoint cp = ac_mem_checkpoint();
    ac_tensor_set_requires_grad(x, 1);
    p = ac_prod(x, 0, 0);
    CHECK(p && p->data[0] == 0.0f);
    CHECK(p && ac_backward(p) == AC_OK);
    CHECK(x->grad && x->grad->data[1] == 30.0f && x->grad->data[0] == 0.0f);
    ac_tensor_zero_grad(x);
    c = ac_cumprod(x, 0);
    loss = ac_sum(c, NULL, 0, 0);
    CHECK(loss && ac_backward(loss) == AC_OK);
    /* d/dx1 of 2 + 2 x1 + 2 x1 x2 + 2 x1 x2 x3 at x = (2, 0, 3, 5) = 2 + 6 + 30 */
    CHECK(x->grad && x->grad->data[1] == 38.0f && x->grad->data[3] == 0.0f);
    CHECK(ac_mem_restore(cp) == AC_OK);
    ac_tensor_free(x);
}

static void test_det_inv_and_norms(void)
{
    const int64_t shape[2] = {2, 2};
    const float v[4] = {4.0f, 7.0f, 2.0f, 6.0f};
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *a = floats(v, shape, 2), *d = ac_det(a), *inv = ac_inv(a), *nuc = ac_svd_norm(a, 0);
    AcTensor *two = ac_svd_norm(a, 1), *zero = ac_tensor_new(shape, 2);
    CHECK_NEAR(d->data[0], 10.0, 1e-5);
    CHECK_NEAR(inv->data[0], 0.6, 1e-6);
    CHECK_NEAR(inv->data[1], -0.7, 1e-6);
    /* A^T A has trace 105 and determinant 100: s1^2 = (105 + sqrt(10625)) / 2, s1 s2 = 10 */
    CHECK_NEAR(two->data[0], sqrt((105.0 + sqrt(10625.0)) / 2.0), 1e-5);
    CHECK_NEAR(nuc->data[0], sqrt(125.0), 1e-5);
    CHECK(ac_inv(zero) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_cholesky(zero) == NULL && ac_last_error_code() == AC_ERR_ARG);
    {
        AcTensor *e = ac_matrix_exp(zero), *w = ac_eigvalsh(a);   /* exp(0) = I */
        CHECK(e && e->data[0] == 1.0f && e->data[1] == 0.0f && e->data[3] == 1.0f);
        CHECK(w && w->size == 2 && w->data[0] <= w->data[1]);
    }
    {
        AcTensor *s = ac_svdvals(a);
        CHECK(s && s->size == 2 && s->data[0] >= s->data[1]);
        CHECK_NEAR((double)s->data[0] * s->data[1], 10.0, 1e-4);
    }
    CHECK(ac_mem_restore(cp) == AC_OK);
}

static void test_counts_and_histograms(void)
{
    const int64_t v[5] = {1, 3, 3, 0, 3}, shape[1] = {5};
    const float f[5] = {0.0f, 0.5f, 1.0f, 2.0f, 3.0f};
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *x = ints(v, 5), *b = ac_bincount(x, NULL, 6), *h = ac_histc(floats(f, shape, 1), 3, 0.0, 3.0);
    CHECK(b && b->size == 6 && at64(b, 3) == 3 && at64(b, 2) == 0);
    CHECK(h && h->data[0] == 2.0f && h->data[1] == 1.0f && h->data[2] == 2.0f);
    CHECK(ac_mem_restore(cp) == AC_OK);
}

static void test_bad_arguments_are_refused(void)
{
    const int64_t shape[2] = {2, 3}, neg[2] = {1, -1};
    AcTensor *x = ac_tensor_new(shape, 2), *idx = NULL, *n = ints(neg, 2);
    AcMemStats before, after;
    ac_memory_stats(&before);
    CHECK(ac_kthvalue(NULL, 1, 0, 0, &idx) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_kthvalue(x, 1, 0, 0, NULL) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_kthvalue(x, 4, 1, 0, &idx) == NULL && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(ac_median_dim(x, 2, 0, 0, &idx) == NULL && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(ac_mode(x, -3, 0, &idx) == NULL && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(ac_cummax(x, 0, 1, NULL) == NULL);
    CHECK(ac_unique(NULL, 0, NULL, NULL) == NULL);
    CHECK(ac_unique_dim(x, 5, 0, NULL, NULL) == NULL && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(ac_searchsorted(x, n, 0) == NULL && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(ac_bincount(n, NULL, 0) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_bincount(x, NULL, 0) == NULL && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(ac_histc(x, 0, 0.0, 1.0) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_histc(x, 3, 2.0, 1.0) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_prod(NULL, 0, 0) == NULL && ac_prod(x, 2, 0) == NULL);
    CHECK(ac_cumprod(x, -3) == NULL && ac_logcumsumexp(n, 0) == NULL);
    CHECK(ac_det(x) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(ac_inv(NULL) == NULL && ac_svd_norm(x, 3) == NULL && ac_svd_norm(n, 0) == NULL);
    CHECK(ac_cholesky(x) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(ac_svdvals(n) == NULL && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(ac_matrix_exp(x) == NULL && ac_eigvalsh(NULL) == NULL);
    ac_memory_stats(&after);
    CHECK(after.live_tensors == before.live_tensors);
    ac_tensor_free(x);
    ac_tensor_free(n);
}

int main(void)
{
    RUN(test_int64_order_is_exact);
    RUN(test_median_picks_and_gradient);
    RUN(test_prod_and_cumprod_gradients_with_zeros);
    RUN(test_det_inv_and_norms);
    RUN(test_counts_and_histograms);
    RUN(test_bad_arguments_are_refused);
    return TEST_REPORT();
}
