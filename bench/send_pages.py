"""Producer.send keyed and keyless, first after a pause and right after another send (issue 27).

The bench's clients part times ``send_keyed`` first in each run, after operations that free
no page cache for a few seconds (the confluent-kafka ones), and ``send_keyless`` right after
``send_keyed`` deleted its store. This script repeats that order in one process: per round a
pause of ``pause_s`` seconds, then two sends of ``n`` records (the bench's ``_send``: a new
Store, 6 partitions, ``linger_ms=1000``, 1 MiB batches, 100-byte values, 10,000 keys), the
store deleted after each; the two sends' order alternates by round (keyed first, then
keyless first), then each of the two again right after an untimed run of itself (the bench's
priming). It prints each timed send's wall rate and the process's user and system CPU time
during it. On a VM with free page reporting (virtio-balloon), memory freed more than ~2 s
ago is back with the host, and the first send after the pause pays a host page fault per
new page-cache page inside the kernel's copy of its writes (system time), keyed or not.

usage: PYTHONPATH=src python bench/send_pages.py [rounds] [pause_s] [n]
"""
import os
import resource
import shutil
import sys
import tempfile
import time

from seglog.store import Store

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 4
PAUSE_S = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
N = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
VALUES = [os.urandom(100) for _ in range(N)]
KEYS = [b"key-%d" % (i % 10_000) for i in range(N)]


def send(keyed: bool) -> str:
    """One timed send of N records into a new store (deleted afterwards)."""
    path = tempfile.mkdtemp(prefix="send-pages-", dir=".")
    store = Store(path)
    store.create_topic("bench", partitions=6)
    producer = store.producer(linger_ms=1000, batch_size_bytes=1 << 20)
    send_one = producer.send
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    if keyed:
        for value, key in zip(VALUES, KEYS):
            send_one("bench", value, key)
    else:
        for value in VALUES:
            send_one("bench", value)
    producer.flush()
    wall_s = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    producer.close()
    store.close()
    shutil.rmtree(path)
    return "%-7s %5.2f M/s user %4.0f ms sys %4.0f ms" % (
        "keyed" if keyed else "keyless", N / wall_s / 1e6,
        (after.ru_utime - before.ru_utime) * 1e3, (after.ru_stime - before.ru_stime) * 1e3)


for round_index in range(ROUNDS):
    time.sleep(PAUSE_S)
    first_keyed = round_index % 2 == 0
    load = os.getloadavg()[0]
    first = send(first_keyed)
    second = send(not first_keyed)
    print(f"round {round_index} load {load:.1f} | first after {PAUSE_S:g} s: {first} | "
          f"second: {second}", flush=True)
    # As the bench's clients part now does: each send right after an untimed one of its own.
    primed = []
    for keyed in (first_keyed, not first_keyed):
        send(keyed)
        primed.append(send(keyed))
    print(f"        primed: {primed[0]} | {primed[1]}", flush=True)
