import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.StreamsMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * A word count with the streams group protocol (KIP-1071), for tests: lines from the input
 * topic are split into words, re-keyed by word (a repartition topic), counted in an
 * in-memory state store (a changelog topic), and the counts written to the output topic.
 *
 * Args: bootstrap application-id input-topic output-topic state-dir [application.server].
 * Prints "STATE <state>" on each state change, "TASKS <active task ids, comma separated>"
 * whenever this instance's active tasks change and "HOSTS <host:port, ...>" whenever the
 * instances it knows to hold partitions (interactive queries' metadata) change; stops cleanly (leaving the group) when stdin says "stop"
 * or closes, then prints "CLOSED".
 */
public class StreamsWordCount {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        if (args.length > 5) {
            props.put(StreamsConfig.APPLICATION_SERVER_CONFIG, args[5]);
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase().split("\\s+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
            .toStream()
            .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> say("STATE " + now));
        streams.start();

        Thread watcher = new Thread(() -> {
            String last = null;
            String lastHosts = null;
            while (!Thread.currentThread().isInterrupted()) {
                Set<String> hosts = new TreeSet<>();
                try {
                    for (StreamsMetadata metadata : streams.metadataForAllStreamsClients()) {
                        if (!metadata.topicPartitions().isEmpty()) {
                            hosts.add(metadata.hostInfo().host() + ":" + metadata.hostInfo().port());
                        }
                    }
                } catch (RuntimeException e) {
                    // not running (yet): no metadata to report
                }
                String nowHosts = String.join(",", hosts);
                if (!nowHosts.equals(lastHosts)) {
                    say("HOSTS " + nowHosts);
                    lastHosts = nowHosts;
                }
                Set<String> tasks = new TreeSet<>();
                try {
                    for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                        for (TaskMetadata task : thread.activeTasks()) {
                            tasks.add(task.taskId().toString());
                        }
                    }
                } catch (RuntimeException e) {
                    // not running (yet): no tasks to report
                }
                String now = String.join(",", tasks);
                if (!now.equals(last)) {
                    say("TASKS " + now);
                    last = now;
                }
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        watcher.setDaemon(true);
        watcher.start();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
            // wait for the test to say stop
        }
        watcher.interrupt();
        streams.close(Duration.ofSeconds(30));
        say("CLOSED");
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
