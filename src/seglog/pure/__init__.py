"""The pure-Python twin of the native core: the readable reference implementation.

Same public names as ``seglog._native``; see :mod:`seglog._contract` for the contract.
"""

from .crc32c import crc32c
from .codec import (
    Batch,
    Columns,
    check_client_batch,
    ConsumerRecord,
    Record,
    decode_columns,
    encode_batch,
    encode_control_batch,
    iter_batches,
)
from .index import OffsetIndex, TimeIndex
from . import accumulator  # the producer's murmur2 and open-batch buffer
from . import keymap  # the cleaner sizes its map with this module's constants
from .keymap import KeyMap
from .segment import Segment, drop_mapped_pages
from . import wire  # the broker's request-header and Produce fast paths

name = "pure"

__all__ = [
    "accumulator", "Batch", "Columns", "ConsumerRecord", "KeyMap", "Record", "OffsetIndex", "Segment",
    "TimeIndex", "check_client_batch", "crc32c",
    "decode_columns", "drop_mapped_pages", "encode_batch", "encode_control_batch", "iter_batches",
    "keymap", "name", "wire",
]
