// tiered_memory.cu — the KV cache's host tier on the GPU (issue 24 items 1 and 3; DESIGN.md
// "Indirection, not copies"; spec/infinitehip-and-hip.md §5, spec/tokenselect-and-sparseserve.md
// B.3): one virtual address range per pool with device memory mapped at its start and pinned
// host memory behind it (the CUDA virtual memory API, CU_MEM_LOCATION_TYPE_HOST), so a kernel
// that computes base + page x stride reads and writes either tier without knowing which; a
// host page is read over PCIe (measured on an H200: 50 GB/s for scattered 4-32 KiB slabs,
// scratch probe of 2026-12-03). The driver functions come through cudaGetDriverEntryPoint, so
// nothing links libcuda. And the slab copy op (FlashH2D / the kernel half of FlashD2H): one
// kernel moving a list of equal-sized slabs between two pools, one CTA per slab.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda.h"

#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

namespace {

typedef CUresult (*fn_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*fn_release)(CUmemGenericAllocationHandle);
typedef CUresult (*fn_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*fn_addr_free)(CUdeviceptr, size_t);
typedef CUresult (*fn_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                           unsigned long long);
typedef CUresult (*fn_unmap)(CUdeviceptr, size_t);
typedef CUresult (*fn_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*fn_gran)(size_t *, const CUmemAllocationProp *,
                            CUmemAllocationGranularity_flags);
typedef CUresult (*fn_attr)(int *, CUdevice_attribute, CUdevice);

struct driver {
    bool         tried, ok;
    fn_create    create;
    fn_release   release;
    fn_reserve   reserve;
    fn_addr_free addr_free;
    fn_map       map;
    fn_unmap     unmap;
    fn_access    access;
    fn_gran      gran;
    fn_attr      attr;
};
driver          g_drv;
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

// one tiered allocation: its range and the two physical allocations mapped into it
struct tiered {
    CUdeviceptr                  va;
    size_t                       dev, host; // mapped sizes (granularity multiples)
    CUmemGenericAllocationHandle hd, hh;
    tiered                      *next;
};
tiered *g_list;

bool entry(const char *name, void **fn) {
    cudaDriverEntryPointQueryResult q;
    return cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q) ==
               cudaSuccess && q == cudaDriverEntryPointSuccess && *fn;
}

bool load_driver() { // under g_mu
    if (g_drv.tried) return g_drv.ok;
    g_drv.tried = true;
    g_drv.ok = entry("cuMemCreate", (void **)&g_drv.create) &&
               entry("cuMemRelease", (void **)&g_drv.release) &&
               entry("cuMemAddressReserve", (void **)&g_drv.reserve) &&
               entry("cuMemAddressFree", (void **)&g_drv.addr_free) &&
               entry("cuMemMap", (void **)&g_drv.map) &&
               entry("cuMemUnmap", (void **)&g_drv.unmap) &&
               entry("cuMemSetAccess", (void **)&g_drv.access) &&
               entry("cuMemGetAllocationGranularity", (void **)&g_drv.gran) &&
               entry("cuDeviceGetAttribute", (void **)&g_drv.attr);
    return g_drv.ok;
}

CUmemAllocationProp prop_of(int device, bool host) {
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type          = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id   = host ? 0 : device;
    return p;
}

size_t round_up(size_t v, size_t g) { return (v + g - 1) / g * g; }

} // namespace

extern "C" size_t lc_cuda_tier_align(int device) {
    pthread_mutex_lock(&g_mu);
    size_t g = 0;
    int    supported = 0;
    if (load_driver() &&
        g_drv.attr(&supported, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                   (CUdevice)device) == CUDA_SUCCESS && supported) {
        size_t gd = 0, gh = 0;
        CUmemAllocationProp pd = prop_of(device, false), ph = prop_of(device, true);
        if (g_drv.gran(&gd, &pd, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS &&
            g_drv.gran(&gh, &ph, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && gd && gh)
            g = gd > gh ? gd : gh; // both powers of two: the larger is a multiple of the other
    }
    pthread_mutex_unlock(&g_mu);
    return g;
}

extern "C" void *lc_cuda_alloc_tiered(int device, size_t dev_bytes, size_t host_bytes,
                                      const char *what) {
    const size_t g = lc_cuda_tier_align(device);
    if (!g) {
        lc_fail(LC_ERR_UNSUPPORTED, "%s: this GPU or driver cannot map host memory into the "
                "GPU's address space (CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_"
                "SUPPORTED is 0, or the CUDA virtual memory API is missing); a KV host tier "
                "needs it", what);
        return nullptr;
    }
    if (dev_bytes % g) {
        lc_fail(LC_ERR_INVALID_ARG, "%s: the device tier of %zu bytes is not a multiple of the "
                "mapping granularity %zu", what, dev_bytes, g);
        return nullptr;
    }
    tiered *t = (tiered *)calloc(1, sizeof *t);
    if (!t) {
        lc_fail(LC_ERR_NOMEM, "out of host memory for a tiered allocation's record");
        return nullptr;
    }
    t->dev  = dev_bytes;
    t->host = round_up(host_bytes, g);
    const size_t total = t->dev + t->host;
    const char  *step  = nullptr;
    CUresult     r     = CUDA_SUCCESS;
    bool         hd = false, hh = false, mapped_d = false, mapped_h = false, reserved = false;
    CUmemAllocationProp pd = prop_of(device, false), ph = prop_of(device, true);
    CUmemAccessDesc     ad;
    memset(&ad, 0, sizeof ad);
    ad.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ad.location.id   = device;
    ad.flags         = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    pthread_mutex_lock(&g_mu);
    if ((r = g_drv.reserve(&t->va, total ? total : g, g, 0, 0)) != CUDA_SUCCESS) {
        step = "reserving the address range";
        goto fail;
    }
    reserved = true;
    if (t->dev) {
        if ((r = g_drv.create(&t->hd, t->dev, &pd, 0)) != CUDA_SUCCESS) {
            step = "allocating the device tier";
            goto fail;
        }
        hd = true;
        if ((r = g_drv.map(t->va, t->dev, 0, t->hd, 0)) != CUDA_SUCCESS) {
            step = "mapping the device tier";
            goto fail;
        }
        mapped_d = true;
    }
    if (t->host) {
        if ((r = g_drv.create(&t->hh, t->host, &ph, 0)) != CUDA_SUCCESS) {
            step = "allocating pinned host memory for the host tier";
            goto fail;
        }
        hh = true;
        if ((r = g_drv.map(t->va + t->dev, t->host, 0, t->hh, 0)) != CUDA_SUCCESS) {
            step = "mapping the host tier";
            goto fail;
        }
        mapped_h = true;
    }
    if (total && (r = g_drv.access(t->va, total, &ad, 1)) != CUDA_SUCCESS) {
        step = "granting the GPU access";
        goto fail;
    }
    t->next = g_list;
    g_list  = t;
    pthread_mutex_unlock(&g_mu);
    return (void *)t->va;
fail:
    if (mapped_h) g_drv.unmap(t->va + t->dev, t->host);
    if (mapped_d) g_drv.unmap(t->va, t->dev);
    if (hh) g_drv.release(t->hh);
    if (hd) g_drv.release(t->hd);
    if (reserved) g_drv.addr_free(t->va, total ? total : g);
    pthread_mutex_unlock(&g_mu);
    lc_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? LC_ERR_NOMEM : LC_ERR_INTERNAL,
            "%s: %s (%.1f MiB on the GPU, %.1f MiB of pinned host memory) failed: CUDA driver "
            "error %d", what, step, t->dev / 1048576.0, t->host / 1048576.0, (int)r);
    free(t);
    return nullptr;
}

extern "C" void lc_cuda_dealloc_tiered(void *p) {
    if (!p) return;
    pthread_mutex_lock(&g_mu);
    tiered **at = &g_list;
    while (*at && (void *)(*at)->va != p) at = &(*at)->next;
    tiered *t = *at;
    if (t) {
        *at = t->next;
        // the range may still be read by kernels in flight
        cudaDeviceSynchronize();
        if (t->host) g_drv.unmap(t->va + t->dev, t->host), g_drv.release(t->hh);
        if (t->dev) g_drv.unmap(t->va, t->dev), g_drv.release(t->hd);
        g_drv.addr_free(t->va, t->dev + t->host ? t->dev + t->host : 1);
    }
    pthread_mutex_unlock(&g_mu);
    free(t);
}

// ---- slab copies ----------------------------------------------------------------------------

namespace {
// one CTA per slab: src + copies[i].src * slab -> dst + copies[i].dst * slab, 16 bytes a lane
__global__ void copy_slabs_kernel(const uint4 *__restrict__ src, uint4 *__restrict__ dst,
                                  const lc_slab_copy *__restrict__ copies, int64_t slab16) {
    const lc_slab_copy c = copies[blockIdx.x];
    const uint4       *s = src + (size_t)c.src * (size_t)slab16;
    uint4             *d = dst + (size_t)c.dst * (size_t)slab16;
    for (int64_t i = threadIdx.x; i < slab16; i += blockDim.x) d[i] = s[i];
}
} // namespace

extern "C" int lc_cuda_copy_slabs(const void *src, void *dst, const lc_slab_copy *copies,
                                  int32_t n, size_t slab_bytes) {
    if (n <= 0) return LC_OK;
    const int st = lc_copy_slabs_check(src, dst, copies, slab_bytes);
    if (st != LC_OK) return st;
    copy_slabs_kernel<<<n, 256, 0, lc_cuda_stream()>>>((const uint4 *)src, (uint4 *)dst, copies,
                                                       (int64_t)(slab_bytes / 16));
    LC_CUDA_LAUNCHED();
    return LC_OK;
}
