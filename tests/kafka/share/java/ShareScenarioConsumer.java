// Kafka 4.4's Java KafkaShareConsumer run by a script, for the share-group scenarios of
// tests/kafka/share (share_driver.py holds the other side and the line format).
// Args: bootstrap group topic member run_seconds [rule ...]; rules (the same as the Python
// driver's): release-below=K (RELEASE while the delivery count is below K), release-mod=M:R
// (always RELEASE offsets with offset % M == R), reject-mod=M:R (REJECT them), hold-after=N
// (the first batch polled once N records were delivered is held: not acknowledged, and
// polling stops until STOP, after which the process halts without closing), max-poll=N
// (max.poll.records), pause-ms=N (sleep N ms after each committed batch: a slow worker).
// Anything else is ACCEPTed.
// stdin: "STOP" (or end of input) ends the run: the batch in hand is committed and the
// consumer closed. Output, one line per event, flushed:
//   READY <member>
//   DELIVERY <poll_ms> <member> <topic> <partition> <offset> <delivery_count> <ack> <commit_ms> <result>
//   ERROR <member> <exception>        (a poll or commit that threw; the loop goes on)
//   CLOSED <member>                   (HALTED <member> after a hold)
// <result> is "ok" when commitSync confirmed the acknowledgement, else the error's class.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ShareScenarioConsumer {
    static void out(String line) {
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }

    static int[] modRule(String value) {
        String[] mr = value.split(":");
        return new int[] {Integer.parseInt(mr[0]), Integer.parseInt(mr[1])};
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2], member = args[3];
        long until = System.currentTimeMillis() + Long.parseLong(args[4]) * 1000;
        int releaseBelow = 0, holdAfter = -1, maxPoll = -1, pauseMs = 0;
        int[] releaseMod = null, rejectMod = null;
        for (int i = 5; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            switch (kv[0]) {
                case "release-below": releaseBelow = Integer.parseInt(kv[1]); break;
                case "release-mod": releaseMod = modRule(kv[1]); break;
                case "reject-mod": rejectMod = modRule(kv[1]); break;
                case "hold-after": holdAfter = Integer.parseInt(kv[1]); break;
                case "max-poll": maxPoll = Integer.parseInt(kv[1]); break;
                case "pause-ms": pauseMs = Integer.parseInt(kv[1]); break;
                default: throw new IllegalArgumentException("unknown rule " + args[i]);
            }
        }
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread control = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("STOP")) { }
            } catch (Exception e) { }
            stop.set(true);
        });
        control.setDaemon(true);
        control.start();

        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("client.id", member);
        props.put("share.acknowledgement.mode", "explicit");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        if (maxPoll > 0) props.put("max.poll.records", Integer.toString(maxPoll));
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props);
        consumer.subscribe(List.of(topic));
        out("READY " + member);
        int delivered = 0;
        while (!stop.get() && System.currentTimeMillis() < until) {
            ConsumerRecords<byte[], byte[]> records;
            try {
                records = consumer.poll(Duration.ofMillis(200));
            } catch (KafkaException e) {
                out("ERROR " + member + " " + e.getClass().getSimpleName() + ": " + e.getMessage());
                Thread.sleep(100);
                continue;
            }
            if (records.isEmpty()) continue;
            long pollMs = System.currentTimeMillis();
            if (holdAfter >= 0 && delivered >= holdAfter) {
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    out(String.format("DELIVERY %d %s %s %d %d %d HOLD %d -", pollMs, member,
                        r.topic(), r.partition(), r.offset(), r.deliveryCount().orElse((short) -1),
                        pollMs));
                }
                while (!stop.get()) Thread.sleep(50);
                out("HALTED " + member);
                Runtime.getRuntime().halt(0);
            }
            List<String[]> lines = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : records) {
                int count = r.deliveryCount().orElse((short) -1);
                AcknowledgeType ack = AcknowledgeType.ACCEPT;
                if (rejectMod != null && r.offset() % rejectMod[0] == rejectMod[1]) {
                    ack = AcknowledgeType.REJECT;
                } else if (releaseMod != null && r.offset() % releaseMod[0] == releaseMod[1]) {
                    ack = AcknowledgeType.RELEASE;
                } else if (count < releaseBelow) {
                    ack = AcknowledgeType.RELEASE;
                }
                consumer.acknowledge(r, ack);
                lines.add(new String[] {r.topic(), Integer.toString(r.partition()),
                    Long.toString(r.offset()), Integer.toString(count), ack.name()});
                delivered++;
            }
            Map<String, String> results = new HashMap<>();
            try {
                Map<TopicIdPartition, Optional<KafkaException>> done =
                    consumer.commitSync(Duration.ofSeconds(30));
                for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : done.entrySet()) {
                    results.put(e.getKey().topic() + ":" + e.getKey().partition(),
                        e.getValue().map(x -> x.getClass().getSimpleName()).orElse("ok"));
                }
            } catch (KafkaException e) {
                out("ERROR " + member + " " + e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            long commitMs = System.currentTimeMillis();
            for (String[] l : lines) {
                String result = results.getOrDefault(l[0] + ":" + l[1], "none");
                out(String.format("DELIVERY %d %s %s %s %s %s %s %d %s", pollMs, member, l[0], l[1],
                    l[2], l[3], l[4], commitMs, result));
            }
            if (pauseMs > 0) Thread.sleep(pauseMs);
        }
        try {
            consumer.close(Duration.ofSeconds(30));
        } catch (KafkaException e) {
            out("ERROR " + member + " " + e.getClass().getSimpleName() + ": " + e.getMessage());
        }
        out("CLOSED " + member);
    }
}
