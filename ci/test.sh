#!/usr/bin/env bash
# Run the test suite on both backends (the native build must exist: see ci/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pytest "$@"
