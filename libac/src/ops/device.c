/*
 * device.c - ac_tensor_to: a tensor copied to another device (host to CUDA,
 * CUDA to host, between CUDA devices), and its backward, which copies the
 * gradient back to the input's device.
 *
 * Copies to a device return once the source may be reused; copies to the host
 * wait for the device's stream, so the data is there when the call returns.
 * A graph being recorded cannot hold a copy between devices: it is marked
 * failed.
 *
 * Not here: cudart (kernels/cuda/runtime.cu), device memory (device_arena.c).
 */
#include "graph.h"
#include "kernels/cuda/runtime.h"

#include <string.h>

int tensor_copy_across(AcTensor *dst, const AcTensor *src)
{
    size_t bytes = (size_t)src->size * elem_size(src);
    if (bytes == 0) return AC_OK;
    if (src->device == AC_CPU && dst->device == AC_CPU) {
        memcpy(dst->data, src->data, bytes);
        return AC_OK;
    }
    if (src->device == AC_CPU) return cuda_copy_to_device(dst->device_index, dst->data, src->data, bytes);
    if (dst->device == AC_CPU) return cuda_copy_to_host(src->device_index, dst->data, src->data, bytes);
    /* between two devices: the source's stream must have written src first */
    if (src->device_index != dst->device_index && cuda_synchronize(src->device_index)) return AC_ERR_DEVICE;
    return cuda_copy_on_device(dst->device_index, dst->data, src->data, bytes);
}

static int to_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *in = node->inputs[0];
    gin[0] = ac_tensor_to(gout, in->device, in->device_index);
    return gin[0] ? AC_OK : ac_last_error_code();
}

AcTensor *ac_tensor_to(const AcTensor *t, int device, int device_index)
{
    AcTensor *out;
    if (graph_recording) graph_unsupported("to");
    if (tensor_check_any("to", t, "tensor")) return NULL;
    if (device != AC_CPU && device != AC_CUDA)
        return error_null(AC_ERR_ARG, "to: device %d is not AC_CPU (0) or AC_CUDA (1)", device);
    if (device_index < 0 || (device == AC_CPU && device_index != 0))
        return error_null(AC_ERR_ARG, "to: device index %d is not valid for %s", device_index,
                          device == AC_CPU ? "the CPU (0)" : "CUDA");
    out = op_output_on("to", t, device, device_index, to_backward);
    if (!out) return NULL;
    if (tensor_copy_across(out, t)) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}
