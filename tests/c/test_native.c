/*
 * test_native.c - native segments (the mlir backend's way into replay), with
 * hand-written segment functions: a segment replaces its nodes and reads the
 * scalar arguments replay holds now, a parameter's gradient is made for it when
 * missing, a segment's error status fails the replay by naming the node's op,
 * replays stay free of heap allocations, and bad calls fail cleanly.
 */
#include "ac.h"
#include "test.h"

#include <stdint.h>
#include <string.h>

#define N 6

static AcMemStats stats(void)
{
    AcMemStats s;
    ac_memory_stats(&s);
    return s;
}

/* Node 0 (mul_scalar): data[1] = data[0] * its scalar argument; the scratch is aligned. */
static int scale_native(void *const *data, const double *const *attrs, const void *kernels)
{
    const float *x = data[0];
    float *y = data[1];
    int i;
    (void)kernels;
    if ((uintptr_t)data[2] % 64 != 0) return 1;
    for (i = 0; i < N; i++) y[i] = x[i] * (float)attrs[0][0];
    return 0;
}

/* The gradient of buffer w: add one to each element. */
static int grad_native(void *const *data, const double *const *attrs, const void *kernels)
{
    float *grad = data[0];
    int i;
    (void)attrs;
    (void)kernels;
    for (i = 0; i < N; i++) grad[i] += 1.0f;
    return 0;
}

static int failing_native(void *const *data, const double *const *attrs, const void *kernels)
{
    (void)data;
    (void)attrs;
    (void)kernels;
    return 1;   /* node 0's input holds a bad class index */
}

/* y = exp(x * 2), recorded with x as the input; g's node 0 is mul_scalar. */
static AcGraph *record_scale_exp(AcTensor *x, int *buffers)
{
    AcGraph *g = ac_graph_begin();
    AcTensor *y, *z;
    int n_in, n_out, n_attr;
    double attrs[12];
    ac_graph_input(g, x);
    y = ac_mul_scalar(x, 2.0f);
    z = ac_exp(y);
    CHECK(ac_graph_end(g, &z, 1) == AC_OK);
    CHECK(ac_graph_node_info(g, 0, &n_in, &n_out, buffers, &n_attr, attrs) == AC_OK);
    CHECK(n_in == 1 && n_out == 1 && n_attr == 1 && attrs[0] == 2.0);
    ac_tensor_free(y);
    ac_tensor_free(z);
    return g;
}

static void test_segment_replaces_its_nodes_and_reads_scalars_per_call(void)
{
    const int64_t shape[1] = {N};
    AcTensor *x = ac_randn(shape, 1), *out = NULL;
    int buffers[8], i;
    AcGraph *g = record_scale_exp(x, buffers);
    AcMemStats before;
    CHECK(ac_graph_add_native(g, 0, 1, scale_native, buffers, 2, 100) == AC_OK);
    CHECK(ac_graph_set_scalar(g, 0, 0, 3.0) == AC_OK);
    CHECK(ac_graph_replay(g, &x, 1, &out, 1) == AC_OK);
    for (i = 0; i < N; i++) CHECK_NEAR(out->data[i], expf(3.0f * x->data[i]), 1e-5 * out->data[i]);
    ac_tensor_free(out);
    before = stats();
    for (i = 0; i < 100; i++) {
        CHECK(ac_graph_replay(g, &x, 1, &out, 1) == AC_OK);
        ac_tensor_free(out);
    }
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
    ac_graph_free(g);
    ac_tensor_free(x);
}

static void test_a_parameters_missing_grad_is_made_for_the_segment(void)
{
    const int64_t shape[1] = {N};
    AcTensor *x = ac_randn(shape, 1), *w = ac_randn(shape, 1), *out = NULL, *y;
    AcGraph *g;
    int grad_of_w, i, n_in, n_out, n_attr, buffers[8];
    double attrs[12];
    ac_tensor_set_requires_grad(w, 1);
    g = ac_graph_begin();
    ac_graph_input(g, x);
    ac_set_grad_enabled(0);
    y = ac_mul(x, w);
    ac_set_grad_enabled(1);
    CHECK(ac_graph_end(g, &y, 1) == AC_OK);
    ac_tensor_free(y);
    /* node 0 is set_grad_enabled; node 1 reads x and w */
    CHECK(ac_graph_node_info(g, 1, &n_in, &n_out, buffers, &n_attr, attrs) == AC_OK);
    CHECK(ac_graph_buffer_kind(g, buffers[1]) == AC_BUFFER_PARAMETER);
    grad_of_w = -2 - buffers[1];
    CHECK(ac_graph_add_native(g, 0, 1, grad_native, &grad_of_w, 1, 0) == AC_OK);
    CHECK(w->grad == NULL);
    CHECK(ac_graph_replay(g, &x, 1, &out, 1) == AC_OK);
    ac_tensor_free(out);
    CHECK(ac_graph_replay(g, &x, 1, &out, 1) == AC_OK);
    ac_tensor_free(out);
    CHECK(w->grad != NULL);
    for (i = 0; w->grad && i < N; i++) CHECK(w->grad->data[i] == 2.0f);
    ac_graph_free(g);
    ac_tensor_free(x);
    ac_tensor_free(w);
}

static void test_a_segments_status_fails_the_replay_by_op(void)
{
    const int64_t shape[1] = {N};
    AcTensor *x = ac_randn(shape, 1), *out = NULL;
    int buffers[8];
    AcGraph *g = record_scale_exp(x, buffers);
    AcMemStats before;
    CHECK(ac_graph_add_native(g, 0, 2, failing_native, buffers, 2, 0) == AC_OK);
    CHECK(ac_graph_replay(g, &x, 1, &out, 1) == AC_ERR_INDEX);
    before = stats();
    CHECK(ac_graph_replay(g, &x, 1, &out, 1) == AC_ERR_INDEX);
    CHECK(strstr(ac_last_error(), "mul_scalar") != NULL);
    CHECK(stats().live_tensors == before.live_tensors);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    ac_graph_free(g);
    ac_tensor_free(x);
}

static void test_bad_calls_fail_cleanly(void)
{
    const int64_t shape[1] = {N};
    AcTensor *x = ac_randn(shape, 1);
    int buffers[8], bad = 1000, n_in, n_out, n_attr;
    double attrs[12];
    int64_t dims[8];
    AcGraph *g = record_scale_exp(x, buffers), *open;
    CHECK(ac_graph_add_native(NULL, 0, 1, scale_native, buffers, 2, 0) == AC_ERR_ARG);
    CHECK(ac_graph_add_native(g, 1, 2, scale_native, buffers, 2, 0) == AC_ERR_INDEX);
    CHECK(ac_graph_add_native(g, 0, 0, scale_native, buffers, 2, 0) == AC_ERR_INDEX);
    CHECK(ac_graph_add_native(g, 0, 1, NULL, buffers, 2, 0) == AC_ERR_ARG);
    CHECK(ac_graph_add_native(g, 0, 1, scale_native, NULL, 2, 0) == AC_ERR_ARG);
    CHECK(ac_graph_add_native(g, 0, 1, scale_native, &bad, 1, 0) == AC_ERR_INDEX);
    CHECK(ac_graph_add_native(g, 0, 1, scale_native, buffers, 2, -1) == AC_ERR_ARG);
    CHECK(ac_graph_node_info(g, -1, &n_in, &n_out, buffers, &n_attr, attrs) == AC_ERR_INDEX);
    CHECK(ac_graph_buffer_shape(g, 0, NULL) == AC_ERR_ARG);
    CHECK(ac_graph_buffer_shape(g, 0, dims) == 1 && dims[0] == N);
    CHECK(ac_graph_buffer_dtype(g, 0) == AC_FLOAT32);
    CHECK(ac_graph_output_buffer(g, 1) == AC_ERR_INDEX);
    open = ac_graph_begin();   /* still recording: not readable yet */
    CHECK(ac_graph_num_inputs(open) == AC_ERR_STATE);
    CHECK(ac_graph_add_native(open, 0, 1, scale_native, buffers, 2, 0) == AC_ERR_STATE);
    ac_graph_end(open, NULL, 0);
    ac_graph_free(open);
    ac_graph_free(g);
    ac_tensor_free(x);
}

int main(void)
{
    AcMemStats start = stats(), end;
    RUN(test_segment_replaces_its_nodes_and_reads_scalars_per_call);
    RUN(test_a_parameters_missing_grad_is_made_for_the_segment);
    RUN(test_a_segments_status_fails_the_replay_by_op);
    RUN(test_bad_calls_fail_cleanly);
    end = stats();
    CHECK(end.live_tensors == start.live_tensors);
    CHECK(end.bytes_in_use == start.bytes_in_use);
    return TEST_REPORT();
}
