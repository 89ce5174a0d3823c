"""Stub for ``seglog._native.wire`` (``src/_native/wire.pyx``): the broker's request-header and
Produce fast paths. Contract: ``seglog._contract.WireModule``."""

from typing_extensions import Buffer

def read_request_header(frame: Buffer, flexible: bool
                        ) -> tuple[int, int, int, str | None, int] | None: ...
def read_produce_single(version: int, body: Buffer) -> tuple[
        str | None, int, int, str | None, bytes | None, int, memoryview | None] | None: ...
def encode_produce_single(version: int, topic: str | Buffer | None, partition: int,
                          error_code: int, base_offset: int, log_append_time_ms: int,
                          log_start_offset: int) -> bytes: ...
