"""Issue 23: running out of file descriptors once must not disable a protocol version.

Both tests run in a subprocess whose RLIMIT_NOFILE is lowered and whose descriptors are all
taken, so that importing a kio schema module fails with a real EMFILE."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")

EXHAUST = """
import os, resource
def exhaust():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
    held = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError as exc:
        assert exc.errno == 24, exc
    return held
"""


def _run(script: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", EXHAUST + textwrap.dedent(script)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_failed_schema_import_is_not_cached():
    out = _run("""
        from seglog.server import protocol
        held = exhaust()
        try:
            protocol.response_class(3, 1)
            print("first: no error")
        except OSError as exc:
            print("first:", exc.errno)
        for fd in held:
            os.close(fd)
        print("after:", protocol.response_class(3, 1).__name__,
              protocol.is_flexible_request(3, 9))
    """)
    assert out.splitlines() == ["first: 24", "after: MetadataResponse True"], out


def test_the_broker_loads_every_advertised_schema_at_start(tmp_path):
    out = _run(f"""
        import io
        from seglog.server import protocol
        from seglog.server.broker import Broker
        with Broker({str(tmp_path / "d")!r}, listen="127.0.0.1:0") as broker:
            ranges = broker.api_ranges
            held = exhaust()  # from here no module can be imported
            for api_key, low, high in ranges:
                for version in range(low, high + 1):
                    if (api_key, version) in protocol.ADVERTISED_WITHOUT_SCHEMA:
                        continue
                    protocol.is_flexible_request(api_key, version)
                    protocol.is_flexible_response(api_key, version)
                    assert protocol.response_class(api_key, version) is not None
            for fd in held:
                os.close(fd)
        print("ok", len(ranges))
    """)
    assert out.startswith("ok "), out
