/* fuzz_safetensors.c - ac_load_safetensors on any bytes: a dict of root
   tensors that fill the file's data region exactly, or a format error; never a
   crash, an overread or a leak. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzMemory before = fuzz_memory();
    AcStateDict *dict = ac_load_safetensors(fuzz_write(data, size));
    if (dict) {
        int64_t bytes = 0;
        int i, n = ac_state_dict_size(dict);
        for (i = 0; i < n; i++) {
            AcTensor *t = ac_state_dict_tensor(dict, i);
            FUZZ_CHECK(t && t->scope_depth == 0 && t->refcount >= 1);
            bytes += t->size * ac_dtype_size(t->dtype);
        }
        FUZZ_CHECK(n == 0 || bytes < (int64_t)size);
        FUZZ_CHECK(ac_state_dict_free(dict) == AC_OK);
    } else {
        fuzz_expect_read_error();
    }
    fuzz_memory_back_to(before);
    return 0;
}
