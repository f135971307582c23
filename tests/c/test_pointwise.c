/*
 * test_pointwise.c - ac_pointwise and ac_pointwise2: gradient checks of every
 * differentiable op against central differences (with broadcasting for the
 * binary ones), a few hand-checked values, the exact integer forms, the bool
 * tests, the same bits for 1 and 3 threads, and bad inputs returning NULL with
 * the right error while the library keeps working.
 */
#include "test.h"

#include <ac.h>
#include <string.h>

typedef struct {
    int op;
    float lo, hi;      /* the inputs are drawn in [lo, hi] */
    float p[3];
} UnaryCase;

static const UnaryCase unary_cases[] = {
    {AC_PW_RSQRT, 0.5f, 3.0f, {0}}, {AC_PW_SQUARE, -2, 2, {0}}, {AC_PW_RECIPROCAL, 0.5f, 3, {0}},
    {AC_PW_ERF, -2, 2, {0}}, {AC_PW_ERFC, -2, 2, {0}}, {AC_PW_ERFINV, -0.8f, 0.8f, {0}},
    {AC_PW_EXPM1, -2, 2, {0}}, {AC_PW_EXP2, -2, 2, {0}}, {AC_PW_LOG2, 0.5f, 3, {0}},
    {AC_PW_LOG10, 0.5f, 3, {0}}, {AC_PW_FRAC, 0.1f, 0.9f, {0}}, {AC_PW_TAN, -1, 1, {0}},
    {AC_PW_ASIN, -0.8f, 0.8f, {0}}, {AC_PW_ACOS, -0.8f, 0.8f, {0}}, {AC_PW_ATAN, -2, 2, {0}},
    {AC_PW_SINH, -2, 2, {0}}, {AC_PW_COSH, -2, 2, {0}}, {AC_PW_ASINH, -2, 2, {0}},
    {AC_PW_ACOSH, 1.5f, 3, {0}}, {AC_PW_ATANH, -0.8f, 0.8f, {0}}, {AC_PW_LOGIT, 0.2f, 0.8f, {-1}},
    {AC_PW_SINC, 0.2f, 2, {0}}, {AC_PW_LGAMMA, 0.5f, 4, {0}}, {AC_PW_DIGAMMA, 0.5f, 4, {0}},
    {AC_PW_NAN_TO_NUM, -2, 2, {0, 1, -1}}, {AC_PW_SILU, -3, 3, {0}},
    {AC_PW_LEAKY_RELU, 0.1f, 3, {0.2f}}, {AC_PW_SOFTPLUS, -3, 3, {2.0f, 20.0f}},
    {AC_PW_ELU, -3, -0.1f, {1.5f, 1.2f, 0.7f}}, {AC_PW_GELU_TANH, -3, 3, {0}},
    {AC_PW_HARDTANH, -0.9f, 0.9f, {-1, 1}}, {AC_PW_MISH, -3, 3, {0}},
    {AC_PW_HARDSWISH, -2.5f, 2.5f, {0}}, {AC_PW_HARDSIGMOID, -2.5f, 2.5f, {0}},
    {AC_PW_HARDSHRINK, 0.6f, 2, {0.5f}}, {AC_PW_SOFTSHRINK, 0.6f, 2, {0.5f}},
    {AC_PW_TANHSHRINK, -2, 2, {0}}, {AC_PW_SOFTSIGN, 0.1f, 2, {0}}, {AC_PW_LOGSIGMOID, -3, 3, {0}},
    {AC_PW_THRESHOLD, 0.6f, 2, {0.5f, -3}},
};

static AcTensor *leaf_in(float lo, float hi, const int64_t *shape, int ndim)
{
    AcTensor *t = ac_rand(shape, ndim);
    int64_t i;
    for (i = 0; t && i < t->size; i++) t->data[i] = lo + (hi - lo) * t->data[i];
    ac_tensor_set_requires_grad(t, 1);
    return t;
}

static AcTensor *fn_unary(AcTensor *const *in, int n, void *user)
{
    const UnaryCase *c = user;
    (void)n;
    return ac_pointwise(in[0], c->op, c->p[0], c->p[1], c->p[2]);
}

static void test_unary_gradients(void)
{
    const int64_t shape[2] = {3, 5};
    size_t k;
    for (k = 0; k < sizeof unary_cases / sizeof *unary_cases; k++) {
        AcCheckpoint cp = ac_mem_checkpoint();
        const UnaryCase *c = &unary_cases[k];
        AcTensor *x = leaf_in(c->lo, c->hi, shape, 2);
        float err = 0;
        int rc = ac_gradient_check(fn_unary, &x, 1, (void *)c, 1e-3f, 2e-2f, 2e-2f, &err);
        if (rc != AC_OK) fprintf(stderr, "op %d: %s\n", c->op, ac_last_error());
        CHECK(rc == AC_OK);
        ac_mem_restore(cp);
    }
}

static AcTensor *fn_binary(AcTensor *const *in, int n, void *user)
{
    (void)n;
    return ac_pointwise2(in[0], in[1], *(const int *)user);
}

static void test_binary_gradients_broadcast(void)
{
    const int ops[] = {AC_PW2_ATAN2, AC_PW2_HYPOT, AC_PW2_FMOD, AC_PW2_XLOGY, AC_PW2_LOGADDEXP,
                       AC_PW2_LOGADDEXP2, AC_PW2_MAXIMUM, AC_PW2_MINIMUM, AC_PW2_FMAX, AC_PW2_FMIN,
                       AC_PW2_CLAMP_MIN, AC_PW2_CLAMP_MAX, AC_PW2_COPYSIGN};
    const int64_t sa[3] = {2, 1, 4}, sb[2] = {3, 1};
    size_t k;
    for (k = 0; k < sizeof ops / sizeof *ops; k++) {
        AcCheckpoint cp = ac_mem_checkpoint();
        AcTensor *in[2];
        float err = 0;
        int rc;
        in[0] = leaf_in(0.6f, 2.0f, sa, 3);
        in[1] = leaf_in(2.5f, 4.0f, sb, 2);   /* apart from in[0]: no ties, no kinks */
        if (ops[k] == AC_PW2_FMOD) in[1] = leaf_in(0.7f, 0.9f, sb, 2), in[0] = leaf_in(1.0f, 1.3f, sa, 3);
        rc = ac_gradient_check(fn_binary, in, 2, (void *)&ops[k], 1e-3f, 2e-2f, 2e-2f, &err);
        if (rc != AC_OK) fprintf(stderr, "op2 %d: %s\n", ops[k], ac_last_error());
        CHECK(rc == AC_OK);
        ac_mem_restore(cp);
    }
}

static void test_values(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float xv[6] = {-2.0f, -0.5f, 0.0f, 0.5f, 2.0f, 10.0f};
    const int64_t shape[1] = {6};
    AcTensor *x = ac_tensor_from_data(xv, shape, 1), *y;
    int i;
    y = ac_pointwise(x, AC_PW_SILU, 0, 0, 0);
    for (i = 0; i < 6; i++) CHECK_NEAR(y->data[i], xv[i] / (1.0 + exp(-xv[i])), 1e-6 * (1 + fabs(xv[i])));
    y = ac_pointwise(x, AC_PW_SOFTPLUS, 1, 20, 0);
    for (i = 0; i < 6; i++) CHECK_NEAR(y->data[i], log1p(exp(xv[i])), 1e-6);
    y = ac_pointwise(x, AC_PW_HARDTANH, 0, 6, 0);   /* relu6 */
    CHECK(y->data[0] == 0.0f && y->data[3] == 0.5f && y->data[5] == 6.0f);
    y = ac_pointwise(x, AC_PW_ROUND, 0, 0, 0);
    CHECK(y->data[1] == 0.0f && y->data[3] == 0.0f && y->data[4] == 2.0f);
    y = ac_pointwise(x, AC_PW_ISFINITE, 0, 0, 0);
    CHECK(y->dtype == AC_BOOL && !y->requires_grad);
    ac_mem_restore(cp);
}

static void test_integers_exact(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t big = (int64_t)1 << 62, shape[1] = {4};
    const int64_t av[4] = {big + 1, -7, 0, 3}, bv[4] = {big, -8, 0, 5};
    const uint8_t uv[4] = {200, 1, 0, 17};
    AcTensor *a = ac_tensor_from_typed(av, shape, 1, AC_INT64);
    AcTensor *b = ac_tensor_from_typed(bv, shape, 1, AC_INT64);
    AcTensor *u = ac_tensor_from_typed(uv, shape, 1, AC_UINT8), *y;
    const int64_t *d;
    y = ac_pointwise2(a, b, AC_PW2_MAXIMUM);
    CHECK(y && y->dtype == AC_INT64);
    d = (const int64_t *)(const void *)y->data;
    CHECK(d[0] == big + 1 && d[1] == -7 && d[2] == 0 && d[3] == 5);
    y = ac_pointwise(a, AC_PW_SIGN, 0, 0, 0);
    d = (const int64_t *)(const void *)y->data;
    CHECK(y->dtype == AC_INT64 && d[0] == 1 && d[1] == -1 && d[2] == 0);
    y = ac_pointwise(u, AC_PW_SQUARE, 0, 0, 0);   /* uint8 wraps: 200^2 = 40000 = 64 mod 256 */
    CHECK(y->dtype == AC_UINT8 && ((const uint8_t *)(const void *)y->data)[0] == 64);
    y = ac_pointwise2(a, u, AC_PW2_MINIMUM);
    CHECK(y && y->dtype == AC_INT64);
    CHECK(ac_pointwise2(a, b, AC_PW2_FMOD) == NULL && ac_last_error_code() == AC_ERR_ARG);  /* 0 % 0 */
    CHECK(ac_pointwise(a, AC_PW_ERF, 0, 0, 0) == NULL && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(ac_pointwise2(a, b, AC_PW2_ATAN2) == NULL && ac_last_error_code() == AC_ERR_DTYPE);
    ac_mem_restore(cp);
}

static void test_same_bits_for_any_thread_count(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t shape[1] = {100003};
    AcTensor *x = ac_randn(shape, 1), *one, *three;
    const int ops[] = {AC_PW_SILU, AC_PW_MISH, AC_PW_GELU_TANH, AC_PW_ERF, AC_PW_SOFTPLUS};
    size_t k;
    for (k = 0; k < sizeof ops / sizeof *ops; k++) {
        ac_set_num_threads(1);
        one = ac_pointwise(x, ops[k], 1, 20, 0);
        ac_set_num_threads(3);
        three = ac_pointwise(x, ops[k], 1, 20, 0);
        CHECK(one && three && memcmp(one->data, three->data, (size_t)x->size * sizeof(float)) == 0);
    }
    ac_set_num_threads(1);
    ac_mem_restore(cp);
}

static void test_bad_inputs(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t s3[1] = {3}, s4[1] = {4};
    AcTensor *a = ac_full(s3, 1, 1.0f), *b = ac_full(s4, 1, 1.0f), *g = leaf_in(0, 1, s3, 1);
    CHECK(ac_pointwise(NULL, AC_PW_ERF, 0, 0, 0) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_pointwise(a, -1, 0, 0, 0) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_pointwise(a, AC_PW_COUNT, 0, 0, 0) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_pointwise(a, AC_PW_SOFTPLUS, 0, 20, 0) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_pointwise2(a, NULL, AC_PW2_HYPOT) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_pointwise2(a, a, AC_PW2_COUNT) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_pointwise2(a, b, AC_PW2_HYPOT) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(ac_pointwise2(g, a, AC_PW2_HEAVISIDE) == NULL && ac_last_error_code() == AC_ERR_STATE);
    CHECK(strstr(ac_last_error(), "heaviside") != NULL);
    CHECK(ac_pointwise(a, AC_PW_ERF, 0, 0, 0) != NULL);   /* still usable */
    ac_mem_restore(cp);
}

int main(void)
{
    ac_manual_seed(7);
    RUN(test_unary_gradients);
    RUN(test_binary_gradients_broadcast);
    RUN(test_values);
    RUN(test_integers_exact);
    RUN(test_same_bits_for_any_thread_count);
    RUN(test_bad_inputs);
    return TEST_REPORT();
}
