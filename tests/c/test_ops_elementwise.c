/*
 * test_ops_elementwise.c - the elementwise, activation and loss ops of libac:
 * forward values on small hand-checked inputs, broadcasting, backward through
 * ac_backward and ac_gradient_check, determinism across thread counts, and
 * every bad input returning NULL with the right error while the library keeps
 * working.
 */
#include "test.h"

#include <ac.h>
#include <string.h>

static AcTensor *make(const float *data, const int64_t *shape, int ndim)
{
    return ac_tensor_from_data(data, shape, ndim);
}

static AcTensor *leaf(const float *data, const int64_t *shape, int ndim)
{
    AcTensor *t = make(data, shape, ndim);
    ac_tensor_set_requires_grad(t, 1);
    return t;
}

static void check_values(const AcTensor *t, const float *expected, int64_t n, double tol)
{
    int64_t i;
    CHECK(t != NULL);
    if (!t) return;
    CHECK(t->size == n);
    for (i = 0; i < n && i < t->size; i++) CHECK_NEAR(t->data[i], expected[i], tol);
}

static int shape_is(const AcTensor *t, const int64_t *shape, int ndim)
{
    int i;
    if (!t || t->ndim != ndim) return 0;
    for (i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i]) return 0;
    return 1;
}

/* ---- forward values ------------------------------------------------------ */

static void test_binary_same_shape(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float av[4] = {1, 2, 3, 4}, bv[4] = {2, -1, 0.5f, 2};
    const int64_t shape[2] = {2, 2};
    AcTensor *a = make(av, shape, 2), *b = make(bv, shape, 2);
    const float add[4] = {3, 1, 3.5f, 6}, sub[4] = {-1, 3, 2.5f, 2}, mul[4] = {2, -2, 1.5f, 8};
    const float div[4] = {0.5f, -2, 6, 2}, pw[4] = {1, 0.5f, 1.7320508f, 16};
    check_values(ac_add(a, b), add, 4, 0);
    check_values(ac_sub(a, b), sub, 4, 0);
    check_values(ac_mul(a, b), mul, 4, 0);
    check_values(ac_div(a, b), div, 4, 0);
    check_values(ac_pow(a, b), pw, 4, 1e-6);
    CHECK(shape_is(ac_add(a, b), shape, 2));
    ac_mem_restore(cp);
}

static void test_broadcasting(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t s314[3] = {3, 1, 4}, s24[2] = {2, 4}, s31[2] = {3, 1}, s14[2] = {1, 4};
    const int64_t s324[3] = {3, 2, 4}, s34[2] = {3, 4};
    float av[12], bv[8], expected[24];
    const float col[3] = {1, 2, 3}, row[4] = {10, 20, 30, 40}, five = 5;
    const float outer[12] = {10, 20, 30, 40, 20, 40, 60, 80, 30, 60, 90, 120};
    const float plus5[3] = {6, 7, 8}, five_minus[3] = {4, 3, 2};
    int i, j, k;
    AcTensor *a, *b, *out, *c, *r, *s;
    for (i = 0; i < 12; i++) av[i] = (float)i;
    for (i = 0; i < 8; i++) bv[i] = 100.0f * (float)(i + 1);
    a = make(av, s314, 3);
    b = make(bv, s24, 2);
    for (i = 0; i < 3; i++)
        for (j = 0; j < 2; j++)
            for (k = 0; k < 4; k++) expected[(i * 2 + j) * 4 + k] = av[i * 4 + k] - bv[j * 4 + k];
    out = ac_sub(a, b);
    CHECK(shape_is(out, s324, 3));
    check_values(out, expected, 24, 0);

    c = make(col, s31, 2);
    r = make(row, s14, 2);
    out = ac_mul(c, r);
    CHECK(shape_is(out, s34, 2));
    check_values(out, outer, 12, 0);

    s = make(&five, NULL, 0);   /* a 0-d operand on either side */
    check_values(ac_add(c, s), plus5, 3, 0);
    check_values(ac_sub(s, c), five_minus, 3, 0);
    CHECK(shape_is(ac_add(s, c), s31, 2));
    CHECK(ac_add(s, s)->ndim == 0 && ac_add(s, s)->data[0] == 10.0f);
    ac_mem_restore(cp);
}

static void test_scalar_and_unary(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float av[4] = {-2, -0.5f, 0.5f, 4};
    const int64_t shape[1] = {4};
    AcTensor *a = make(av, shape, 1);
    const float add_s[4] = {1, 2.5f, 3.5f, 7}, mul_s[4] = {-4, -1, 1, 8};
    const float rsub[4] = {3, 1.5f, 0.5f, -3}, div_s[4] = {-1, -0.25f, 0.25f, 2};
    const float rdiv[4] = {-0.5f, -2, 2, 0.25f}, pow2[4] = {4, 0.25f, 0.25f, 16};
    const float neg[4] = {2, 0.5f, -0.5f, -4}, absv[4] = {2, 0.5f, 0.5f, 4};
    const float pos[3] = {0.25f, 1, 4}, sq[3] = {0.5f, 1, 2}, lg[3] = {-1.3862944f, 0, 1.3862944f};
    const int64_t s3[1] = {3};
    AcTensor *p = make(pos, s3, 1);
    int i;
    check_values(ac_add_scalar(a, 3), add_s, 4, 0);
    check_values(ac_mul_scalar(a, 2), mul_s, 4, 0);
    check_values(ac_rsub_scalar(a, 1), rsub, 4, 0);
    check_values(ac_div_scalar(a, 2), div_s, 4, 0);
    check_values(ac_rdiv_scalar(a, 1), rdiv, 4, 0);
    check_values(ac_pow_scalar(a, 2), pow2, 4, 1e-6);
    check_values(ac_neg(a), neg, 4, 0);
    check_values(ac_abs(a), absv, 4, 0);
    check_values(ac_sqrt(p), sq, 3, 1e-7);
    check_values(ac_log(p), lg, 3, 1e-6);
    for (i = 0; i < 4; i++) {
        CHECK_NEAR(ac_exp(a)->data[i], exp(av[i]), 1e-5 * exp(av[i]));
        CHECK_NEAR(ac_sin(a)->data[i], sin(av[i]), 1e-6);
        CHECK_NEAR(ac_cos(a)->data[i], cos(av[i]), 1e-6);
    }
    ac_mem_restore(cp);
}

static void test_clamp(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float av[5] = {-3, -1, 0, 1, 3};
    const int64_t shape[1] = {5};
    AcTensor *a = make(av, shape, 1), *nan_in, *out;
    const float both[5] = {-1, -1, 0, 1, 1}, lo_only[5] = {0, 0, 0, 1, 3};
    const float hi_only[5] = {-3, -1, 0, 0.5f, 0.5f}, crossed[5] = {-2, -2, -2, -2, -2};
    const float with_nan[2] = {NAN, 5};
    const int64_t s2[1] = {2};
    check_values(ac_clamp(a, -1, 1), both, 5, 0);
    check_values(ac_clamp(a, 0, INFINITY), lo_only, 5, 0);
    check_values(ac_clamp(a, -INFINITY, 0.5f), hi_only, 5, 0);
    check_values(ac_clamp(a, 2, -2), crossed, 5, 0);   /* lo > hi gives hi, as PyTorch */
    nan_in = make(with_nan, s2, 1);
    out = ac_clamp(nan_in, -1, 1);
    CHECK(out && isnan(out->data[0]) && out->data[1] == 1.0f);
    ac_mem_restore(cp);
}

static void test_activations(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float av[5] = {-100, -1, 0, 1, 100};
    const int64_t shape[1] = {5};
    AcTensor *a = make(av, shape, 1);
    const float relu[5] = {0, 0, 0, 1, 100};
    const float sig[5] = {0, 0.26894142f, 0.5f, 0.73105858f, 1};
    const float tnh[5] = {-1, -0.76159416f, 0, 0.76159416f, 1};
    const float gelu[5] = {0, -0.15865525f, 0, 0.84134475f, 100};
    check_values(ac_relu(a), relu, 5, 0);
    check_values(ac_sigmoid(a), sig, 5, 1e-7);
    check_values(ac_tanh(a), tnh, 5, 1e-7);
    check_values(ac_gelu(a), gelu, 5, 1e-6);
    ac_mem_restore(cp);
}

static void test_softmax(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float av[6] = {1, 2, 3, 1e4f, 1e4f, -1e4f};
    const int64_t shape[2] = {2, 3};
    AcTensor *a = make(av, shape, 2);
    double z = exp(1.0) + exp(2.0) + exp(3.0);
    const float rows[6] = {(float)(exp(1.0) / z), (float)(exp(2.0) / z), (float)(exp(3.0) / z),
                           0.5f, 0.5f, 0};
    const float log_rows[6] = {(float)(1 - log(z)), (float)(2 - log(z)), (float)(3 - log(z)),
                               -0.69314718f, -0.69314718f, -2e4f - 0.69314718f};
    const float cols[6] = {0, 0, 1, 1, 1, 0};
    AcTensor *s = ac_softmax(a, 1), *ls = ac_log_softmax(a, -1), *sc = ac_softmax(a, 0);
    check_values(s, rows, 6, 1e-6);
    check_values(ls, log_rows, 6, 4e-3);
    check_values(sc, cols, 6, 1e-6);
    CHECK(ls && isfinite(ls->data[5]));
    ac_mem_restore(cp);
}

static void test_losses_forward(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float xv[4] = {1, 2, 3, 4}, tv[4] = {0, 2, 5, 3};
    const float pv[2] = {0.25f, 0.75f}, yv[2] = {0, 1}, zero_one[2] = {0, 1};
    const float logits[6] = {1, 2, 3, 0, 0, 0}, targets[2] = {2, 0};
    const int64_t s4[1] = {4}, s2[1] = {2}, s23[2] = {2, 3}, s3[1] = {3};
    const float per[4] = {1, 0, 4, 1};
    double lse0 = log(exp(1.0) + exp(2.0) + exp(3.0)), l0 = lse0 - 3, l1 = log(3.0);
    double smooth0 = 0.9 * l0 + 0.1 * (lse0 - 2), smooth1 = l1;
    AcTensor *x = make(xv, s4, 1), *t = make(tv, s4, 1), *ce_none, *bl;
    AcTensor *p = make(pv, s2, 1), *y = make(yv, s2, 1), *lg = make(logits, s23, 2);
    AcTensor *tg = make(targets, s2, 1), *one_row = make(logits, s3, 1), *hard = make(zero_one, s2, 1);
    float two = 2;
    AcTensor *one_target = make(&two, NULL, 0);

    check_values(ac_mse_loss(x, t, AC_REDUCTION_NONE), per, 4, 0);
    CHECK_NEAR(ac_mse_loss(x, t, AC_REDUCTION_MEAN)->data[0], 1.5, 1e-7);
    CHECK_NEAR(ac_mse_loss(x, t, AC_REDUCTION_SUM)->data[0], 6, 1e-7);
    CHECK(ac_mse_loss(x, t, AC_REDUCTION_SUM)->ndim == 0);

    ce_none = ac_cross_entropy(lg, tg, AC_REDUCTION_NONE, 0);
    CHECK(shape_is(ce_none, s2, 1));
    CHECK_NEAR(ce_none->data[0], l0, 1e-6);
    CHECK_NEAR(ce_none->data[1], l1, 1e-6);
    CHECK_NEAR(ac_cross_entropy(lg, tg, AC_REDUCTION_MEAN, 0)->data[0], (l0 + l1) / 2, 1e-6);
    CHECK_NEAR(ac_cross_entropy(lg, tg, AC_REDUCTION_SUM, 0)->data[0], l0 + l1, 1e-6);
    CHECK_NEAR(ac_cross_entropy(lg, tg, AC_REDUCTION_SUM, 0.1f)->data[0], smooth0 + smooth1, 1e-6);
    CHECK_NEAR(ac_cross_entropy(one_row, one_target, AC_REDUCTION_MEAN, 0)->data[0], l0, 1e-6);
    CHECK(ac_cross_entropy(one_row, one_target, AC_REDUCTION_NONE, 0)->ndim == 0);

    CHECK_NEAR(ac_binary_cross_entropy(p, y, AC_REDUCTION_MEAN)->data[0], -log(0.75), 1e-6);
    /* a probability of exactly 0 or 1 gives the clamped log of -100, as PyTorch */
    CHECK_NEAR(ac_binary_cross_entropy(hard, y, AC_REDUCTION_SUM)->data[0], 0, 1e-7);
    CHECK_NEAR(ac_binary_cross_entropy(hard, make(pv, s2, 1), AC_REDUCTION_SUM)->data[0],
               0.25 * 100 + 0.25 * 100, 1e-4);
    bl = ac_bce_with_logits(x, make(per, s4, 1), AC_REDUCTION_NONE);
    CHECK(bl != NULL);
    if (bl) {
        int i;
        for (i = 0; i < 4; i++)
            CHECK_NEAR(bl->data[i], log(1 + exp(xv[i])) - xv[i] * per[i], 1e-5);
    }
    {   /* logits of 1e4 stay finite */
        const float big[2] = {1e4f, -1e4f};
        AcTensor *b = ac_bce_with_logits(make(big, s2, 1), y, AC_REDUCTION_NONE);
        CHECK(b && b->data[0] == 1e4f && b->data[1] == 1e4f);
    }
    ac_mem_restore(cp);
}

/* ---- backward ------------------------------------------------------------ */

static void test_mul_backward_broadcast(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float av[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {10, 20, 30};
    const int64_t s23[2] = {2, 3}, s3[1] = {3};
    AcTensor *a = leaf(av, s23, 2), *b = leaf(bv, s3, 1);
    const float ga[6] = {10, 20, 30, 10, 20, 30}, gb[3] = {5, 7, 9};
    CHECK(ac_backward(ac_sum(ac_mul(a, b), NULL, 0, 0)) == AC_OK);
    check_values(a->grad, ga, 6, 0);
    check_values(b->grad, gb, 3, 0);
    CHECK(shape_is(b->grad, s3, 1));
    ac_mem_restore(cp);
}

static void test_div_pow_backward(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float av[3] = {0, 1, 2}, bv[3] = {2, 3, 0.5f};
    const int64_t s3[1] = {3};
    AcTensor *a = leaf(av, s3, 1), *b = leaf(bv, s3, 1);
    /* d/da a^b = b a^(b-1); d/db = a^b log a, taken as 0 at a == 0 as PyTorch does */
    const float ga[3] = {0, 3, 0.5f / 1.4142135f}, gb[3] = {0, 0, 1.4142135f * 0.6931472f};
    const float da[3] = {0.5f, 1.0f / 3, 2}, db[3] = {0, -1.0f / 9, -8};
    CHECK(ac_backward(ac_sum(ac_pow(a, b), NULL, 0, 0)) == AC_OK);
    check_values(a->grad, ga, 3, 1e-6);
    check_values(b->grad, gb, 3, 1e-6);
    ac_tensor_zero_grad(a);
    ac_tensor_zero_grad(b);
    CHECK(ac_backward(ac_sum(ac_div(a, b), NULL, 0, 0)) == AC_OK);
    check_values(a->grad, da, 3, 1e-6);
    check_values(b->grad, db, 3, 1e-6);
    ac_mem_restore(cp);
}

static void test_clamp_abs_relu_backward(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float av[5] = {-2, -1, 0, 1, 2};
    const int64_t s5[1] = {5};
    AcTensor *a = leaf(av, s5, 1);
    const float g_clamp[5] = {0, 1, 1, 1, 0}, g_abs[5] = {-1, -1, 0, 1, 1}, g_relu[5] = {0, 0, 0, 1, 1};
    CHECK(ac_backward(ac_sum(ac_clamp(a, -1, 1), NULL, 0, 0)) == AC_OK);
    check_values(a->grad, g_clamp, 5, 0);
    ac_tensor_zero_grad(a);
    CHECK(ac_backward(ac_sum(ac_abs(a), NULL, 0, 0)) == AC_OK);
    check_values(a->grad, g_abs, 5, 0);
    ac_tensor_zero_grad(a);
    CHECK(ac_backward(ac_sum(ac_relu(a), NULL, 0, 0)) == AC_OK);
    check_values(a->grad, g_relu, 5, 0);
    ac_mem_restore(cp);
}

static void test_cross_entropy_backward(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float logits[6] = {1, 2, 3, 0, 0, 0}, targets[2] = {2, 0};
    const int64_t s23[2] = {2, 3}, s2[1] = {2};
    AcTensor *x = leaf(logits, s23, 2), *t = make(targets, s2, 1);
    double z = exp(1.0) + exp(2.0) + exp(3.0);
    float expected[6];
    int c;
    for (c = 0; c < 3; c++) {
        expected[c] = (float)((exp(c + 1.0) / z - (c == 2)) / 2);
        expected[3 + c] = (float)((1.0 / 3 - (c == 0)) / 2);
    }
    CHECK(ac_backward(ac_cross_entropy(x, t, AC_REDUCTION_MEAN, 0)) == AC_OK);
    check_values(x->grad, expected, 6, 1e-6);
    ac_mem_restore(cp);
}

/* Functions for ac_gradient_check: inputs -> one op. */
static AcTensor *fn_div(AcTensor *const *in, int n, void *user)
{
    (void)n, (void)user;
    return ac_div(in[0], in[1]);
}
static AcTensor *fn_pow(AcTensor *const *in, int n, void *user)
{
    (void)n, (void)user;
    return ac_pow(in[0], in[1]);
}
static AcTensor *fn_log_softmax0(AcTensor *const *in, int n, void *user)
{
    (void)n, (void)user;
    return ac_log_softmax(in[0], 0);
}
static AcTensor *fn_softmax1(AcTensor *const *in, int n, void *user)
{
    (void)n, (void)user;
    return ac_softmax(in[0], 1);
}
static AcTensor *fn_gelu(AcTensor *const *in, int n, void *user)
{
    (void)n, (void)user;
    return ac_gelu(in[0]);
}
static AcTensor *fn_cross_entropy(AcTensor *const *in, int n, void *user)
{
    (void)n;
    return ac_cross_entropy(in[0], (const AcTensor *)user, AC_REDUCTION_SUM, 0.2f);
}
static AcTensor *fn_bce_logits(AcTensor *const *in, int n, void *user)
{
    (void)n, (void)user;
    return ac_bce_with_logits(in[0], in[1], AC_REDUCTION_MEAN);
}

static void test_gradient_check(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t s314[3] = {3, 1, 4}, s24[2] = {2, 4}, s34[2] = {3, 4};
    const float targets[3] = {0, 3, 1};
    const int64_t s3[1] = {3};
    AcTensor *in[2], *target;
    float err;
    ac_manual_seed(7);
    in[0] = ac_add_scalar(ac_rand(s314, 3), 0.5f);
    in[1] = ac_add_scalar(ac_rand(s24, 2), 0.5f);
    ac_tensor_set_requires_grad(in[0], 1);
    ac_tensor_set_requires_grad(in[1], 1);
    CHECK(ac_gradient_check(fn_div, in, 2, NULL, 1e-2f, 1e-2f, 1e-2f, &err) == AC_OK);
    CHECK(ac_gradient_check(fn_pow, in, 2, NULL, 1e-2f, 1e-2f, 1e-2f, &err) == AC_OK);

    in[0] = ac_randn(s34, 2);
    ac_tensor_set_requires_grad(in[0], 1);
    CHECK(ac_gradient_check(fn_log_softmax0, in, 1, NULL, 1e-2f, 1e-2f, 1e-2f, &err) == AC_OK);
    CHECK(ac_gradient_check(fn_softmax1, in, 1, NULL, 1e-2f, 1e-2f, 1e-2f, &err) == AC_OK);
    CHECK(ac_gradient_check(fn_gelu, in, 1, NULL, 1e-2f, 1e-2f, 1e-2f, &err) == AC_OK);
    target = make(targets, s3, 1);
    CHECK(ac_gradient_check(fn_cross_entropy, in, 1, target, 1e-2f, 1e-2f, 1e-2f, &err) == AC_OK);
    in[1] = ac_rand(s34, 2);
    ac_tensor_set_requires_grad(in[1], 1);
    CHECK(ac_gradient_check(fn_bce_logits, in, 2, NULL, 1e-2f, 1e-2f, 1e-2f, &err) == AC_OK);
    ac_mem_restore(cp);
}

/* ---- large tensors and threads ------------------------------------------- */

static void test_threads_bit_identical(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t big[2] = {300, 1000}, row[1] = {1000}, n_rows[1] = {300};
    AcTensor *a, *b, *t, *sum1, *sum2, *ce1, *ce2, *out1, *out2;
    int previous = ac_get_num_threads(), i;
    ac_manual_seed(3);
    a = ac_randn(big, 2);
    b = ac_randn(row, 1);
    t = ac_mul_scalar(ac_rand(n_rows, 1), 999.0f);
    for (i = 0; i < 300; i++) t->data[i] = floorf(t->data[i]);
    ac_set_num_threads(1);
    out1 = ac_gelu(ac_mul(a, b));
    sum1 = ac_mse_loss(a, ac_exp(a), AC_REDUCTION_SUM);
    ce1 = ac_cross_entropy(a, t, AC_REDUCTION_MEAN, 0.1f);
    ac_set_num_threads(2);
    out2 = ac_gelu(ac_mul(a, b));
    sum2 = ac_mse_loss(a, ac_exp(a), AC_REDUCTION_SUM);
    ce2 = ac_cross_entropy(a, t, AC_REDUCTION_MEAN, 0.1f);
    ac_set_num_threads(previous);
    CHECK(out1 && out2 && memcmp(out1->data, out2->data, (size_t)out1->size * sizeof(float)) == 0);
    CHECK(sum1 && sum2 && sum1->data[0] == sum2->data[0]);
    CHECK(ce1 && ce2 && ce1->data[0] == ce2->data[0]);
    for (i = 0; i < 1000; i++) CHECK_NEAR(out1->data[i], 0.5 * (a->data[i] * b->data[i]) *
                                          (1 + erf(a->data[i] * b->data[i] / sqrt(2.0))), 1e-5);
    ac_mem_restore(cp);
}

/* ---- bad input ----------------------------------------------------------- */

/* The call failed with code, and its message names op. */
static void check_error(const AcTensor *result, int code, const char *op)
{
    CHECK(result == NULL);
    CHECK(ac_last_error_code() == code);
    CHECK(strncmp(ac_last_error(), op, strlen(op)) == 0);
    if (strncmp(ac_last_error(), op, strlen(op)) != 0)
        fprintf(stderr, "  message was: %s\n", ac_last_error());
    ac_clear_error();
}

static void test_bad_input(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s2[1] = {2}, s3[1] = {3}, s223[3] = {2, 2, 3};
    const float v6[6] = {1, 2, 3, 4, 5, 6};
    const float bad_class[2] = {1, 3}, half_class[2] = {0.5f, 1}, neg_class[2] = {-1, 0};
    const float probs_bad[2] = {0.5f, 1.5f}, probs_nan[2] = {NAN, 0.5f};
    AcTensor *a = make(v6, s23, 2), *b = make(v6, s32, 2), *t2 = make(v6, s2, 1);
    AcTensor *t3 = make(v6, s3, 1), *cube = ac_tensor_new(s223, 3);

    check_error(ac_add(NULL, a), AC_ERR_ARG, "add");
    check_error(ac_sub(a, NULL), AC_ERR_ARG, "sub");
    check_error(ac_mul(NULL, NULL), AC_ERR_ARG, "mul");
    check_error(ac_div(a, NULL), AC_ERR_ARG, "div");
    check_error(ac_pow(NULL, a), AC_ERR_ARG, "pow");
    check_error(ac_add(a, b), AC_ERR_SHAPE, "add");
    check_error(ac_mul(a, t2), AC_ERR_SHAPE, "mul");
    check_error(ac_pow(b, t3), AC_ERR_SHAPE, "pow");
    ac_add(a, b);
    CHECK(strstr(ac_last_error(), "(2, 3)") && strstr(ac_last_error(), "(3, 2)"));
    ac_clear_error();

    check_error(ac_add_scalar(NULL, 1), AC_ERR_ARG, "add_scalar");
    check_error(ac_mul_scalar(NULL, 1), AC_ERR_ARG, "mul_scalar");
    check_error(ac_rsub_scalar(NULL, 1), AC_ERR_ARG, "rsub_scalar");
    check_error(ac_div_scalar(NULL, 1), AC_ERR_ARG, "div_scalar");
    check_error(ac_rdiv_scalar(NULL, 1), AC_ERR_ARG, "rdiv_scalar");
    check_error(ac_pow_scalar(NULL, 1), AC_ERR_ARG, "pow_scalar");
    check_error(ac_neg(NULL), AC_ERR_ARG, "neg");
    check_error(ac_exp(NULL), AC_ERR_ARG, "exp");
    check_error(ac_log(NULL), AC_ERR_ARG, "log");
    check_error(ac_sqrt(NULL), AC_ERR_ARG, "sqrt");
    check_error(ac_abs(NULL), AC_ERR_ARG, "abs");
    check_error(ac_sin(NULL), AC_ERR_ARG, "sin");
    check_error(ac_cos(NULL), AC_ERR_ARG, "cos");
    check_error(ac_clamp(NULL, 0, 1), AC_ERR_ARG, "clamp");
    check_error(ac_clamp(a, NAN, 1), AC_ERR_ARG, "clamp");
    check_error(ac_clamp(a, 0, NAN), AC_ERR_ARG, "clamp");

    check_error(ac_relu(NULL), AC_ERR_ARG, "relu");
    check_error(ac_sigmoid(NULL), AC_ERR_ARG, "sigmoid");
    check_error(ac_tanh(NULL), AC_ERR_ARG, "tanh");
    check_error(ac_gelu(NULL), AC_ERR_ARG, "gelu");
    check_error(ac_softmax(NULL, 0), AC_ERR_ARG, "softmax");
    check_error(ac_softmax(a, 2), AC_ERR_INDEX, "softmax");
    check_error(ac_log_softmax(a, -3), AC_ERR_INDEX, "log_softmax");

    check_error(ac_mse_loss(NULL, a, AC_REDUCTION_MEAN), AC_ERR_ARG, "mse_loss");
    check_error(ac_mse_loss(a, NULL, AC_REDUCTION_MEAN), AC_ERR_ARG, "mse_loss");
    check_error(ac_mse_loss(a, b, AC_REDUCTION_MEAN), AC_ERR_SHAPE, "mse_loss");
    check_error(ac_mse_loss(a, a, 3), AC_ERR_ARG, "mse_loss");
    check_error(ac_mse_loss(a, a, -1), AC_ERR_ARG, "mse_loss");

    check_error(ac_cross_entropy(NULL, t2, AC_REDUCTION_MEAN, 0), AC_ERR_ARG, "cross_entropy");
    check_error(ac_cross_entropy(a, NULL, AC_REDUCTION_MEAN, 0), AC_ERR_ARG, "cross_entropy");
    check_error(ac_cross_entropy(a, t3, AC_REDUCTION_MEAN, 0), AC_ERR_SHAPE, "cross_entropy");
    check_error(ac_cross_entropy(cube, t2, AC_REDUCTION_MEAN, 0), AC_ERR_SHAPE, "cross_entropy");
    check_error(ac_cross_entropy(a, make(bad_class, s2, 1), AC_REDUCTION_MEAN, 0), AC_ERR_INDEX,
                "cross_entropy");
    ac_cross_entropy(a, make(bad_class, s2, 1), AC_REDUCTION_MEAN, 0);
    CHECK(strstr(ac_last_error(), "target 3 ") != NULL);
    check_error(ac_cross_entropy(a, make(half_class, s2, 1), AC_REDUCTION_MEAN, 0), AC_ERR_INDEX,
                "cross_entropy");
    check_error(ac_cross_entropy(a, make(neg_class, s2, 1), AC_REDUCTION_MEAN, 0), AC_ERR_INDEX,
                "cross_entropy");
    check_error(ac_cross_entropy(a, make(probs_nan, s2, 1), AC_REDUCTION_MEAN, 0), AC_ERR_INDEX,
                "cross_entropy");
    check_error(ac_cross_entropy(a, make(v6, s2, 1), 7, 0), AC_ERR_ARG,
                "cross_entropy");
    check_error(ac_cross_entropy(a, make(v6, s2, 1), AC_REDUCTION_MEAN, 1.5f), AC_ERR_ARG,
                "cross_entropy");
    check_error(ac_cross_entropy(a, make(v6, s2, 1), AC_REDUCTION_MEAN, NAN), AC_ERR_ARG,
                "cross_entropy");

    check_error(ac_binary_cross_entropy(NULL, t2, AC_REDUCTION_MEAN), AC_ERR_ARG,
                "binary_cross_entropy");
    check_error(ac_binary_cross_entropy(t2, t3, AC_REDUCTION_MEAN), AC_ERR_SHAPE,
                "binary_cross_entropy");
    check_error(ac_binary_cross_entropy(make(probs_bad, s2, 1), t2, AC_REDUCTION_MEAN), AC_ERR_ARG,
                "binary_cross_entropy");
    check_error(ac_binary_cross_entropy(make(probs_nan, s2, 1), t2, AC_REDUCTION_MEAN), AC_ERR_ARG,
                "binary_cross_entropy");
    check_error(ac_bce_with_logits(t2, NULL, AC_REDUCTION_MEAN), AC_ERR_ARG, "bce_with_logits");
    check_error(ac_bce_with_logits(a, b, AC_REDUCTION_SUM), AC_ERR_SHAPE, "bce_with_logits");
    check_error(ac_bce_with_logits(a, a, 9), AC_ERR_ARG, "bce_with_logits");

    {   /* still works afterwards */
        AcTensor *sum = ac_add(a, a);
        CHECK(sum && sum->data[5] == 12.0f);
        CHECK(ac_last_error_code() == AC_OK);
    }
    ac_mem_restore(cp);
}

/* ---- in place ------------------------------------------------------------- */

static int same_bits(const AcTensor *a, const AcTensor *b)
{
    return a && b && a->size == b->size && memcmp(a->data, b->data, (size_t)a->size * 4) == 0;
}

static void check_status(int status, int code, const char *op)
{
    CHECK(status == code);
    CHECK(ac_last_error_code() == code);
    CHECK(strncmp(ac_last_error(), op, strlen(op)) == 0);
    ac_clear_error();
}

/* The writes give the out-of-place ops' bits, broadcast b and scalars included;
   a b that overlaps a reads as it was before the write. */
static void test_inplace(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float av[6] = {1, -2, 3.5f, 4, 0.25f, -6}, bv[6] = {2, 0.5f, -1, 3, 7, 0.125f};
    const int64_t s23[2] = {2, 3}, s3[1] = {3}, s4[1] = {4}, s48[1] = {48}, s64[1] = {64};
    float fv[64];
    AcTensor *(*outs[4])(const AcTensor *, const AcTensor *) = {ac_add, ac_sub, ac_mul, ac_div};
    int (*ins[4])(AcTensor *, const AcTensor *) = {ac_add_, ac_sub_, ac_mul_, ac_div_};
    AcTensor *b = make(bv, s23, 2), *row = make(bv, s3, 1), *a, *flat, *lo, *hi, *lo_copy, *hi_copy;
    AcTensor *expect;
    int i;
    for (i = 0; i < 4; i++) {
        a = make(av, s23, 2);
        expect = outs[i](a, b);
        CHECK(ins[i](a, b) == AC_OK && same_bits(a, expect));
        a = make(av, s23, 2);
        expect = outs[i](a, row);
        CHECK(ins[i](a, row) == AC_OK && same_bits(a, expect));
        a = make(av, s23, 2);
        expect = outs[i](a, a);
        CHECK(ins[i](a, a) == AC_OK && same_bits(a, expect));
    }
    a = make(av, s23, 2);
    CHECK(ac_add_scalar_(a, 1.5f) == AC_OK && same_bits(a, ac_add_scalar(make(av, s23, 2), 1.5f)));
    a = make(av, s23, 2);
    CHECK(ac_mul_scalar_(a, -3) == AC_OK && same_bits(a, ac_mul_scalar(make(av, s23, 2), -3)));
    a = make(av, s23, 2);
    CHECK(ac_div_scalar_(a, 3) == AC_OK && same_bits(a, ac_div_scalar(make(av, s23, 2), 3)));

    /* hi = flat[16:64] += lo = flat[0:48]: lo[16:48] is read as it was, not as the
       writes to hi[0:32] left it */
    ac_mem_restore(cp);
    for (i = 0; i < 64; i++) fv[i] = (float)(i % 7) - 2.5f;
    flat = make(fv, s64, 1);
    lo = ac_tensor_view_flat(flat, 0, s48, 1);
    hi = ac_tensor_view_flat(flat, 16, s48, 1);
    lo_copy = make(fv, s48, 1);
    hi_copy = make(fv + 16, s48, 1);
    expect = ac_add(hi_copy, lo_copy);
    CHECK(ac_add_(hi, lo) == AC_OK && same_bits(hi, expect));
    CHECK(memcmp(flat->data, fv, 16 * sizeof(float)) == 0);
    ac_tensor_free(lo);
    ac_tensor_free(hi);
    ac_tensor_free(flat);
    ac_tensor_free(lo_copy);
    ac_tensor_free(hi_copy);
    ac_tensor_free(expect);

    cp = ac_mem_checkpoint();
    a = make(av, s3, 1);
    b = make(bv, s23, 2);
    check_status(ac_add_(NULL, a), AC_ERR_ARG, "add_");
    check_status(ac_sub_(a, NULL), AC_ERR_ARG, "sub_");
    check_status(ac_mul_scalar_(NULL, 2), AC_ERR_ARG, "mul_");
    check_status(ac_mul_(a, b), AC_ERR_SHAPE, "mul_");   /* (3,) cannot take (2, 3) */
    CHECK(a->data[0] == av[0] && a->data[2] == av[2]);
    check_status(ac_div_(a, make(av, s4, 1)), AC_ERR_SHAPE, "div_");
    check_status(ac_add_(ac_tensor_new_typed(s3, 1, AC_INT64), a), AC_ERR_DTYPE, "add_");
    check_status(ac_div_scalar_(ac_tensor_new_typed(s3, 1, AC_INT64), 2), AC_ERR_DTYPE, "div_");
    ac_mem_restore(cp);
}

/* At root the caller owns each output; once all are freed, nothing is left. */
static void test_root_no_leak(void)
{
    AcMemStats before, after;
    const float av[3] = {1, 2, 3};
    const int64_t s3[1] = {3};
    AcTensor *a, *scaled, *y, *loss, *t;
    ac_memory_stats(&before);
    a = leaf(av, s3, 1);
    t = make(av, s3, 1);
    scaled = ac_mul_scalar(a, 2);
    y = ac_softmax(scaled, 0);
    ac_tensor_free(scaled);   /* the graph keeps it alive until loss goes */
    loss = ac_mse_loss(y, t, AC_REDUCTION_MEAN);
    CHECK(ac_backward(loss) == AC_OK);
    CHECK(a->grad != NULL);
    ac_tensor_free(loss);
    ac_tensor_free(y);
    ac_tensor_free(t);
    ac_tensor_free(a);
    ac_memory_stats(&after);
    CHECK(after.bytes_in_use == before.bytes_in_use);
    CHECK(after.live_tensors == before.live_tensors);
    CHECK(after.live_nodes == before.live_nodes);
}

int main(void)
{
    AcMemStats start, end;
    ac_memory_stats(&start);
    RUN(test_binary_same_shape);
    RUN(test_broadcasting);
    RUN(test_scalar_and_unary);
    RUN(test_clamp);
    RUN(test_activations);
    RUN(test_softmax);
    RUN(test_losses_forward);
    RUN(test_mul_backward_broadcast);
    RUN(test_div_pow_backward);
    RUN(test_clamp_abs_relu_backward);
    RUN(test_cross_entropy_backward);
    RUN(test_gradient_check);
    RUN(test_threads_bit_identical);
    RUN(test_bad_input);
    RUN(test_inplace);
    RUN(test_root_no_leak);
    ac_memory_stats(&end);
    CHECK(end.bytes_in_use == start.bytes_in_use);
    return TEST_REPORT();
}
