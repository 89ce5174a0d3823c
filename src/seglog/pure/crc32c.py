"""CRC-32C (Castagnoli) in plain Python: the checksum that guards every Kafka RecordBatch v2.

Kafka computes ``Crc32C.compute(batch, 21, size - 21)``: the reflected CRC with polynomial
0x1EDC6F41 (0x82F63B78 bit-reversed), initial value 0xFFFFFFFF and a final XOR of 0xFFFFFFFF,
the same CRC as iSCSI (RFC 3720, appendix B.4) and ext4.

The algorithm is *slicing-by-8*: eight 256-entry tables let one step fold eight input bytes into
the CRC instead of one. In Python the win is fewer interpreter steps per byte (one loop turn and
one ``struct`` unpack per 8 bytes), not cache behaviour; the native twin uses SSE4.2 or the same
tables in C. Table ``k`` maps a byte to the CRC contribution of that byte followed by ``k`` zero
bytes, so the eight lookups for a 64-bit word can be XORed together independently.
"""

from __future__ import annotations

import struct

#: The reflected Castagnoli polynomial.
POLYNOMIAL_REFLECTED = 0x82F63B78
_MASK32 = 0xFFFFFFFF
# Each step of the fast loop reads one little-endian 64-bit word as two 32-bit halves.
_WORDS = struct.Struct("<II")
_WORD_BYTES = _WORDS.size  # 8


def _make_tables() -> tuple[tuple[int, ...], ...]:
    # Table 0 is the classic byte-at-a-time table.
    table0 = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ POLYNOMIAL_REFLECTED if crc & 1 else crc >> 1
        table0.append(crc)
    tables = [table0]
    # Table k = table k-1 advanced by one more zero byte.
    for _ in range(1, 8):
        previous = tables[-1]
        tables.append(
            [(previous[byte] >> 8) ^ table0[previous[byte] & 0xFF] for byte in range(256)]
        )
    return tuple(tuple(table) for table in tables)


_T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7 = _make_tables()


def crc32c(data, crc: int = 0) -> int:
    """CRC-32C of ``data`` (any C-contiguous bytes-like object), continuing from ``crc``.

    ``crc`` is a previous result (0 to start), so ``crc32c(b, crc32c(a)) == crc32c(a + b)``.
    Returns an unsigned 32-bit int. ``crc32c(b"123456789") == 0xE3069283``. Raises TypeError
    for an object without the buffer protocol or a non-contiguous one, and ValueError for
    ``crc`` outside [0, 2**32).
    """
    if not 0 <= crc <= _MASK32:
        raise ValueError(f"crc must be an unsigned 32-bit value, got {crc}")
    view = memoryview(data)
    if not view.c_contiguous:
        raise TypeError("crc32c needs a C-contiguous buffer")
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    crc ^= _MASK32
    word_end = len(view) - len(view) % _WORD_BYTES
    t0, t1, t2, t3, t4, t5, t6, t7 = _T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7  # locals are faster
    for low, high in _WORDS.iter_unpack(view[:word_end]):
        low ^= crc
        crc = (
            t7[low & 0xFF]
            ^ t6[(low >> 8) & 0xFF]
            ^ t5[(low >> 16) & 0xFF]
            ^ t4[low >> 24]
            ^ t3[high & 0xFF]
            ^ t2[(high >> 8) & 0xFF]
            ^ t1[(high >> 16) & 0xFF]
            ^ t0[high >> 24]
        )
    # The last 0-7 bytes go one at a time.
    for byte in view[word_end:]:
        crc = (crc >> 8) ^ t0[(crc ^ byte) & 0xFF]
    return crc ^ _MASK32
