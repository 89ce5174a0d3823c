import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.protocol.Readable;

/**
 * Kafka's own generated message classes read what seglog writes: each stdin line is
 * "MessageDataClass version hex" (a class of org.apache.kafka.common.message, or a fully
 * qualified one such as a coordinator record's); the message is read with Kafka's class at that version and
 * written back, and the line printed is "hex-written-back remaining-bytes toString()". The
 * test compares the bytes (tests/kafka/test_streams_schemas.py).
 */
public class SchemaRoundTrip {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.trim().split(" ");
            String name = parts[0].contains(".") ? parts[0] : "org.apache.kafka.common.message." + parts[0];
            Class<?> cls = Class.forName(name);
            short version = Short.parseShort(parts[1]);
            ByteBuffer input = ByteBuffer.wrap(HexFormat.of().parseHex(parts[2]));
            ApiMessage message = (ApiMessage) cls
                .getConstructor(Readable.class, short.class)
                .newInstance(new ByteBufferAccessor(input), version);
            ObjectSerializationCache cache = new ObjectSerializationCache();
            ByteBuffer output = ByteBuffer.allocate(message.size(cache, version));
            message.write(new ByteBufferAccessor(output), cache, version);
            System.out.println(HexFormat.of().formatHex(output.array()) + " " + input.remaining()
                + " " + message);
        }
    }
}
