# seglog._native.index: Kafka's OffsetIndex and TimeIndex over mmap (index.pyx, in src/_native/).
#
# What other native modules cimport: ``offset_lookup``, OffsetIndex.lookup without a tuple,
# which Segment.read_record calls once per point read; ``offset_append`` and
# ``time_maybe_append``, the appends of an entry without the Python call, which the segment
# makes once per index interval written. The file lives in the package directory
# because Cython finds a module's .pxd by its qualified name (see codec.pxd). The cdef classes
# are not declared here.

from libc.stdint cimport int64_t


cdef int64_t offset_lookup(object index, int64_t target_offset,
                           int64_t *found_offset) except? -2
cdef int64_t offset_lookup_ahead(object index, int64_t target_offset, int64_t *found_offset,
                                 int64_t *ahead) except? -2
cdef int offset_append(object index, int64_t offset, int64_t position) except -1
cdef int time_maybe_append(object index, int64_t timestamp_ms, int64_t offset) except -1
