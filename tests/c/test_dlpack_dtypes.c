/* test_dlpack_dtypes.c - DLPack's dtype labels are exact: uint8 leaves as kDLUInt 8
   (not bool) and comes back as uint8, bool as kDLBool 8; an imported bool tensor
   whose bytes are not all 0 or 1 is refused, with its producer's deleter left to
   its caller (nothing released, nothing leaked). */
#include "ac.h"
#include "test.h"

#include <stdint.h>
#include <string.h>

#include "dlpack.h"

static int releases;
static void count_delete_versioned(DLManagedTensorVersioned *self) { releases++; (void)self; }

static void test_uint8_and_bool_keep_their_labels(void)
{
    uint8_t bytes[3] = {0, 5, 200}, mask[3] = {1, 0, 1};
    int64_t shape[1] = {3};
    AcTensor *u = ac_tensor_from_typed(bytes, shape, 1, AC_UINT8);
    AcTensor *b = ac_tensor_from_typed(mask, shape, 1, AC_BOOL);
    DLManagedTensorVersioned *mu = ac_to_dlpack(u, 1), *mb = ac_to_dlpack(b, 1);
    AcTensor *back;
    CHECK(mu && mu->dl_tensor.dtype.code == 1 && mu->dl_tensor.dtype.bits == 8);   /* kDLUInt */
    CHECK(mb && mb->dl_tensor.dtype.code == 6 && mb->dl_tensor.dtype.bits == 8);   /* kDLBool */
    back = ac_from_dlpack(mu, 1);
    CHECK(back && back->dtype == AC_UINT8 && ((uint8_t *)back->data)[2] == 200);
    ac_tensor_free(back);
    ac_dlpack_delete(mb, 1);
    ac_tensor_free(u);
    ac_tensor_free(b);
}

static void test_bool_bytes_past_1_are_refused(void)
{
    uint8_t data[4] = {0, 1, 2, 1};
    int64_t shape[1] = {4};
    DLManagedTensorVersioned m;
    memset(&m, 0, sizeof m);
    m.version.major = 1;
    m.deleter = count_delete_versioned;
    m.dl_tensor.data = data;
    m.dl_tensor.device.device_type = 1;
    m.dl_tensor.ndim = 1;
    m.dl_tensor.dtype.code = 6;
    m.dl_tensor.dtype.bits = 8;
    m.dl_tensor.dtype.lanes = 1;
    m.dl_tensor.shape = shape;
    releases = 0;
    CHECK(ac_from_dlpack(&m, 1) == NULL);
    CHECK(ac_last_error_code() == AC_ERR_ARG);
    CHECK(strstr(ac_last_error(), "bool element 2 is 2") != NULL);
    CHECK(releases == 0);             /* the caller still owns it */
    data[2] = 0;
    {
        AcTensor *t = ac_from_dlpack(&m, 1);
        CHECK(t && t->dtype == AC_BOOL);
        ac_tensor_free(t);
        CHECK(releases == 1);
    }
}

int main(void)
{
    RUN(test_uint8_and_bool_keep_their_labels);
    RUN(test_bool_bytes_past_1_are_refused);
    return TEST_REPORT();
}
