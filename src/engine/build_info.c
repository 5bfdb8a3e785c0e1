/*
 * build_info.c — what this library is (lc_build: version, commit, CUDA architectures) and
 * which GPU it would use (lc_gpu_name), for `longctx --version` and bug reports. The strings
 * come from CMake at configure time (CMakeLists.txt).
 */
#include "backend/backend.h"
#include "longctx.h"
#include "util/util.h"

#ifndef LC_VERSION_STRING
#define LC_VERSION_STRING "unknown"
#endif
#ifndef LC_BUILD_COMMIT
#define LC_BUILD_COMMIT "unknown"
#endif
#ifndef LC_BUILD_ARCHS
#define LC_BUILD_ARCHS ""
#endif

lc_build_info lc_build(void) {
    lc_build_info b = {LC_VERSION_STRING, LC_BUILD_COMMIT, false, LC_BUILD_ARCHS};
    b.cuda          = LC_BUILD_ARCHS[0] != '\0';
    return b;
}

int lc_gpu_name(char *buf, size_t cap) {
    if (!buf || !cap) return lc_fail(LC_ERR_INVALID_ARG, "lc_gpu_name: no buffer");
    return lc_backend_cuda_device_name(buf, cap);
}
