/* test_device_ops.c - the ops of the matmul, conv, pooling, norm, embedding and
   optimizer entries, and every op without table entries (cpu_only), on a device
   they cannot use: each refuses a tensor relabelled cuda:0 ("no kernel for
   cuda:0") and leaves its data as it was; those with entries refuse tensors on
   two devices. As in test_device.c, the relabelled tensor's data is host memory,
   which only a build without CUDA can do safely. */
#include "ac.h"
#include "test.h"

#include <stdio.h>
#include <string.h>

/* ---- every op, table-driven ------------------------------------------------ */

typedef struct {
    int ndim;
    int64_t dims[4];
} Shape;

/* An op run on tensors t (ones, float32, of the case's shapes); returns AC_OK or the error. */
typedef int (*DeviceCase)(AcTensor *const *t);

typedef struct {
    const char *op;       /* in the error message */
    DeviceCase run;
    int n;
    Shape shapes[5];
    int has_kernels;      /* the op has table entries: a tensor on another device than the
                             rest gives the two-devices error, not a missing kernel */
} OpCase;

static int made(const AcTensor *out) { return out ? AC_OK : ac_last_error_code(); }

static int run_matmul(AcTensor *const *t) { return made(ac_matmul(t[0], t[1])); }
static int run_linear(AcTensor *const *t) { return made(ac_linear(t[0], t[1], t[2])); }
static int run_conv2d(AcTensor *const *t) { return made(ac_conv2d(t[0], t[1], t[2], 1, 1, 1, 1, 1, 1, 1)); }
static int run_max_pool2d(AcTensor *const *t) { return made(ac_max_pool2d(t[0], 2, 2, 2, 2, 0, 0)); }
static int run_avg_pool2d(AcTensor *const *t) { return made(ac_avg_pool2d(t[0], 2, 2, 2, 2, 0, 0)); }
static int run_adaptive_avg_pool2d(AcTensor *const *t) { return made(ac_adaptive_avg_pool2d(t[0], 2, 2)); }
static int run_batch_norm(AcTensor *const *t)
{
    return made(ac_batch_norm(t[0], t[1], t[2], t[3], t[4], 1, 0.1f, 1e-5f));
}
static int run_layer_norm(AcTensor *const *t)
{
    int64_t normalized[1] = {3};
    return made(ac_layer_norm(t[0], normalized, 1, t[1], t[2], 1e-5f));
}
static int run_embedding(AcTensor *const *t) { return made(ac_embedding(t[0], t[1], -1)); }

/* An optimizer step with t[1] as param t[0]'s gradient for the call. */
static int with_grad(AcTensor *const *t, int status_of_step(AcTensor *const *t))
{
    int status;
    t[0]->grad = t[1];
    status = status_of_step(t);
    t[0]->grad = NULL;
    return status;
}
static int sgd(AcTensor *const *t) { return ac_sgd_step(t[0], t[2], 2, 0.1f, 0.9f, 0.0f, 0, 0.0f); }
static int adam(AcTensor *const *t) { return ac_adam_step(t[0], t[2], t[3], 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 0); }
static int adadelta(AcTensor *const *t) { return ac_adadelta_step(t[0], t[2], t[3], 1.0f, 0.9f, 1e-6f, 0.0f); }
static int rmsprop(AcTensor *const *t) { return ac_rmsprop_step(t[0], t[2], NULL, NULL, 0.1f, 0.99f, 1e-8f, 0.0f, 0.0f, 0); }
static int adagrad(AcTensor *const *t) { return ac_adagrad_step(t[0], t[2], 1, 0.1f, 0.0f, 0.0f, 1e-10f); }
static int run_sgd(AcTensor *const *t) { return with_grad(t, sgd); }
static int run_adam(AcTensor *const *t) { return with_grad(t, adam); }
static int run_adadelta(AcTensor *const *t) { return with_grad(t, adadelta); }
static int run_rmsprop(AcTensor *const *t) { return with_grad(t, rmsprop); }
static int run_adagrad(AcTensor *const *t) { return with_grad(t, adagrad); }

static int run_lstm(AcTensor *const *t)
{
    return made(ac_lstm(t[0], NULL, NULL, t[1], t[2], NULL, NULL, 0, 0, NULL, NULL));
}
static int run_gru(AcTensor *const *t) { return made(ac_gru(t[0], NULL, t[1], t[2], NULL, NULL, 0, 0, NULL)); }

/* Quantized layers packed from CPU weights, run on t[0]. */
static int run_qlinear_forward(AcTensor *const *t)
{
    int64_t shape[2] = {8, 3};
    AcTensor *w = ac_full(shape, 2, 0.5f);
    AcQLinear *q = ac_qlinear_pack(w, NULL);
    int status = made(ac_qlinear_forward(q, t[0]));
    ac_qlinear_free(q);
    ac_tensor_free(w);
    return status;
}
static int run_qlstm(AcTensor *const *t)
{
    int64_t ih_shape[2] = {8, 3}, hh_shape[2] = {8, 2};
    AcTensor *w_ih = ac_full(ih_shape, 2, 0.5f), *w_hh = ac_full(hh_shape, 2, 0.5f);
    AcQLinear *ih = ac_qlinear_pack(w_ih, NULL), *hh = ac_qlinear_pack(w_hh, NULL);
    int status = made(ac_qlstm(t[0], NULL, NULL, ih, hh, 0, 0, NULL, NULL));
    ac_qlinear_free(ih);
    ac_qlinear_free(hh);
    ac_tensor_free(w_ih);
    ac_tensor_free(w_hh);
    return status;
}
static int run_qlinear_pack(AcTensor *const *t)
{
    AcQLinear *q = ac_qlinear_pack(t[0], t[1]);
    ac_qlinear_free(q);
    return q ? AC_OK : ac_last_error_code();
}

static int run_sort(AcTensor *const *t) { return made(ac_sort(t[0], -1, 0, NULL)); }
static int run_topk(AcTensor *const *t) { return made(ac_topk(t[0], 1, -1, 1, NULL)); }
static int run_cumsum(AcTensor *const *t) { return made(ac_cumsum(t[0], 0)); }
static int run_index_select(AcTensor *const *t) { return made(ac_index_select(t[0], 0, t[1])); }
static int run_index_put(AcTensor *const *t) { return ac_index_put_(t[0], 0, t[1], t[2]); }
static int run_gather(AcTensor *const *t) { return made(ac_gather(t[0], 0, t[1])); }
static int run_expand(AcTensor *const *t)
{
    int64_t shape[2] = {4, 3};
    return made(ac_expand(t[0], shape, 2));
}
static int run_transpose(AcTensor *const *t) { return made(ac_transpose(t[0], 0, 1)); }
static int run_slice(AcTensor *const *t)
{
    AcSlice s = {0, 1, 1, 1, 1, 0};
    return made(ac_slice(t[0], &s, 1));
}
static int run_slice_put(AcTensor *const *t)
{
    AcSlice s = {0, 1, 1, 1, 1, 0};
    return ac_slice_put_(t[0], &s, 1, t[1]);
}
static int run_cat(AcTensor *const *t) { return made(ac_cat(t, 2, 0)); }
static int run_stack(AcTensor *const *t) { return made(ac_stack(t, 2, 0)); }
static int run_to_dtype(AcTensor *const *t) { return made(ac_to_dtype(t[0], AC_INT64)); }
static int run_keep(AcTensor *const *t) { return made(ac_tensor_keep(t[0])); }
static int run_copy(AcTensor *const *t) { return ac_tensor_copy_(t[0], t[1]); }
static int run_uniform(AcTensor *const *t) { return ac_tensor_uniform_(t[0], 0.0f, 1.0f); }
static int run_normal(AcTensor *const *t) { return ac_tensor_normal_(t[0], 0.0f, 1.0f); }
static int run_params_to_flat(AcTensor *const *t) { return ac_params_to_flat(t, 1, t[1]); }
static int run_params_from_flat(AcTensor *const *t) { return ac_params_from_flat(t, 1, t[1]); }
static int run_lbfgs_direction(AcTensor *const *t)
{
    return ac_lbfgs_direction(t[0], NULL, NULL, NULL, 0, 1.0f, NULL, t[1]);
}
static int run_to_dlpack(AcTensor *const *t)
{
    void *m = ac_to_dlpack(t[0], 1);
    if (m) ac_dlpack_delete(m, 1);
    return m ? AC_OK : ac_last_error_code();
}
static int run_save_safetensors(AcTensor *const *t)
{
    AcStateDict *dict = ac_state_dict_new();
    int status = ac_state_dict_set(dict, "w", t[0]);
    if (status == AC_OK) status = ac_save_safetensors(dict, "test_device_never_written.safetensors");
    ac_state_dict_free(dict);
    return status;
}
static AcTensor *doubled(AcTensor *const *inputs, int n, void *user)
{
    (void)n;
    (void)user;
    return ac_add(inputs[0], inputs[0]);
}
static int run_gradient_check(AcTensor *const *t)
{
    return ac_gradient_check(doubled, t, 1, NULL, 1e-3f, 1e-3f, 1e-3f, NULL);
}

#define S2(a, b) {2, {a, b, 0, 0}}
#define S1(a) {1, {a, 0, 0, 0}}
static const OpCase op_cases[] = {
    {"matmul", run_matmul, 2, {S2(2, 3), S2(3, 2)}, 1},
    {"linear", run_linear, 3, {S2(2, 3), S2(4, 3), S1(4)}, 1},
    {"conv2d", run_conv2d, 3, {{4, {1, 1, 4, 4}}, {4, {1, 1, 3, 3}}, S1(1)}, 1},
    {"max_pool2d", run_max_pool2d, 1, {{4, {1, 1, 4, 4}}}, 1},
    {"avg_pool2d", run_avg_pool2d, 1, {{4, {1, 1, 4, 4}}}, 1},
    {"adaptive_avg_pool2d", run_adaptive_avg_pool2d, 1, {{4, {1, 1, 4, 4}}}, 1},
    {"batch_norm", run_batch_norm, 5, {S2(2, 3), S1(3), S1(3), S1(3), S1(3)}, 1},
    {"layer_norm", run_layer_norm, 3, {S2(2, 3), S1(3), S1(3)}, 1},
    {"embedding", run_embedding, 2, {S2(2, 3), S2(4, 3)}, 1},
    {"sgd_step", run_sgd, 3, {S2(2, 3), S2(2, 3), S2(2, 3)}, 1},
    {"adam_step", run_adam, 4, {S2(2, 3), S2(2, 3), S2(2, 3), S2(2, 3)}, 1},
    {"adadelta_step", run_adadelta, 4, {S2(2, 3), S2(2, 3), S2(2, 3), S2(2, 3)}, 0},
    {"rmsprop_step", run_rmsprop, 3, {S2(2, 3), S2(2, 3), S2(2, 3)}, 0},
    {"adagrad_step", run_adagrad, 3, {S2(2, 3), S2(2, 3), S2(2, 3)}, 0},
    {"lstm", run_lstm, 3, {{3, {2, 1, 3}}, S2(8, 3), S2(8, 2)}, 0},
    {"gru", run_gru, 3, {{3, {2, 1, 3}}, S2(6, 3), S2(6, 2)}, 0},
    {"qlinear_forward", run_qlinear_forward, 1, {S2(2, 3)}, 0},
    {"qlstm", run_qlstm, 1, {{3, {2, 1, 3}}}, 0},
    {"qlinear_pack", run_qlinear_pack, 2, {S2(2, 3), S1(2)}, 0},
    {"sort", run_sort, 1, {S2(2, 3)}, 0},
    {"topk", run_topk, 1, {S2(2, 3)}, 0},
    {"cumsum", run_cumsum, 1, {S2(2, 3)}, 0},
    {"index_select", run_index_select, 2, {S2(2, 3), S1(2)}, 0},
    {"index_put_", run_index_put, 3, {S2(2, 3), S1(1), S2(1, 3)}, 0},
    {"gather", run_gather, 2, {S2(2, 3), S2(1, 3)}, 0},
    {"expand", run_expand, 1, {S2(1, 3)}, 0},
    {"transpose", run_transpose, 1, {S2(2, 3)}, 0},
    {"slice", run_slice, 1, {S2(2, 3)}, 0},
    {"slice_put_", run_slice_put, 2, {S2(2, 3), S1(3)}, 0},
    {"cat", run_cat, 2, {S2(2, 3), S2(2, 3)}, 0},
    {"stack", run_stack, 2, {S2(2, 3), S2(2, 3)}, 0},
    {"to_dtype", run_to_dtype, 1, {S2(2, 3)}, 0},
    {"keep", run_keep, 1, {S2(2, 3)}, 0},
    {"copy_", run_copy, 2, {S2(2, 3), S2(2, 3)}, 0},
    {"uniform_", run_uniform, 1, {S2(2, 3)}, 0},
    {"normal_", run_normal, 1, {S2(2, 3)}, 0},
    {"params_to_flat", run_params_to_flat, 2, {S2(2, 3), S1(6)}, 0},
    {"params_from_flat", run_params_from_flat, 2, {S2(2, 3), S1(6)}, 0},
    {"lbfgs_direction", run_lbfgs_direction, 2, {S1(6), S1(6)}, 0},
    {"to_dlpack", run_to_dlpack, 1, {S2(2, 3)}, 0},
    {"save_safetensors", run_save_safetensors, 1, {S2(2, 3)}, 0},
    {"gradient_check", run_gradient_check, 1, {S2(2, 3)}, 0},
};

/* The case's tensors, all ones, tensor i on cuda:0 when on_gpu says so. */
static void make_case(const OpCase *c, AcTensor **t, int on_gpu(int i, int n))
{
    int i;
    for (i = 0; i < c->n; i++) {
        t[i] = ac_full(c->shapes[i].dims, c->shapes[i].ndim, 1.0f);
        if (t[i] && on_gpu(i, c->n)) t[i]->device = AC_CUDA;
    }
}

/* Every value still 1, and back on the CPU, where the memory is, to be freed. */
static int untouched_then_free(const OpCase *c, AcTensor **t)
{
    int i, same = 1;
    int64_t j;
    for (i = 0; i < c->n; i++) {
        if (!t[i]) return 0;
        for (j = 0; j < t[i]->size; j++) same &= t[i]->data[j] == 1.0f;
        t[i]->device = AC_CPU;
        ac_tensor_free(t[i]);
    }
    return same;
}

static int all(int i, int n) { (void)i; (void)n; return 1; }
static int last(int i, int n) { return i == n - 1; }

static void test_every_op_refuses_a_device_it_has_no_kernel_for(void)
{
    size_t c;
    for (c = 0; c < sizeof op_cases / sizeof op_cases[0]; c++) {
        const OpCase *oc = &op_cases[c];
        AcTensor *t[5] = {NULL};
        char want[64];
        int status;
        make_case(oc, t, all);
        status = oc->run(t);
        snprintf(want, sizeof want, "%s: no kernel for cuda:0", oc->op);
        if (status != AC_ERR_DEVICE || !strstr(ac_last_error(), want))
            fprintf(stderr, "%s: status %d, %s\n", oc->op, status, ac_last_error());
        CHECK(status == AC_ERR_DEVICE && strstr(ac_last_error(), want));
        CHECK(untouched_then_free(oc, t));
    }
}

static void test_ops_with_kernels_refuse_tensors_on_two_devices(void)
{
    size_t c;
    for (c = 0; c < sizeof op_cases / sizeof op_cases[0]; c++) {
        const OpCase *oc = &op_cases[c];
        AcTensor *t[5] = {NULL};
        int status;
        if (!oc->has_kernels || oc->n < 2) continue;
        make_case(oc, t, last);
        status = oc->run(t);
        if (status != AC_ERR_DEVICE || !strstr(ac_last_error(), "same device"))
            fprintf(stderr, "%s: status %d, %s\n", oc->op, status, ac_last_error());
        CHECK(status == AC_ERR_DEVICE && strstr(ac_last_error(), "same device") &&
              strstr(ac_last_error(), "cpu and cuda:0"));
        CHECK(untouched_then_free(oc, t));
    }
}

int main(void)
{
    if (!ac_cuda_is_built())   /* with CUDA, cuda:0 has kernels, which must not see host memory */
        RUN(test_every_op_refuses_a_device_it_has_no_kernel_for);
    RUN(test_ops_with_kernels_refuse_tensors_on_two_devices);
    return TEST_REPORT();
}
