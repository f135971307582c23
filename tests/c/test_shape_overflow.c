/* test_shape_overflow.c - a shape whose dims other than 0 multiply past int64 is
   refused (AC_ERR_MEMORY, "too many elements") by creation, reshape and expand,
   though it holds no element: (0, 2^32, 2^32) would flatten to (0, 0). */
#include "ac.h"
#include "test.h"

#include <string.h>

static void test_empty_shapes_whose_other_dims_overflow_are_refused(void)
{
    const int64_t huge[3] = {0, (int64_t)1 << 32, (int64_t)1 << 32}, ok[3] = {0, 1 << 20, 1 << 20};
    const int64_t zero[1] = {0}, late[3] = {(int64_t)1 << 40, 0, (int64_t)1 << 40};
    AcTensor *empty = ac_full(zero, 1, 0.0f), *t, *flat;
    CHECK(ac_full(huge, 3, 0.0f) == NULL && ac_last_error_code() == AC_ERR_MEMORY);
    CHECK(strstr(ac_last_error(), "too many elements") != NULL);
    CHECK(ac_full(late, 3, 0.0f) == NULL && ac_last_error_code() == AC_ERR_MEMORY);
    CHECK(ac_reshape(empty, huge, 3) == NULL && ac_last_error_code() == AC_ERR_MEMORY);
    t = ac_full(ok, 3, 0.0f);
    CHECK(t && t->size == 0);
    flat = t ? ac_flatten(t, 1, 2) : NULL;
    CHECK(flat && flat->ndim == 2 && flat->shape[1] == (int64_t)1 << 40);
    ac_tensor_free(flat);
    ac_tensor_free(t);
    ac_tensor_free(empty);
}

int main(void)
{
    RUN(test_empty_shapes_whose_other_dims_overflow_are_refused);
    return TEST_REPORT();
}
