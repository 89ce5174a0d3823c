# seglog._native.codec: Kafka RecordBatch v2 encode/decode (codec.pyx, in src/_native/, and
# the codec_*.pxi parts it includes: batch_record_at is in codec_records.pxi).
#
# What other native modules cimport from the codec: the format constants (cdef enum, equal to
# seglog.format's; a test checks) and ``batch_record_at`` (Segment.read_record's decoder).
# The .pyx is built as seglog._native.codec, and Cython finds a module's .pxd by its qualified
# name, so this file lives in the package directory (src/seglog/_native/) and setup.py puts
# "src" on the cimport path: codec.pyx sees it as its own .pxd, other modules write
# ``from seglog._native.codec cimport batch_record_at``. Using an enum constant costs no import
# at run time; calling batch_record_at imports seglog._native.codec once, when the cimporting
# module loads (through Cython's __pyx_capi__ table). The cdef classes (Record, Batch,
# Columns) are not declared here: no other module needs their C attributes.

from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t

cdef enum:
    # RecordBatch v2 header: field positions (seglog.format.*_POSITION)
    BASE_OFFSET_POSITION = 0
    BATCH_LENGTH_POSITION = 8
    PARTITION_LEADER_EPOCH_POSITION = 12
    MAGIC_POSITION = 16
    CRC_POSITION = 17
    ATTRIBUTES_POSITION = 21              # the CRC covers from here to the batch end
    LAST_OFFSET_DELTA_POSITION = 23
    BASE_TIMESTAMP_POSITION = 27
    MAX_TIMESTAMP_POSITION = 35
    PRODUCER_ID_POSITION = 43
    PRODUCER_EPOCH_POSITION = 51
    BASE_SEQUENCE_POSITION = 53
    RECORDS_COUNT_POSITION = 57
    RECORD_BATCH_OVERHEAD = 61
    LOG_OVERHEAD = 12
    HEADER_SIZE_UP_TO_MAGIC = 17
    MIN_BATCH_LENGTH = 14
    MAX_RECORD_OVERHEAD = 21
    MAGIC_V2 = 2
    # attribute bits
    COMPRESSION_CODEC_MASK = 0x07
    TIMESTAMP_TYPE_MASK = 0x08
    TRANSACTIONAL_FLAG_MASK = 0x10
    CONTROL_FLAG_MASK = 0x20
    DELETE_HORIZON_FLAG_MASK = 0x40
    COMPRESSION_NONE = 0
    COMPRESSION_GZIP = 1
    COMPRESSION_SNAPPY = 2
    COMPRESSION_LZ4 = 3
    COMPRESSION_ZSTD = 4
    TIMESTAMP_TYPE_CREATE_TIME = 0
    TIMESTAMP_TYPE_LOG_APPEND_TIME = 1
    # control batches
    CONTROL_TYPE_ABORT = 0
    CONTROL_TYPE_COMMIT = 1
    CONTROL_RECORD_VERSION = 0
    END_TXN_MARKER_BATCH_BYTES = 78

# Big-endian loads and stores live in _bigendian.pxd, varints in varint.pxd and the record
# parser in _records.pxd (header-only helpers in src/_native/, cimported by file name).


cdef object batch_record_at(const unsigned char *batch, Py_ssize_t size, int64_t offset,
                            Py_ssize_t hint, bint check_crcs, Py_ssize_t max_decompressed_bytes)


cdef object batch_record_known(const unsigned char *batch, Py_ssize_t size, int64_t offset,
                               Py_ssize_t hint, int64_t base_offset, int32_t count,
                               int64_t base_timestamp_ms, int64_t max_timestamp_ms,
                               bint log_append_time, bint value_only)
