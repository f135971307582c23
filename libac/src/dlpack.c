/*
 * dlpack.c - sharing tensors with other libraries (NumPy, PyTorch, ...) through
 * DLPack, without copying: DLManagedTensorVersioned (DLPack 1.x, which can say
 * "writable") or the older unversioned DLManagedTensor.
 *
 * Export: a managed tensor describing a root tensor's data and holding a
 * reference to the tensor until the consumer calls its deleter. Scoped tensors
 * are refused: their memory ends with their scope, whoever still points at it.
 * Import: a managed tensor becomes an external tensor whose release calls the
 * producer's deleter, so the producer's memory lives as long as the tensor. A
 * bool tensor whose bytes are not all 0 or 1 is refused, as files are.
 *
 * Not here: Python's capsules and __dlpack__ protocol (aicraft/dlpack.py).
 */
#include "dlpack.h"
#include "internal.h"

#include <string.h>

/* One allocation per export: the managed tensor and the arrays it points to. */
typedef struct {
    union {                      /* first: the consumer's pointer is an Export * */
        DLManagedTensor legacy;
        DLManagedTensorVersioned versioned;
    } managed;
    int64_t shape[AC_MAX_DIMS];
    int64_t strides[AC_MAX_DIMS];
} Export;

static void export_free(Export *e, AcTensor *t)
{
    ac_tensor_free(t);
    root_free(e, sizeof *e);
}
static void legacy_delete(DLManagedTensor *self) { export_free((Export *)(void *)self, self->manager_ctx); }
static void versioned_delete(DLManagedTensorVersioned *self)
{
    export_free((Export *)(void *)self, self->manager_ctx);
}

/* dl describes t's data, with e's shape and strides (in full: DLPack 1.2 asks for them). */
static void describe(const AcTensor *t, Export *e, DLTensor *dl)
{
    int64_t stride = 1;
    int i;
    for (i = t->ndim - 1; i >= 0; i--) {
        e->shape[i] = t->shape[i];
        e->strides[i] = stride;
        stride *= t->shape[i];
    }
    dl->data = t->data;
    dl->device.device_type = DL_CPU;
    dl->ndim = t->ndim;
    dl->dtype.code = t->dtype == AC_FLOAT32 ? DL_FLOAT
                   : t->dtype == AC_INT64 || t->dtype == AC_INT8 ? DL_INT
                   : t->dtype == AC_UINT8 ? DL_UINT : DL_BOOL;
    dl->dtype.bits = (uint8_t)(elem_size(t) * 8);
    dl->dtype.lanes = 1;
    dl->shape = e->shape;
    dl->strides = e->strides;
}

void *ac_to_dlpack(AcTensor *t, int versioned)
{
    Export *e;
    if (tensor_check_any("to_dlpack", t, "tensor") || cpu_only("to_dlpack", (const AcTensor *[]){t}, 1))
        return NULL;
    if (t->scope_depth != 0)
        return error_null(AC_ERR_SCOPE, "to_dlpack: tensor %s was made in a scope and dies with it; "
                          "keep() it first to share it", tensor_shape_str(t));
    e = root_alloc(sizeof *e);
    if (!e) return NULL;
    memset(e, 0, sizeof *e);
    if (versioned) {
        DLManagedTensorVersioned *m = &e->managed.versioned;
        m->version.major = DL_MAJOR_VERSION;
        m->version.minor = DL_MINOR_VERSION;
        m->manager_ctx = t;
        m->deleter = versioned_delete;
        describe(t, e, &m->dl_tensor);
    } else {
        e->managed.legacy.manager_ctx = t;
        e->managed.legacy.deleter = legacy_delete;
        describe(t, e, &e->managed.legacy.dl_tensor);
    }
    ac_tensor_retain(t);
    return e;
}

/* The AcDtype of a DLPack dtype, or -1 and an error naming it. */
static int dtype_from_dlpack(DLDataType d)
{
    static const char *const kinds[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
    if (d.lanes == 1 && d.code == DL_FLOAT && d.bits == 32) return AC_FLOAT32;
    if (d.lanes == 1 && d.code == DL_INT && d.bits == 64) return AC_INT64;
    if (d.lanes == 1 && d.code == DL_BOOL && d.bits == 8) return AC_BOOL;
    if (d.lanes == 1 && d.code == DL_UINT && d.bits == 8) return AC_UINT8;
    error_set(AC_ERR_DTYPE, "from_dlpack: dtype %s%d (lanes %d) is not float32, int64, bool or uint8; "
              "convert it first", d.code < 7 ? kinds[d.code] : "code-", (int)d.bits, (int)d.lanes);
    return -1;
}

static void legacy_release(void *ctx)
{
    DLManagedTensor *m = ctx;
    if (m->deleter) m->deleter(m);
}

static void versioned_release(void *ctx)
{
    DLManagedTensorVersioned *m = ctx;
    if (m->deleter) m->deleter(m);
}

AcTensor *ac_from_dlpack(void *managed, int versioned)
{
    DLManagedTensorVersioned *mv = managed;
    const DLTensor *dl;
    int64_t expected = 1, size;
    char *data;
    int dtype, i;
    if (!managed) return error_null(AC_ERR_ARG, "from_dlpack: managed tensor is NULL");
    if (versioned && mv->version.major != DL_MAJOR_VERSION)
        return error_null(AC_ERR_ARG, "from_dlpack: DLPack version %u.%u; libac reads %d.x",
                          (unsigned)mv->version.major, (unsigned)mv->version.minor, DL_MAJOR_VERSION);
    if (versioned && (mv->flags & DL_FLAG_READ_ONLY))
        return error_null(AC_ERR_ARG, "from_dlpack: the data is read-only and tensors are writable; "
                          "copy it first");
    dl = versioned ? &mv->dl_tensor : &((DLManagedTensor *)managed)->dl_tensor;
    if (dl->device.device_type != DL_CPU)
        return error_null(AC_ERR_DEVICE, "from_dlpack: device type %d is not the CPU (%d); libac "
                          "holds CPU tensors", (int)dl->device.device_type, DL_CPU);
    if (dl->ndim < 0 || dl->ndim > AC_MAX_DIMS)
        return error_null(AC_ERR_ARG, "from_dlpack: ndim %d is out of range [0, %d]", (int)dl->ndim,
                          AC_MAX_DIMS);
    dtype = dtype_from_dlpack(dl->dtype);
    if (dtype < 0) return NULL;
    if (shape_check("from_dlpack", dl->shape, dl->ndim, &size)) return NULL;
    /* a dim of size 1 may have any stride; an empty tensor has no layout */
    for (i = dl->ndim - 1; dl->strides && size > 0 && i >= 0; i--) {
        if (dl->shape[i] != 1 && dl->strides[i] != expected)
            return error_null(AC_ERR_ARG, "from_dlpack: strides %s of shape %s are not row-major "
                              "contiguous; make it contiguous first",
                              shape_str(dl->strides, dl->ndim), shape_str(dl->shape, dl->ndim));
        expected *= dl->shape[i];
    }
    data = dl->data ? (char *)dl->data + dl->byte_offset : NULL;
    if (dtype == AC_BOOL && data) {   /* as the safetensors reader: a bool byte is 0 or 1 */
        const unsigned char *bytes = (const unsigned char *)data;
        int64_t e;
        for (e = 0; e < size; e++)
            if (bytes[e] > 1)
                return error_null(AC_ERR_ARG, "from_dlpack: bool element %lld is %u, not 0 or 1; "
                                  "convert it to bool first", (long long)e, bytes[e]);
    }
    return ac_tensor_from_external(data, dl->shape, dl->ndim, dtype,
                                   versioned ? versioned_release : legacy_release, managed);
}

int ac_dlpack_delete(void *managed, int versioned)
{
    if (!managed) return error_set(AC_ERR_ARG, "dlpack_delete: managed tensor is NULL");
    if (versioned) versioned_release(managed);
    else legacy_release(managed);
    return AC_OK;
}
