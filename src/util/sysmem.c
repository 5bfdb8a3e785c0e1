/*
 * sysmem.c — the host's available memory and number formatting (see sysmem.h). Reads
 * /proc/meminfo and the cgroup memory files under /sys/fs/cgroup; no environment variables.
 */
#include "util/sysmem.h"
#include "util/util.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The value of "key:" (in kB) in /proc/meminfo; false when absent. */
static bool meminfo_kb(const char *text, const char *key, uint64_t *out) {
    const size_t klen = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        unsigned long long v;
        if (strncmp(p, key, klen) == 0 && p[klen] == ':' && sscanf(p + klen + 1, "%llu", &v) == 1) {
            *out = (uint64_t)v * 1024u;
            return true;
        }
    }
    return false;
}

static size_t read_small(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n;
}

/* A number file ("max" or absent: false). */
static bool read_u64(const char *path, uint64_t *out) {
    char               buf[64];
    unsigned long long v;
    if (!read_small(path, buf, sizeof buf) || sscanf(buf, "%llu", &v) != 1) return false;
    *out = (uint64_t)v;
    return true;
}

/* "key value" line of a cgroup memory.stat; 0 when absent. */
static uint64_t stat_value(const char *path, const char *key) {
    char buf[8192];
    if (!read_small(path, buf, sizeof buf)) return 0;
    const size_t klen = strlen(key);
    for (const char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        unsigned long long v;
        if (strncmp(p, key, klen) == 0 && p[klen] == ' ' && sscanf(p + klen + 1, "%llu", &v) == 1)
            return (uint64_t)v;
    }
    return 0;
}

/* What a cgroup limit leaves: limit - (usage - inactive page cache, which the kernel reclaims
 * before it kills). false when there is no limit. */
static bool cgroup_left(uint64_t *limit_out, uint64_t *left_out) {
    uint64_t limit, usage;
    uint64_t inactive = 0;
    if (read_u64("/sys/fs/cgroup/memory.max", &limit) &&
        read_u64("/sys/fs/cgroup/memory.current", &usage)) { /* v2 */
        inactive = stat_value("/sys/fs/cgroup/memory.stat", "inactive_file");
    } else if (read_u64("/sys/fs/cgroup/memory/memory.limit_in_bytes", &limit) &&
               read_u64("/sys/fs/cgroup/memory/memory.usage_in_bytes", &usage)) { /* v1 */
        inactive = stat_value("/sys/fs/cgroup/memory/memory.stat", "total_inactive_file");
    } else {
        return false;
    }
    if (limit >= (UINT64_C(1) << 60)) return false; /* v1 writes "no limit" as ~2^63 */
    const uint64_t used = usage > inactive ? usage - inactive : 0;
    *limit_out          = limit;
    *left_out           = limit > used ? limit - used : 0;
    return true;
}

int lc_sys_host_memory(uint64_t *available, uint64_t *total) {
    uint64_t avail = 0, tot = 0;
    bool     have  = false;
    char     buf[8192];
    if (read_small("/proc/meminfo", buf, sizeof buf)) {
        have = meminfo_kb(buf, "MemTotal", &tot);
        if (have && !meminfo_kb(buf, "MemAvailable", &avail)) { /* kernels before 3.14 */
            uint64_t fr = 0, cached = 0, buffers = 0;
            meminfo_kb(buf, "MemFree", &fr);
            meminfo_kb(buf, "Cached", &cached);
            meminfo_kb(buf, "Buffers", &buffers);
            avail = fr + cached + buffers;
        }
    }
    if (!have) {
        const long pages = sysconf(_SC_PHYS_PAGES), avp = sysconf(_SC_AVPHYS_PAGES);
        const long psz   = sysconf(_SC_PAGESIZE);
        if (pages <= 0 || psz <= 0)
            return lc_fail(LC_ERR_UNSUPPORTED, "host memory: neither /proc/meminfo nor sysconf "
                           "tells how much memory there is");
        tot   = (uint64_t)pages * (uint64_t)psz;
        avail = avp > 0 ? (uint64_t)avp * (uint64_t)psz : tot;
    }
    uint64_t limit, left;
    if (cgroup_left(&limit, &left)) {
        if (left < avail) avail = left;
        if (limit < tot) tot = limit;
    }
    if (available) *available = avail;
    if (total) *total = tot;
    return LC_OK;
}

const char *lc_fmt_bytes(uint64_t bytes, char *buf, size_t cap) {
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, cap, "%" PRIu64 " B", bytes);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    int    u = 0;
    while (v >= 1024.0 && u < 5) v /= 1024.0, u++;
    snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}

const char *lc_fmt_count(uint64_t n, char *buf, size_t cap) {
    char digits[32];
    int  nd = snprintf(digits, sizeof digits, "%" PRIu64, n);
    char tmp[48];
    int  o = 0;
    for (int i = 0; i < nd; i++) {
        if (i > 0 && (nd - i) % 3 == 0) tmp[o++] = ',';
        tmp[o++] = digits[i];
    }
    tmp[o] = '\0';
    snprintf(buf, cap, "%s", tmp);
    return buf;
}

int lc_host_memory(uint64_t *available, uint64_t *total) {
    lc_clear_error();
    return lc_sys_host_memory(available, total);
}
