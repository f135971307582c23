/* fuzz_state_dict.c - a state dict loaded from any bytes, used as a C program
   would: every name found by ac_state_dict_get, the entries copied into a new
   dict (in a scope, as a training step would), saved and loaded again, giving
   the same names, dtypes, shapes and bytes. */
#include "fuzz.h"

static void expect_same(const AcStateDict *a, const AcStateDict *b)
{
    int i, n = ac_state_dict_size(a);
    FUZZ_CHECK(ac_state_dict_size(b) == n);
    for (i = 0; i < n; i++) {
        const AcTensor *x = ac_state_dict_tensor(a, i), *y = ac_state_dict_tensor(b, i);
        FUZZ_CHECK(strcmp(ac_state_dict_name(a, i), ac_state_dict_name(b, i)) == 0);
        FUZZ_CHECK(x->dtype == y->dtype && x->ndim == y->ndim && x->size == y->size);
        FUZZ_CHECK(memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim) == 0);
        FUZZ_CHECK(memcmp(x->data, y->data, (size_t)(x->size * ac_dtype_size(x->dtype))) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzMemory before = fuzz_memory();
    AcStateDict *loaded = ac_load_safetensors(fuzz_write(data, size)), *copy, *reloaded;
    AcCheckpoint cp;
    int i, n;
    if (!loaded) {
        fuzz_expect_read_error();
        fuzz_memory_back_to(before);
        return 0;
    }
    n = ac_state_dict_size(loaded);
    copy = ac_state_dict_new();
    FUZZ_CHECK(copy != NULL);
    cp = ac_mem_checkpoint();
    for (i = 0; i < n; i++) {
        const char *name = ac_state_dict_name(loaded, i);
        AcTensor *t = ac_state_dict_tensor(loaded, i), *scoped = ac_tensor_clone(t);
        FUZZ_CHECK(ac_state_dict_get(loaded, name) == t);
        FUZZ_CHECK(scoped != NULL && ac_state_dict_set(copy, name, scoped) == AC_OK);
    }
    FUZZ_CHECK(ac_mem_restore(cp) == AC_OK);   /* the copy holds root copies */
    FUZZ_CHECK(ac_save_safetensors(copy, fuzz_path("out")) == AC_OK);
    reloaded = ac_load_safetensors(fuzz_path("out"));
    FUZZ_CHECK(reloaded != NULL);
    expect_same(loaded, copy);
    expect_same(loaded, reloaded);
    FUZZ_CHECK(ac_state_dict_free(loaded) == AC_OK && ac_state_dict_free(copy) == AC_OK &&
               ac_state_dict_free(reloaded) == AC_OK);
    fuzz_memory_back_to(before);
    return 0;
}
