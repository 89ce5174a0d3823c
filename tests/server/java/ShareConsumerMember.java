import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Kafka 4.4's KafkaShareConsumer as a share group member for the seglog tests:
 * {@code ShareConsumerMember <bootstrap> <group> <topic> <run seconds> <mode>}, mode
 * "accept" (every record ACCEPTed), "release-once" (RELEASEd on its first delivery, then
 * ACCEPTed) or "reject". Prints "RECORD partition offset deliveryCount" per record, then
 * "CLOSED".
 */
public class ShareConsumerMember {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("share.acknowledgement.mode", "explicit");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long endMs = System.currentTimeMillis() + Long.parseLong(args[3]) * 1000L;
        String mode = args[4];
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]));
            while (System.currentTimeMillis() < endMs) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    short count = record.deliveryCount().orElse((short) -1);
                    System.out.println("RECORD " + record.partition() + " " + record.offset()
                        + " " + count);
                    AcknowledgeType type = AcknowledgeType.ACCEPT;
                    if (mode.equals("release-once") && count == 1) {
                        type = AcknowledgeType.RELEASE;
                    } else if (mode.equals("reject")) {
                        type = AcknowledgeType.REJECT;
                    }
                    consumer.acknowledge(record, type);
                }
                if (!records.isEmpty()) {
                    consumer.commitSync();
                }
                System.out.flush();
            }
        }
        System.out.println("CLOSED");
        System.out.flush();
    }
}
