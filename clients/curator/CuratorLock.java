import java.io.IOException;
import java.io.InputStream;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;

/**
 * Apache Curator's ZooKeeper locks, InterProcessMutex and
 * InterProcessSemaphoreMutex, through locktest's client protocol
 * (docs/clients.md).
 *
 * <p>One CuratorFramework per process, as an application runs it: its
 * connection string is the run's ZooKeeper nodes, its session timeout the
 * run's ttl, its connection timeout the op deadline (at most the session
 * timeout, as Curator wants it), and its retry policy Curator's
 * ExponentialBackoffRetry. Each acquire is a new lock object on
 * /locktest-curator/&lt;recipe&gt;/&lt;lock&gt;, waiting for the lock until a
 * little before the op's deadline; its release is that object's release().
 * Both recipes hold the lock in an ephemeral sequential znode, which the
 * server deletes when the holder's session expires; the holder learns of
 * it only through its ConnectionStateListener, which this adapter logs to
 * standard error and sends to locktest as lost notices (SUSPENDED: the
 * leases may be gone; LOST: they are).
 *
 * <p>Options (--client-opt): recipe (mutex, the default, or
 * semaphore-mutex); session-timeout and connection-timeout (seconds, or a
 * number with the unit ms or s), which override those of the ttl and the
 * op deadline; retry-base-sleep (likewise) and retry-max-retries, the
 * arguments of ExponentialBackoffRetry, 1 s and 3 by default as in
 * Curator's own examples.
 */
public final class CuratorLock implements LocktestClient.Client {
    /** The recipes, by the option that selects them. */
    static final String MUTEX = "mutex";
    static final String SEMAPHORE_MUTEX = "semaphore-mutex";

    private final String recipe;
    private final CuratorFramework client;
    private final LocktestClient.Leases<InterProcessLock> leases;

    /** Connects one CuratorFramework to the nodes of hello. */
    CuratorLock(Map<String, Object> hello) throws Exception {
        Map<String, Object> params = params(hello);
        recipe = recipe(hello);
        leases = new LocktestClient.Leases<>(LocktestClient.num(hello.get("process")));
        List<String> addrs = new ArrayList<>();
        if (hello.get("nodes") instanceof List<?> nodes) {
            for (Object n : nodes) {
                if (n instanceof Map<?, ?> node && node.get("addr") != null) {
                    addrs.add(node.get("addr").toString());
                }
            }
        }
        String hosts = String.join(",", addrs);
        int sessionMs = millis(params, "session-timeout", orDefault(hello.get("ttl_ms"), 1000));
        // Curator warns of a connection timeout longer than the session's.
        int connectionMs = millis(params, "connection-timeout", Math.min(sessionMs, orDefault(hello.get("deadline_ms"), 1000)));
        int baseSleepMs = millis(params, "retry-base-sleep", 1000);
        int maxRetries = Integer.parseInt(String.valueOf(params.getOrDefault("retry-max-retries", "3")));
        client = CuratorFrameworkFactory.builder()
                .connectString(hosts)
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(connectionMs)
                .retryPolicy(new ExponentialBackoffRetry(baseSleepMs, maxRetries))
                .build();
        client.getConnectionStateListenable().addListener((c, state) -> stateChanged(state));
        log("Curator %s, ZooKeeper client %s, %s on %s: session timeout %d ms, connection timeout %d ms, ExponentialBackoffRetry(%d, %d)",
                curatorVersion(), org.apache.zookeeper.Version.getFullVersion().replaceAll("^([0-9.]+).*", "$1"), recipe, hosts, sessionMs, connectionMs, baseSleepMs, maxRetries);
        client.start();
        if (!client.blockUntilConnected(15, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no connection to ZooKeeper at " + hosts + " within 15 s");
        }
        log("connected, session 0x%x of %d ms (as the server granted it)",
                client.getZookeeperClient().getZooKeeper().getSessionId(),
                client.getZookeeperClient().getZooKeeper().getSessionTimeout());
        // A JVM loads a class when it first runs it: without a first lock
        // of its own, the first acquire of the run would spend its deadline
        // loading the recipe's classes.
        InterProcessLock warm = newLock("/locktest-curator/" + recipe + "-warm-up/p" + LocktestClient.num(hello.get("process")));
        if (warm.acquire(15, TimeUnit.SECONDS)) {
            warm.release();
        }
    }

    /** A new lock object of the recipe on path. */
    private InterProcessLock newLock(String path) {
        return recipe.equals(MUTEX) ? new InterProcessMutex(client, path) : new InterProcessSemaphoreMutex(client, path);
    }

    @Override
    public Map<String, Object> acquire(String lock, long ttlMs, long deadlineMs) throws Exception {
        String value = leases.nextValue();
        String path = "/locktest-curator/" + recipe + "/" + lock;
        InterProcessLock lk = newLock(path);
        long waitMs = Math.max(1, (deadlineMs > 0 ? deadlineMs : 1000) * 3 / 4);
        // A wait that times out removes its own znode: the lock was not
        // taken, certainly.
        boolean got = lk.acquire(waitMs, TimeUnit.MILLISECONDS);
        if (!got) {
            throw new LocktestClient.Fail("timed out waiting for the lock (" + waitMs + " ms)");
        }
        return leases.granted(lock, value, lk);
    }

    @Override
    public Map<String, Object> release(String lock, String value, Object token, long deadlineMs) throws Exception {
        // Curator deletes the lease's znode, and says nothing when the
        // server had deleted it already (an expired session). A release
        // that ends after its deadline is answered too late for locktest
        // to record: the log says how it ended.
        InterProcessLock lk = leases.lease(value);
        long start = System.nanoTime();
        try {
            lk.release();
        } catch (Exception e) {
            log("release of %s of %s failed after %d ms: %s", value, lock, (System.nanoTime() - start) / 1_000_000, e);
            throw e;
        } finally {
            leases.released(value);
        }
        long took = (System.nanoTime() - start) / 1_000_000;
        if (deadlineMs > 0 && took >= deadlineMs) {
            log("release of %s of %s returned after %d ms, past its deadline of %d ms", value, lock, took, deadlineMs);
        }
        return LocktestClient.fields();
    }

    /**
     * Logs a change of the connection's state, with the leases held then.
     * SUSPENDED says the held leases may be gone (the connection dropped,
     * and the session may expire before it comes back); LOST says they are
     * gone (the session expired, or Curator gave it up after a whole
     * session timeout suspended). Curator's recipes do not act on it: the
     * holder goes on believing it holds the lock unless its code listens.
     * Both go to locktest as a lost notice for each lease held, which the
     * run's --on-lost setting acts on or not.
     */
    private void stateChanged(ConnectionState state) {
        List<LocktestClient.Leases.Held<InterProcessLock>> held = leases.held();
        List<String> names = new ArrayList<>();
        for (LocktestClient.Leases.Held<InterProcessLock> h : held) {
            names.add(h.value() + " of " + h.lock());
        }
        log("connection %s%s", state, names.isEmpty() ? "" : ", holding " + String.join(", ", names));
        String notice = notice(state);
        if (notice == null) {
            return;
        }
        for (LocktestClient.Leases.Held<InterProcessLock> h : held) {
            // This lease is gone, or may be gone: a lost notice to
            // locktest, which records it as the listener heard it.
            log("lease %s of %s: %s", h.value(), h.lock(), notice);
            LocktestClient.lost(h.lock(), h.value(), state + ": " + notice);
        }
    }

    /** What state says of the leases held, or null when it says nothing. */
    static String notice(ConnectionState state) {
        return switch (state) {
            case SUSPENDED -> "connection suspended: the session, and the lease, may expire";
            case LOST -> "session lost: the lease's ephemeral znode went with it";
            default -> null;
        };
    }

    /** Closes the client, which deletes what its session still holds. */
    void close() {
        client.close();
    }

    /** The capabilities of the recipe hello selects. */
    static Map<String, Object> caps(Map<String, Object> hello) {
        String recipe = recipe(hello);
        boolean mutex = recipe.equals(MUTEX);
        String doc = mutex
                ? "Apache Curator's InterProcessMutex: an ephemeral sequential znode that waits for its predecessor; "
                        + "the server deletes it when the holder's session expires, and the holder goes on believing it holds the lock"
                : "Apache Curator's InterProcessSemaphoreMutex: a one-lease InterProcessSemaphoreV2, an ephemeral sequential lease znode "
                        + "taken under an inner mutex; the server deletes it when the holder's session expires, and the holder goes on believing it holds the lock";
        return LocktestClient.fields(
                "name", mutex ? "curator" : "curator-semaphore",
                "library", "Apache Curator " + (mutex ? "InterProcessMutex" : "InterProcessSemaphoreMutex"),
                "version", curatorVersion(),
                "fenced", false,
                "expires", false,
                "blocking", true,
                "points", List.of(),
                "notices", "its ConnectionStateListener hears SUSPENDED (may be lost) or LOST (lost)",
                "doc", doc);
    }

    /** The recipe the option recipe selects. */
    static String recipe(Map<String, Object> hello) {
        String r = String.valueOf(params(hello).getOrDefault("recipe", MUTEX));
        if (!r.equals(MUTEX) && !r.equals(SEMAPHORE_MUTEX)) {
            throw new IllegalArgumentException("--client-opt recipe=" + r + ": want " + MUTEX + " or " + SEMAPHORE_MUTEX);
        }
        return r;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> params(Map<String, Object> hello) {
        return hello.get("params") instanceof Map<?, ?> m ? (Map<String, Object>) m : Map.of();
    }

    private static int orDefault(Object n, int otherwise) {
        return n instanceof Number x && x.longValue() > 0 ? (int) x.longValue() : otherwise;
    }

    /**
     * The option key as milliseconds: a number of seconds (as kazoo's
     * session-timeout), or a number with the unit ms or s.
     */
    static int millis(Map<String, Object> params, String key, int otherwise) {
        Object v = params.get(key);
        if (v == null) {
            return otherwise;
        }
        String s = v.toString().trim();
        try {
            if (s.endsWith("ms")) {
                return (int) Math.round(Double.parseDouble(s.substring(0, s.length() - 2)));
            }
            if (s.endsWith("s")) {
                s = s.substring(0, s.length() - 1);
            }
            return (int) Math.round(Double.parseDouble(s) * 1000);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--client-opt " + key + "=" + v + ": want seconds, or a number with ms or s");
        }
    }

    /**
     * Curator's version, from the Maven properties in its recipes' jar, or
     * else the jar's manifest.
     */
    static String curatorVersion() {
        try (InputStream s = InterProcessMutex.class.getResourceAsStream("/META-INF/maven/org.apache.curator/curator-recipes/pom.properties")) {
            if (s != null) {
                Properties p = new Properties();
                p.load(s);
                if (p.getProperty("version") != null) {
                    return p.getProperty("version");
                }
            }
        } catch (IOException e) {
            // Fall back to the manifest.
        }
        String v = InterProcessMutex.class.getPackage().getImplementationVersion();
        return v != null ? v : "unknown";
    }

    private static long logProcess = -1;

    /** Writes one line to standard error, with the time and the process. */
    static void log(String format, Object... args) {
        System.err.println(Instant.now() + " curator p" + logProcess + ": " + String.format(format, args));
    }

    public static void main(String[] args) {
        CuratorLock lock = null;
        try {
            LocktestClient.Client c = LocktestClient.serve(CuratorLock::caps, hello -> {
                logProcess = LocktestClient.num(hello.get("process"));
                return new CuratorLock(hello);
            });
            lock = (CuratorLock) c;
        } catch (Exception e) {
            System.err.println("curator: " + e.getClass().getSimpleName() + ": " + e.getMessage());
            System.exit(2);
        }
        if (lock != null) {
            lock.close();
        }
        System.exit(0);
    }
}
