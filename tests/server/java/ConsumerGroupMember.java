// A member of a consumer group with group.protocol=consumer (KIP-848), Kafka 4.4's Java
// consumer, for tests/server/test_consumer_groups_clients.py. Args: bootstrap group topic
// run_seconds. Prints one line per event, flushed: "ASSIGNED p,p", "REVOKED p,p",
// "RECORD partition offset", "EPOCH <member epoch>" (after each commit), "CLOSED".
// Commits synchronously after every poll that returned records. Closes after run_seconds, or
// sooner once a line comes on stdin (the test has seen what it waited for).
import java.time.Duration;
import java.util.*;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ConsumerGroupMember {
    static String parts(Collection<TopicPartition> tps) {
        return tps.stream().map(tp -> Integer.toString(tp.partition())).sorted()
            .collect(Collectors.joining(","));
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("group.protocol", "consumer");
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long until = System.currentTimeMillis() + Long.parseLong(args[3]) * 1000;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                    if (!tps.isEmpty()) System.out.println("REVOKED " + parts(tps));
                    System.out.flush();
                }
                public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                    System.out.println("ASSIGNED " + parts(consumer.assignment()));
                    System.out.flush();
                }
            });
            while (System.currentTimeMillis() < until && System.in.available() == 0) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    System.out.println("RECORD " + r.partition() + " " + r.offset());
                }
                if (!records.isEmpty()) {
                    consumer.commitSync();
                    System.out.println("EPOCH " + consumer.groupMetadata().generationId());
                }
                System.out.flush();
            }
        }
        System.out.println("CLOSED");
        System.out.flush();
    }
}
