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

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;

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

        /** The ok of an acquire that got the lock: it holds lease under value. */
        public synchronized Map<String, Object> granted(String lock, String value, L lease) {
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
            out.write(JSON.writeValueAsString(msg));
            out.write('\n');
            out.flush();
        } catch (IOException e) {
            // locktest closed its end: the program has nobody to talk to.
            System.exit(0);
        }
    }

    /**
     * Tells locktest that the lease value of lock is lost, or may be: a
     * lost notice, sent at once from any thread (a connection listener's).
     */
    public static void lost(String lock, String value, String reason) {
        send(fields("type", "lost", "lock", lock, "value", value, "reason", reason));
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
            Map<String, Object> msg = object(line);
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
        Map<String, Object> hello = object(line);
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
                req = object(line);
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

    private static final ObjectMapper JSON = new ObjectMapper();

    /**
     * Parses a line that holds one JSON object, with Jackson (Debian's
     * libjackson2-databind-java, which ZooKeeper and Curator depend on):
     * objects as maps in their order, whole numbers as Integer or Long.
     *
     * @throws IllegalArgumentException when the line is not one JSON object
     */
    @SuppressWarnings("unchecked")
    public static Map<String, Object> object(String line) {
        try {
            return JSON.readValue(line, LinkedHashMap.class);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("not one JSON object: " + e.getOriginalMessage(), e);
        }
    }
}
