/* CRC-32C (Castagnoli), the checksum of Kafka's RecordBatch v2 (bytes 21..end of a batch).
 *
 * seglog_crc32c(crc, data, n) continues a CRC the way zlib.crc32 does: pass 0 to start,
 * pass the previous result to continue; pre- and post-inversion happen inside, so
 * seglog_crc32c(0, "123456789", 9) == 0xE3069283 (RFC 3720 check value).
 *
 * Two implementations behind one name:
 *   - x86-64 with SSE4.2: the crc32 instruction, run on three interleaved streams (the
 *     instruction has 3-cycle latency and 1-cycle throughput) whose CRCs are combined with
 *     "shift by N zero bytes" tables, as in Mark Adler's crc32c.c (zlib licence). About 3x the
 *     speed of a single stream on large buffers.
 *   - elsewhere (or if the self-check fails): slicing-by-8 tables, about 1-2 GB/s.
 * seglog_crc32c_init() builds the tables, detects the CPU and runs a self-check of the hardware
 * path against the table path (the RFC vector and a 40 KiB buffer that exercises every
 * stream length); on any mismatch the hardware path is disabled. It is idempotent, runs as a
 * shared-object constructor where the compiler supports it, is called again at import by
 * seglog._native._crc32c, and seglog_crc32c() calls it lazily as a last resort.
 *
 * Everything is static: each extension module that includes this header gets its own copy
 * (about 16 KiB of tables). No allocation, no GIL needed: safe to call in `nogil` blocks.
 */
#ifndef SEGLOG_CRC32C_H
#define SEGLOG_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SEGLOG_CRC32C_X86 1
#include <nmmintrin.h>
#else
#define SEGLOG_CRC32C_X86 0
#endif

#define SEGLOG_CRC32C_POLY 0x82f63b78u /* reflected Castagnoli polynomial */
#define SEGLOG_CRC32C_LONG 8192        /* bytes per stream, long interleave */
#define SEGLOG_CRC32C_SHORT 256        /* bytes per stream, short interleave */

static uint32_t seglog_crc32c_table[8][256];     /* slicing-by-8 */
static uint32_t seglog_crc32c_long[4][256];      /* shift a CRC over LONG zero bytes */
static uint32_t seglog_crc32c_short[4][256];     /* shift a CRC over SHORT zero bytes */
static volatile int seglog_crc32c_ready = 0;     /* tables built, mode chosen */
static int seglog_crc32c_hw = 0;                 /* 1: SSE4.2 path in use */
static int seglog_crc32c_hw_ok = 0;              /* 1: SSE4.2 present and self-check passed */

/* ---- software path: slicing-by-8 ------------------------------------------------------- */

static uint32_t seglog_crc32c_sw(uint32_t crc, const unsigned char *data, size_t n)
{
    uint32_t c = ~crc;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (n && ((uintptr_t)data & 7)) {
        c = seglog_crc32c_table[0][(c ^ *data++) & 0xff] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, data, 8);
        w ^= c;
        c = seglog_crc32c_table[7][w & 0xff] ^
            seglog_crc32c_table[6][(w >> 8) & 0xff] ^
            seglog_crc32c_table[5][(w >> 16) & 0xff] ^
            seglog_crc32c_table[4][(w >> 24) & 0xff] ^
            seglog_crc32c_table[3][(w >> 32) & 0xff] ^
            seglog_crc32c_table[2][(w >> 40) & 0xff] ^
            seglog_crc32c_table[1][(w >> 48) & 0xff] ^
            seglog_crc32c_table[0][w >> 56];
        data += 8;
        n -= 8;
    }
#endif
    while (n--) {
        c = seglog_crc32c_table[0][(c ^ *data++) & 0xff] ^ (c >> 8);
    }
    return ~c;
}

/* ---- zero-shift operators (GF(2) matrices), for combining interleaved streams ------------ */

static uint32_t seglog_gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    while (vec) {
        if (vec & 1)
            sum ^= *mat;
        vec >>= 1;
        mat++;
    }
    return sum;
}

static void seglog_gf2_square(uint32_t *square, const uint32_t *mat)
{
    int n;
    for (n = 0; n < 32; n++)
        square[n] = seglog_gf2_times(mat, mat[n]);
}

/* Operator (32 columns) that applies `len` zero bytes to a raw CRC register. */
static void seglog_crc32c_zeros_op(uint32_t *even, size_t len)
{
    uint32_t odd[32], row = 1;
    int n;
    odd[0] = SEGLOG_CRC32C_POLY; /* one zero bit */
    for (n = 1; n < 32; n++) {
        odd[n] = row;
        row <<= 1;
    }
    seglog_gf2_square(even, odd); /* two zero bits */
    seglog_gf2_square(odd, even); /* four zero bits */
    /* each square doubles; the first square below gives one zero byte */
    do {
        seglog_gf2_square(even, odd);
        len >>= 1;
        if (len == 0)
            return;
        seglog_gf2_square(odd, even);
        len >>= 1;
    } while (len);
    for (n = 0; n < 32; n++)
        even[n] = odd[n];
}

static void seglog_crc32c_zeros(uint32_t zeros[][256], size_t len)
{
    uint32_t op[32];
    uint32_t n;
    seglog_crc32c_zeros_op(op, len);
    for (n = 0; n < 256; n++) {
        zeros[0][n] = seglog_gf2_times(op, n);
        zeros[1][n] = seglog_gf2_times(op, n << 8);
        zeros[2][n] = seglog_gf2_times(op, n << 16);
        zeros[3][n] = seglog_gf2_times(op, n << 24);
    }
}

static inline uint32_t seglog_crc32c_shift(uint32_t zeros[][256], uint32_t crc)
{
    return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^
           zeros[2][(crc >> 16) & 0xff] ^ zeros[3][crc >> 24];
}

/* ---- hardware path: SSE4.2, three interleaved streams ---------------------------------- */

#if SEGLOG_CRC32C_X86
__attribute__((target("sse4.2")))
static uint32_t seglog_crc32c_hw_impl(uint32_t crc, const unsigned char *next, size_t len)
{
    uint64_t crc0, crc1, crc2, w0, w1, w2;
    const unsigned char *end;

    crc0 = (uint32_t)~crc;
    while (len && ((uintptr_t)next & 7)) {
        crc0 = _mm_crc32_u8((uint32_t)crc0, *next);
        next++;
        len--;
    }
    while (len >= 3 * SEGLOG_CRC32C_LONG) {
        crc1 = 0;
        crc2 = 0;
        end = next + SEGLOG_CRC32C_LONG;
        do {
            memcpy(&w0, next, 8);
            memcpy(&w1, next + SEGLOG_CRC32C_LONG, 8);
            memcpy(&w2, next + 2 * SEGLOG_CRC32C_LONG, 8);
            crc0 = _mm_crc32_u64(crc0, w0);
            crc1 = _mm_crc32_u64(crc1, w1);
            crc2 = _mm_crc32_u64(crc2, w2);
            next += 8;
        } while (next < end);
        crc0 = seglog_crc32c_shift(seglog_crc32c_long, (uint32_t)crc0) ^ crc1;
        crc0 = seglog_crc32c_shift(seglog_crc32c_long, (uint32_t)crc0) ^ crc2;
        next += 2 * SEGLOG_CRC32C_LONG;
        len -= 3 * SEGLOG_CRC32C_LONG;
    }
    while (len >= 3 * SEGLOG_CRC32C_SHORT) {
        crc1 = 0;
        crc2 = 0;
        end = next + SEGLOG_CRC32C_SHORT;
        do {
            memcpy(&w0, next, 8);
            memcpy(&w1, next + SEGLOG_CRC32C_SHORT, 8);
            memcpy(&w2, next + 2 * SEGLOG_CRC32C_SHORT, 8);
            crc0 = _mm_crc32_u64(crc0, w0);
            crc1 = _mm_crc32_u64(crc1, w1);
            crc2 = _mm_crc32_u64(crc2, w2);
            next += 8;
        } while (next < end);
        crc0 = seglog_crc32c_shift(seglog_crc32c_short, (uint32_t)crc0) ^ crc1;
        crc0 = seglog_crc32c_shift(seglog_crc32c_short, (uint32_t)crc0) ^ crc2;
        next += 2 * SEGLOG_CRC32C_SHORT;
        len -= 3 * SEGLOG_CRC32C_SHORT;
    }
    while (len >= 8) {
        memcpy(&w0, next, 8);
        crc0 = _mm_crc32_u64(crc0, w0);
        next += 8;
        len -= 8;
    }
    while (len) {
        crc0 = _mm_crc32_u8((uint32_t)crc0, *next);
        next++;
        len--;
    }
    return (uint32_t)~crc0;
}
#endif

/* ---- initialisation and self-check ------------------------------------------------------ */

static void seglog_crc32c_init(void)
{
    uint32_t n, k, c;
    if (seglog_crc32c_ready)
        return;
    for (n = 0; n < 256; n++) {
        c = n;
        for (k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ SEGLOG_CRC32C_POLY : c >> 1;
        seglog_crc32c_table[0][n] = c;
    }
    for (n = 0; n < 256; n++) {
        c = seglog_crc32c_table[0][n];
        for (k = 1; k < 8; k++) {
            c = seglog_crc32c_table[0][c & 0xff] ^ (c >> 8);
            seglog_crc32c_table[k][n] = c;
        }
    }
    seglog_crc32c_zeros(seglog_crc32c_long, SEGLOG_CRC32C_LONG);
    seglog_crc32c_zeros(seglog_crc32c_short, SEGLOG_CRC32C_SHORT);
    seglog_crc32c_hw = 0;
#if SEGLOG_CRC32C_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        /* Self-check: the RFC 3720 vector, then hardware vs tables on a buffer long enough
         * for the long, short and tail paths, at several alignments and continuations. */
        static unsigned char buf[3 * SEGLOG_CRC32C_LONG + 3 * SEGLOG_CRC32C_SHORT + 77];
        uint32_t x = 2463534242u;
        size_t i, off;
        int ok = seglog_crc32c_hw_impl(0, (const unsigned char *)"123456789", 9) == 0xE3069283u;
        for (i = 0; i < sizeof(buf); i++) {
            x ^= x << 13; x ^= x >> 17; x ^= x << 5; /* xorshift32 */
            buf[i] = (unsigned char)x;
        }
        for (off = 0; ok && off < 9; off += 4) {
            size_t len = sizeof(buf) - off;
            uint32_t a = seglog_crc32c_hw_impl(0, buf + off, len);
            uint32_t b = seglog_crc32c_sw(0, buf + off, len);
            uint32_t c2 = seglog_crc32c_hw_impl(seglog_crc32c_hw_impl(0, buf + off, 1000),
                                                buf + off + 1000, len - 1000);
            ok = (a == b) && (a == c2);
        }
        seglog_crc32c_hw_ok = ok;
        seglog_crc32c_hw = ok;
    }
#endif
    seglog_crc32c_ready = 1;
}

#if defined(__GNUC__) || defined(__clang__)
__attribute__((constructor)) static void seglog_crc32c_ctor(void) { seglog_crc32c_init(); }
#endif

/* CRC-32C of data[0:n], continuing from crc (0 to start). */
static inline uint32_t seglog_crc32c(uint32_t crc, const unsigned char *data, size_t n)
{
    if (!seglog_crc32c_ready)
        seglog_crc32c_init();
#if SEGLOG_CRC32C_X86
    if (seglog_crc32c_hw)
        return seglog_crc32c_hw_impl(crc, data, n);
#endif
    return seglog_crc32c_sw(crc, data, n);
}

/* 1 if the SSE4.2 path is in use (after init). */
static inline int seglog_crc32c_hardware(void)
{
    if (!seglog_crc32c_ready)
        seglog_crc32c_init();
    return seglog_crc32c_hw;
}

/* Tests: 0 forces the table path, 1 restores the hardware path if it passed its self-check.
 * Returns the previous setting. Not thread-safe; never called by the codec. */
static inline int seglog_crc32c_set_hardware(int on)
{
    int previous;
    if (!seglog_crc32c_ready)
        seglog_crc32c_init();
    previous = seglog_crc32c_hw;
    seglog_crc32c_hw = on ? seglog_crc32c_hw_ok : 0;
    return previous;
}

#endif /* SEGLOG_CRC32C_H */
