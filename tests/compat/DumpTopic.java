// Prints Kafka records byte-exactly, one JSON object per line: topic,
// partition, offset, timestamp (+ type), key and value as hex (null for a
// null key/value) plus their UTF-8 text when it is printable, and every
// header as [name, hex]. Used by observe.sh to record what the real Debezium
// worker produced; reads from the beginning of each topic, no consumer group.
//
// Run in source-file mode against the broker's client jars:
//   java -cp '.cache/kafka/4.1.1/libs/*' tests/compat/DumpTopic.java \
//       BOOTSTRAP COUNT TIMEOUT_MS TOPIC...
// Exits 1 when fewer than COUNT records arrived within TIMEOUT_MS.
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class DumpTopic {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int count = Integer.parseInt(args[1]);
        long timeoutMs = Long.parseLong(args[2]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long deadline = System.currentTimeMillis() + timeoutMs;
        int seen = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> parts = new ArrayList<>();
            for (int i = 3; i < args.length; i++) {
                // The topic may not exist yet: Debezium creates it on first send.
                while (true) {
                    List<PartitionInfo> infos = c.partitionsFor(args[i], Duration.ofSeconds(5));
                    if (infos != null && !infos.isEmpty()) {
                        for (PartitionInfo pi : infos) parts.add(new TopicPartition(pi.topic(), pi.partition()));
                        break;
                    }
                    if (System.currentTimeMillis() > deadline) {
                        System.err.println("topic " + args[i] + " did not appear");
                        System.exit(1);
                    }
                    Thread.sleep(200);
                }
            }
            c.assign(parts);
            c.seekToBeginning(parts);
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    StringBuilder sb = new StringBuilder("{");
                    sb.append("\"topic\":").append(q(r.topic()));
                    sb.append(",\"partition\":").append(r.partition());
                    sb.append(",\"offset\":").append(r.offset());
                    sb.append(",\"timestamp\":").append(r.timestamp());
                    sb.append(",\"timestamp_type\":").append(q(r.timestampType().toString()));
                    bytes(sb, "key", r.key());
                    bytes(sb, "value", r.value());
                    sb.append(",\"headers\":[");
                    boolean first = true;
                    for (Header h : r.headers()) {
                        if (!first) sb.append(',');
                        first = false;
                        sb.append('[').append(q(h.key())).append(',')
                            .append(h.value() == null ? "null" : q(hex(h.value())))
                            .append(',').append(h.value() == null ? "null" : text(h.value())).append(']');
                    }
                    sb.append("]}");
                    System.out.println(sb);
                    seen++;
                }
            }
        }
        if (seen < count) {
            System.err.println("only " + seen + " of " + count + " records within " + timeoutMs + " ms");
            System.exit(1);
        }
    }

    static void bytes(StringBuilder sb, String name, byte[] b) {
        sb.append(",\"").append(name).append("_hex\":").append(b == null ? "null" : q(hex(b)));
        sb.append(",\"").append(name).append("\":").append(b == null ? "null" : text(b));
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) sb.append(String.format("%02x", x));
        return sb.toString();
    }

    // The UTF-8 text as a JSON string, or null when the bytes are not UTF-8.
    static String text(byte[] b) {
        try {
            return q(StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(b)).toString());
        } catch (CharacterCodingException e) {
            return "null";
        }
    }

    static String q(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\') sb.append('\\').append(ch);
            else if (ch < 0x20) sb.append(String.format("\\u%04x", (int) ch));
            else sb.append(ch);
        }
        return sb.append('"').toString();
    }
}
