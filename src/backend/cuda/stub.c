/*
 * stub.c — the CUDA backend when longctx is built without CUDA: every entry point reports
 * LC_ERR_UNSUPPORTED, so callers never need #ifdefs.
 */
#include "backend/backend.h"
#include "util/util.h"

int lc_backend_cuda_device_name(char *buf, size_t cap) {
    if (buf && cap) buf[0] = '\0';
    return lc_fail(LC_ERR_UNSUPPORTED, "this build of longctx has no CUDA backend");
}

int lc_backend_cuda_create(int device_index, lc_backend **out) {
    (void)device_index;
    *out = NULL;
    return lc_fail(LC_ERR_UNSUPPORTED, "this build of longctx has no CUDA backend "
                   "(configure with nvcc available and -DLC_CUDA=ON)");
}
