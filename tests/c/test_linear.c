/*
 * test_linear.c - ac_linear: forward against a double-precision loop, with and
 * without bias, on 1-D, 2-D and 3-D inputs; backward through ac_backward and
 * ac_gradient_check; empty shapes; bit-identical results for 1 and 2
 * threads; every bad input returning NULL with a clear message; no leaks.
 */
#include "test.h"

#include <ac.h>
#include <string.h>

/* y[r, o] = sum_i x[r, i] w[o, i] + b[o], in double. */
static double reference(const AcTensor *x, const AcTensor *w, const AcTensor *b, int64_t r,
                        int64_t o)
{
    int64_t in = w->shape[1], i;
    double sum = b ? b->data[o] : 0.0;
    for (i = 0; i < in; i++) sum += (double)x->data[r * in + i] * w->data[o * in + i];
    return sum;
}

static void check_forward(const AcTensor *x, const AcTensor *w, const AcTensor *b)
{
    AcTensor *y = ac_linear(x, w, b);
    int64_t out = w->shape[0], rows, r, o;
    int i;
    CHECK(y != NULL);
    if (!y) return;
    CHECK(y->ndim == x->ndim);
    for (i = 0; i < x->ndim - 1; i++) CHECK(y->shape[i] == x->shape[i]);
    CHECK(y->shape[y->ndim - 1] == out);
    rows = out ? y->size / out : 0;
    for (r = 0; r < rows; r++)
        for (o = 0; o < out; o++) CHECK_NEAR(y->data[r * out + o], reference(x, w, b, r, o), 1e-4);
}

static void test_forward_hand_checked(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float xv[6] = {1, 2, 3, -1, 0, 2}, wv[6] = {1, 0, -1, 0.5f, 0.5f, 0.5f}, bv[2] = {10, -1};
    const float expected[4] = {8, 2, 7, -0.5f}, expected_no_bias[4] = {-2, 3, -3, 0.5f};
    const int64_t s23[2] = {2, 3}, s2[1] = {2};
    AcTensor *x = ac_tensor_from_data(xv, s23, 2), *w = ac_tensor_from_data(wv, s23, 2);
    AcTensor *b = ac_tensor_from_data(bv, s2, 1);
    AcTensor *y = ac_linear(x, w, b), *y0 = ac_linear(x, w, NULL);
    int i;
    CHECK(y && y0);
    for (i = 0; y && y0 && i < 4; i++) {
        CHECK_NEAR(y->data[i], expected[i], 1e-6);
        CHECK_NEAR(y0->data[i], expected_no_bias[i], 1e-6);
    }
    ac_mem_restore(cp);
}

static void test_forward_shapes(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t s3d[3] = {4, 5, 37}, s1d[1] = {37}, w_shape[2] = {19, 37}, b_shape[1] = {19};
    const int64_t big_x[2] = {130, 200}, big_w[2] = {70, 200}, big_b[1] = {70};
    AcTensor *w, *b;
    ac_manual_seed(1);
    w = ac_randn(w_shape, 2);
    b = ac_randn(b_shape, 1);
    check_forward(ac_randn(s3d, 3), w, b);
    check_forward(ac_randn(s3d, 3), w, NULL);
    check_forward(ac_randn(s1d, 1), w, b);
    /* big enough for the blocked, threaded gemm path */
    check_forward(ac_randn(big_x, 2), ac_randn(big_w, 2), ac_randn(big_b, 1));
    ac_mem_restore(cp);
}

static void test_empty_shapes(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t no_rows[2] = {0, 3}, w_shape[2] = {2, 3}, b_shape[1] = {2};
    const int64_t no_in[2] = {4, 0}, w_no_in[2] = {2, 0};
    const float bv[2] = {1.5f, -2};
    AcTensor *w = leaf_randn(w_shape, 2, 1.0f), *b = ac_tensor_from_data(bv, b_shape, 1);
    AcTensor *x = ac_randn(no_rows, 2), *y, *loss;
    int i;
    ac_tensor_set_requires_grad(b, 1);
    y = ac_linear(x, w, b);
    CHECK(y && y->ndim == 2 && y->shape[0] == 0 && y->shape[1] == 2);
    loss = ac_sum(y, NULL, 0, 0);
    CHECK(ac_backward(loss) == AC_OK);
    CHECK(w->grad && b->grad);
    for (i = 0; w->grad && i < 6; i++) CHECK(w->grad->data[i] == 0.0f);
    for (i = 0; b->grad && i < 2; i++) CHECK(b->grad->data[i] == 0.0f);
    /* no input features: the output is the bias alone */
    y = ac_linear(ac_randn(no_in, 2), ac_randn(w_no_in, 2), b);
    CHECK(y && y->size == 8);
    for (i = 0; y && i < 8; i++) CHECK(y->data[i] == bv[i % 2]);
    y = ac_linear(ac_randn(no_in, 2), ac_randn(w_no_in, 2), NULL);
    for (i = 0; y && i < 8; i++) CHECK(y->data[i] == 0.0f);
    ac_mem_restore(cp);
}

/* ---- backward ------------------------------------------------------------ */

static void test_backward_against_loops(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t xs[3] = {2, 3, 5}, ws[2] = {4, 5}, bs[1] = {4}, ys[3] = {2, 3, 4};
    AcTensor *x, *w, *b, *g, *y;
    int64_t rows = 6, in = 5, out = 4, r, i, o;
    ac_manual_seed(2);
    x = leaf_randn(xs, 3, 1.0f);
    w = leaf_randn(ws, 2, 1.0f);
    b = leaf_randn(bs, 1, 1.0f);
    g = ac_randn(ys, 3);
    y = ac_linear(x, w, b);
    CHECK(y && ac_backward_with(y, g) == AC_OK);
    CHECK(x->grad && w->grad && b->grad);
    if (!x->grad || !w->grad || !b->grad) {
        ac_mem_restore(cp);
        return;
    }
    for (r = 0; r < rows; r++)
        for (i = 0; i < in; i++) {
            double dx = 0.0;
            for (o = 0; o < out; o++) dx += (double)g->data[r * out + o] * w->data[o * in + i];
            CHECK_NEAR(x->grad->data[r * in + i], dx, 1e-5);
        }
    for (o = 0; o < out; o++) {
        double db = 0.0;
        for (r = 0; r < rows; r++) db += g->data[r * out + o];
        CHECK_NEAR(b->grad->data[o], db, 1e-5);
        for (i = 0; i < in; i++) {
            double dw = 0.0;
            for (r = 0; r < rows; r++) dw += (double)g->data[r * out + o] * x->data[r * in + i];
            CHECK_NEAR(w->grad->data[o * in + i], dw, 1e-5);
        }
    }
    ac_mem_restore(cp);
}

static AcTensor *fn_linear(AcTensor *const *in, int n, void *user)
{
    (void)user;
    return ac_linear(in[0], in[1], n > 2 ? in[2] : NULL);
}

static void test_gradient_check(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t xs[3] = {3, 2, 4}, ws[2] = {5, 4}, bs[1] = {5}, x1[1] = {4};
    AcTensor *in[3];
    float err;
    ac_manual_seed(4);
    in[0] = leaf_randn(xs, 3, 1.0f);
    in[1] = leaf_randn(ws, 2, 1.0f);
    in[2] = leaf_randn(bs, 1, 1.0f);
    CHECK(ac_gradient_check(fn_linear, in, 3, NULL, 1e-2f, 1e-2f, 1e-2f, &err) == AC_OK);
    CHECK(ac_gradient_check(fn_linear, in, 2, NULL, 1e-2f, 1e-2f, 1e-2f, &err) == AC_OK);
    in[0] = leaf_randn(x1, 1, 1.0f);
    CHECK(ac_gradient_check(fn_linear, in, 3, NULL, 1e-2f, 1e-2f, 1e-2f, &err) == AC_OK);
    /* only the weight needs a gradient: x and b are plain data */
    ac_tensor_set_requires_grad(in[0], 0);
    ac_tensor_set_requires_grad(in[2], 0);
    CHECK(ac_gradient_check(fn_linear, in, 3, NULL, 1e-2f, 1e-2f, 1e-2f, &err) == AC_OK);
    ac_mem_restore(cp);
}

static void test_threads_bit_identical(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t xs[2] = {300, 257}, ws[2] = {130, 257}, bs[1] = {130}, ys[2] = {300, 130};
    AcTensor *x, *w, *b, *g, *y[2], *dx[2], *dw[2], *db[2];
    int previous = ac_get_num_threads(), t;
    ac_manual_seed(5);
    x = leaf_randn(xs, 2, 1.0f);
    w = leaf_randn(ws, 2, 1.0f);
    b = leaf_randn(bs, 1, 1.0f);
    g = ac_randn(ys, 2);
    for (t = 0; t < 2; t++) {
        ac_set_num_threads(t + 1);
        ac_tensor_zero_grad(x);
        ac_tensor_zero_grad(w);
        ac_tensor_zero_grad(b);
        y[t] = ac_linear(x, w, b);
        CHECK(y[t] && ac_backward_with(y[t], g) == AC_OK);
        dx[t] = x->grad;
        dw[t] = w->grad;
        db[t] = b->grad;
        CHECK(dx[t] && dw[t] && db[t]);
    }
    ac_set_num_threads(previous);
    CHECK(memcmp(y[0]->data, y[1]->data, (size_t)y[0]->size * sizeof(float)) == 0);
    if (dx[0] && dx[1] && dw[0] && dw[1] && db[0] && db[1]) {
        CHECK(memcmp(dx[0]->data, dx[1]->data, (size_t)dx[0]->size * sizeof(float)) == 0);
        CHECK(memcmp(dw[0]->data, dw[1]->data, (size_t)dw[0]->size * sizeof(float)) == 0);
        CHECK(memcmp(db[0]->data, db[1]->data, (size_t)db[0]->size * sizeof(float)) == 0);
    }
    ac_mem_restore(cp);
}

/* ---- bad input and memory ------------------------------------------------ */

static void check_error(const AcTensor *result, int code, const char *message)
{
    CHECK(result == NULL);
    CHECK(ac_last_error_code() == code);
    CHECK(strcmp(ac_last_error(), message) == 0);
    if (strcmp(ac_last_error(), message) != 0)
        fprintf(stderr, "  message was: %s\n  expected:    %s\n", ac_last_error(), message);
    ac_clear_error();
}

static void test_bad_input(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t xs[2] = {64, 785}, ws[2] = {128, 784}, bs[1] = {128}, bad_b[1] = {127};
    const int64_t w3[3] = {2, 128, 784}, x_ok[2] = {64, 784};
    AcTensor *x = ac_tensor_new(xs, 2), *w = ac_tensor_new(ws, 2), *b = ac_tensor_new(bs, 1);
    AcTensor *scalar = ac_tensor_new(NULL, 0), *y;
    check_error(ac_linear(x, w, b), AC_ERR_SHAPE,
                "linear: input (64, 785) has 785 features, weight (128, 784) expects 784");
    x = ac_tensor_new(x_ok, 2);
    check_error(ac_linear(NULL, w, b), AC_ERR_ARG, "linear: input is NULL");
    check_error(ac_linear(x, NULL, b), AC_ERR_ARG, "linear: weight is NULL");
    check_error(ac_linear(x, ac_tensor_new(w3, 3), b), AC_ERR_SHAPE,
                "linear: weight (2, 128, 784) must be (out_features, in_features)");
    check_error(ac_linear(scalar, w, b), AC_ERR_SHAPE,
                "linear: input () must have at least 1 dim (..., in_features)");
    check_error(ac_linear(x, w, ac_tensor_new(bad_b, 1)), AC_ERR_SHAPE,
                "linear: bias (127,) does not fit weight (128, 784) (expected (128,))");
    /* still usable */
    y = ac_linear(x, w, b);
    CHECK(y && y->shape[0] == 64 && y->shape[1] == 128);
    CHECK(ac_last_error_code() == AC_OK);
    ac_mem_restore(cp);
}

static void test_training_steps_in_scopes_leak_nothing(void)
{
    const int64_t xs[2] = {32, 20}, ws[2] = {10, 20}, bs[1] = {10};
    AcTensor *w, *b;
    AcMemStats before, after;
    int step;
    ac_manual_seed(6);
    w = leaf_randn(ws, 2, 1.0f);
    b = leaf_randn(bs, 1, 1.0f);
    ac_memory_stats(&before);
    for (step = 0; step < 50; step++) {
        AcCheckpoint cp = ac_mem_checkpoint();
        AcTensor *y = ac_linear(ac_randn(xs, 2), w, b);
        AcTensor *loss = ac_mean(ac_relu(y), NULL, 0, 0);
        CHECK(ac_backward(loss) == AC_OK);
        ac_mem_restore(cp);
        ac_tensor_zero_grad(w);
        ac_tensor_zero_grad(b);
    }
    ac_memory_stats(&after);
    CHECK(after.bytes_in_use == before.bytes_in_use);
    CHECK(after.live_tensors == before.live_tensors);
    CHECK(after.live_nodes == before.live_nodes);
    ac_tensor_free(w);
    ac_tensor_free(b);
}

int main(void)
{
    RUN(test_forward_hand_checked);
    RUN(test_forward_shapes);
    RUN(test_empty_shapes);
    RUN(test_backward_against_loops);
    RUN(test_gradient_check);
    RUN(test_threads_bit_identical);
    RUN(test_bad_input);
    RUN(test_training_steps_in_scopes_leak_nothing);
    return TEST_REPORT();
}
