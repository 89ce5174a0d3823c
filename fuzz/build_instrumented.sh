#!/usr/bin/env bash
# Build a copy of seglog whose native parser (codec, crc32c) carries libFuzzer coverage
# instrumentation, for the atheris harness (fuzz/fuzz_codec.py). The repository's own build is
# untouched: the copy goes to $SEGLOG_FUZZ_BUILD (default /tmp/seglog-fuzz-build), and the
# harness uses it when SEGLOG_FUZZ_SRC points at its src/ directory.
#
#   bash fuzz/build_instrumented.sh            # needs clang (apt-get install clang)
#   bash fuzz/run_atheris.sh 60                # fuzz for 60 s with it
#
# Takes about a minute here (Cython + clang for two modules). Without it the harness still runs,
# with coverage feedback from the Python code only (the pure twin and seglog.compression).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${SEGLOG_FUZZ_BUILD:-/tmp/seglog-fuzz-build}"
cc="${CC:-$(command -v clang || command -v clang-14 || true)}"
if [ -z "$cc" ]; then
    echo "build_instrumented.sh: no clang found (apt-get install clang)" >&2
    exit 2
fi
rm -rf "$build"
mkdir -p "$build"
(cd "$here" && tar -cf - src setup.py pyproject.toml README.md) | tar -xf - -C "$build"
cd "$build"
# AddressSanitizer too: an out-of-bounds read in the parser is then a crash with a report,
# not a silent wrong answer. The harness must then run with atheris's ASan+libFuzzer runtime
# preloaded (fuzz/run_atheris.sh does it).
CC="$cc" LDSHARED="$cc -shared" CFLAGS="-fsanitize=address,fuzzer-no-link -g" \
    SEGLOG_ONLY="${SEGLOG_ONLY:-_crc32c,codec}" python3 setup.py build_ext --inplace -q
echo "$build/src"
