/*
 * test_nn_ops.c - the nn ops added for PyTorch's programs, from C: the transposed
 * convolution, the resample op (pads and interpolations), max pooling with
 * dilation, ceil_mode and indices, adaptive max pooling and avg_pool2d's ceil
 * mode. Hand-checked values, gradient checks by central differences, and every
 * bad input returning NULL with a clear message, the library still usable.
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

/* ---- conv_transpose2d ------------------------------------------------------ */

static void test_conv_transpose_values(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    /* 2x2 input, 2x2 kernel of ones, stride 2: each input spreads over its own 2x2 block */
    const float xv[4] = {1, 2, 3, 4}, ones[4] = {1, 1, 1, 1};
    const float expected[16] = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
    AcTensor *x = from(xv, 1, 1, 2, 2), *w = from(ones, 1, 1, 2, 2);
    AcTensor *y = ac_conv_transpose2d(x, w, 2, 2, 0, 0, 0, 0, 1, 1, 1);
    /* stride 1: overlapping windows add up; output_padding 1 adds a zero row and column */
    AcTensor *z = ac_conv_transpose2d(x, w, 2, 2, 0, 0, 1, 1, 1, 1, 1);
    int i;
    CHECK(y && y->shape[2] == 4 && y->shape[3] == 4);
    for (i = 0; y && i < 16; i++) CHECK_NEAR(y->data[i], expected[i], 1e-6);
    CHECK(z && z->shape[2] == 5 && z->shape[3] == 5);
    CHECK(z && z->data[4] == 0.0f && z->data[24] == 0.0f && z->data[0] == 1.0f);
    ac_mem_restore(cp);
}

static AcTensor *transpose_fn(AcTensor *const *inputs, int n_inputs, void *user)
{
    (void)n_inputs;
    (void)user;
    return ac_conv_transpose2d(inputs[0], inputs[1], 2, 1, 1, 0, 1, 0, 1, 2, 2);
}

static void test_conv_transpose_gradient_check(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t xs[4] = {2, 4, 3, 4}, ws[4] = {4, 3, 3, 2};
    AcTensor *inputs[2];
    float max_err = -1.0f;
    ac_manual_seed(5);
    inputs[0] = leaf_randn(xs, 4, 1.0f);
    inputs[1] = leaf_randn(ws, 4, 1.0f);
    CHECK(ac_gradient_check(transpose_fn, inputs, 2, NULL, 1e-2f, 1e-2f, 1e-2f, &max_err) == AC_OK);
    CHECK(max_err >= 0.0f && max_err < 1e-2f);
    ac_mem_restore(cp);
}

/* ---- resample ---------------------------------------------------------------- */

static void test_resample_pads_and_interpolates(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float xv[3] = {1, 2, 3};
    const int64_t shape[2] = {1, 3}, reflect[5] = {1, 0, 1, 2, 1}, constant[4] = {-1, 0, 1, 2};
    const int64_t linear[4] = {0, 1, 1, 2};
    const float halves[4] = {0.5f, 0.5f, 0.25f, 0.75f};
    AcTensor *x = ac_tensor_from_data(xv, shape, 2);
    AcTensor *r = ac_resample(x, 1, 5, 1, reflect, NULL, 0.0);
    AcTensor *c = ac_resample(x, -1, 4, 1, constant, NULL, 7.0);
    AcTensor *l = ac_resample(x, 1, 2, 2, linear, halves, 0.0);
    CHECK(r && r->shape[1] == 5 && r->data[0] == 2.0f && r->data[4] == 2.0f);
    CHECK(c && c->data[0] == 7.0f && c->data[3] == 3.0f);
    CHECK(l && l->data[0] == 1.5f && l->data[1] == 2.75f);
    ac_mem_restore(cp);
}

static void test_resample_copies_int64(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t values[2] = {(int64_t)1 << 40, 5}, shape[1] = {2}, index[3] = {1, -1, 0};
    AcTensor *x = ac_tensor_from_typed(values, shape, 1, AC_INT64);
    AcTensor *y = ac_resample(x, 0, 3, 1, index, NULL, -2.0);
    const int64_t *out = y ? (const int64_t *)y->data : NULL;
    CHECK(y && y->dtype == AC_INT64);
    CHECK(out && out[0] == 5 && out[1] == -2 && out[2] == ((int64_t)1 << 40));
    ac_mem_restore(cp);
}

static const int64_t cubic_index[12] = {0, 0, 1, 2, 0, 1, 2, 3, 1, 2, 3, 3};
static const float cubic_weight[12] = {-0.1f, 0.6f, 0.6f, -0.1f, -0.05f, 0.3f, 0.8f, -0.05f,
                                       0.2f, 0.2f, 0.3f, 0.3f};

static AcTensor *resample_fn(AcTensor *const *inputs, int n_inputs, void *user)
{
    (void)n_inputs;
    (void)user;
    return ac_resample(inputs[0], 2, 3, 4, cubic_index, cubic_weight, 0.0);
}

static void test_resample_gradient_check(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t xs[4] = {2, 3, 4, 5};
    AcTensor *inputs[1];
    float max_err = -1.0f;
    ac_manual_seed(6);
    inputs[0] = leaf_randn(xs, 4, 1.0f);
    CHECK(ac_gradient_check(resample_fn, inputs, 1, NULL, 1e-2f, 1e-2f, 1e-2f, &max_err) == AC_OK);
    CHECK(max_err >= 0.0f && max_err < 1e-2f);
    ac_mem_restore(cp);
}

/* ---- pools --------------------------------------------------------------------- */

static void test_max_pool_options(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float xv[16] = {1, 3, 3, 0, 3, 2, 0, 3, 5, 5, 7, 7, 5, 6, 7, -1};
    AcTensor *x = from(xv, 1, 1, 4, 4), *indices = NULL;
    /* 3x3 windows, stride 2, ceil_mode: a partial second window on each side */
    AcTensor *y = ac_max_pool2d_ex(x, 3, 3, 2, 2, 0, 0, 1, 1, 1, &indices);
    /* dilation 2: the 2x2 taps at distance 2 */
    AcTensor *d = ac_max_pool2d_ex(x, 2, 2, 1, 1, 0, 0, 2, 2, 0, NULL);
    AcTensor *a = ac_adaptive_max_pool2d(x, 1, 2, &indices);
    AcTensor *avg = ac_avg_pool2d_ex(x, 3, 3, 2, 2, 0, 0, 1);
    CHECK(y && y->shape[2] == 2 && y->shape[3] == 2);
    CHECK(y && y->data[0] == 7.0f && y->data[1] == 7.0f && y->data[3] == 7.0f);
    CHECK(d && d->shape[2] == 2 && d->data[0] == 7.0f && d->data[1] == 7.0f);
    CHECK(a && a->data[0] == 6.0f && a->data[1] == 7.0f);
    CHECK(indices && indices->dtype == AC_INT64 && ((int64_t *)indices->data)[0] == 13 &&
          ((int64_t *)indices->data)[1] == 10);
    /* the partial window's sum over 9 (the caller rescales): (7 + 7 + 7 - 1) / 9 */
    CHECK(avg && avg->shape[3] == 2);
    CHECK_NEAR(avg ? avg->data[3] : 0.0f, 20.0f / 9.0f, 1e-6);
    ac_mem_restore(cp);
}

static AcTensor *dilated_fn(AcTensor *const *inputs, int n_inputs, void *user)
{
    (void)n_inputs;
    (void)user;
    return ac_max_pool2d_ex(inputs[0], 2, 3, 2, 1, 1, 1, 2, 1, 1, NULL);
}

static void test_max_pool_gradient_check(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t xs[4] = {2, 2, 7, 6};
    AcTensor *inputs[1];
    float max_err = -1.0f;
    ac_manual_seed(8);
    inputs[0] = leaf_randn(xs, 4, 1.0f);
    CHECK(ac_gradient_check(dilated_fn, inputs, 1, NULL, 1e-3f, 1e-2f, 1e-2f, &max_err) == AC_OK);
    ac_mem_restore(cp);
}

/* ---- bad inputs ----------------------------------------------------------------- */

static void test_bad_inputs(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t xs[4] = {1, 2, 4, 4}, ws[4] = {3, 2, 3, 3}, w2s[4] = {2, 1, 3, 3};
    const int64_t index[2] = {0, 9};
    AcTensor *x = ac_tensor_new(xs, 4), *w = ac_tensor_new(ws, 4), *w2 = ac_tensor_new(w2s, 4);
    AcTensor *indices = NULL;
    CHECK(!ac_conv_transpose2d(x, w, 1, 1, 0, 0, 0, 0, 1, 1, 1) && message_has("2 channels"));
    CHECK(!ac_conv_transpose2d(NULL, w, 1, 1, 0, 0, 0, 0, 1, 1, 1));
    CHECK(!ac_conv_transpose2d(x, x, 2, 2, 0, 0, 2, 0, 1, 1, 1) && message_has("output_padding"));
    CHECK(!ac_conv_transpose2d(x, x, 0, 1, 0, 0, 0, 0, 1, 1, 1) && message_has("stride"));
    CHECK(!ac_conv_transpose2d(x, w2, 1, 1, 9, 9, 0, 0, 1, 1, 1) && message_has("output of"));
    CHECK(!ac_conv_transpose2d(x, w2, 1, 1, 0, 0, 0, 0, 1, 1, 3) && message_has("groups"));
    CHECK(!ac_resample(x, 4, 2, 1, index, NULL, 0.0) && message_has("dim 4"));
    CHECK(!ac_resample(x, 3, 2, 1, index, NULL, 0.0) && message_has("out of range"));
    CHECK(!ac_resample(x, 3, 2, 0, index, NULL, 0.0));
    CHECK(!ac_resample(x, 3, 2, 1, NULL, NULL, 0.0));
    CHECK(!ac_max_pool2d_ex(x, 2, 2, 1, 1, 0, 0, 0, 1, 0, NULL) && message_has("dilation"));
    CHECK(!ac_max_pool2d_ex(x, 3, 3, 1, 1, 2, 2, 1, 1, 0, &indices) && message_has("half"));
    CHECK(!indices);
    CHECK(!ac_adaptive_max_pool2d(x, 0, 1, NULL) && message_has("output size"));
    CHECK(!ac_adaptive_max_pool2d(NULL, 1, 1, NULL));
    CHECK(!ac_avg_pool2d_ex(x, 5, 5, 1, 1, 0, 0, 1) && message_has("larger"));
    CHECK(ac_max_pool2d_ex(x, 2, 2, 2, 2, 0, 0, 1, 1, 0, NULL) != NULL);   /* still usable */
    ac_mem_restore(cp);
}

int main(void)
{
    RUN(test_conv_transpose_values);
    RUN(test_conv_transpose_gradient_check);
    RUN(test_resample_pads_and_interpolates);
    RUN(test_resample_copies_int64);
    RUN(test_resample_gradient_check);
    RUN(test_max_pool_options);
    RUN(test_max_pool_gradient_check);
    RUN(test_bad_inputs);
    return TEST_REPORT();
}
