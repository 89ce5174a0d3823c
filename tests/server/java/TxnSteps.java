// A Kafka 4.4 Java transactional producer run by tests/server/test_txn_v2.py: one
// transaction per step, "cN" commits N records, "aN" aborts N records; prints one line
// per step ("commit 3" / "abort 2") and "done" at the end.
// Usage: TxnSteps <bootstrap> <topic> <transactional id> <step>...

import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnSteps {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[2]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        String topic = args[1];
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            for (int step = 3; step < args.length; step++) {
                boolean commit = args[step].charAt(0) == 'c';
                int count = Integer.parseInt(args[step].substring(1));
                producer.beginTransaction();
                for (int i = 0; i < count; i++) {
                    String value = args[2] + "-" + step + "-" + i + (commit ? "-c" : "-a");
                    producer.send(new ProducerRecord<>(topic, i % 2, null, value)).get();
                }
                if (commit) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                System.out.println((commit ? "commit " : "abort ") + count);
            }
        }
        System.out.println("done");
    }
}
