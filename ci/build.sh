#!/usr/bin/env bash
# Build the Cython extensions in place (src/seglog/_native/*.so) for development.
# SEGLOG_DEBUG=1 adds annotations (HTML beside each .pyx), line tracing and -Wall -Wextra.
set -euo pipefail
cd "$(dirname "$0")/.."
python setup.py build_ext --inplace
