"""The broker keeps no page of what Fetch sent mapped (issue 11): a Fetch response's record sets
are zero-copy views of the segment mappings, and once the connection has written them it drops
their pages from the broker's page tables (``drop_mapped_pages``), as Kafka, which sends with
sendfile, maps none.

The broker runs in this process, so residence is measured for the partition's ``.log``
mappings alone (``/proc/self/smaps``), not for the whole test process. Asserts compare
directions with wide margins, never times. Both storage backends.
"""

from __future__ import annotations

import struct

from seglog import get_backend

from core_helpers import connect, read_frame, request_frame
from segment_helpers import mapping_rss_bytes

#: Batches of about 0.5 MiB: 16 of them make a Fetch response of about 8.4 MiB.
RECORDS_PER_BATCH = 5000
BATCHES = 16
FETCH_BYTES = 32 << 20


def _fetch_v4(topic: str, max_bytes: int) -> bytes:
    name = topic.encode()
    return (struct.pack(">iiiib", -1, 0, 1, max_bytes, 0)
            + struct.pack(">ih", 1, len(name)) + name
            + struct.pack(">iiqi", 1, 0, 0, max_bytes))


def test_a_fetch_of_several_mib_leaves_no_page_mapped(any_backend_broker):
    broker = any_backend_broker
    broker.store.create_topic("t", partitions=1)
    log = broker.store.topic("t").log(0)
    for b in range(BATCHES):
        log.append_batch([b"%08d" % (b * RECORDS_PER_BATCH + i) * 12
                          for i in range(RECORDS_PER_BATCH)])
    # The measure sees what a read maps: touching the whole log through a view maps it.
    result = log.read(0, FETCH_BYTES)
    assert result.next_offset == log.end_offset == BATCHES * RECORDS_PER_BATCH
    size_bytes, path = result.size_bytes, result.log_path
    log_bytes = bytes(result.buffer)
    assert mapping_rss_bytes(path) >= size_bytes * 3 // 4
    assert get_backend(broker.store.backend).drop_mapped_pages(result.buffer) > 0
    result.buffer.release()
    assert mapping_rss_bytes(path) < size_bytes // 8

    sock = connect(broker)
    try:
        sock.sendall(request_frame(1, 4, 7, _fetch_v4("t", FETCH_BYTES)))
        frame = read_frame(sock)
    finally:
        sock.close()
    assert frame is not None and struct.unpack(">i", frame[:4])[0] == 7
    assert log_bytes in frame  # every batch was served, byte for byte
    # The socket send read every page of the response; none of them stays mapped.
    assert mapping_rss_bytes(path) < size_bytes // 8
