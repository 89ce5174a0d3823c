"""Consumer.poll against the core's scan to record objects, in one process (issue 27).

The session-12 method (bench/results-issue27-pollperf.md): one filled store (``n`` records of
100 bytes, 6 partitions, 1,000-record send_batch calls), keyed then keyless; an untimed core
pass faults the segments in; then ``rounds`` alternating rounds of the core scan (Log.read of
8 MiB + iter_batches + records(), every value touched, CRC32C checked, the bench's
``_core_rate``) and ``Consumer.poll(max_records=5000)`` of every record (a new group each
round). Rates are records per CPU second of the process (``time.process_time``), which a
loaded machine inflates less than wall time; wall-clock rates are printed below them.
Before/after: run it alternately with ``PYTHONPATH`` at each checkout's ``src``.

usage: PYTHONPATH=src python bench/poll_ab.py <rounds> [n]
"""
import os, sys, time, tempfile, shutil, statistics, gc
import seglog
from seglog.store import Store
ROUNDS = int(sys.argv[1]); N = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
PARTS, READ, POLL = 6, 8 << 20, 5000
values = [os.urandom(50) + bytes(50) for _ in range(1000)]
values = [values[i % 1000] for i in range(N)]
keys = [b"key-%d" % (i % 10000) for i in range(N)]

def fill(path, keyed):
    store = Store(path); store.create_topic("bench", partitions=PARTS)
    p = store.producer(linger_ms=1000, batch_size_bytes=1 << 20)
    for i in range(0, N, 1000):
        p.send_batch("bench", values[i:i+1000], keys[i:i+1000] if keyed else None)
    p.close(); return store

def core(store):
    logs = [store.topic("bench").log(p) for p in range(PARTS)]
    seen = 0; t = time.process_time(); w = time.perf_counter()
    for log in logs:
        b = log.backend; off, end = log.start_offset, log.end_offset
        while off < end:
            r = log.read(off, READ)
            for batch in b.iter_batches(r.buffer, check_offsets=True):
                for rec in batch.records(check_crcs=True):
                    rec.value; seen += 1
            off = r.next_offset
    dt = time.process_time() - t; wall.append(N / (time.perf_counter() - w))
    assert seen == N
    return N / dt

gid = [0]
wall = []
def poll(store):
    gid[0] += 1
    c = store.consumer(group_id=f"g{gid[0]}", topics=["bench"], auto_offset_reset="earliest",
                       max_partition_fetch_bytes=READ)
    c.assignment(); seen = 0; t = time.process_time(); w = time.perf_counter(); w = time.perf_counter()
    while seen < N:
        seen += len(c.poll(max_records=POLL))
    dt = time.process_time() - t; wall.append(N / (time.perf_counter() - w))
    c.close(); return N / dt

def fmt(xs): return f"{statistics.median(xs):.3g} ({min(xs):.3g}..{max(xs):.3g})"
tmp = tempfile.mkdtemp()
try:
    for keyed in (True, False):
        store = fill(os.path.join(tmp, "k" if keyed else "n"), keyed)
        core(store)  # untimed: fault the mappings in
        cs, ps, rs = [], [], []; del wall[:]
        for _ in range(ROUNDS):
            c = core(store); p = poll(store)
            cs.append(c); ps.append(p); rs.append(p / c)
        print(f"{os.path.dirname(seglog.__file__)} {'keyed' if keyed else 'keyless'}: core {fmt(cs)} poll {fmt(ps)} ratio {fmt(rs)} load {os.getloadavg()[0]:.2f}", flush=True)
        wc, wp = wall[0::2], wall[1::2]
        print(f"   wall: core {fmt(wc)} poll {fmt(wp)} ratio {fmt([p / c for p, c in zip(wp, wc)])}", flush=True)
        store.close()
finally:
    shutil.rmtree(tmp, ignore_errors=True)
