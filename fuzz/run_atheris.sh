#!/usr/bin/env bash
# Fuzz seglog's native batch parser for N seconds (default 60) with atheris.
#
#   bash fuzz/run_atheris.sh [SECONDS] [CORPUS_DIR] [extra libFuzzer flags...]
#
# If an instrumented build exists ($SEGLOG_FUZZ_BUILD, default /tmp/seglog-fuzz-build, made by
# fuzz/build_instrumented.sh) the native code runs with coverage feedback and AddressSanitizer
# (atheris's ASan+libFuzzer runtime is preloaded); otherwise the repository's own build runs
# with coverage from the Python code only. Crashing inputs are written to the current directory
# (crash-<sha1>); replay one with `python3 fuzz/fuzz_codec.py crash-<sha1>`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
seconds="${1:-60}"
corpus="${2:-/tmp/seglog-codec-corpus}"
shift $(( $# > 2 ? 2 : $# ))
mkdir -p "$corpus"
build="${SEGLOG_FUZZ_BUILD:-/tmp/seglog-fuzz-build}"
flags=(-max_total_time="$seconds" -rss_limit_mb=1024 -max_len=8192 -timeout=20)
if [ -d "$build/src/seglog/_native" ]; then
    site="$(python3 -c 'import atheris, os; print(atheris.path())')"
    export SEGLOG_FUZZ_SRC="$build/src"
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}"
    export LD_PRELOAD="$site/asan_with_fuzzer.so"
    # ASan's shadow memory and quarantine add ~850 MiB of resident memory before the first
    # input: the RSS limit is raised by as much.
    flags[1]=-rss_limit_mb=2048
fi
exec python3 "$here/fuzz_codec.py" "${flags[@]}" "$@" "$corpus"
