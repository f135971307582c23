/* fuzz_idx.c - ac_read_idx on any bytes: a tensor whose values are bytes
   (0..255) and whose shape matches the data, or a format error; never a crash,
   an overread or a leak. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzMemory before = fuzz_memory();
    AcTensor *t = ac_read_idx(fuzz_write(data, size));
    if (t) {
        int64_t count = 1, i;
        int d;
        FUZZ_CHECK(t->dtype == AC_FLOAT32 && t->ndim == data[3]);
        for (d = 0; d < t->ndim; d++) count *= t->shape[d];
        FUZZ_CHECK(count == t->size && (size_t)(4 + 4 * t->ndim + count) == size);
        for (i = 0; i < t->size; i++)
            FUZZ_CHECK(t->data[i] == (float)data[size - (size_t)t->size + (size_t)i]);
        FUZZ_CHECK(ac_tensor_free(t) == AC_OK);
    } else {
        fuzz_expect_read_error();
    }
    fuzz_memory_back_to(before);
    return 0;
}
