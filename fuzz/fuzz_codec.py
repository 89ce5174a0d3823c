"""Coverage-guided fuzzing (atheris / libFuzzer) of seglog's native batch parser.

Every input is a buffer of would-be RecordBatch v2 bytes. It goes through the native
``iter_batches``, ``Batch.records``/``columns``/``record_at``/``is_valid`` and
``decode_columns``; the same calls are made on the pure twin and the outcomes compared
(records, or the error class). A crash, an exception that is not a ``SeglogError``, or a
difference between the twins stops the run with the input saved by libFuzzer
(``crash-<sha1>`` in the working directory).

Run (``pip install atheris``; the corpus directory is seeded with valid batches of every
codec the first time)::

    python3 fuzz/fuzz_codec.py -max_total_time=60 -rss_limit_mb=1024 /tmp/seglog-codec-corpus

For coverage feedback from the native code, build an instrumented copy first
(``bash fuzz/build_instrumented.sh``, needs clang) and point ``SEGLOG_FUZZ_SRC`` at its
``src``. Replay one input: ``python3 fuzz/fuzz_codec.py crash-<sha1>``.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SRC = os.environ.get("SEGLOG_FUZZ_SRC") or os.path.join(ROOT, "src")
sys.path.insert(0, SRC)
sys.path.insert(0, os.path.join(ROOT, "tests"))  # the seed corpus: tests/fuzz/corpus.py

import atheris  # noqa: E402 - first, so instrumented extensions find libFuzzer's hooks

# Python-level coverage of seglog's own modules (the pure twin, seglog.compression); the
# native modules report their own coverage when built by build_instrumented.sh.
with atheris.instrument_imports(include=["seglog"]):
    import seglog  # noqa: E402
    import seglog.compression  # noqa: E402,F401
    import seglog.pure  # noqa: E402,F401
    import seglog._native  # noqa: E402,F401
    from seglog.errors import SeglogError  # noqa: E402

NATIVE = seglog.get_backend("native")
PURE = seglog.get_backend("pure")
# With SEGLOG_FUZZ_DIFF=0 only the native parser runs (several times faster).
DIFFERENTIAL = os.environ.get("SEGLOG_FUZZ_DIFF", "1") != "0"
MAX_BATCHES = 16


class Untyped(Exception):
    """An exception from seglog that is not a SeglogError."""


def _outcome(fn):
    try:
        return ("ok", fn())
    except SeglogError as exc:
        return ("err", type(exc).__name__)
    except Exception as exc:  # noqa: BLE001
        raise Untyped(f"{type(exc).__name__}: {exc}") from exc


def _record(r):
    if r is None:
        return None
    return (r.offset, r.timestamp_ms, None if r.key is None else bytes(r.key),
            None if r.value is None else bytes(r.value),
            tuple((k, None if v is None else bytes(v)) for k, v in (r.headers or ())))


def observe(be, data: bytes) -> list:
    out = []
    batches = []

    def walk():
        for batch in be.iter_batches(data):
            batches.append(batch)
            if len(batches) >= MAX_BATCHES:
                break
        return len(batches)

    out.append(_outcome(walk))
    for batch in batches:
        out.append(_outcome(lambda: (batch.base_offset, batch.batch_length, batch.record_count,
                                     batch.attributes, batch.last_offset_delta)))
        out.append(_outcome(lambda: [_record(r) for r in batch.records()]))
        out.append(_outcome(lambda: len(batch.columns())))
        out.append(_outcome(batch.is_valid))
        out.append(_outcome(lambda: _record(batch.record_at(batch.base_offset))))
    out.append(_outcome(lambda: len(be.decode_columns(data))))
    return out


def test_one_input(data: bytes) -> None:
    native = observe(NATIVE, data)
    if DIFFERENTIAL:
        pure = observe(PURE, data)
        if native != pure:
            for i, (a, b) in enumerate(zip(native, pure)):
                if a != b:
                    raise AssertionError(f"twins differ at step {i}: native {a!r}, pure {b!r}")
            raise AssertionError(f"twins differ in length: {len(native)} vs {len(pure)}")


def seed_corpus(directory: str) -> None:
    """Write the seed batches into an empty corpus directory."""
    if not os.path.isdir(directory) or os.listdir(directory):
        return
    from fuzz import corpus

    for name, raw in corpus.codec_seeds():
        with open(os.path.join(directory, f"seed-{name}"), "wb") as f:
            f.write(raw)


def main(argv: list[str]) -> None:
    for arg in argv[1:]:
        if not arg.startswith("-") and os.path.isdir(arg):
            seed_corpus(arg)
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
