/* test_dlpack.c - tensors over external memory (release called once, never a free
   of memory libac does not own) and DLPack export and import, with their errors. */
#include "ac.h"
#include "test.h"

#include <stdint.h>
#include <string.h>

#include "dlpack.h"   /* the consumer's and producer's view of DLPack's ABI */

static int releases;
static void count_release(void *ctx) { releases++; (void)ctx; }
static void count_delete(DLManagedTensor *self) { releases++; (void)self; }
static void count_delete_versioned(DLManagedTensorVersioned *self) { releases++; (void)self; }

static int64_t bytes_in_use(void)
{
    AcMemStats s;
    ac_memory_stats(&s);
    return s.bytes_in_use;
}

static void test_external_tensor_releases_once_after_its_last_view(void)
{
    float data[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3}, flat = 6;
    int64_t before = bytes_in_use();
    AcTensor *t, *view, *doubled;
    releases = 0;
    t = ac_tensor_from_external(data, shape, 2, AC_FLOAT32, count_release, NULL);
    CHECK(t && t->data == data && t->scope_depth == 0 && t->size == 6);
    view = ac_reshape(t, &flat, 1);
    doubled = ac_mul_scalar(view, 2.0f);
    CHECK(doubled && doubled->data[5] == 12.0f);
    data[0] = -1.0f;                       /* shared, not copied */
    CHECK(view->data[0] == -1.0f);
    CHECK(ac_tensor_fill_(view, 7.0) == AC_OK && data[4] == 7.0f);
    ac_tensor_free(t);
    CHECK(releases == 0);                  /* the view still holds it */
    ac_tensor_free(view);
    CHECK(releases == 1);
    ac_tensor_free(doubled);
    CHECK(releases == 1 && bytes_in_use() == before);
}

static void test_external_tensor_is_made_at_root_inside_a_scope(void)
{
    int64_t data[3] = {4, 5, 6}, shape[1] = {3};
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *t = ac_tensor_from_external(data, shape, 1, AC_INT64, count_release, NULL), *v;
    releases = 0;
    CHECK(t && t->scope_depth == 0 && t->dtype == AC_INT64);
    v = ac_unsqueeze(t, 0);                /* a scoped view holds it until the scope ends */
    CHECK(v && v->scope_depth == 1);
    ac_tensor_free(t);
    CHECK(releases == 0);
    CHECK(ac_mem_restore(cp) == AC_OK && releases == 1 && data[2] == 6);
}

static void test_external_tensor_refuses_bad_arguments(void)
{
    char bytes[16] = {0};
    int64_t shape[1] = {2}, bad_shape[1] = {-2};
    releases = 0;
    CHECK(!ac_tensor_from_external(NULL, shape, 1, AC_FLOAT32, count_release, NULL) &&
          ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_tensor_from_external(bytes + 1, shape, 1, AC_FLOAT32, count_release, NULL) &&
          ac_last_error_code() == AC_ERR_ARG && strstr(ac_last_error(), "aligned"));
    CHECK(!ac_tensor_from_external(bytes, shape, 1, 7, count_release, NULL) &&
          ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(!ac_tensor_from_external(bytes, bad_shape, 1, AC_BOOL, count_release, NULL) &&
          ac_last_error_code() == AC_ERR_ARG);
    CHECK(releases == 0);                  /* the caller still owns its memory */
}

static void test_export_shares_data_until_the_deleter(void)
{
    float values[4] = {1, 2, 3, 4};
    int64_t shape[2] = {2, 2};
    int64_t before = bytes_in_use();
    AcTensor *t = ac_tensor_from_data(values, shape, 2);
    DLManagedTensor *m = ac_to_dlpack(t, 0);
    const DLTensor *dl;
    CHECK(m != NULL);
    if (!m) return;
    dl = &m->dl_tensor;
    CHECK(dl->data == t->data && dl->device.device_type == 1 && dl->ndim == 2);
    CHECK(dl->dtype.code == 2 && dl->dtype.bits == 32 && dl->dtype.lanes == 1);
    CHECK(dl->shape[0] == 2 && dl->shape[1] == 2 && dl->strides[0] == 2 && dl->strides[1] == 1);
    CHECK(dl->byte_offset == 0);
    ((float *)dl->data)[3] = 40.0f;        /* a write through the consumer's side */
    CHECK(t->data[3] == 40.0f);
    ac_tensor_free(t);                     /* the export still holds it */
    CHECK(((float *)dl->data)[0] == 1.0f);
    m->deleter(m);
    CHECK(bytes_in_use() == before);
}

static void test_export_refuses_scoped_and_null_tensors(void)
{
    int64_t shape[1] = {3};
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *t = ac_tensor_new(shape, 1);
    CHECK(ac_to_dlpack(t, 1) == NULL && ac_last_error_code() == AC_ERR_SCOPE);
    CHECK(strstr(ac_last_error(), "keep()") != NULL);
    ac_mem_restore(cp);
    CHECK(ac_to_dlpack(NULL, 0) == NULL && ac_last_error_code() == AC_ERR_ARG);
}

static void test_import_keeps_the_producer_until_released(void)
{
    int64_t data[4] = {1, -2, 3, -4}, shape[2] = {2, 2}, strides[2] = {2, 1};
    DLManagedTensor m;
    AcTensor *t;
    memset(&m, 0, sizeof m);
    m.dl_tensor.data = data;
    m.dl_tensor.device.device_type = 1;
    m.dl_tensor.ndim = 2;
    m.dl_tensor.dtype.code = 0;
    m.dl_tensor.dtype.bits = 64;
    m.dl_tensor.dtype.lanes = 1;
    m.dl_tensor.shape = shape;
    m.dl_tensor.strides = strides;
    m.deleter = count_delete;
    releases = 0;
    t = ac_from_dlpack(&m, 0);
    CHECK(t && t->dtype == AC_INT64 && (void *)t->data == (void *)data && t->shape[1] == 2);
    ac_tensor_free(t);
    CHECK(releases == 1);

    m.dl_tensor.byte_offset = 2 * sizeof(int64_t);   /* the second row alone */
    shape[0] = 1;
    t = ac_from_dlpack(&m, 0);
    CHECK(t && t->size == 2 && ((int64_t *)(void *)t->data)[0] == 3);
    ac_tensor_free(t);
    CHECK(releases == 2);
}

static void test_import_refuses_what_it_cannot_share(void)
{
    double data[4] = {0};
    int64_t shape[2] = {2, 2}, transposed[2] = {1, 2};
    DLManagedTensor m;
    memset(&m, 0, sizeof m);
    m.dl_tensor.data = data;
    m.dl_tensor.device.device_type = 1;
    m.dl_tensor.ndim = 2;
    m.dl_tensor.dtype.code = 2;
    m.dl_tensor.dtype.bits = 64;
    m.dl_tensor.dtype.lanes = 1;
    m.dl_tensor.shape = shape;
    m.deleter = count_delete;
    releases = 0;
    CHECK(!ac_from_dlpack(&m, 0) && ac_last_error_code() == AC_ERR_DTYPE &&
          strstr(ac_last_error(), "float64"));
    m.dl_tensor.dtype.bits = 32;
    m.dl_tensor.strides = transposed;
    CHECK(!ac_from_dlpack(&m, 0) && ac_last_error_code() == AC_ERR_ARG &&
          strstr(ac_last_error(), "contiguous"));
    m.dl_tensor.strides = NULL;
    m.dl_tensor.device.device_type = 2;    /* CUDA */
    CHECK(!ac_from_dlpack(&m, 0) && ac_last_error_code() == AC_ERR_DEVICE);
    m.dl_tensor.device.device_type = 1;
    m.dl_tensor.ndim = 9;
    CHECK(!ac_from_dlpack(&m, 0) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_from_dlpack(NULL, 0) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(releases == 0);
    CHECK(ac_dlpack_delete(&m, 0) == AC_OK && releases == 1);   /* the owner declines it */
    CHECK(ac_dlpack_delete(NULL, 1) == AC_ERR_ARG);
}

static void test_versioned_export_is_writable_dlpack_1(void)
{
    int64_t shape[1] = {5};
    AcTensor *t = ac_tensor_new_typed(shape, 1, AC_INT64);
    DLManagedTensorVersioned *m = ac_to_dlpack(t, 1);
    CHECK(m && m->version.major == 1 && m->flags == 0 && m->dl_tensor.data == (void *)t->data);
    CHECK(m && m->dl_tensor.dtype.code == 0 && m->dl_tensor.dtype.bits == 64);
    ac_tensor_free(t);
    if (m) CHECK(ac_dlpack_delete(m, 1) == AC_OK);
}

static void test_versioned_import_checks_version_and_read_only(void)
{
    float data[2] = {1, 2};
    int64_t shape[1] = {2};
    DLManagedTensorVersioned m;
    AcTensor *t;
    memset(&m, 0, sizeof m);
    m.version.major = 1;
    m.dl_tensor.data = data;
    m.dl_tensor.device.device_type = 1;
    m.dl_tensor.ndim = 1;
    m.dl_tensor.dtype.code = 2;
    m.dl_tensor.dtype.bits = 32;
    m.dl_tensor.dtype.lanes = 1;
    m.dl_tensor.shape = shape;
    m.deleter = count_delete_versioned;
    releases = 0;
    m.flags = 1;                           /* read-only */
    CHECK(!ac_from_dlpack(&m, 1) && strstr(ac_last_error(), "read-only"));
    m.flags = 0;
    m.version.major = 2;
    CHECK(!ac_from_dlpack(&m, 1) && ac_last_error_code() == AC_ERR_ARG);
    m.version.major = 1;
    t = ac_from_dlpack(&m, 1);
    CHECK(t && t->data == data && releases == 0);
    ac_tensor_free(t);
    CHECK(releases == 1);
}

static void test_round_trip_through_dlpack_shares_one_buffer(void)
{
    uint8_t mask[3] = {1, 0, 1};
    int64_t shape[1] = {3};
    int64_t before = bytes_in_use();
    AcTensor *a = ac_tensor_from_typed(mask, shape, 1, AC_BOOL);
    AcTensor *b = ac_from_dlpack(ac_to_dlpack(a, 1), 1);
    CHECK(b && b->data == a->data && b->dtype == AC_BOOL);
    ac_tensor_free(a);
    CHECK(((uint8_t *)(void *)b->data)[2] == 1);
    ac_tensor_free(b);                     /* releases the export, which frees a */
    CHECK(bytes_in_use() == before);
}

int main(void)
{
    RUN(test_external_tensor_releases_once_after_its_last_view);
    RUN(test_external_tensor_is_made_at_root_inside_a_scope);
    RUN(test_external_tensor_refuses_bad_arguments);
    RUN(test_export_shares_data_until_the_deleter);
    RUN(test_export_refuses_scoped_and_null_tensors);
    RUN(test_import_keeps_the_producer_until_released);
    RUN(test_import_refuses_what_it_cannot_share);
    RUN(test_versioned_export_is_writable_dlpack_1);
    RUN(test_versioned_import_checks_version_and_read_only);
    RUN(test_round_trip_through_dlpack_shares_one_buffer);
    return TEST_REPORT();
}
