// device_info.cu — the current CUDA device's name and free/total memory, and events for timing
// ops: the CUDA backend's measurement ops (backend.h "Measurement", used by the profiling
// backend and `longctx bench`'s result header); its multiprocessor count for the kernels'
// grid sizes; its compute capability and whether the build's wgmma kernels run on it, for the
// kernel choices of attention.cu and attn_segments.cu.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"
#include "backend/cuda/device_prims.cuh" // LC_HAVE_WGMMA

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

int lc_cuda_smem_per_sm(void) {
    static int smem = 0;
    if (smem == 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) != cudaSuccess)
            smem = 228 * 1024;
        (void)cudaGetLastError();
    }
    return smem;
}

int lc_cuda_cc(void) {
    static int cc = -1;
    if (cc < 0) {
        int dev = 0, minor = 0;
        cc = lc_cuda_cc_major();
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
            minor = 0;
        cc = 10 * cc + minor;
    }
    return cc;
}

int lc_cuda_cc_major(void) {
    static int major = -1;
    if (major < 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
            major = 0;
    }
    return major;
}

__global__ void wgmma_probe_kernel(int *out) {
#ifdef LC_HAVE_WGMMA
    *out = 1;
#else
    *out = 0;
#endif
}

bool lc_cuda_have_wgmma(void) {
    static int v = -1;
    if (v < 0) {
        int have = 0, *d_have = NULL;
        if (lc_cuda_cc_major() == 9 && cudaMalloc(&d_have, sizeof(int)) == cudaSuccess) {
            wgmma_probe_kernel<<<1, 1, 0, lc_cuda_stream()>>>(d_have);
            if (cudaMemcpyAsync(&have, d_have, sizeof(int), cudaMemcpyDeviceToHost, lc_cuda_stream()) != cudaSuccess ||
                cudaStreamSynchronize(lc_cuda_stream()) != cudaSuccess)
                have = 0;
            cudaFree(d_have);
        }
        (void)cudaGetLastError(); // a failed probe only means: no wgmma kernel
        v = have;
    }
    return v == 1;
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
