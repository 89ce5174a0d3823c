"""seglog's fuzz harness: mutated files, client batches and parser inputs on both backends.

The native backend runs in worker subprocesses (:mod:`fuzz.workers`), so a crash is a test
failure with a saved reproducer, not a dead test run. See ``fuzz/README.md`` at the root of
the repository for the atheris (coverage-guided) harness and how to run the long mode.
"""
