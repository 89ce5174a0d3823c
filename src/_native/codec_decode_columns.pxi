# Part of seglog._native.codec: included by codec.pyx (see "Layout" in its docstring), not
# compiled alone; it imports nothing, codec.pyx does.
#
# decode_columns: every batch of a buffer into one Columns, and its two-thread path for large
# uncompressed inputs (a POSIX thread parses the second half while the caller parses the
# first; any trouble falls back to the single-threaded walk, which raises in batch order).

cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t
    ctypedef void *(*_thread_start)(void *) noexcept nogil
    int pthread_create(pthread_t *thread, const void *attributes, _thread_start start,
                       void *argument)
    int pthread_join(pthread_t thread, void **result)


# decode_columns parses on two threads when the buffer has at least this many bytes and at
# least this many batches to parse (module attributes, so a test can lower them).
_THREADED_BYTES_MIN = 8 << 20
_THREADED_BATCHES_MIN = 8

# Decodes that took the two-thread path (a test checks it was taken). GIL held.
cdef Py_ssize_t _threaded_decodes = 0


def _threaded_decode_count():
    """How many decode_columns calls parsed on two threads (for tests)."""
    return _threaded_decodes


ctypedef struct _HalfJob:
    # A run of tasks [first, stop) parsed by one thread; ``failed`` is the index of the task
    # that failed (-1: none), with ``failure`` filled in.
    const ColumnsTarget *target
    const unsigned char *data
    const AreaTask *tasks
    Py_ssize_t first
    Py_ssize_t stop
    Py_ssize_t failed
    ParseFailure failure


cdef void _parse_half(_HalfJob *job) noexcept nogil:
    cdef Py_ssize_t k
    cdef const AreaTask *task
    job.failed = -1
    for k in range(job.first, job.stop):
        task = &job.tasks[k]
        # A CRC mismatch fails the run like a parse error: the single-threaded decode then
        # raises it in batch order.
        if task.check_crc and seglog_crc32c(0, job.data + task.crc_start,
                                            task.crc_bytes) != task.crc_expected:
            job.failed = k
            return
        if _parse_area(job.target, job.data, task, &job.failure) < 0:
            job.failed = k
            return


cdef void *_parse_half_thread(void *job) noexcept nogil:
    _parse_half(<_HalfJob *>job)
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
    of the columns (index ``at``, ``count`` records), and the batches are split in two runs
    of about equal record-area bytes: the second run is parsed on a new POSIX thread while
    this one parses the first, both without the GIL, into disjoint slices of the block. A
    parse succeeds with exactly ``count`` records or fails; on any failure (in either run)
    everything is dropped and False returned, so the single-threaded path raises the first
    error in batch order, as always. If the thread cannot be created, the second run is
    parsed here after the first.

    ``check_offsets`` is checked in the walk and ``check_crcs`` too for the batches that are
    not parsed (control, empty); the parsed batches' CRCs are computed by the thread that
    parses them, just before it does, so the hashing is split over the two threads as well. A
    mismatch anywhere returns False (the single-threaded decode raises it)."""
    global _threaded_decodes
    cdef Py_ssize_t position = 0, n, k, split, total = 0, area_bytes = 0, half, seen
    cdef list batches = []
    cdef Batch batch
    cdef AreaTask *tasks
    cdef AreaTask *task
    cdef ColumnsTarget target
    cdef _HalfJob first_run, second_run
    cdef pthread_t thread
    cdef int started
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
    tasks = <AreaTask *>PyMem_Malloc(n * sizeof(AreaTask))
    if tasks == NULL:
        return False
    try:
        for k in range(n):
            batch = <Batch>PyList_GET_ITEM(batches, k)
            task = &tasks[k]
            task.start = batch.position + RECORD_BATCH_OVERHEAD
            task.end = batch.position + LOG_OVERHEAD + <Py_ssize_t>batch.batch_length
            task.count = batch.record_count
            if task.count > (task.end - task.start) // RECORD_BYTES_MIN + 1:
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
            area_bytes += task.end - task.start
        if 0 <= limit < total or total > builder.capacity:
            return False
        # The first run: the batches before the one at which half the area bytes were seen.
        half = area_bytes // 2
        seen = 0
        split = n - 1
        for k in range(n):
            if seen >= half:
                split = k
                break
            seen += tasks[k].end - tasks[k].start
        if split < 1:
            split = 1
        target.offsets = builder.offsets
        target.timestamps = builder.timestamps
        target.key_positions = builder.key_positions
        target.value_positions = builder.value_positions
        target.key_lengths = builder.key_lengths
        target.value_lengths = builder.value_lengths
        target.capacity = builder.capacity
        first_run.target = second_run.target = &target
        first_run.data = second_run.data = owner.data
        first_run.tasks = second_run.tasks = tasks
        first_run.first, first_run.stop = 0, split
        second_run.first, second_run.stop = split, n
        with nogil:
            started = pthread_create(&thread, NULL, _parse_half_thread, &second_run)
            _parse_half(&first_run)
            if started == 0:
                pthread_join(thread, NULL)
            else:
                _parse_half(&second_run)
        if first_run.failed >= 0 or second_run.failed >= 0:
            return False
        for k in range(n):
            builder.chunks.append((<object>PyList_GET_ITEM(batches, k), None, tasks[k].at,
                                   <Py_ssize_t>tasks[k].count))
        builder.count = total
        _threaded_decodes += 1
        return True
    finally:
        PyMem_Free(tasks)


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

    Large inputs are parsed on two threads: when ``buffer`` holds at least 8 MiB
    (``_THREADED_BYTES_MIN``) and at least 8 batches to decode (``_THREADED_BATCHES_MIN``), all
    uncompressed with record counts that fit their areas (and ``max_records``, if given, not
    below their total), the batches are split in two halves by bytes and the second half is
    parsed on a worker thread while the calling thread parses the first, each into its own
    slice of the columns. The result is identical to the single-threaded decode; on any error
    (or anything else unusual) the single-threaded decode runs instead and raises the first
    error in batch order.
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
    if owner.size >= _THREADED_BYTES_MIN and _decode_threaded(
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
