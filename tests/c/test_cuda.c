/* test_cuda.c - the CUDA API: with no GPU (or a build without CUDA) every call
   that needs a device is a clear AC_ERR_DEVICE and the library goes on working;
   on a GPU, copies both ways, backward through them, and device memory under the
   scopes (a warm loop makes no cudaMalloc). */
#include "ac.h"
#include "test.h"

#include <string.h>

static AcMemStats stats(void)
{
    AcMemStats s;
    ac_memory_stats(&s);
    return s;
}

/* Runs first: nothing before it may have asked for a device. */
static void test_loading_does_not_initialise_cuda(void) { CHECK(ac_cuda_is_initialized() == 0); }

static void test_without_a_device_calls_fail_clearly(void)
{
    int64_t shape[2] = {2, 3};
    AcTensor *t = ac_full(shape, 2, 1.5f), *u;
    CHECK(!ac_cuda_is_available() && ac_last_error_code() == AC_OK);
    CHECK(ac_cuda_is_initialized() == ac_cuda_is_built());
    CHECK(ac_cuda_device_count() == AC_ERR_DEVICE && strstr(ac_last_error(), "is not available: "));
    CHECK(ac_cuda_synchronize(-1) == AC_ERR_DEVICE && strstr(ac_last_error(), "synchronize: cuda:0"));
    u = ac_tensor_to(t, AC_CUDA, 0);
    CHECK(!u && ac_last_error_code() == AC_ERR_DEVICE);
    CHECK(strstr(ac_last_error(), "to: cuda:0 is not available: ") != NULL);
    if (!ac_cuda_is_built()) CHECK(strstr(ac_last_error(), "this build of libac has no CUDA") != NULL);
    CHECK(stats().cuda_mallocs == 0 && stats().device_bytes_in_use == 0);
    u = ac_tensor_to(t, AC_CPU, 0);   /* the library still works */
    CHECK(u && u != t && u->data[5] == 1.5f && u->device == AC_CPU);
    ac_tensor_free(u);
    ac_tensor_free(t);
}

static void test_bad_arguments(void)
{
    int64_t shape[1] = {3};
    AcTensor *t = ac_full(shape, 1, 1.0f);
    CHECK(!ac_tensor_to(NULL, AC_CPU, 0) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_tensor_to(t, 7, 0) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_tensor_to(t, AC_CPU, 1) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_tensor_to(t, AC_CUDA, -1) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_cuda_synchronize(-2) == AC_ERR_ARG);
    ac_tensor_free(t);
}

/* to() is differentiable: the gradient comes back through the copy. */
static void test_backward_through_a_copy(int device)
{
    int64_t shape[2] = {3, 5};
    AcTensor *x = ac_full(shape, 2, 2.0f), *y, *square, *loss, *back;
    int64_t i;
    ac_tensor_set_requires_grad(x, 1);
    y = ac_tensor_to(x, device, 0);
    CHECK(y && y->requires_grad && y->device == device);
    back = ac_tensor_to(y, AC_CPU, 0);
    square = ac_mul(back, back);
    loss = ac_sum(square, NULL, 0, 0);
    CHECK(loss && ac_backward(loss) == AC_OK);
    CHECK(x->grad && x->grad->device == AC_CPU);
    for (i = 0; x->grad && i < x->grad->size; i++) CHECK(x->grad->data[i] == 4.0f);
    ac_tensor_free(loss);
    ac_tensor_free(square);
    ac_tensor_free(back);
    ac_tensor_free(y);
    ac_tensor_free(x);
}

static void test_on_a_device(void)
{
    int64_t i, mallocs = 0;
    AcTensor *host = ac_arange(0.0, 1000.0, 1.0), *dev, *back;
    AcMemStats before = stats();
    CHECK(ac_cuda_device_count() >= 1 && ac_cuda_is_initialized());
    dev = ac_tensor_to(host, AC_CUDA, 0);
    CHECK(dev && dev->device == AC_CUDA && dev->device_index == 0);
    CHECK(ac_tensor_fill_(dev, 3.0) == AC_OK);
    back = ac_tensor_to(dev, AC_CPU, 0);
    for (i = 0; back && i < 1000; i++) CHECK(back->data[i] == 3.0f);
    CHECK(stats().device_bytes_in_use > before.device_bytes_in_use);
    ac_tensor_free(back);
    ac_tensor_free(dev);
    CHECK(stats().device_bytes_in_use == before.device_bytes_in_use);
    for (i = 0; i < 100; i++) {   /* the device arena: a warm loop makes no cudaMalloc */
        AcCheckpoint cp = ac_mem_checkpoint();
        AcTensor *a = ac_tensor_to(host, AC_CUDA, 0), *b = ac_tensor_to(a, AC_CUDA, 0);
        AcTensor *c = ac_tensor_to(b, AC_CPU, 0);
        CHECK(c && c->data[999] == 999.0f);
        CHECK(ac_mem_restore(cp) == AC_OK);
        if (i == 1) mallocs = stats().cuda_mallocs;
    }
    CHECK(stats().cuda_mallocs == mallocs);
    CHECK(stats().device_bytes_in_use == before.device_bytes_in_use);
    for (i = 0; i < 10; i++) {   /* root tensors: freed ones come back from the cache */
        AcTensor *r = ac_tensor_to(host, AC_CUDA, 0);
        ac_tensor_free(r);
        if (i == 0) mallocs = stats().cuda_mallocs;
    }
    CHECK(stats().cuda_mallocs == mallocs);
    CHECK(ac_cuda_synchronize(-1) == AC_OK && ac_cuda_synchronize(0) == AC_OK);
    test_backward_through_a_copy(AC_CUDA);
    ac_tensor_free(host);
}

int main(void)
{
    RUN(test_loading_does_not_initialise_cuda);
    RUN(test_bad_arguments);
    if (ac_cuda_is_available())
        RUN(test_on_a_device);
    else
        RUN(test_without_a_device_calls_fail_clearly);
    test_backward_through_a_copy(AC_CPU);
    return TEST_REPORT();
}
