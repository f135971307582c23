/*
 * dlpack.c - sharing tensors with other libraries (NumPy, PyTorch, ...) through
 * DLPack's DLManagedTensor, without copying.
 *
 * Export: a DLManagedTensor describing a root tensor's data and holding a
 * reference to the tensor until the consumer calls its deleter. Scoped tensors
 * are refused: their memory ends with their scope, whoever still points at it.
 * Import: a DLManagedTensor becomes an external tensor whose release calls the
 * producer's deleter, so the producer's memory lives as long as the tensor.
 *
 * Not here: Python's capsules and __dlpack__ protocol (aicraft/dlpack.py).
 */
#include "internal.h"

#include <string.h>

/* dlpack.h's ABI (unversioned DLManagedTensor, as in DLPack 0.8 and 1.x),
   spelled out so that libac needs no extra header. */
enum { DL_CPU = 1 };
enum { DL_INT = 0, DL_FLOAT = 2, DL_BOOL = 6 };   /* type codes; kinds[] below names all */

typedef struct {
    int32_t device_type;
    int32_t device_id;
} DLDevice;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;      /* in elements; NULL means row-major contiguous */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* One allocation per export: the managed tensor and the arrays it points to. */
typedef struct {
    DLManagedTensor managed;   /* first: the consumer's pointer is an Export * */
    int64_t shape[AC_MAX_DIMS];
    int64_t strides[AC_MAX_DIMS];
} Export;

static void export_delete(DLManagedTensor *self)
{
    ac_tensor_free(self->manager_ctx);
    root_free(self, sizeof(Export));
}

void *ac_to_dlpack(AcTensor *t)
{
    Export *e;
    int64_t stride = 1;
    int i;
    if (tensor_check_any("to_dlpack", t, "tensor")) return NULL;
    if (t->scope_depth != 0)
        return error_null(AC_ERR_SCOPE, "to_dlpack: tensor %s was made in a scope and dies with it; "
                          "keep() it first to share it", tensor_shape_str(t));
    e = root_alloc(sizeof *e);
    if (!e) return NULL;
    memset(e, 0, sizeof *e);
    for (i = t->ndim - 1; i >= 0; i--) {   /* strides in full: DLPack 1.2 asks for them */
        e->shape[i] = t->shape[i];
        e->strides[i] = stride;
        stride *= t->shape[i];
    }
    e->managed.dl_tensor.data = t->data;
    e->managed.dl_tensor.device.device_type = DL_CPU;
    e->managed.dl_tensor.ndim = t->ndim;
    e->managed.dl_tensor.dtype.code = t->dtype == AC_FLOAT32 ? DL_FLOAT : t->dtype == AC_INT64 ? DL_INT : DL_BOOL;
    e->managed.dl_tensor.dtype.bits = (uint8_t)(elem_size(t) * 8);
    e->managed.dl_tensor.dtype.lanes = 1;
    e->managed.dl_tensor.shape = e->shape;
    e->managed.dl_tensor.strides = e->strides;
    e->managed.manager_ctx = t;
    e->managed.deleter = export_delete;
    ac_tensor_retain(t);
    return &e->managed;
}

/* The AcDtype of a DLPack dtype, or -1 and an error naming it. */
static int dtype_from_dlpack(DLDataType d)
{
    static const char *const kinds[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
    if (d.lanes == 1 && d.code == DL_FLOAT && d.bits == 32) return AC_FLOAT32;
    if (d.lanes == 1 && d.code == DL_INT && d.bits == 64) return AC_INT64;
    if (d.lanes == 1 && d.code == DL_BOOL && d.bits == 8) return AC_BOOL;
    error_set(AC_ERR_DTYPE, "from_dlpack: dtype %s%d (lanes %d) is not float32, int64 or bool; "
              "convert it first", d.code < 7 ? kinds[d.code] : "code-", (int)d.bits, (int)d.lanes);
    return -1;
}

static void import_release(void *ctx)
{
    DLManagedTensor *m = ctx;
    if (m->deleter) m->deleter(m);
}

AcTensor *ac_from_dlpack(void *managed)
{
    DLManagedTensor *m = managed;
    const DLTensor *dl;
    int64_t expected = 1, size;
    char *data;
    int dtype, i;
    if (!m) return error_null(AC_ERR_ARG, "from_dlpack: managed tensor is NULL");
    dl = &m->dl_tensor;
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
    return ac_tensor_from_external(data, dl->shape, dl->ndim, dtype,
                                   import_release, m);
}
