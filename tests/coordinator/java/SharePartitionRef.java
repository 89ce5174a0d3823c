package kafka.server.share;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;

import org.apache.kafka.clients.consumer.internals.ShareAcquireMode;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.errors.InvalidRecordStateException;
import org.apache.kafka.common.errors.InvalidRequestException;
import org.apache.kafka.common.message.FetchResponseData.AbortedTransaction;
import org.apache.kafka.common.message.ShareFetchResponseData.AcquiredRecords;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.record.internal.ControlRecordType;
import org.apache.kafka.common.record.internal.EndTransactionMarker;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.SimpleRecord;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.coordinator.group.ShareGroupAutoOffsetResetStrategy;
import org.apache.kafka.coordinator.group.modern.share.ShareGroupConfigProvider;
import org.apache.kafka.server.partition.PartitionListener;
import org.apache.kafka.server.share.PartitionMetadataProvider;
import org.apache.kafka.server.share.acknowledge.ShareAcknowledgementBatch;
import org.apache.kafka.server.share.dlq.ShareGroupDLQManager;
import org.apache.kafka.server.share.dlq.ShareGroupDLQRecordParameter;
import org.apache.kafka.server.share.fetch.InFlightBatch;
import org.apache.kafka.server.share.fetch.InFlightState;
import org.apache.kafka.server.share.fetch.ShareAcquiredRecords;
import org.apache.kafka.server.share.persister.DeleteShareGroupStateParameters;
import org.apache.kafka.server.share.persister.DeleteShareGroupStateResult;
import org.apache.kafka.server.share.persister.InitializeShareGroupStateParameters;
import org.apache.kafka.server.share.persister.InitializeShareGroupStateResult;
import org.apache.kafka.server.share.persister.PartitionAllData;
import org.apache.kafka.server.share.persister.PartitionErrorData;
import org.apache.kafka.server.share.persister.PartitionFactory;
import org.apache.kafka.server.share.persister.PartitionStateBatchData;
import org.apache.kafka.server.share.persister.Persister;
import org.apache.kafka.server.share.persister.PersisterStateBatch;
import org.apache.kafka.server.share.persister.ReadShareGroupStateParameters;
import org.apache.kafka.server.share.persister.ReadShareGroupStateResult;
import org.apache.kafka.server.share.persister.ReadShareGroupStateSummaryParameters;
import org.apache.kafka.server.share.persister.ReadShareGroupStateSummaryResult;
import org.apache.kafka.server.share.persister.TopicData;
import org.apache.kafka.server.share.persister.WriteShareGroupStateParameters;
import org.apache.kafka.server.share.persister.WriteShareGroupStateResult;
import org.apache.kafka.server.storage.log.FetchIsolation;
import org.apache.kafka.server.storage.log.FetchPartitionData;
import org.apache.kafka.server.util.timer.Timer;
import org.apache.kafka.server.util.timer.TimerTask;
import org.apache.kafka.server.util.timer.TimerTaskEntry;
import org.apache.kafka.storage.internals.log.LogOffsetMetadata;

/**
 * Kafka 4.4's own SharePartition driven by a script on stdin, one operation a line, one answer
 * line each, with a manual clock, timer, persister and DLQ manager: the reference that
 * tests/coordinator/test_share_partition_kafka.py compares seglog's port with. The line format
 * is the one of that test's driver.
 */
public class SharePartitionRef {
    static long now = 0;
    static final Uuid TOPIC_ID = Uuid.fromString("XH0LDr44S0OfPV0L0fHwoQ");
    static final TopicIdPartition TIP = new TopicIdPartition(TOPIC_ID, 0, "t");

    static final class ManualTime implements Time {
        public long milliseconds() { return now; }
        public long nanoseconds() { return now * 1_000_000L; }
        public void sleep(long ms) { now += ms; }
    }

    static final class ManualTimer implements Timer {
        final List<Object[]> tasks = new ArrayList<>();
        long seq = 0;
        public void add(TimerTask task) {
            // The entry ties the task to this timer (TimerTask.isCancelled is "no entry").
            new TimerTaskEntry(task, now + task.delayMs);
            tasks.add(new Object[]{now + task.delayMs, seq++, task});
        }
        public boolean advanceClock(long timeoutMs) {
            boolean any = false;
            while (true) {
                Object[] best = null;
                for (Object[] t : tasks) {
                    if (((TimerTask) t[2]).isCancelled() || (long) t[0] > now) continue;
                    if (best == null || (long) t[0] < (long) best[0]
                            || ((long) t[0] == (long) best[0] && (long) t[1] < (long) best[1])) best = t;
                }
                tasks.removeIf(t -> ((TimerTask) t[2]).isCancelled());
                if (best == null) return any;
                tasks.remove(best);
                ((TimerTask) best[2]).run();
                any = true;
            }
        }
        public int size() { return tasks.size(); }
        public void close() { }
    }

    static final class RefPersister implements Persister {
        ReadShareGroupStateResult read;
        final Deque<CompletableFuture<WriteShareGroupStateResult>> writes = new ArrayDeque<>();
        final Deque<String> descs = new ArrayDeque<>();
        public CompletableFuture<InitializeShareGroupStateResult> initializeState(InitializeShareGroupStateParameters p) { throw new UnsupportedOperationException(); }
        public CompletableFuture<ReadShareGroupStateResult> readState(ReadShareGroupStateParameters p) { return CompletableFuture.completedFuture(read); }
        public CompletableFuture<WriteShareGroupStateResult> writeState(WriteShareGroupStateParameters p) {
            PartitionStateBatchData d = p.groupTopicPartitionData().topicsData().get(0).partitions().get(0);
            StringBuilder sb = new StringBuilder("W " + d.stateEpoch() + " " + d.startOffset() + " " + d.deliveryCompleteCount() + " " + d.leaderEpoch());
            for (PersisterStateBatch b : d.stateBatches())
                sb.append(" ").append(b.firstOffset()).append(",").append(b.lastOffset()).append(",").append(b.deliveryState()).append(",").append(b.deliveryCount());
            CompletableFuture<WriteShareGroupStateResult> f = new CompletableFuture<>();
            writes.add(f);
            descs.add(sb.toString());
            return f;
        }
        public CompletableFuture<DeleteShareGroupStateResult> deleteState(DeleteShareGroupStateParameters p) { throw new UnsupportedOperationException(); }
        public CompletableFuture<ReadShareGroupStateSummaryResult> readSummary(ReadShareGroupStateSummaryParameters p) { throw new UnsupportedOperationException(); }
        public void stop() { }
    }

    static final class RefDlq implements ShareGroupDLQManager {
        final List<String> fresh = new ArrayList<>();
        final Map<String, Deque<CompletableFuture<Void>>> waiting = new HashMap<>();
        public CompletableFuture<Void> enqueue(ShareGroupDLQRecordParameter p) {
            Throwable cause = p.cause().orElse(null);
            String name = cause == CLIENT_REJECT ? "CLIENT_REJECT" : cause == DELIVERY_COUNT_EXCEEDED ? "DELIVERY_COUNT_EXCEEDED" : String.valueOf(cause);
            fresh.add(p.firstOffset() + "," + p.lastOffset() + "," + p.deliveryCount().orElse((short) -1) + "," + name);
            CompletableFuture<Void> f = new CompletableFuture<>();
            waiting.computeIfAbsent(p.firstOffset() + "," + p.lastOffset(), k -> new ArrayDeque<>()).add(f);
            return f;
        }
        public void stop() { }
    }

    static final class Config extends ShareGroupConfigProvider {
        int lockMs, limit, maxInFlight; boolean dlq, renew;
        Config() { super(null); }
        public int recordLockDurationMsOrDefault(String g, int d) { return lockMs; }
        public int deliveryCountLimitOrDefault(String g, int d) { return limit; }
        public int partitionMaxRecordLocksOrDefault(String g, int d) { return maxInFlight; }
        public boolean isRenewAcknowledgeEnabled(String g) { return renew; }
        public ShareGroupAutoOffsetResetStrategy autoOffsetReset(String g) { return ShareGroupAutoOffsetResetStrategy.EARLIEST; }
        public Optional<String> errorsDLQTopicName(String g) { return dlq ? Optional.of("dlq") : Optional.empty(); }
    }

    static final class Metadata implements PartitionMetadataProvider {
        long logStart = 0;
        public long offsetForEarliestTimestamp(TopicIdPartition tp, int e) { return logStart; }
        public long offsetForLatestTimestamp(TopicIdPartition tp, int e) { return logStart; }
        public long offsetForTimestamp(TopicIdPartition tp, long ts, int e) { return logStart; }
        public LogOffsetMetadata endOffsetMetadata(TopicIdPartition tp, FetchIsolation i) { return null; }
        public int leaderEpoch(TopicIdPartition tp) { return 0; }
        public boolean addPartitionListener(TopicIdPartition tp, PartitionListener l) { return true; }
        public void removePartitionListener(TopicIdPartition tp, PartitionListener l) { }
    }

    /**
     * Kafka's SharePartition with one fix, the one place seglog's port deliberately differs:
     * canMoveStartOffset() reads the start offset's state in the batch at or before it, and
     * when that batch holds per-offset states and ends before the start offset (the log start
     * moved into a hole past it) the lookup is null and Kafka throws NullPointerException
     * inside the write's completion, dropping that write's DLQ hand-off (the records stay
     * ARCHIVING for good). Here, as in seglog, the start offset simply does not move.
     */
    static final class FixedSharePartition extends SharePartition {
        FixedSharePartition(String groupId, TopicIdPartition tip, int leaderEpoch, int maxInFlight, int maxDelivery, int lockMs,
                            Timer timer, Time time, Persister persister, PartitionMetadataProvider metadata,
                            ShareGroupConfigProvider config, boolean dlq, ShareGroupDLQManager dlqManager) {
            super(groupId, tip, leaderEpoch, maxInFlight, maxDelivery, lockMs, timer, time, persister, metadata, k -> { }, config,
                  null, () -> dlq, dlqManager);
        }

        @Override
        boolean canMoveStartOffset() {
            try {
                return super.canMoveStartOffset();
            } catch (NullPointerException e) {
                return false;
            }
        }
    }

    static String code(CompletableFuture<Void> f) {
        if (!f.isDone()) return "E 0";
        try {
            f.getNow(null);
            return "E 0";
        } catch (Exception e) {
            Throwable c = e.getCause() != null ? e.getCause() : e;
            if (c instanceof InvalidRecordStateException) return "E " + Errors.INVALID_RECORD_STATE.code();
            if (c instanceof InvalidRequestException) return "E " + Errors.INVALID_REQUEST.code();
            return "E " + c.getClass().getSimpleName();
        }
    }

    static String dump(SharePartition sp) {
        StringBuilder sb = new StringBuilder("S " + sp.startOffset() + " " + sp.endOffset() + " " + sp.nextFetchOffset() + " " + sp.deliveryCompleteCount() + " |");
        NavigableMap<Long, InFlightBatch> cache = sp.cachedState();
        for (InFlightBatch b : cache.values()) {
            if (b.offsetState() == null) {
                sb.append(" ").append(b.firstOffset()).append(",").append(b.lastOffset()).append(",").append(b.batchState().id).append(",").append(b.batchDeliveryCount()).append(",").append(b.batchMemberId());
            } else {
                for (Map.Entry<Long, InFlightState> e : b.offsetState().entrySet())
                    sb.append(" ").append(e.getKey()).append(",").append(e.getKey()).append(",").append(e.getValue().state().id).append(",").append(e.getValue().deliveryCount()).append(",").append(e.getValue().memberId());
            }
        }
        return sb.toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        PrintStream out = new PrintStream(System.out, true);
        ManualTime time = new ManualTime();
        ManualTimer timer = null;
        RefPersister persister = new RefPersister();
        RefDlq dlqManager = null;
        Config config = new Config();
        Metadata metadata = new Metadata();
        SharePartition sp = null;
        String line;
        while ((line = in.readLine()) != null) {
            String[] t = line.trim().split(" ");
            int i = 0;
            String op = t[i++];
            try {
            switch (op) {
                case "config": {
                    config.lockMs = Integer.parseInt(t[i++]); config.limit = Integer.parseInt(t[i++]);
                    config.maxInFlight = Integer.parseInt(t[i++]); config.dlq = t[i++].equals("1");
                    config.renew = t[i++].equals("1");
                    out.println("OK");
                    break;
                }
                case "init": {
                    long start = Long.parseLong(t[i++]); int epoch = Integer.parseInt(t[i++]); int n = Integer.parseInt(t[i++]);
                    List<PersisterStateBatch> batches = new ArrayList<>();
                    for (int k = 0; k < n; k++) {
                        String[] b = t[i++].split(",");
                        batches.add(new PersisterStateBatch(Long.parseLong(b[0]), Long.parseLong(b[1]), Byte.parseByte(b[2]), Short.parseShort(b[3])));
                    }
                    // A new partition: its own timer, writes and DLQ (one JVM runs many scripts).
                    now = 0;
                    timer = new ManualTimer();
                    persister = new RefPersister();
                    dlqManager = new RefDlq();
                    metadata.logStart = 0;
                    PartitionAllData data = PartitionFactory.newPartitionAllData(0, epoch, start, (short) 0, null, batches);
                    persister.read = new ReadShareGroupStateResult.Builder().setTopicsData(List.of(new TopicData<>(TOPIC_ID, List.of(data)))).build();
                    boolean dlqOn = config.dlq;
                    sp = new FixedSharePartition("g", TIP, 0, config.maxInFlight, config.limit, config.lockMs, timer, time, persister,
                        metadata, config, dlqOn, dlqManager);
                    sp.maybeInitialize().get();
                    out.println(dump(sp));
                    break;
                }
                case "acq": {
                    now = Long.parseLong(t[i++]);
                    String member = t[i++];
                    ShareAcquireMode mode = t[i++].equals("1") ? ShareAcquireMode.RECORD_LIMIT : ShareAcquireMode.BATCH_OPTIMIZED;
                    int batchSize = Integer.parseInt(t[i++]); int maxRecords = Integer.parseInt(t[i++]);
                    long fetchOffset = Long.parseLong(t[i++]);
                    FetchIsolation isolation = t[i++].equals("1") ? FetchIsolation.TXN_COMMITTED : FetchIsolation.HIGH_WATERMARK;
                    int nb = Integer.parseInt(t[i++]);
                    ByteBuffer all = ByteBuffer.allocate(1 << 20);
                    for (int k = 0; k < nb; k++) {
                        String[] b = t[i++].split(",");
                        long base = Long.parseLong(b[0]), last = Long.parseLong(b[1]), pid = Long.parseLong(b[2]);
                        boolean txn = b[3].equals("1"), ctrl = b[4].equals("1"), abort = b[5].equals("1");
                        MemoryRecords r;
                        if (ctrl) {
                            r = MemoryRecords.withEndTransactionMarker(base, 0L, 0, pid, (short) 0,
                                new EndTransactionMarker(abort ? ControlRecordType.ABORT : ControlRecordType.COMMIT, 0));
                        } else {
                            SimpleRecord[] recs = new SimpleRecord[(int) (last - base + 1)];
                            for (int j = 0; j < recs.length; j++) recs[j] = new SimpleRecord(0L, "v".getBytes());
                            if (txn) r = MemoryRecords.withTransactionalRecords(base, Compression.NONE, pid, (short) 0, 0, 0, recs);
                            else if (pid >= 0) r = MemoryRecords.withIdempotentRecords(base, Compression.NONE, pid, (short) 0, 0, 0, recs);
                            else r = MemoryRecords.withRecords(base, Compression.NONE, recs);
                        }
                        all.put(r.buffer());
                    }
                    all.flip();
                    int na = Integer.parseInt(t[i++]);
                    List<AbortedTransaction> aborted = new ArrayList<>();
                    for (int k = 0; k < na; k++) {
                        String[] a = t[i++].split(",");
                        aborted.add(new AbortedTransaction().setProducerId(Long.parseLong(a[0])).setFirstOffset(Long.parseLong(a[1])));
                    }
                    FetchPartitionData fpd = new FetchPartitionData(Errors.NONE, 0L, 0L, MemoryRecords.readableRecords(all), Optional.empty(),
                        OptionalLong.empty(), Optional.of(aborted), OptionalInt.empty(), false);
                    ShareAcquiredRecords got = sp.acquire(member, mode, batchSize, maxRecords, fetchOffset, fpd, isolation);
                    StringBuilder sb = new StringBuilder("A " + got.count());
                    for (AcquiredRecords a : got.acquiredRecords())
                        sb.append(" ").append(a.firstOffset()).append(",").append(a.lastOffset()).append(",").append(a.deliveryCount());
                    out.println(sb);
                    break;
                }
                case "ack": {
                    now = Long.parseLong(t[i++]);
                    String member = t[i++];
                    int nb = Integer.parseInt(t[i++]);
                    List<ShareAcknowledgementBatch> acks = new ArrayList<>();
                    for (int k = 0; k < nb; k++) {
                        String[] b = t[i++].split(",");
                        List<Byte> types = new ArrayList<>();
                        for (int j = 2; j < b.length; j++) types.add(Byte.parseByte(b[j]));
                        acks.add(new ShareAcknowledgementBatch(Long.parseLong(b[0]), Long.parseLong(b[1]), types));
                    }
                    out.println(code(sp.acknowledge(member, acks)));
                    break;
                }
                case "rel": {
                    now = Long.parseLong(t[i++]);
                    out.println(code(sp.releaseAcquiredRecords(t[i++])));
                    break;
                }
                case "exp": {
                    now = Long.parseLong(t[i++]);
                    int count = persister.writes.size();
                    timer.advanceClock(0);
                    out.println("X " + (persister.writes.size() > count));
                    break;
                }
                case "wd": {
                    boolean ok = t[i++].equals("1");
                    if (persister.writes.isEmpty()) { out.println("W none"); break; }
                    CompletableFuture<WriteShareGroupStateResult> f = persister.writes.poll();
                    String desc = persister.descs.poll();
                    if (ok) {
                        PartitionErrorData pe = PartitionFactory.newPartitionErrorData(0, (short) 0, null);
                        f.complete(new WriteShareGroupStateResult.Builder().setTopicsData(List.of(new TopicData<>(TOPIC_ID, List.of(pe)))).build());
                    } else {
                        f.completeExceptionally(new RuntimeException("write failed"));
                    }
                    out.println(desc);
                    break;
                }
                case "dlq": {
                    out.println("D" + (dlqManager.fresh.isEmpty() ? "" : " " + String.join(" ", dlqManager.fresh)));
                    dlqManager.fresh.clear();
                    break;
                }
                case "ad": {
                    String key = t[i++] + "," + t[i++];
                    dlqManager.waiting.get(key).poll().complete(null);
                    out.println("OK");
                    break;
                }
                case "lso": {
                    long lso = Long.parseLong(t[i++]);
                    metadata.logStart = lso;
                    sp.updateCacheAndOffsets(lso);
                    out.println("OK");
                    break;
                }
                case "dump": {
                    out.println(dump(sp));
                    break;
                }
                default:
                    out.println("? " + line);
            }
            } catch (RuntimeException e) {
                // What Kafka throws out of an operation (its callers turn it into an error).
                out.println("EXC");
                if (System.getenv("SHARE_REF_DEBUG") != null) e.printStackTrace();
            }
        }
    }
}
