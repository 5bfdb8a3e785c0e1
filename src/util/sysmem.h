/*
 * sysmem.h — how much memory the machine has (DESIGN.md "Memory is accounted"): the host's
 * available physical memory (/proc/meminfo, lowered to a cgroup memory limit when one is
 * set), and number formatting for the refusals that quote it. Not part of the public API.
 */
#ifndef LC_SYSMEM_H
#define LC_SYSMEM_H

#include <stddef.h>
#include <stdint.h>

/* Host memory: *available = what can be allocated without swapping (MemAvailable, or, without
 * it, free pages from sysconf), no more than a cgroup (v2 or v1) limit leaves; *total =
 * MemTotal (or the cgroup limit when lower). Either pointer may be NULL. LC_ERR_UNSUPPORTED
 * when neither /proc/meminfo nor sysconf tells. */
int lc_sys_host_memory(uint64_t *available, uint64_t *total);

/* "345.2 GiB", "512.0 MiB", "900 B" into buf (always NUL-terminated); returns buf. */
const char *lc_fmt_bytes(uint64_t bytes, char *buf, size_t cap);
/* 15000000 -> "15,000,000"; returns buf. */
const char *lc_fmt_count(uint64_t n, char *buf, size_t cap);

#endif
