/* test_device.c - what ops do with a tensor on a device they cannot use: the
   device field, the error for inputs on two devices, and no kernel found.
   No GPU is needed: a CPU tensor relabelled cuda:0 stands in for one, which
   only a build without CUDA can do safely (its table there has no kernels, so
   nothing reads the data as device memory). */
#include "ac.h"
#include "test.h"

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
    CHECK(ac_add_(cpu, gpu) == AC_ERR_DEVICE && strstr(ac_last_error(), "add_:") != NULL);
    CHECK(ac_div_(gpu, cpu) == AC_ERR_DEVICE && strstr(ac_last_error(), "cuda:0 and cpu") != NULL);
    CHECK(cpu->data[0] == 1.0f && gpu->data[0] == 1.0f);   /* untouched */
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
static AcTensor *call_sum(const AcTensor *a, const AcTensor *b) { (void)b; return ac_sum(a, NULL, 0, 0); }
static AcTensor *call_mean(const AcTensor *a, const AcTensor *b) { int d = 1; (void)b; return ac_mean(a, &d, 1, 1); }
static AcTensor *call_max(const AcTensor *a, const AcTensor *b) { int d = 0; (void)b; return ac_max(a, &d, 1, 0); }
static AcTensor *call_min(const AcTensor *a, const AcTensor *b) { (void)b; return ac_min(a, NULL, 0, 0); }
static AcTensor *call_var(const AcTensor *a, const AcTensor *b) { (void)b; return ac_var(a, NULL, 0, 1, 0); }
static AcTensor *call_std(const AcTensor *a, const AcTensor *b) { int d = 1; (void)b; return ac_std(a, &d, 1, 0, 0); }
static AcTensor *call_max_dim(const AcTensor *a, const AcTensor *b) { AcTensor *i; (void)b; return ac_max_dim(a, 1, 0, &i); }
static AcTensor *call_min_dim(const AcTensor *a, const AcTensor *b) { (void)b; return ac_min_dim(a, 0, 1, NULL); }
static AcTensor *call_argmax(const AcTensor *a, const AcTensor *b) { (void)b; return ac_argmax(a, 1, 0); }

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
    {"sum", call_sum, 0}, {"mean", call_mean, 0}, {"max", call_max, 0}, {"min", call_min, 0},
    {"var", call_var, 0}, {"std", call_std, 0}, {"max", call_max_dim, 0},
    {"min", call_min_dim, 0}, {"argmax", call_argmax, 0},
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

/* sum of a bool tensor on cuda:0: the exact integer sum has no kernel there either. */
static void test_integer_sum_refuses_a_device_without_kernels(void)
{
    int64_t shape[2] = {2, 3};
    AcTensor *ones = ac_full(shape, 2, 1.0f), *mask = ac_compare_scalar(ones, 0.5, AC_GT);
    mask->device = AC_CUDA;
    CHECK(!ac_sum(mask, NULL, 0, 0) && ac_last_error_code() == AC_ERR_DEVICE);
    CHECK(strncmp(ac_last_error(), "sum:", 4) == 0 && strstr(ac_last_error(), "cuda:0"));
    mask->device = AC_CPU;
    CHECK(mask->data && ((const uint8_t *)(const void *)mask->data)[0] == 1);
    ac_tensor_free(mask);
    ac_tensor_free(ones);
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

int main(void)
{
    RUN(test_new_tensors_are_on_the_cpu);
    RUN(test_inputs_on_two_devices_are_refused);
    if (!ac_cuda_is_built()) {   /* with CUDA, cuda:0 has kernels, which must not see host memory */
        RUN(test_a_device_without_a_backend_has_no_kernels);
        RUN(test_every_op_refuses_a_device_without_kernels);
        RUN(test_integer_sum_refuses_a_device_without_kernels);
    }
    RUN(test_every_binary_op_refuses_mixed_devices);
    return TEST_REPORT();
}
