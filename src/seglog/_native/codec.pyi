"""Stub for ``seglog._native.codec`` (``src/_native/codec.pyx``): the RecordBatch v2 codec.
Contract: ``seglog._contract.Record``, ``ConsumerRecord``, ``Batch``, ``Columns`` and ``Backend.encode_batch``,
``encode_control_batch``, ``iter_batches``, ``decode_columns``."""

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from typing_extensions import Buffer, TypeAlias

from seglog.compression import DECOMPRESSED_BYTES_MAX_DEFAULT as DECOMPRESSED_BYTES_MAX_DEFAULT
from seglog.compression import check_max_decompressed_bytes as check_max_decompressed_bytes
from seglog.errors import CorruptRecordError as CorruptRecordError
from seglog.errors import InvalidRecordError as InvalidRecordError
from seglog.errors import InvalidTimestampError as InvalidTimestampError
from seglog.errors import RecordTooLargeError as RecordTooLargeError
from seglog.errors import SeglogError as SeglogError
from seglog.errors import UnsupportedCompressionError as UnsupportedCompressionError
from seglog.format import COMPRESSION_NAMES as COMPRESSION_NAMES
from seglog.format import CONTROL_KEY as CONTROL_KEY
from seglog.format import END_TXN_MARKER_VALUE as END_TXN_MARKER_VALUE
from seglog.format import REASON_BAD_LAST_OFFSET_DELTA as REASON_BAD_LAST_OFFSET_DELTA
from seglog.format import REASON_BAD_MAGIC as REASON_BAD_MAGIC
from seglog.format import REASON_BATCH_TOO_LARGE as REASON_BATCH_TOO_LARGE
from seglog.format import REASON_BATCH_TOO_SMALL as REASON_BATCH_TOO_SMALL
from seglog.format import REASON_CRC_MISMATCH as REASON_CRC_MISMATCH
from seglog.format import REASON_OFFSETS_NOT_INCREASING as REASON_OFFSETS_NOT_INCREASING
from seglog.format import REASON_TRUNCATED as REASON_TRUNCATED

_Headers: TypeAlias = tuple[tuple[str, bytes | None], ...]
_RecordColumn: TypeAlias = (
    Sequence[Buffer | None] | NDArray[np.uint8] | tuple[Buffer, NDArray[np.integer[Any]]]
)

ATTRIBUTES_POSITION: int
BASE_OFFSET_POSITION: int
BASE_SEQUENCE_POSITION: int
BASE_TIMESTAMP_POSITION: int
BATCH_LENGTH_POSITION: int
COMPRESSION_CODEC_MASK: int
COMPRESSION_GZIP: int
COMPRESSION_LZ4: int
COMPRESSION_NONE: int
COMPRESSION_SNAPPY: int
COMPRESSION_ZSTD: int
CONTROL_FLAG_MASK: int
CONTROL_RECORD_VERSION: int
CONTROL_TYPE_ABORT: int
CONTROL_TYPE_COMMIT: int
CRC_POSITION: int
DELETE_HORIZON_FLAG_MASK: int
END_TXN_MARKER_BATCH_BYTES: int
HEADER_SIZE_UP_TO_MAGIC: int
INT16_MAX: int
INT16_MIN: int
INT32_MAX: int
INT32_MIN: int
INT64_MAX: int
INT64_MIN: int
LAST_OFFSET_DELTA_POSITION: int
LOG_OVERHEAD: int
MAGIC_POSITION: int
MAGIC_V2: int
MAX_RECORD_OVERHEAD: int
MAX_TIMESTAMP_POSITION: int
MIN_BATCH_LENGTH: int
PARTITION_LEADER_EPOCH_POSITION: int
PRODUCER_EPOCH_POSITION: int
PRODUCER_ID_POSITION: int
RECORDS_COUNT_POSITION: int
RECORD_BATCH_OVERHEAD: int
TIMESTAMP_TYPE_CREATE_TIME: int
TIMESTAMP_TYPE_LOG_APPEND_TIME: int
TIMESTAMP_TYPE_MASK: int
TRANSACTIONAL_FLAG_MASK: int

class Record:
    def __init__(self, offset: int, timestamp_ms: int, key: bytes | None, value: bytes | None,
                 headers: _Headers = ()) -> None: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp_ms(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> _Headers: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class ConsumerRecord:
    def __init__(self, topic: str, partition: int, offset: int, timestamp_ms: int,
                 key: bytes | None, value: bytes | None, headers: _Headers) -> None: ...
    _fields: tuple[str, ...]
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp_ms(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> _Headers: ...
    @classmethod
    def _make(cls, iterable: Any) -> ConsumerRecord: ...
    def _asdict(self) -> dict[str, Any]: ...
    def _replace(self, **changes: Any) -> ConsumerRecord: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __getitem__(self, index: Any) -> Any: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> Any: ...

class Columns:
    offsets: NDArray[np.int64]
    timestamps_ms: NDArray[np.int64]
    key_positions: NDArray[np.int64]
    key_lengths: NDArray[np.int32]
    value_positions: NDArray[np.int64]
    value_lengths: NDArray[np.int32]
    data: Buffer
    def __init__(self, *, offsets: NDArray[np.int64], timestamps_ms: NDArray[np.int64],
                 key_positions: NDArray[np.int64], key_lengths: NDArray[np.int32],
                 value_positions: NDArray[np.int64], value_lengths: NDArray[np.int32],
                 data: Buffer) -> None: ...
    def __len__(self) -> int: ...
    def key(self, index: int) -> bytes | None: ...
    def value(self, index: int) -> bytes | None: ...

class Batch:
    def __init__(self, buffer: Buffer, position: int = 0) -> None: ...
    @property
    def position(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def batch_length(self) -> int: ...
    @property
    def partition_leader_epoch(self) -> int: ...
    @property
    def magic(self) -> int: ...
    @property
    def crc(self) -> int: ...
    @property
    def attributes(self) -> int: ...
    @property
    def last_offset_delta(self) -> int: ...
    @property
    def base_timestamp_ms(self) -> int: ...
    @property
    def max_timestamp_ms(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def record_count(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def compression_id(self) -> int: ...
    @property
    def compression(self) -> str: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def has_delete_horizon(self) -> bool: ...
    @property
    def delete_horizon_ms(self) -> int: ...
    @property
    def last_sequence(self) -> int: ...
    def is_valid(self) -> bool: ...
    def ensure_valid(self) -> None: ...
    def records(self, *, check_crcs: bool = True,
                max_decompressed_bytes: int = ...) -> list[Record]: ...
    def consumer_records(self, record_type: type[Any], topic: str, partition: int,
                         min_offset: int = 0, *, check_crcs: bool = True,
                         max_decompressed_bytes: int = ...) -> list[Any]: ...
    def record_at(self, offset: int, *, check_crcs: bool = True,
                  max_decompressed_bytes: int = ...) -> Record | None: ...
    def columns(self, *, check_crcs: bool = True,
                max_decompressed_bytes: int = ...) -> Columns: ...
    def record_summary(self, *, check_crcs: bool = True,
                       max_decompressed_bytes: int = ...) -> tuple[int, bool, int, int, int]: ...
    def control_type(self, *, check_crcs: bool = True) -> int: ...

def check_client_batch(buffer: Buffer, lowest_allowed_ms: int, highest_allowed_ms: int,
                       max_message_bytes: int, keys_required: bool,
                       compression_id: int) -> Batch | None: ...
def iter_batches(buffer: Buffer, *, max_batch_bytes: int | None = None,
                 check_offsets: bool = False) -> Iterator[Batch]: ...
def decode_columns(buffer: Buffer, *, max_records: int | None = None, check_crcs: bool = True,
                   check_offsets: bool = False, max_decompressed_bytes: int = ...) -> Columns: ...
def encode_batch(
    values: _RecordColumn,
    keys: _RecordColumn | None = None,
    timestamps_ms: int | Sequence[int] | NDArray[np.int64] | None = None,
    headers: Sequence[Sequence[tuple[str, Buffer | None]] | None] | None = None,
    *,
    base_offset: int = 0,
    compression: str | int = "none",
    compression_level: int | None = None,
    timestamp_type: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    partition_leader_epoch: int = -1,
    delete_horizon_ms: int = -1,
    offset_deltas: Sequence[int] | NDArray[np.integer[Any]] | None = None,
    last_offset_delta: int | None = None,
) -> bytes: ...
def encode_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    timestamp_ms: int | None = None,
    partition_leader_epoch: int = -1,
    timestamp_type: int = 0,
    delete_horizon_ms: int = -1,
) -> bytes: ...
