/*
 * test_conv.c - the convolutional ops from C: conv2d, max/avg/adaptive pooling,
 * batch norm and dropout. Hand-checked forward values, a conv2d gradient check,
 * a small conv net trained a few steps inside scopes (no leaks), running
 * statistics written in place, and every bad input returning NULL with a clear
 * message while the library stays usable.
 */
#include "test.h"

#include <ac.h>
#include <string.h>

static int message_has(const char *text) { return strstr(ac_last_error(), text) != NULL; }

static AcTensor *from(const float *values, int64_t n, int64_t c, int64_t h, int64_t w)
{
    const int64_t shape[4] = {n, c, h, w};
    return ac_tensor_from_data(values, shape, 4);
}

static void test_conv_forward_values(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    /* 3x3 input, 2x2 kernel of ones, no padding: sums of each 2x2 window, + bias */
    const float xv[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, ones[4] = {1, 1, 1, 1}, bias_value = 0.5f;
    const int64_t bias_shape[1] = {1};
    AcTensor *x = from(xv, 1, 1, 3, 3), *w = from(ones, 1, 1, 2, 2);
    AcTensor *b = ac_tensor_from_data(&bias_value, bias_shape, 1);
    AcTensor *y = ac_conv2d(x, w, b, 1, 1, 0, 0, 1, 1, 1);
    AcTensor *padded = ac_conv2d(x, w, NULL, 2, 2, 1, 1, 1, 1, 1);
    const float expected[4] = {12.5f, 16.5f, 24.5f, 28.5f};
    /* stride 2, padding 1: the windows at the corners see one to four inputs */
    const float expected_padded[4] = {1, 5, 11, 28};
    int i;
    CHECK(y && y->ndim == 4 && y->shape[2] == 2 && y->shape[3] == 2);
    CHECK(padded && padded->shape[2] == 2 && padded->shape[3] == 2);
    for (i = 0; y && i < 4; i++) CHECK_NEAR(y->data[i], expected[i], 1e-6);
    for (i = 0; padded && i < 4; i++) CHECK_NEAR(padded->data[i], expected_padded[i], 1e-6);
    ac_mem_restore(cp);
}

static AcTensor *conv_fn(AcTensor *const *inputs, int n_inputs, void *user)
{
    (void)n_inputs;
    (void)user;
    return ac_conv2d(inputs[0], inputs[1], inputs[2], 2, 1, 1, 2, 1, 2, 2);
}

static void test_conv_gradient_check(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t xs[4] = {2, 4, 6, 7}, ws[4] = {6, 2, 3, 3}, bs[1] = {6};
    AcTensor *inputs[3];
    float max_err = -1.0f;
    int i;
    ac_manual_seed(3);
    inputs[0] = ac_randn(xs, 4);
    inputs[1] = ac_randn(ws, 4);
    inputs[2] = ac_randn(bs, 1);
    for (i = 0; i < 3; i++) ac_tensor_set_requires_grad(inputs[i], 1);
    CHECK(ac_gradient_check(conv_fn, inputs, 3, NULL, 1e-2f, 1e-2f, 1e-2f, &max_err) == AC_OK);
    CHECK(max_err >= 0.0f && max_err < 1e-2f);
    /* the input as data (a first layer): only weight and bias are checked */
    ac_tensor_set_requires_grad(inputs[0], 0);
    CHECK(ac_gradient_check(conv_fn, inputs, 3, NULL, 1e-2f, 1e-2f, 1e-2f, &max_err) == AC_OK);
    ac_mem_restore(cp);
}

static AcTensor *winograd_fn(AcTensor *const *inputs, int n_inputs, void *user)
{
    (void)n_inputs;
    (void)user;
    return ac_conv2d(inputs[0], inputs[1], inputs[2], 1, 1, 1, 1, 1, 1, 1);
}

/* 3x3, stride 1, padding 1, 32 channels and filters on 3x5 images: forward, dx
   and dW by Winograd (odd sides: clipped edge tiles). */
static void test_conv_winograd_gradient_check(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t xs[4] = {1, 32, 3, 5}, ws[4] = {32, 32, 3, 3}, bs[1] = {32};
    AcTensor *inputs[3];
    float max_err = -1.0f;
    int i;
    ac_manual_seed(4);
    inputs[0] = ac_randn(xs, 4);
    inputs[1] = ac_randn(ws, 4);
    inputs[2] = ac_randn(bs, 1);
    for (i = 0; i < 3; i++) ac_tensor_set_requires_grad(inputs[i], 1);
    CHECK(ac_gradient_check(winograd_fn, inputs, 3, NULL, 1e-2f, 2e-2f, 2e-2f, &max_err) == AC_OK);
    CHECK(max_err >= 0.0f && max_err < 2e-2f);
    ac_mem_restore(cp);
}

static void test_pool_forward_values(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float xv[16] = {1, 3, 3, 0, 3, 2, 0, 3, 5, 5, 7, 7, 5, 5, 7, -1};
    AcTensor *x = from(xv, 1, 1, 4, 4);
    AcTensor *mx = ac_max_pool2d(x, 2, 2, 2, 2, 0, 0), *avg = ac_avg_pool2d(x, 2, 2, 2, 2, 0, 0);
    AcTensor *global = ac_adaptive_avg_pool2d(x, 1, 1);
    const float expected_max[4] = {3, 3, 5, 7}, expected_avg[4] = {2.25f, 1.5f, 5, 5};
    int i;
    CHECK(mx && avg && global && global->size == 1);
    for (i = 0; mx && avg && i < 4; i++) {
        CHECK_NEAR(mx->data[i], expected_max[i], 0);
        CHECK_NEAR(avg->data[i], expected_avg[i], 1e-6);
    }
    if (global) CHECK_NEAR(global->data[0], 55.0 / 16.0, 1e-6);
    ac_mem_restore(cp);
}

static void test_batch_norm_running_stats(void)
{
    AcCheckpoint cp;
    const float xv[8] = {1, 2, 3, 4, 10, 20, 30, 40};   /* (4, 2) rows of (a, b) */
    const int64_t xs[2] = {4, 2}, cs[1] = {2};
    AcTensor *rm = ac_full(cs, 1, 0.0f), *rv = ac_full(cs, 1, 1.0f), *x, *y;
    cp = ac_mem_checkpoint();
    x = ac_tensor_from_data(xv, xs, 2);
    y = ac_batch_norm(x, NULL, NULL, rm, rv, 1, 0.5f, 0.0f);
    CHECK(y != NULL);
    ac_mem_restore(cp);
    /* channel 0 holds 1, 3, 10, 30 and channel 1 holds 2, 4, 20, 40 */
    CHECK_NEAR(rm->data[0], 0.5 * 11.0, 1e-5);
    CHECK_NEAR(rm->data[1], 0.5 * 16.5, 1e-5);
    CHECK_NEAR(rv->data[0], 0.5 + 0.5 * (100.0 + 64.0 + 1.0 + 361.0) / 3.0, 1e-3);
    cp = ac_mem_checkpoint();
    x = ac_tensor_from_data(xv, xs, 2);
    y = ac_batch_norm(x, NULL, NULL, rm, rv, 0, 0.5f, 0.0f);
    CHECK(y && fabsf(y->data[0] - (1.0f - rm->data[0]) / sqrtf(rv->data[0])) < 1e-5f);
    ac_mem_restore(cp);
    ac_tensor_free(rm);
    ac_tensor_free(rv);
}

static void test_dropout_values(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t shape[1] = {1000};
    AcTensor *x = ac_full(shape, 1, 2.0f), *a, *b, *eval;
    int64_t i, kept = 0, same = 1;
    ac_manual_seed(11);
    a = ac_dropout(x, 0.5f, 1);
    ac_manual_seed(11);
    b = ac_dropout(x, 0.5f, 1);
    eval = ac_dropout(x, 0.5f, 0);
    CHECK(a && b && eval);
    for (i = 0; a && b && i < 1000; i++) {
        CHECK(a->data[i] == 0.0f || a->data[i] == 4.0f);
        kept += a->data[i] != 0.0f;
        same &= a->data[i] == b->data[i];
    }
    CHECK(same);
    CHECK(kept > 400 && kept < 600);
    CHECK(eval && eval->data == x->data);
    ac_mem_restore(cp);
}

/* A conv net trained a few SGD steps, each inside a scope: no bytes left behind. */
static void test_training_steps_leave_nothing(void)
{
    const int64_t xs[4] = {4, 1, 8, 8}, w1s[4] = {4, 1, 3, 3}, b1s[1] = {4}, w2s[4] = {6, 4, 3, 3};
    const int64_t cs[1] = {6};
    AcTensor *w1 = ac_randn(w1s, 4), *b1 = ac_randn(b1s, 1), *w2 = ac_randn(w2s, 4);
    AcTensor *gamma = ac_full(cs, 1, 1.0f), *beta = ac_full(cs, 1, 0.0f);
    AcTensor *rm = ac_full(cs, 1, 0.0f), *rv = ac_full(cs, 1, 1.0f);
    AcTensor *params[5];
    AcMemStats before, after;
    int step, i;
    params[0] = w1, params[1] = b1, params[2] = w2, params[3] = gamma, params[4] = beta;
    for (i = 0; i < 5; i++) ac_tensor_set_requires_grad(params[i], 1);
    ac_memory_stats(&before);
    for (step = 1; step <= 3; step++) {
        AcCheckpoint cp = ac_mem_checkpoint();
        AcTensor *x = ac_randn(xs, 4);
        AcTensor *h = ac_relu(ac_conv2d(x, w1, b1, 1, 1, 1, 1, 1, 1, 1));
        AcTensor *p = ac_max_pool2d(h, 2, 2, 2, 2, 0, 0);
        AcTensor *c = ac_conv2d(p, w2, NULL, 1, 1, 1, 1, 1, 1, 1);
        AcTensor *n = ac_batch_norm(c, gamma, beta, rm, rv, 1, 0.1f, 1e-5f);
        AcTensor *g = ac_adaptive_avg_pool2d(ac_dropout(ac_relu(n), 0.2f, 1), 1, 1);
        AcTensor *loss = ac_sum(g, NULL, 0, 0);
        CHECK(loss != NULL);
        CHECK(ac_backward(loss) == AC_OK);
        ac_mem_restore(cp);
        for (i = 0; i < 5; i++)
            CHECK(ac_sgd_step(params[i], NULL, step, 0.01f, 0, 0, 0, 0) == AC_OK);
    }
    for (i = 0; i < 5; i++) CHECK(params[i]->grad != NULL);
    for (i = 0; i < 5; i++) ac_tensor_zero_grad(params[i]);
    ac_memory_stats(&after);
    CHECK(after.bytes_in_use == before.bytes_in_use);
    CHECK(after.live_nodes == before.live_nodes);
    for (i = 0; i < 5; i++) ac_tensor_free(params[i]);
    ac_tensor_free(rm);
    ac_tensor_free(rv);
}

static void test_bad_inputs(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t x_shape[4] = {1, 3, 5, 5}, w_shape[4] = {2, 4, 3, 3}, g_shape[4] = {4, 2, 3, 3};
    const int64_t big_kernel[4] = {1, 3, 7, 7}, flat[2] = {3, 5}, c3[1] = {3}, c4[1] = {4};
    const int64_t x6[4] = {1, 6, 5, 5}, one[2] = {1, 3};
    AcTensor *x = ac_tensor_new(x_shape, 4), *kernel = ac_tensor_new(big_kernel, 4);
    AcTensor *ok;

    CHECK(ac_conv2d(NULL, x, NULL, 1, 1, 0, 0, 1, 1, 1) == NULL);
    CHECK(ac_last_error_code() == AC_ERR_ARG && message_has("conv2d: input is NULL"));
    CHECK(ac_conv2d(x, ac_tensor_new(w_shape, 4), NULL, 1, 1, 0, 0, 1, 1, 1) == NULL);
    CHECK(ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(message_has("conv2d: input has 3 channels, weight expects 4"));
    CHECK(ac_conv2d(ac_tensor_new(x6, 4), ac_tensor_new(g_shape, 4), NULL, 1, 1, 0, 0, 1, 1, 4) ==
          NULL);
    CHECK(message_has("not divisible by groups 4"));
    CHECK(ac_conv2d(x, kernel, NULL, 1, 1, 0, 0, 1, 1, 1) == NULL);
    CHECK(ac_last_error_code() == AC_ERR_SHAPE && message_has("larger than the padded input 5x5"));
    CHECK(ac_conv2d(ac_tensor_new(flat, 2), kernel, NULL, 1, 1, 0, 0, 1, 1, 1) == NULL);
    CHECK(message_has("must be (N, C, H, W)"));
    CHECK(ac_conv2d(x, kernel, ac_tensor_new(c4, 1), 1, 1, 3, 3, 1, 1, 1) == NULL);
    CHECK(message_has("conv2d: bias (4") && message_has("does not fit weight (1, 3, 7, 7)"));
    CHECK(ac_conv2d(x, kernel, NULL, 0, 1, 3, 3, 1, 1, 1) == NULL);
    CHECK(ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_conv2d(x, kernel, NULL, 1, 1, -1, 0, 1, 1, 1) == NULL);
    CHECK(ac_conv2d(x, kernel, NULL, 1, 1, 3, 3, 1, 1, 0) == NULL);

    CHECK(ac_max_pool2d(NULL, 2, 2, 2, 2, 0, 0) == NULL);
    CHECK(message_has("max_pool2d: input is NULL"));
    CHECK(ac_max_pool2d(x, 2, 2, 2, 2, 2, 0) == NULL && message_has("at most half the kernel"));
    CHECK(ac_avg_pool2d(x, 6, 6, 1, 1, 0, 0) == NULL && message_has("avg_pool2d: kernel (6, 6)"));
    CHECK(ac_avg_pool2d(ac_tensor_new(flat, 2), 2, 2, 2, 2, 0, 0) == NULL);
    CHECK(ac_adaptive_avg_pool2d(x, 0, 1) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_adaptive_avg_pool2d(NULL, 1, 1) == NULL);

    CHECK(ac_batch_norm(NULL, NULL, NULL, NULL, NULL, 1, 0.1f, 1e-5f) == NULL);
    CHECK(ac_batch_norm(x, ac_tensor_new(c4, 1), NULL, NULL, NULL, 1, 0.1f, 1e-5f) == NULL);
    CHECK(message_has("batch_norm: weight (4") && message_has("does not fit input (1, 3, 5, 5)"));
    CHECK(ac_batch_norm(x, NULL, NULL, NULL, NULL, 0, 0.1f, 1e-5f) == NULL);
    CHECK(message_has("eval mode needs running_mean"));
    CHECK(ac_batch_norm(ac_tensor_new(one, 2), NULL, NULL, NULL, NULL, 1, 0.1f, 1e-5f) == NULL);
    CHECK(message_has("more than 1 value per channel"));
    CHECK(ac_batch_norm(x, NULL, NULL, ac_tensor_new(c3, 1), NULL, 1, 0.1f, 1e-5f) == NULL);
    CHECK(ac_batch_norm(x, NULL, NULL, NULL, NULL, 1, 0.1f, -1.0f) == NULL);

    CHECK(ac_dropout(NULL, 0.5f, 1) == NULL);
    CHECK(ac_dropout(x, 1.5f, 1) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_dropout(x, -0.5f, 0) == NULL && message_has("dropout: probability"));

    /* still usable */
    ok = ac_conv2d(x, kernel, NULL, 1, 1, 1, 1, 1, 1, 1);
    CHECK(ok != NULL && ok->shape[2] == 1 && ok->shape[3] == 1);
    ac_mem_restore(cp);
}

int main(void)
{
    RUN(test_conv_forward_values);
    RUN(test_conv_gradient_check);
    RUN(test_conv_winograd_gradient_check);
    RUN(test_pool_forward_values);
    RUN(test_batch_norm_running_stats);
    RUN(test_dropout_values);
    RUN(test_training_steps_leave_nothing);
    RUN(test_bad_inputs);
    return TEST_REPORT();
}
