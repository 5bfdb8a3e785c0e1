// device_info.cu — the current CUDA device's name and free/total memory, and events for timing
// ops: the CUDA backend's measurement ops (backend.h "Measurement", used by the profiling
// backend and `longctx bench`'s result header); and its multiprocessor count for the kernels'
// grid sizes.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"

#include <stdio.h>

extern "C" int lc_cuda_device_info(char *name, size_t cap, uint64_t *free_bytes,
                                   uint64_t *total_bytes) {
    int dev = 0;
    LC_CUDA_TRY(cudaGetDevice(&dev));
    if (name && cap) {
        cudaDeviceProp prop;
        LC_CUDA_TRY(cudaGetDeviceProperties(&prop, dev));
        snprintf(name, cap, "%s", prop.name);
    }
    if (free_bytes || total_bytes) {
        size_t f = 0, t = 0;
        LC_CUDA_TRY(cudaMemGetInfo(&f, &t));
        if (free_bytes) *free_bytes = f;
        if (total_bytes) *total_bytes = t;
    }
    return LC_OK;
}

int lc_cuda_sm_count(void) {
    static int n_sm = 0;
    if (n_sm == 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
            n_sm = 132;
        (void)cudaGetLastError();
    }
    return n_sm;
}

// Events for timing ops on the backend's stream (profile.c): n events made at once.
extern "C" int lc_cuda_events_create(void **ev, int n) {
    for (int i = 0; i < n; i++) {
        cudaEvent_t e;
        cudaError_t err = cudaEventCreate(&e);
        if (err != cudaSuccess) {
            lc_cuda_events_destroy(ev, i);
            LC_CUDA_TRY(err);
        }
        ev[i] = (void *)e;
    }
    return LC_OK;
}

extern "C" void lc_cuda_events_destroy(void **ev, int n) {
    for (int i = 0; i < n; i++)
        if (ev[i]) cudaEventDestroy((cudaEvent_t)ev[i]);
}

extern "C" int lc_cuda_event_record(void *ev) {
    LC_CUDA_TRY(cudaEventRecord((cudaEvent_t)ev, lc_cuda_stream()));
    return LC_OK;
}

// Milliseconds between two recorded events (waits for the second).
extern "C" int lc_cuda_event_ms(void *start, void *end, float *ms) {
    LC_CUDA_TRY(cudaEventSynchronize((cudaEvent_t)end));
    LC_CUDA_TRY(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end));
    return LC_OK;
}
