# seglog._native.index: Kafka's OffsetIndex and TimeIndex over mmap (index.pyx, in src/_native/).
#
# What other native modules cimport: ``offset_lookup``, OffsetIndex.lookup without a tuple,
# which Segment.read_record calls once per point read. The file lives in the package directory
# because Cython finds a module's .pxd by its qualified name (see codec.pxd). The cdef classes
# are not declared here: the segment calls their Python methods (once per index entry).

from libc.stdint cimport int64_t


cdef int64_t offset_lookup(object index, int64_t target_offset,
                           int64_t *found_offset) except? -2
cdef int64_t offset_lookup_ahead(object index, int64_t target_offset, int64_t *found_offset,
                                 int64_t *ahead) except? -2
