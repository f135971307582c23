/*
 * dlpack.h - DLPack's ABI (the structs of dlpack.h, versions 0.x and 1.x), spelled
 * out so that libac needs no extra header. dlpack.c produces and consumes them;
 * tests/c/test_dlpack.c plays the other library with the same definitions.
 */
#ifndef AC_DLPACK_H
#define AC_DLPACK_H

#include <stdint.h>

enum { DL_CPU = 1 };
enum { DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2, DL_BOOL = 6 };   /* type codes; dlpack.c names all of them */
enum { DL_MAJOR_VERSION = 1, DL_MINOR_VERSION = 0 };
#define DL_FLAG_READ_ONLY 1u

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
    int64_t *strides;      /* in elements; NULL (before DLPack 1.2) means row-major */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct DLManagedTensorVersioned {
    struct { uint32_t major, minor; } version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#endif /* AC_DLPACK_H */
