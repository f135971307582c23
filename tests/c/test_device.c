/* test_device.c - what ops do with a tensor on a device they cannot use: the
   device field, the error for inputs on two devices, and no kernel found.
   No GPU is needed: a CPU tensor relabelled cuda:0 stands in for one, which
   only a build without CUDA can do safely (its table there has no kernels, so
   nothing reads the data as device memory). */
#include "ac.h"
#include "test.h"

#include <stdio.h>
#include <string.h>

/* A 2x3 tensor of ones that says it lives on cuda:0 (its data is host memory). */
static AcTensor *fake_cuda_tensor(void)
{
    int64_t shape[2] = {2, 3};
    AcTensor *t = ac_full(shape, 2, 1.0f);
    if (t) {
        t->device = AC_CUDA;
        t->device_index = 0;
    }
    return t;
}

/* Back to the CPU, where its memory is, before it is freed. */
static void free_fake(AcTensor *t)
{
    t->device = AC_CPU;
    t->device_index = 0;
    ac_tensor_free(t);
}

static void test_new_tensors_are_on_the_cpu(void)
{
    int64_t shape[1] = {3};
    AcTensor *a = ac_full(shape, 1, 2.0f), *b = ac_exp(a), *v = ac_reshape(a, shape, 1);
    CHECK(a && a->device == AC_CPU && a->device_index == 0);
    CHECK(b && b->device == AC_CPU && v && v->device == AC_CPU);
    ac_tensor_free(v);
    ac_tensor_free(b);
    ac_tensor_free(a);
}

static void test_inputs_on_two_devices_are_refused(void)
{
    int64_t shape[2] = {2, 3};
    AcTensor *cpu = ac_full(shape, 2, 1.0f), *gpu = fake_cuda_tensor();
    const char *msg;
    CHECK(!ac_add(cpu, gpu) && ac_last_error_code() == AC_ERR_DEVICE);
    msg = ac_last_error();
    CHECK(strstr(msg, "add:") && strstr(msg, "same device") && strstr(msg, "cpu") &&
          strstr(msg, "cuda:0"));
    CHECK(!ac_mul(gpu, cpu) && ac_last_error_code() == AC_ERR_DEVICE);
    CHECK(strstr(ac_last_error(), "cuda:0 and cpu") != NULL);
    gpu->device_index = 1;
    cpu->device = AC_CUDA;   /* cuda:0 against cuda:1 */
    CHECK(!ac_sub(cpu, gpu) && ac_last_error_code() == AC_ERR_DEVICE);
    CHECK(strstr(ac_last_error(), "cuda:0 and cuda:1") != NULL);
    cpu->device = AC_CPU;
    free_fake(gpu);
    ac_tensor_free(cpu);
}

static void test_a_device_without_a_backend_has_no_kernels(void)
{
    AcTensor *gpu = fake_cuda_tensor();
    CHECK(!ac_exp(gpu) && ac_last_error_code() == AC_ERR_DEVICE);
    CHECK(strstr(ac_last_error(), "cuda:0") != NULL);
    CHECK(!ac_tensor_clone(gpu) && ac_last_error_code() == AC_ERR_DEVICE);
    CHECK(ac_tensor_fill_(gpu, 5.0) == AC_ERR_DEVICE);
    CHECK(strstr(ac_last_error(), "fill_: no kernel for cuda:0") != NULL);
    CHECK(gpu->data[0] == 1.0f && gpu->data[5] == 1.0f);   /* untouched */
    free_fake(gpu);
}

/* ---- every op refuses a tensor on a device without kernels ---------------- */

/* One op, called on one tensor (b unused) or two: wrappers give all the same shape. */
typedef struct {
    const char *name;   /* the op's name in its errors */
    AcTensor *(*call)(const AcTensor *a, const AcTensor *b);
    int binary;
} DeviceCase;

static AcTensor *call_add(const AcTensor *a, const AcTensor *b) { return ac_add(a, b); }
static AcTensor *call_sub(const AcTensor *a, const AcTensor *b) { return ac_sub(a, b); }
static AcTensor *call_mul(const AcTensor *a, const AcTensor *b) { return ac_mul(a, b); }
static AcTensor *call_div(const AcTensor *a, const AcTensor *b) { return ac_div(a, b); }
static AcTensor *call_pow(const AcTensor *a, const AcTensor *b) { return ac_pow(a, b); }
static AcTensor *call_add_scalar(const AcTensor *a, const AcTensor *b) { (void)b; return ac_add_scalar(a, 2.0f); }
static AcTensor *call_mul_scalar(const AcTensor *a, const AcTensor *b) { (void)b; return ac_mul_scalar(a, 2.0f); }
static AcTensor *call_rsub_scalar(const AcTensor *a, const AcTensor *b) { (void)b; return ac_rsub_scalar(a, 2.0f); }
static AcTensor *call_div_scalar(const AcTensor *a, const AcTensor *b) { (void)b; return ac_div_scalar(a, 2.0f); }
static AcTensor *call_rdiv_scalar(const AcTensor *a, const AcTensor *b) { (void)b; return ac_rdiv_scalar(a, 2.0f); }
static AcTensor *call_pow_scalar(const AcTensor *a, const AcTensor *b) { (void)b; return ac_pow_scalar(a, 2.0f); }
static AcTensor *call_clamp(const AcTensor *a, const AcTensor *b) { (void)b; return ac_clamp(a, 0.0f, 0.5f); }
static AcTensor *call_neg(const AcTensor *a, const AcTensor *b) { (void)b; return ac_neg(a); }
static AcTensor *call_exp(const AcTensor *a, const AcTensor *b) { (void)b; return ac_exp(a); }
static AcTensor *call_log(const AcTensor *a, const AcTensor *b) { (void)b; return ac_log(a); }
static AcTensor *call_log1p(const AcTensor *a, const AcTensor *b) { (void)b; return ac_log1p(a); }
static AcTensor *call_sqrt(const AcTensor *a, const AcTensor *b) { (void)b; return ac_sqrt(a); }
static AcTensor *call_abs(const AcTensor *a, const AcTensor *b) { (void)b; return ac_abs(a); }
static AcTensor *call_sin(const AcTensor *a, const AcTensor *b) { (void)b; return ac_sin(a); }
static AcTensor *call_cos(const AcTensor *a, const AcTensor *b) { (void)b; return ac_cos(a); }
static AcTensor *call_relu(const AcTensor *a, const AcTensor *b) { (void)b; return ac_relu(a); }
static AcTensor *call_sigmoid(const AcTensor *a, const AcTensor *b) { (void)b; return ac_sigmoid(a); }
static AcTensor *call_tanh(const AcTensor *a, const AcTensor *b) { (void)b; return ac_tanh(a); }
static AcTensor *call_gelu(const AcTensor *a, const AcTensor *b) { (void)b; return ac_gelu(a); }
static AcTensor *call_softmax(const AcTensor *a, const AcTensor *b) { (void)b; return ac_softmax(a, 0); }
static AcTensor *call_log_softmax(const AcTensor *a, const AcTensor *b) { (void)b; return ac_log_softmax(a, 1); }
static AcTensor *call_dropout(const AcTensor *a, const AcTensor *b) { (void)b; return ac_dropout(a, 0.5f, 1); }
static AcTensor *call_feature_dropout(const AcTensor *a, const AcTensor *b) { (void)b; return ac_feature_dropout(a, 0.5f, 1); }
static AcTensor *call_compare(const AcTensor *a, const AcTensor *b) { return ac_compare(a, b, AC_LT); }
static AcTensor *call_compare_scalar(const AcTensor *a, const AcTensor *b) { (void)b; return ac_compare_scalar(a, 0.5, AC_GE); }
static AcTensor *call_logical(const AcTensor *a, const AcTensor *b) { return ac_logical(a, b, AC_XOR); }
static AcTensor *call_logical_not(const AcTensor *a, const AcTensor *b) { (void)b; return ac_logical_not(a); }

/* where(cond, a, b) with a bool cond on a's device. */
static AcTensor *call_where(const AcTensor *a, const AcTensor *b)
{
    int64_t shape[2] = {2, 3};
    AcTensor *ones = ac_full(shape, 2, 1.0f), *cond = ac_compare_scalar(ones, 0.5, AC_GT), *out;
    cond->device = a->device;
    out = ac_where(cond, a, b);
    cond->device = AC_CPU;
    ac_tensor_free(cond);
    ac_tensor_free(ones);
    return out;
}
static AcTensor *call_mse_loss(const AcTensor *a, const AcTensor *b) { return ac_mse_loss(a, b, AC_REDUCTION_MEAN); }
static AcTensor *call_l1_loss(const AcTensor *a, const AcTensor *b) { return ac_l1_loss(a, b, AC_REDUCTION_SUM); }
static AcTensor *call_smooth_l1_loss(const AcTensor *a, const AcTensor *b) { return ac_smooth_l1_loss(a, b, AC_REDUCTION_NONE, 1.0f); }
static AcTensor *call_bce(const AcTensor *a, const AcTensor *b) { return ac_binary_cross_entropy(a, b, AC_REDUCTION_MEAN); }
static AcTensor *call_bce_with_logits(const AcTensor *a, const AcTensor *b) { return ac_bce_with_logits(a, b, AC_REDUCTION_MEAN); }

/* cross_entropy of logits a (2, 3) with int64 targets (2,) on b's device. */
static AcTensor *call_cross_entropy(const AcTensor *a, const AcTensor *b)
{
    int64_t shape[1] = {2};
    AcTensor *target = ac_tensor_new_typed(shape, 1, AC_INT64), *out;
    ac_tensor_fill_(target, 1.0);
    target->device = b->device;
    out = ac_cross_entropy(a, target, AC_REDUCTION_MEAN, 0.0f);
    target->device = AC_CPU;
    ac_tensor_free(target);
    return out;
}

static const DeviceCase device_cases[] = {
    {"add", call_add, 1}, {"sub", call_sub, 1}, {"mul", call_mul, 1}, {"div", call_div, 1},
    {"pow", call_pow, 1}, {"add_scalar", call_add_scalar, 0}, {"mul_scalar", call_mul_scalar, 0},
    {"rsub_scalar", call_rsub_scalar, 0}, {"div_scalar", call_div_scalar, 0},
    {"rdiv_scalar", call_rdiv_scalar, 0}, {"pow_scalar", call_pow_scalar, 0},
    {"clamp", call_clamp, 0}, {"neg", call_neg, 0}, {"exp", call_exp, 0}, {"log", call_log, 0},
    {"log1p", call_log1p, 0}, {"sqrt", call_sqrt, 0}, {"abs", call_abs, 0}, {"sin", call_sin, 0},
    {"cos", call_cos, 0}, {"relu", call_relu, 0}, {"sigmoid", call_sigmoid, 0},
    {"tanh", call_tanh, 0}, {"gelu", call_gelu, 0}, {"softmax", call_softmax, 0},
    {"log_softmax", call_log_softmax, 0}, {"dropout", call_dropout, 0},
    {"feature_dropout", call_feature_dropout, 0}, {"lt", call_compare, 1},
    {"ge", call_compare_scalar, 0}, {"logical_xor", call_logical, 1},
    {"logical_not", call_logical_not, 0}, {"where", call_where, 1},
    {"mse_loss", call_mse_loss, 1}, {"l1_loss", call_l1_loss, 1},
    {"smooth_l1_loss", call_smooth_l1_loss, 1}, {"binary_cross_entropy", call_bce, 1},
    {"bce_with_logits", call_bce_with_logits, 1}, {"cross_entropy", call_cross_entropy, 1},
};

/* 1.0 everywhere still: the op did not write into its input. */
static int all_ones(const AcTensor *t)
{
    int64_t i;
    for (i = 0; i < t->size; i++)
        if (t->data[i] != 1.0f) return 0;
    return 1;
}

/* The error names the op and the device, and the input is as it was. */
static void check_refused(const DeviceCase *c, const AcTensor *out, const AcTensor *gpu)
{
    const char *msg = ac_last_error();
    int named = strncmp(msg, c->name, strlen(c->name)) == 0 && msg[strlen(c->name)] == ':';
    CHECK(!out && ac_last_error_code() == AC_ERR_DEVICE && named && strstr(msg, "cuda:0"));
    CHECK(all_ones(gpu));
    if (out || !named) fprintf(stderr, "  op %s: %s\n", c->name, msg);
}

static void test_every_op_refuses_a_device_without_kernels(void)
{
    AcTensor *gpu = fake_cuda_tensor(), *gpu2 = fake_cuda_tensor();
    size_t i;
    for (i = 0; i < sizeof device_cases / sizeof device_cases[0]; i++) {
        const DeviceCase *c = &device_cases[i];
        check_refused(c, c->call(gpu, c->binary ? gpu2 : NULL), gpu);
        CHECK(all_ones(gpu2));
    }
    free_fake(gpu2);
    free_fake(gpu);
}

static void test_every_binary_op_refuses_mixed_devices(void)
{
    int64_t shape[2] = {2, 3};
    AcTensor *cpu = ac_full(shape, 2, 1.0f), *gpu = fake_cuda_tensor();
    size_t i;
    for (i = 0; i < sizeof device_cases / sizeof device_cases[0]; i++) {
        const DeviceCase *c = &device_cases[i];
        if (!c->binary) continue;
        CHECK(!c->call(cpu, gpu) && ac_last_error_code() == AC_ERR_DEVICE);
        CHECK(strstr(ac_last_error(), "same device") && strstr(ac_last_error(), c->name));
        CHECK(!c->call(gpu, cpu) && ac_last_error_code() == AC_ERR_DEVICE);
        CHECK(strstr(ac_last_error(), "same device") != NULL);
        CHECK(all_ones(gpu) && all_ones(cpu));
    }
    free_fake(gpu);
    ac_tensor_free(cpu);
}

/* ---- every op, table-driven ------------------------------------------------ */

typedef struct {
    int ndim;
    int64_t dims[4];
} Shape;

/* An op run on tensors t (ones, float32, of the case's shapes); returns AC_OK or the error. */
typedef int (*OpRun)(AcTensor *const *t);

typedef struct {
    const char *op;       /* in the error message */
    OpRun run;
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
    RUN(test_new_tensors_are_on_the_cpu);
    RUN(test_inputs_on_two_devices_are_refused);
    if (!ac_cuda_is_built()) {   /* with CUDA, cuda:0 has kernels, which must not see host memory */
        RUN(test_a_device_without_a_backend_has_no_kernels);
        RUN(test_every_op_refuses_a_device_without_kernels);
        RUN(test_every_op_refuses_a_device_it_has_no_kernel_for);
    }
    RUN(test_every_binary_op_refuses_mixed_devices);
    RUN(test_ops_with_kernels_refuse_tensors_on_two_devices);
    return TEST_REPORT();
}
