import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * The client side of locktest's client protocol (docs/clients.md), for
 * adapters in Java, as clients/locktest_client.py is for Python.
 *
 * <p>An adapter describes its client (its capabilities) and gives a
 * function that connects it; {@link #serve} then speaks the protocol on
 * standard input and output: it connects the client and then answers hello
 * with the capabilities (a probe's hello at once, without connecting), and
 * answers each acquire and release with ok, fail or unknown. The adapter's client
 * throws {@link Fail} when an op certainly did nothing (the lock is taken,
 * the lease is not held) and {@link Unknown} when its outcome is not known;
 * any other exception is an unknown outcome too, named by its type.
 *
 * <p>Standard output carries the protocol only: serve points System.out at
 * standard error, so that a library that prints cannot garble a message.
 * Messages may be sent from any thread ({@link #send}).
 */
public final class LocktestClient {
    /** The protocol version this helper speaks. */
    public static final int PROTOCOL = 1;

    private static Writer out;
    private static BufferedReader in;

    private LocktestClient() {}

    /** The op certainly changed nothing. */
    public static class Fail extends Exception {
        public Fail(String message) {
            super(message);
        }
    }

    /** The op's outcome is not known. */
    public static class Unknown extends Exception {
        public Unknown(String message) {
            super(message);
        }
    }

    /** A connected lock client: the adapter's side of the protocol. */
    public interface Client {
        /**
         * Acquires lock, waiting at most until a little before deadlineMs,
         * and returns the ok's fields: value and, as the client can, token
         * and valid_ms.
         */
        Map<String, Object> acquire(String lock, long ttlMs, long deadlineMs) throws Exception;

        /**
         * Releases the lease of lock named value (and token), and returns
         * the ok's fields: removed, when the client can tell.
         */
        Map<String, Object> release(String lock, String value, Object token, long deadlineMs) throws Exception;
    }

    /** Connects the client that a hello describes. */
    public interface Connector {
        Client connect(Map<String, Object> hello) throws Exception;
    }

    /**
     * The leases a client holds, by their values, and the unique values of
     * its next ones ("p&lt;process&gt;-&lt;n&gt;"). It may be read from
     * another thread (a connection listener) while ops change it.
     *
     * @param <L> the library's lease (a lock object)
     */
    public static final class Leases<L> {
        private final long process;
        private long n;
        private final Map<String, Held<L>> held = new LinkedHashMap<>();

        /** One held lease: its lock's name, its value and the library's object. */
        public record Held<L>(String lock, String value, L lease) {}

        public Leases(long process) {
            this.process = process;
        }

        /** The value of the next lease. */
        public synchronized String nextValue() {
            n++;
            return "p" + process + "-" + n;
        }

        /**
         * The ok of an acquire that got the lock: it holds lease under
         * value; Fail when it did not get it.
         */
        public synchronized Map<String, Object> granted(boolean got, String lock, String value, L lease) throws Fail {
            if (!got) {
                throw new Fail("the lock is taken");
            }
            held.put(value, new Held<>(lock, value, lease));
            return fields("value", value);
        }

        /**
         * The lease to release; Fail when there is none with this value.
         * It is held until {@link #released} says its release returned, so
         * that a listener sees it held while the library releases it.
         */
        public synchronized L lease(String value) throws Fail {
            Held<L> h = held.get(value);
            if (h == null) {
                throw new Fail("no lease with this value");
            }
            return h.lease();
        }

        /** Forgets the lease of value, whose release returned or threw. */
        public synchronized void released(String value) {
            held.remove(value);
        }

        /** The leases held now, oldest first. */
        public synchronized List<Held<L>> held() {
            return new ArrayList<>(held.values());
        }
    }

    /** A map of the fields given as name, value pairs, in order. */
    public static Map<String, Object> fields(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i + 1 < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    /** Sends one message as a line of standard output. */
    public static synchronized void send(Map<String, Object> msg) {
        try {
            out.write(Json.write(msg));
            out.write('\n');
            out.flush();
        } catch (IOException e) {
            // locktest closed its end: the program has nobody to talk to.
            System.exit(0);
        }
    }

    /**
     * Reports reaching the pause point name, and waits for the driver's
     * go. It is called during an op, on the thread that serves them.
     */
    public static void point(String name) throws IOException {
        send(fields("type", "point", "point", name));
        while (true) {
            String line = in.readLine();
            if (line == null) {
                System.exit(0);
            }
            Map<String, Object> msg = Json.object(line);
            if ("go".equals(msg.get("type")) && name.equals(msg.get("point"))) {
                return;
            }
        }
    }

    /**
     * Speaks the protocol until the end of input, and returns the client it
     * connected, or null for a probe.
     *
     * @param caps the hello_ok without its type and protocol (name,
     *     library, version, fenced, expires, validity, blocking, points,
     *     doc), as a function of the hello
     * @param connector connects the client before the hello_ok is sent
     */
    public static Client serve(Function<Map<String, Object>, Map<String, Object>> caps, Connector connector) throws Exception {
        out = new OutputStreamWriter(new FileOutputStream(FileDescriptor.out), StandardCharsets.UTF_8);
        System.setOut(new PrintStream(new FileOutputStream(FileDescriptor.err), true, StandardCharsets.UTF_8));
        in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line = in.readLine();
        if (line == null) {
            return null;
        }
        Map<String, Object> hello = Json.object(line);
        Map<String, Object> ok = new LinkedHashMap<>(caps.apply(hello));
        ok.put("type", "hello_ok");
        ok.put("protocol", PROTOCOL);
        if (Boolean.TRUE.equals(hello.get("probe"))) {
            send(ok);
            while (in.readLine() != null) {
                // A probe connects nowhere: wait for the end of input.
            }
            return null;
        }
        // Connected first, answered after: the worker is ready once its
        // client is, as with a Go impl, and its first op does not wait for
        // a JVM to connect.
        Client client = connector.connect(hello);
        send(ok);
        while ((line = in.readLine()) != null) {
            Map<String, Object> req;
            try {
                req = Json.object(line);
            } catch (IllegalArgumentException e) {
                System.err.println("locktest_client: a request that is not JSON: " + line);
                continue;
            }
            Object id = req.get("id");
            Object kind = req.get("type");
            Map<String, Object> reply;
            try {
                if ("acquire".equals(kind)) {
                    reply = new LinkedHashMap<>(client.acquire((String) req.get("lock"), num(req.get("ttl_ms")), num(req.get("deadline_ms"))));
                } else if ("release".equals(kind)) {
                    reply = new LinkedHashMap<>(client.release((String) req.get("lock"), (String) req.get("value"), req.get("token"), num(req.get("deadline_ms"))));
                } else {
                    throw new Unknown("unknown request " + kind);
                }
                reply.put("type", "ok");
                reply.put("id", id);
            } catch (Fail e) {
                reply = fields("type", "fail", "id", id, "error", message(e, "fail"));
            } catch (Unknown e) {
                reply = fields("type", "unknown", "id", id, "error", message(e, "unknown"));
            } catch (Exception e) {
                // The library's own error: the outcome is unknown.
                reply = fields("type", "unknown", "id", id, "error", e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            send(reply);
        }
        return client;
    }

    private static String message(Exception e, String otherwise) {
        return e.getMessage() == null || e.getMessage().isEmpty() ? otherwise : e.getMessage();
    }

    /** A JSON number as a long; 0 when it is absent. */
    public static long num(Object o) {
        return o instanceof Number n ? n.longValue() : 0;
    }

    /**
     * The little JSON the protocol needs: objects, arrays, strings,
     * numbers (Long when whole, else Double), true, false and null.
     */
    public static final class Json {
        private final String s;
        private int i;

        private Json(String s) {
            this.s = s;
        }

        /** Parses a line that holds one JSON object. */
        @SuppressWarnings("unchecked")
        public static Map<String, Object> object(String line) {
            Json p = new Json(line);
            Object v = p.value();
            p.space();
            if (!(v instanceof Map) || p.i != p.s.length()) {
                throw new IllegalArgumentException("not one JSON object");
            }
            return (Map<String, Object>) v;
        }

        private void space() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        private IllegalArgumentException bad() {
            return new IllegalArgumentException("bad JSON at " + i);
        }

        private Object value() {
            space();
            if (i >= s.length()) {
                throw bad();
            }
            char c = s.charAt(i);
            switch (c) {
                case '{': {
                    i++;
                    Map<String, Object> m = new LinkedHashMap<>();
                    space();
                    if (i < s.length() && s.charAt(i) == '}') {
                        i++;
                        return m;
                    }
                    while (true) {
                        space();
                        if (i >= s.length() || s.charAt(i) != '"') {
                            throw bad();
                        }
                        String k = string();
                        space();
                        if (i >= s.length() || s.charAt(i++) != ':') {
                            throw bad();
                        }
                        m.put(k, value());
                        space();
                        if (i < s.length() && s.charAt(i) == ',') {
                            i++;
                        } else if (i < s.length() && s.charAt(i) == '}') {
                            i++;
                            return m;
                        } else {
                            throw bad();
                        }
                    }
                }
                case '[': {
                    i++;
                    List<Object> l = new ArrayList<>();
                    space();
                    if (i < s.length() && s.charAt(i) == ']') {
                        i++;
                        return l;
                    }
                    while (true) {
                        l.add(value());
                        space();
                        if (i < s.length() && s.charAt(i) == ',') {
                            i++;
                        } else if (i < s.length() && s.charAt(i) == ']') {
                            i++;
                            return l;
                        } else {
                            throw bad();
                        }
                    }
                }
                case '"':
                    return string();
                default:
                    if (s.startsWith("true", i)) {
                        i += 4;
                        return Boolean.TRUE;
                    }
                    if (s.startsWith("false", i)) {
                        i += 5;
                        return Boolean.FALSE;
                    }
                    if (s.startsWith("null", i)) {
                        i += 4;
                        return null;
                    }
                    return number();
            }
        }

        private String string() {
            StringBuilder b = new StringBuilder();
            i++; // the opening quote
            while (i < s.length()) {
                char c = s.charAt(i++);
                if (c == '"') {
                    return b.toString();
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                if (i >= s.length()) {
                    break;
                }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n' -> b.append('\n');
                    case 't' -> b.append('\t');
                    case 'r' -> b.append('\r');
                    case 'b' -> b.append('\b');
                    case 'f' -> b.append('\f');
                    case 'u' -> {
                        if (i + 4 > s.length()) {
                            throw bad();
                        }
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        i += 4;
                    }
                    default -> b.append(e); // \" \\ \/
                }
            }
            throw bad();
        }

        private Object number() {
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
            String t = s.substring(start, i);
            if (t.isEmpty()) {
                throw bad();
            }
            try {
                if (t.matches("-?[0-9]+")) {
                    return Long.parseLong(t);
                }
                return Double.parseDouble(t);
            } catch (NumberFormatException e) {
                throw bad();
            }
        }

        /** Renders maps, lists, strings, numbers, booleans and null as JSON. */
        public static String write(Object v) {
            StringBuilder b = new StringBuilder();
            write(b, v);
            return b.toString();
        }

        private static void write(StringBuilder b, Object v) {
            if (v == null) {
                b.append("null");
            } else if (v instanceof Map<?, ?> m) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    if (!first) {
                        b.append(',');
                    }
                    first = false;
                    quote(b, String.valueOf(e.getKey()));
                    b.append(':');
                    write(b, e.getValue());
                }
                b.append('}');
            } else if (v instanceof List<?> l) {
                b.append('[');
                for (int k = 0; k < l.size(); k++) {
                    if (k > 0) {
                        b.append(',');
                    }
                    write(b, l.get(k));
                }
                b.append(']');
            } else if (v instanceof Number || v instanceof Boolean) {
                b.append(v);
            } else {
                quote(b, v.toString());
            }
        }

        private static void quote(StringBuilder b, String t) {
            b.append('"');
            for (int k = 0; k < t.length(); k++) {
                char c = t.charAt(k);
                switch (c) {
                    case '"' -> b.append("\\\"");
                    case '\\' -> b.append("\\\\");
                    case '\n' -> b.append("\\n");
                    case '\r' -> b.append("\\r");
                    case '\t' -> b.append("\\t");
                    default -> {
                        if (c < 0x20) {
                            b.append(String.format("\\u%04x", (int) c));
                        } else {
                            b.append(c);
                        }
                    }
                }
            }
            b.append('"');
        }
    }
}
