"""CRC-32C on both backends: RFC 3720 golden vectors, continuation, buffer types, and a
bit-by-bit reference implementation for random data."""

from __future__ import annotations

import array

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# RFC 3720 (iSCSI), appendix B.4: CRC-32C test vectors.
RFC3720_VECTORS = [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]


def reference_crc32c(data: bytes, crc: int = 0) -> int:
    """The CRC one bit at a time, straight from the definition (reflected 0x82F63B78)."""
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


@pytest.mark.parametrize("data, expected", RFC3720_VECTORS)
def test_rfc3720_vectors(backend, data, expected):
    assert backend.crc32c(data) == expected


def test_check_value(backend):
    # The "check" value of the CRC catalogue (CRC-32/ISCSI).
    assert backend.crc32c(b"123456789") == 0xE3069283


def test_empty_input_returns_the_start_value(backend):
    assert backend.crc32c(b"") == 0
    assert backend.crc32c(b"", 0x12345678) == 0x12345678


def test_continuation(backend):
    data = bytes(range(256)) * 5 + b"tail"
    for split in (0, 1, 7, 8, 9, 255, 1000, len(data)):
        first = backend.crc32c(data[:split])
        assert backend.crc32c(data[split:], first) == backend.crc32c(data)


@pytest.mark.parametrize(
    "make",
    [
        bytes,
        bytearray,
        memoryview,
        lambda data: np.frombuffer(data, dtype=np.uint8),
        lambda data: memoryview(data)[:],
    ],
    ids=["bytes", "bytearray", "memoryview", "numpy", "memoryview-slice"],
)
def test_buffer_types(backend, make):
    data = bytes(range(200))
    assert backend.crc32c(make(data)) == reference_crc32c(data)


def test_wide_item_buffers_are_read_as_bytes(backend):
    words = array.array("I", [1, 2, 3, 0xFFFFFFFF])
    assert backend.crc32c(words) == reference_crc32c(words.tobytes())
    matrix = np.arange(24, dtype=np.uint8).reshape(4, 6)
    assert backend.crc32c(matrix) == reference_crc32c(matrix.tobytes())


def test_lengths_around_the_word_size(backend):
    # The fast loop takes 8 bytes at a time; every tail length must agree with the reference.
    data = bytes((i * 37 + 11) & 0xFF for i in range(40))
    for length in range(len(data) + 1):
        assert backend.crc32c(data[:length]) == reference_crc32c(data[:length]), length


def test_start_value_out_of_range(backend):
    with pytest.raises(ValueError):
        backend.crc32c(b"x", -1)
    with pytest.raises(ValueError):
        backend.crc32c(b"x", 2**32)


def test_not_a_buffer(backend):
    with pytest.raises(TypeError):
        backend.crc32c("text")


def test_non_contiguous_buffer(backend):
    # Refused, never read as if contiguous. The exception type is the exporter's (numpy raises
    # ValueError when asked for a contiguous buffer it cannot give), so any of these will do.
    strided = np.arange(64, dtype=np.uint8)[::2]
    with pytest.raises((TypeError, ValueError, BufferError)):
        backend.crc32c(strided)
    with pytest.raises((TypeError, ValueError, BufferError)):
        backend.crc32c(memoryview(bytes(64))[::2])


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=300), start=st.integers(0, 2**32 - 1))
def test_matches_reference(backend, data, start):
    assert backend.crc32c(data, start) == reference_crc32c(data, start)
