# The native wire module's C-level names: none that another native module cimports (its
# helpers are inline in wire.pyx); the file exists because every native module has a .pxd
# beside the built module (see setup.py and tests/twins/test_native_linking.py).
