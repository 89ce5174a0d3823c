# Part of seglog._native.codec: included by codec.pyx (see "Layout" in its docstring), not
# compiled alone; it imports nothing, codec.pyx does.
#
# decode_columns: every batch of a buffer into one Columns, and its two-thread path for large
# uncompressed inputs (a POSIX thread and the caller take batches in turn from a shared
# counter; any trouble falls back to the single-threaded walk, which raises in batch order).

cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t
    ctypedef void *(*_thread_start)(void *) noexcept nogil
    int pthread_create(pthread_t *thread, const void *attributes, _thread_start start,
                       void *argument)
    int pthread_detach(pthread_t thread)

cdef extern from "<sched.h>" nogil:
    int sched_yield()

cdef extern from *:
    """
    /* The shared counters of a two-thread decode (GCC/Clang atomic builtins). */
    static inline Py_ssize_t seglog_atomic_add(Py_ssize_t *p, Py_ssize_t v) {
        return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
    }
    static inline Py_ssize_t seglog_atomic_load(Py_ssize_t *p) {
        return __atomic_load_n(p, __ATOMIC_ACQUIRE);
    }
    static inline void seglog_atomic_store(Py_ssize_t *p, Py_ssize_t v) {
        __atomic_store_n(p, v, __ATOMIC_RELEASE);
    }
    """
    Py_ssize_t seglog_atomic_add(Py_ssize_t *p, Py_ssize_t v) nogil
    Py_ssize_t seglog_atomic_load(Py_ssize_t *p) nogil
    void seglog_atomic_store(Py_ssize_t *p, Py_ssize_t v) nogil


# decode_columns parses on two threads when the buffer has at least this many bytes and at
# least this many batches to parse (module attributes, so a test can lower them). 4 MiB: a
# consumer's read of max_partition_fetch_bytes 8 MiB (whole batches, so a little under 8 MiB)
# takes it; below ~2 MiB the thread's start costs about what it saves.
_THREADED_BYTES_MIN = 4 << 20
_THREADED_BATCHES_MIN = 8


def _usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# Only where this process may run on two CPUs or more (a second thread on one CPU only waits),
# and while the machine's 1-minute load average is below the CPUs less half of one: on a
# machine whose cores are all busy the worker gets a core late, and the two-thread decode
# measured 0.88x (0.58..1.12x) of one thread at load 8.5 on 2 CPUs (this process's own
# decoding counts about 1 of the load). Tests set both to force the path.
_THREADED_CPUS = _usable_cpus() >= 2
_THREADED_LOAD_MAX = _usable_cpus() - 0.5


cdef extern from "<stdlib.h>" nogil:
    int getloadavg(double *loads, int count)


cdef bint _cores_to_spare() except -1:
    cdef double load = 0
    if not _THREADED_CPUS:
        return False
    if getloadavg(&load, 1) != 1:
        return True  # no load average here: as if idle
    return load < _THREADED_LOAD_MAX

# Decodes that took the two-thread path (a test checks it was taken). GIL held.
cdef Py_ssize_t _threaded_decodes = 0


def _threaded_decode_count():
    """How many decode_columns calls parsed on two threads (for tests)."""
    return _threaded_decodes


ctypedef struct _SharedJob:
    # The batches [0, count) shared by the calling thread and a worker: each claims the next
    # batch from ``next_task`` and counts it in ``finished`` once parsed. Allocated with
    # malloc (no GIL in the worker) and freed by whichever of the two drops ``references``
    # to 0: a worker that starts late (its core busy) finds nothing left to claim and only
    # frees; the caller never waits for a thread that has not claimed a batch.
    ColumnsTarget target
    const unsigned char *data
    AreaTask *tasks
    Py_ssize_t count
    Py_ssize_t next_task
    Py_ssize_t finished
    Py_ssize_t failed
    Py_ssize_t references


cdef void _release_job(_SharedJob *job) noexcept nogil:
    if seglog_atomic_add(&job.references, -1) == 1:
        free(job.tasks)
        free(job)


cdef void _parse_shared(_SharedJob *job) noexcept nogil:
    """Claim and parse batches until none is left (or one failed)."""
    cdef Py_ssize_t k
    cdef const AreaTask *task
    cdef ParseFailure failure
    while True:
        k = seglog_atomic_add(&job.next_task, 1)
        if k >= job.count:
            return
        task = &job.tasks[k]
        if seglog_atomic_load(&job.failed) == 0:
            # A CRC mismatch fails the decode like a parse error: the single-threaded
            # decode then raises it in batch order.
            if task.check_crc and seglog_crc32c(0, job.data + task.crc_start,
                                                task.crc_bytes) != task.crc_expected:
                seglog_atomic_store(&job.failed, 1)
            elif _parse_area(&job.target, job.data, task, &failure) < 0:
                seglog_atomic_store(&job.failed, 1)
        seglog_atomic_add(&job.finished, 1)


cdef void *_parse_shared_thread(void *job) noexcept nogil:
    _parse_shared(<_SharedJob *>job)
    _release_job(<_SharedJob *>job)
    return NULL


cdef bint _decode_threaded(_Buffer owner, _ColumnsBuilder builder, Py_ssize_t limit,
                           bint check_crcs, bint check_offsets) except -1:
    """decode_columns' two-thread path: fill the empty ``builder`` with every record of
    ``owner`` and return True, or return False with the builder untouched (the caller then
    takes the single-threaded path, which raises what it raises).

    The batches are walked first (as decode_columns' loop walks them); the path is taken
    only when that walk raises nothing, at least _THREADED_BATCHES_MIN batches are to be
    parsed, none of them is compressed, every record_count is >= 0 and fits its area (each
    record takes >= 7 bytes, so a count that does not is an error), the limit (if any) is
    not below the total and the builder has room for it. Each batch then has a known slice
    of the columns (index ``at``, ``count`` records). The batches are shared, not split in
    fixed halves: a new POSIX thread and this one each claim the next batch (an atomic
    counter) and parse it without the GIL into its own slice, until none is left. On a
    loaded machine the worker may get a core late or never: this thread then parses what is
    left and waits only for the batches the worker claimed (fixed halves waited for a whole
    half, so a busy machine made the decode slower than one thread). A parse succeeds with
    exactly ``count`` records or fails; on any failure everything is dropped and False
    returned, so the single-threaded path raises the first error in batch order, as always.
    If the thread cannot be created, this thread parses every batch.

    ``check_offsets`` is checked in the walk and ``check_crcs`` too for the batches that are
    not parsed (control, empty); the parsed batches' CRCs are computed by the thread that
    parses them, just before it does, so the hashing is shared as well. A
    mismatch anywhere returns False (the single-threaded decode raises it)."""
    global _threaded_decodes
    cdef Py_ssize_t position = 0, n, k, total = 0
    cdef list batches = []
    cdef Batch batch
    cdef AreaTask *tasks
    cdef AreaTask *task
    cdef _SharedJob *job
    cdef pthread_t thread
    cdef bint failed
    cdef int64_t next_offset_min = 0
    try:
        while True:
            batch = _next_batch(owner, &position, -1)
            if batch is None:
                break
            if check_offsets:
                _check_offsets_increase(batch, &next_offset_min)
            if batch.attributes & CONTROL_FLAG_MASK or batch.record_count == 0:
                if check_crcs:
                    batch._check_crc()
                continue
            if batch.record_count < 0 or batch.attributes & COMPRESSION_CODEC_MASK:
                return False
            batches.append(batch)
    except Exception:
        return False  # the single-threaded walk raises it, after the batches before it
    n = len(batches)
    if n < 2 or n < _THREADED_BATCHES_MIN:
        return False
    tasks = <AreaTask *>malloc(n * sizeof(AreaTask))
    if tasks == NULL:
        return False
    for k in range(n):
        batch = <Batch>PyList_GET_ITEM(batches, k)
        task = &tasks[k]
        task.start = batch.position + RECORD_BATCH_OVERHEAD
        task.end = batch.position + LOG_OVERHEAD + <Py_ssize_t>batch.batch_length
        task.count = batch.record_count
        if task.count > (task.end - task.start) // RECORD_BYTES_MIN + 1:
            free(tasks)
            return False
        task.bound = task.count
        task.at = total
        task.base_offset = batch.base_offset
        task.base_timestamp = batch.base_timestamp_ms
        task.max_timestamp = batch.max_timestamp_ms
        task.log_append_time = (batch.attributes & TIMESTAMP_TYPE_MASK) != 0
        task.check_crc = check_crcs
        task.crc_start = batch.position + ATTRIBUTES_POSITION
        task.crc_bytes = <size_t>(task.end - task.crc_start)
        task.crc_expected = batch.crc
        total += task.count
    if 0 <= limit < total or total > builder.capacity:
        free(tasks)
        return False
    job = <_SharedJob *>malloc(sizeof(_SharedJob))
    if job == NULL:
        free(tasks)
        return False
    job.target.offsets = builder.offsets
    job.target.timestamps = builder.timestamps
    job.target.key_positions = builder.key_positions
    job.target.value_positions = builder.value_positions
    job.target.key_lengths = builder.key_lengths
    job.target.value_lengths = builder.value_lengths
    job.target.capacity = builder.capacity
    job.data = owner.data
    job.tasks = tasks
    job.count = n
    job.next_task = 0
    job.finished = 0
    job.failed = 0
    job.references = 2
    with nogil:
        if pthread_create(&thread, NULL, _parse_shared_thread, job) == 0:
            pthread_detach(thread)
        else:
            job.references = 1  # no worker: this thread parses every batch
        _parse_shared(job)
        # Every batch is claimed; wait only for those the worker is still parsing.
        while seglog_atomic_load(&job.finished) < n:
            sched_yield()
        failed = seglog_atomic_load(&job.failed) != 0
        _release_job(job)  # the tasks are not read below: the worker may free them
    if failed:
        return False
    total = 0
    for k in range(n):
        batch = <Batch>PyList_GET_ITEM(batches, k)
        builder.chunks.append((batch, None, total, <Py_ssize_t>batch.record_count))
        total += batch.record_count
    builder.count = total
    _threaded_decodes += 1
    return True


def decode_columns(buffer, *, max_records=None, check_crcs=True, check_offsets=False,
                   max_decompressed_bytes=DECOMPRESSED_BYTES_MAX_DEFAULT):
    """All records of every whole batch in ``buffer`` as one :class:`Columns`.

    Batches are walked as by :func:`iter_batches` (same errors; a torn tail ends the walk;
    ``check_offsets`` as there). Control batches and batches with record_count 0 are skipped.
    Batches are decoded whole until at least ``max_records`` records were collected, then the
    columns are cut to ``max_records`` (0 decodes nothing; None means no limit).

    ``check_crcs`` (default True): every batch walked before the limit is reached, control and
    empty batches included, has its CRC32C checked first (CorruptRecordError,
    REASON_CRC_MISMATCH); ``max_decompressed_bytes`` bounds each compressed record area as in
    :meth:`Batch.records`. TypeError for a ``max_records`` or ``max_decompressed_bytes`` that
    is not an int (None allowed for ``max_records``), ValueError for a negative one.

    ``data``: if nothing was decompressed, a read-only memoryview of the whole ``buffer``
    (positions are absolute in it; zero-copy); otherwise ``bytes`` holding, in batch order, the
    record area of every decoded batch (decompressed, or copied as is), and positions index
    that. Raises as :meth:`Batch.records`. Uncompressed record areas are parsed (and their
    CRCs computed) without the GIL.

    Large inputs are parsed on two threads where the process may use two CPUs or more and the
    machine's 1-minute load average leaves half a CPU or more idle: when
    ``buffer`` holds at least 4 MiB (``_THREADED_BYTES_MIN``) and at least 8 batches to decode
    (``_THREADED_BATCHES_MIN``), all uncompressed with record counts that fit their areas (and
    ``max_records``, if given, not below their total), a worker thread and the calling thread
    each take the next batch until none is left, each parsing into its own slice of the
    columns (a worker that gets no core leaves the calling thread to parse them all, never
    waited for). The result is identical to the single-threaded decode; on any error (or
    anything else unusual) the single-threaded decode runs instead and raises the first error
    in batch order.
    """
    cdef Py_ssize_t limit = -1, position = 0, hint = 0, at = 0, bound, decompressed_limit
    cdef int32_t batch_length, count
    cdef int64_t next_offset_min = 0
    cdef _Buffer owner
    cdef _ColumnsBuilder builder
    cdef Batch batch
    cdef bint c_check_crcs = bool(check_crcs), c_check_offsets = bool(check_offsets)
    max_records = _size_argument("max_records", max_records, True)
    if max_records is not None:
        limit = max_records
    decompressed_limit = _decompressed_limit(max_decompressed_bytes)
    owner = _acquire(buffer)
    # Capacity hint: the declared record counts of the whole batches, each bounded by its size
    # (no errors here; the real walk below raises them in the twin's order).
    while owner.size - at >= RECORD_BATCH_OVERHEAD:
        batch_length = <int32_t>load_u32(owner.data + at + BATCH_LENGTH_POSITION)
        if batch_length < BATCH_LENGTH_MIN_V2 or LOG_OVERHEAD + <Py_ssize_t>batch_length > owner.size - at:
            break
        count = <int32_t>load_u32(owner.data + at + RECORDS_COUNT_POSITION)
        if count > 0:
            if owner.data[at + ATTRIBUTES_POSITION + 1] & COMPRESSION_CODEC_MASK:
                bound = 65536  # unknown until decompressed; the builder grows if needed
            else:
                bound = batch_length // RECORD_BYTES_MIN + 1
            hint += count if count < bound else bound
        at += LOG_OVERHEAD + batch_length
    if limit >= 0 and hint > limit + 65536:
        hint = limit + 65536
    builder = _ColumnsBuilder(hint)
    if owner.size >= _THREADED_BYTES_MIN and _cores_to_spare() and _decode_threaded(
            owner, builder, limit, c_check_crcs, c_check_offsets):
        return builder.finish(owner, limit)
    while True:
        # The next header (and its offsets) is checked before the limit, as the twin's loop
        # over iter_batches; the CRC after it.
        batch = _next_batch(owner, &position, -1)
        if batch is None:
            break
        if c_check_offsets:
            _check_offsets_increase(batch, &next_offset_min)
        if limit >= 0 and builder.count >= limit:
            break
        if c_check_crcs:
            batch._check_crc()
        if batch.attributes & CONTROL_FLAG_MASK or batch.record_count == 0:
            continue
        builder.add_batch(batch, decompressed_limit)
    return builder.finish(owner, limit)
