# seglog._native.segment: one log segment (segment.pyx, in src/_native/).
#
# Nothing here yet: no other native module cimports the segment (the Python layer calls
# Segment's Python methods). The file exists so that every native module has its .pxd beside
# its .so, where Cython looks for it by the qualified name (see codec.pxd); declarations added
# here are seen by segment.pyx as its own.
