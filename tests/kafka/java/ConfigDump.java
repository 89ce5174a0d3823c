// Prints Kafka's config definitions, one JSON object a line, for tests/kafka/test_kafka_configs.py:
// every key of the topic ConfigDef (LogConfig.configKeys()) and of the broker ConfigDef
// (AbstractKafkaConfig.CONFIG_DEF, what KafkaConfig is built from), with its type, default
// (ConfigDef.convertToString, null for none), importance, validator, internal flag and dynamic
// update mode; then each topic config's broker synonyms (ServerTopicConfigSynonyms).
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.server.config.AbstractKafkaConfig;
import org.apache.kafka.server.config.ConfigSynonym;
import org.apache.kafka.server.config.DynamicBrokerConfig;
import org.apache.kafka.server.config.ServerTopicConfigSynonyms;
import org.apache.kafka.storage.internals.log.LogConfig;

public class ConfigDump {
    static String q(Object o) {
        if (o == null) return "null";
        String s = o.toString();
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static void dump(String scope, Map<String, ConfigDef.ConfigKey> keys, Map<String, String> modes) {
        for (ConfigDef.ConfigKey k : keys.values()) {
            String dflt = k.hasDefault() ? ConfigDef.convertToString(k.defaultValue, k.type) : null;
            String mode = modes == null ? null : modes.getOrDefault(k.name, "read-only");
            System.out.println("{\"scope\": " + q(scope) + ", \"name\": " + q(k.name)
                + ", \"type\": " + q(k.type.name().toLowerCase()) + ", \"has_default\": " + k.hasDefault()
                + ", \"default\": " + q(dflt) + ", \"importance\": " + q(k.importance == null ? null : k.importance.name().toLowerCase())
                + ", \"validator\": " + q(k.validator) + ", \"internal\": " + k.internalConfig
                + ", \"dynamic\": " + q(mode) + ", \"doc\": " + q(k.documentation) + "}");
        }
    }

    public static void main(String[] args) {
        dump("topic", LogConfig.configKeys(), null);
        dump("broker", AbstractKafkaConfig.CONFIG_DEF.configKeys(), DynamicBrokerConfig.dynamicConfigUpdateModes());
        for (Map.Entry<String, List<ConfigSynonym>> e : ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS.entrySet()) {
            StringBuilder b = new StringBuilder("[");
            for (ConfigSynonym s : e.getValue()) b.append(b.length() > 1 ? ", " : "").append(q(s.name()));
            System.out.println("{\"scope\": \"synonyms\", \"name\": " + q(e.getKey()) + ", \"synonyms\": " + b + "]}");
        }
    }
}
