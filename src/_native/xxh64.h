/* XXH64, the 64-bit xxHash of Yann Collet (BSD-2-Clause algorithm, written from its spec:
 * https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md, section "XXH64").
 *
 * seglog's cleaner key map hashes every record key with XXH64 (seed 0); the pure twin calls
 * xxhash.xxh64_intdigest, and tests/test_keymap.py checks that both give the same value for
 * random keys of every length class (0, 1-3, 4-7, 8-31, 32+ bytes). Input is read as
 * little-endian 64/32-bit words whatever the host byte order, as the spec requires.
 * Static inline, no global state, no GIL needed. */
#ifndef SEGLOG_XXH64_H
#define SEGLOG_XXH64_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SEGLOG_XXH_P1 0x9E3779B185EBCA87ULL
#define SEGLOG_XXH_P2 0xC2B2AE3D27D4EB4FULL
#define SEGLOG_XXH_P3 0x165667B19E3779F9ULL
#define SEGLOG_XXH_P4 0x85EBCA77C2B2AE63ULL
#define SEGLOG_XXH_P5 0x27D4EB2F165667C5ULL

static inline uint64_t seglog_xxh_rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t seglog_xxh_read64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint32_t seglog_xxh_read32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint64_t seglog_xxh_round(uint64_t acc, uint64_t input) {
    acc += input * SEGLOG_XXH_P2;
    acc = seglog_xxh_rotl64(acc, 31);
    return acc * SEGLOG_XXH_P1;
}

static inline uint64_t seglog_xxh_merge(uint64_t acc, uint64_t val) {
    acc ^= seglog_xxh_round(0, val);
    return acc * SEGLOG_XXH_P1 + SEGLOG_XXH_P4;
}

/* XXH64 of data[0:n] with the given seed. */
static inline uint64_t seglog_xxh64(const unsigned char *data, size_t n, uint64_t seed) {
    const unsigned char *p = data;
    const unsigned char *end = data + n;
    uint64_t h;

    if (n >= 32) {
        const unsigned char *limit = end - 32;
        uint64_t v1 = seed + SEGLOG_XXH_P1 + SEGLOG_XXH_P2;
        uint64_t v2 = seed + SEGLOG_XXH_P2;
        uint64_t v3 = seed;
        uint64_t v4 = seed - SEGLOG_XXH_P1;
        do {
            v1 = seglog_xxh_round(v1, seglog_xxh_read64(p));
            v2 = seglog_xxh_round(v2, seglog_xxh_read64(p + 8));
            v3 = seglog_xxh_round(v3, seglog_xxh_read64(p + 16));
            v4 = seglog_xxh_round(v4, seglog_xxh_read64(p + 24));
            p += 32;
        } while (p <= limit);
        h = seglog_xxh_rotl64(v1, 1) + seglog_xxh_rotl64(v2, 7) + seglog_xxh_rotl64(v3, 12) +
            seglog_xxh_rotl64(v4, 18);
        h = seglog_xxh_merge(h, v1);
        h = seglog_xxh_merge(h, v2);
        h = seglog_xxh_merge(h, v3);
        h = seglog_xxh_merge(h, v4);
    } else {
        h = seed + SEGLOG_XXH_P5;
    }
    h += (uint64_t)n;

    while (end - p >= 8) {
        h ^= seglog_xxh_round(0, seglog_xxh_read64(p));
        h = seglog_xxh_rotl64(h, 27) * SEGLOG_XXH_P1 + SEGLOG_XXH_P4;
        p += 8;
    }
    if (end - p >= 4) {
        h ^= (uint64_t)seglog_xxh_read32(p) * SEGLOG_XXH_P1;
        h = seglog_xxh_rotl64(h, 23) * SEGLOG_XXH_P2 + SEGLOG_XXH_P3;
        p += 4;
    }
    while (p < end) {
        h ^= (uint64_t)(*p) * SEGLOG_XXH_P5;
        h = seglog_xxh_rotl64(h, 11) * SEGLOG_XXH_P1;
        p++;
    }

    h ^= h >> 33;
    h *= SEGLOG_XXH_P2;
    h ^= h >> 29;
    h *= SEGLOG_XXH_P3;
    h ^= h >> 32;
    return h;
}

#endif /* SEGLOG_XXH64_H */
