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

int main(void)
{
    RUN(test_new_tensors_are_on_the_cpu);
    RUN(test_inputs_on_two_devices_are_refused);
    if (!ac_cuda_is_built())   /* with CUDA, cuda:0 has kernels, which must not see host memory */
        RUN(test_a_device_without_a_backend_has_no_kernels);
    return TEST_REPORT();
}
