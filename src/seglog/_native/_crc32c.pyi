"""Stub for ``seglog._native._crc32c`` (``src/_native/_crc32c.pyx``): CRC-32C over any buffer.

The twin of ``seglog.pure.crc32c``; the contract is ``seglog._contract.Backend.crc32c``.
"""

from typing_extensions import Buffer

def crc32c(data: Buffer, crc: int = 0) -> int: ...
def hardware_accelerated() -> bool: ...
def _set_hardware(on: bool) -> bool: ...
