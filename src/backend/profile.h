/*
 * profile.h — a profiling backend: wraps another backend (CPU or CUDA), forwards every op to
 * it, counts the backend's memory (weights, KV pools, other allocations; on a GPU also the
 * device's used memory) and, when asked, times each op with the device synchronised before
 * and after it, so the wall time of an op is exactly its own work. Times add up per op, per
 * category (attention = attn_dense, GEMM = matmul, rest = every other op) and per phase of
 * the forward that ran it (decode: every sequence of the batch has one new row; prefill).
 *
 * The wrapper starts as a copy of the inner backend's struct (name, device, types, page size,
 * impl and every op), then overrides the ops it counts: an op it does not know (added to
 * backend.h later) would still pass through untouched, untimed, and tests/test_profile.c
 * fails (it walks the table: every op but the queries, graph and measurement calls must be
 * wrapped). Every op, timed or not, receives the
 * wrapper's pointer, whose impl is the inner backend's, so the backend sees one consistent
 * struct. Used by lc_model_load with lc_model_params.profile (longctx.h).
 */
#ifndef LC_PROFILE_H
#define LC_PROFILE_H

#include "backend/backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Wrap inner (ownership passes to the wrapper: freeing the wrapper frees inner). time_ops:
 * synchronise and time every op (else only memory is counted, at no cost per op). On failure
 * inner is left alone and still the caller's. */
int lc_backend_profile_wrap(lc_backend *inner, bool time_ops, lc_backend **out);
/* True when b was made by lc_backend_profile_wrap. */
bool lc_backend_is_profile(const lc_backend *b);
/* Per-op times and counts since the wrapper was made or last reset (LC_ERR_INVALID_ARG when b
 * is not a profiling backend). */
int lc_backend_profile_get(const lc_backend *b, lc_profile_report *out);
/* Zero the times and counts (memory counts stay). */
int lc_backend_profile_reset(lc_backend *b);
/* Memory as counted by the wrapper, the device's numbers refreshed now. */
int lc_backend_profile_memory(lc_backend *b, lc_memory_report *out);
/* "cpu" or the GPU's name. */
void lc_backend_device_name(const lc_backend *b, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
