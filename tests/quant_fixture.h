/*
 * quant_fixture.h — the dequantisation fixtures of scripts/gen_quant_fixtures.py (the PyPI
 * `gguf` package as the reference), read for test_quant and test_block_units. A file
 * tests/fixtures/quant/NAME is "LCQF", u32 version 1, u32 type, u32 n (values), u32 raw_bytes,
 * u32 flags, the raw blocks, n fp32 reference values, and (flags & 1: F16 / BF16) n fp32
 * source values. All little-endian.
 */
#ifndef LC_TEST_QUANT_FIXTURE_H
#define LC_TEST_QUANT_FIXTURE_H

#include "format/quant.h"
#include "test_util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct quant_fixture {
    uint8_t *buf;   /* the whole file (free it) */
    uint32_t type, n, raw_bytes, flags;
    const uint8_t *raw, *ref, *src; /* into buf: raw blocks, reference values, (flags & 1) sources */
} quant_fixture;

static inline uint32_t quant_fixture_le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Read fixture file (of want_type) into *q; false, with failed CHECKs, when it cannot be read or
 * its header does not match its size, its type or its type's row bytes. */
static inline bool quant_fixture_load(const char *file, uint32_t want_type, quant_fixture *q) {
    memset(q, 0, sizeof *q);
    char path[512];
    snprintf(path, sizeof path, "%s/tests/fixtures/quant/%s", LC_SOURCE_DIR, file);
    FILE *f = fopen(path, "rb");
    CHECKF(f != NULL, "cannot open %s", path);
    if (!f) return false;
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    q->buf = malloc(size > 0 ? (size_t)size : 1);
    CHECK(q->buf && size > 0 && fread(q->buf, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    if (!q->buf || size < 24) {
        CHECKF(false, "%s: %ld bytes", file, size);
        return false;
    }
    const uint8_t *b = q->buf;
    CHECK(memcmp(b, "LCQF", 4) == 0 && quant_fixture_le32(b + 4) == 1);
    q->type = quant_fixture_le32(b + 8), q->n = quant_fixture_le32(b + 12);
    q->raw_bytes = quant_fixture_le32(b + 16), q->flags = quant_fixture_le32(b + 20);
    CHECK(q->type == want_type);
    const size_t need = 24 + (size_t)q->raw_bytes + 4 * (size_t)q->n * ((q->flags & 1) ? 2 : 1);
    CHECKF((size_t)size == need, "%s: size %ld, header says %zu", file, size, need);
    uint64_t rb = 0;
    const bool rows_ok = lc_type_row_bytes(q->type, q->n, &rb) && rb == q->raw_bytes;
    CHECK(rows_ok);
    if ((size_t)size != need || q->type != want_type || !rows_ok) {
        free(q->buf);
        q->buf = NULL;
        return false;
    }
    q->raw = b + 24, q->ref = q->raw + q->raw_bytes, q->src = q->ref + 4 * (size_t)q->n;
    return true;
}

#endif
