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
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;

/**
 * Apache Curator's ZooKeeper locks, InterProcessMutex and
 * InterProcessSemaphoreMutex, and its leader election LeaderLatch, through
 * locktest's client protocol (docs/clients.md).
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
 * <p>The leader-latch recipe is a LeaderLatch as an application runs it
 * for leader election: each acquire is a new LeaderLatch on
 * /locktest-curator/leader-latch/&lt;lock&gt;, started and awaited until a
 * little before the op's deadline (its leadership is the lock); its release
 * is the latch's close(). Its LeaderLatchListener's notLeader is the lost
 * notice (the latch drops leadership itself on SUSPENDED and LOST); the
 * connection's states are only logged.
 *
 * <p>A grant made after the client's session changed (Curator gave the old
 * one up as LOST and connected a new one) is checked once in the
 * background: the log says whether the grant's znode belongs to the session
 * the client has now, or to the old one that the server will still expire,
 * which is how Curator 5.4.0's LeaderLatch (CURATOR-696) and InterProcessMutex
 * (CURATOR-604) grant a lock on a znode about to go.
 *
 * <p>Options (--client-opt): recipe (mutex, the default, semaphore-mutex or
 * leader-latch); session-timeout and connection-timeout (seconds, or a
 * number with the unit ms or s), which override those of the ttl and the
 * op deadline; retry-base-sleep (likewise), retry-max-retries and
 * retry-max-sleep (a duration likewise), the arguments of
 * ExponentialBackoffRetry, 1 s, 3 and no cap by default as in Curator's
 * own examples.
 */
public final class CuratorLock implements LocktestClient.Client {
    /** The recipes, by the option that selects them. */
    static final String MUTEX = "mutex";
    static final String SEMAPHORE_MUTEX = "semaphore-mutex";
    static final String LEADER_LATCH = "leader-latch";

    /** What a granted lease holds, and how it is given back. */
    interface Lease {
        /** Gives the lease back: the lock's release(), the latch's close(). */
        void release() throws Exception;
    }

    private final String recipe;
    private final CuratorFramework client;
    private final LocktestClient.Leases<Lease> leases;
    /** The connection's latest state that this adapter's listener heard. */
    private volatile ConnectionState lastState = ConnectionState.CONNECTED;
    /** The sessions this client has had: a new one after each LOST. */
    private final java.util.concurrent.atomic.AtomicLong sessionChanges = new java.util.concurrent.atomic.AtomicLong();

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
        int maxSleepMs = millis(params, "retry-max-sleep", Integer.MAX_VALUE);
        client = CuratorFrameworkFactory.builder()
                .connectString(hosts)
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(connectionMs)
                .retryPolicy(new ExponentialBackoffRetry(baseSleepMs, maxRetries, maxSleepMs))
                .build();
        client.getConnectionStateListenable().addListener((c, state) -> stateChanged(state));
        log("Curator %s, ZooKeeper client %s, %s on %s: session timeout %d ms, connection timeout %d ms, ExponentialBackoffRetry(%d, %d%s)",
                curatorVersion(), org.apache.zookeeper.Version.getFullVersion().replaceAll("^([0-9.]+).*", "$1"), recipe, hosts, sessionMs, connectionMs, baseSleepMs, maxRetries,
                maxSleepMs == Integer.MAX_VALUE ? "" : ", " + maxSleepMs);
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
        String warm = "/locktest-curator/" + recipe + "-warm-up/p" + LocktestClient.num(hello.get("process"));
        Lease w = recipe.equals(LEADER_LATCH) ? awaitLeadership(null, "warm-up", warm, 15_000) : lock(warm, 15_000);
        if (w != null) {
            w.release();
        }
    }

    /** A new lock object of the recipe on path. */
    private InterProcessLock newLock(String path) {
        return recipe.equals(MUTEX) ? new Mutex(client, path) : new InterProcessSemaphoreMutex(client, path);
    }

    /** InterProcessMutex, with the path of the znode it holds. */
    static final class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework client, String path) {
            super(client, path);
        }

        /** The znode of the lock held by the calling thread, or null. */
        String node() {
            return getLockPath();
        }
    }

    @Override
    public Map<String, Object> acquire(String lock, long ttlMs, long deadlineMs) throws Exception {
        String value = leases.nextValue();
        String path = "/locktest-curator/" + recipe + "/" + lock;
        long waitMs = Math.max(1, (deadlineMs > 0 ? deadlineMs : 1000) * 3 / 4);
        if (recipe.equals(LEADER_LATCH)) {
            LatchLease l = awaitLeadership(lock, value, path, waitMs);
            if (l == null) {
                throw new LocktestClient.Fail("not the leader within " + waitMs + " ms (the latch is closed)");
            }
            return l.grant();
        }
        long sessions = sessionChanges.get();
        Lease l = lock(path, waitMs);
        if (l == null) {
            throw new LocktestClient.Fail("timed out waiting for the lock (" + waitMs + " ms)");
        }
        if (sessionChanges.get() != sessions && l instanceof MutexLease m && m.node != null) {
            checkOwner("lock " + value + " of " + lock, m.node);
        }
        return leases.granted(lock, value, l);
    }

    /** A held InterProcessMutex or InterProcessSemaphoreMutex, and its znode when known. */
    record MutexLease(InterProcessLock lock, String node) implements Lease {
        @Override
        public void release() throws Exception {
            lock.release();
        }
    }

    /**
     * Takes the lock of the recipe on path, waiting at most waitMs, or
     * returns null when the wait timed out. A wait that times out removes
     * its own znode: the lock was not taken, certainly.
     */
    private Lease lock(String path, long waitMs) throws Exception {
        InterProcessLock lk = newLock(path);
        if (!lk.acquire(waitMs, TimeUnit.MILLISECONDS)) {
            return null;
        }
        return new MutexLease(lk, lk instanceof Mutex m ? m.node() : null);
    }

    /**
     * Starts a LeaderLatch on path with the participant id value and waits
     * at most waitMs for its leadership. It returns the latch's lease, not
     * yet granted, or null when the latch did not lead in time, or led and
     * lost it again before the grant (the latch is then closed).
     */
    private LatchLease awaitLeadership(String lock, String value, String path, long waitMs) throws Exception {
        LeaderLatch latch = new LeaderLatch(client, path, value);
        LatchLease l = new LatchLease(lock, value, latch, sessionChanges.get());
        latch.addListener(l);
        latch.start();
        if (latch.await(waitMs, TimeUnit.MILLISECONDS) && l.lead()) {
            return l;
        }
        latch.close();
        return null;
    }

    /**
     * One LeaderLatch: the lease while it leads. Its listener logs each
     * change of leadership with the latch's znode and the client's session;
     * a notLeader after the grant is a lost notice to locktest. lead() and
     * notLeader() agree under the lease's monitor, so that a leadership lost
     * between the latch's await and the grant is either no grant or a
     * notice, never neither. The latch calls its listener while it holds
     * its own monitor: nothing here calls the latch while holding the
     * lease's.
     */
    final class LatchLease implements Lease, LeaderLatchListener {
        private final String lock;
        private final String value;
        private final LeaderLatch latch;
        private final long sessions;
        private boolean granted;
        private boolean released;

        LatchLease(String lock, String value, LeaderLatch latch, long sessions) {
            this.lock = lock;
            this.value = value;
            this.latch = latch;
            this.sessions = sessions;
        }

        /** Whether the latch leads now; if it does, the lease is granted. */
        boolean lead() {
            synchronized (this) {
                granted = latch.hasLeadership();
                return granted;
            }
        }

        /** Records the grant in the leases and returns the ok's fields. */
        Map<String, Object> grant() {
            return leases.granted(lock, value, this);
        }

        @Override
        public void isLeader() {
            String node = latch.getOurPath();
            log("latch %s%s: isLeader, znode %s, session 0x%x", value, lock == null ? "" : " of " + lock, node, sessionId());
            if (sessionChanges.get() != sessions && node != null) {
                checkOwner("latch " + value, node);
            }
        }

        @Override
        public void notLeader() {
            boolean tell;
            synchronized (this) {
                tell = granted && !released && lock != null;
            }
            log("latch %s%s: notLeader%s", value, lock == null ? "" : " of " + lock, tell ? ", while held" : "");
            if (tell) {
                // The latch's listener may run before this adapter's
                // connection listener: a connection that is down now is
                // what SUSPENDED says.
                String why = client.getZookeeperClient().isConnected() ? "after " + lastState : "the connection is down (SUSPENDED)";
                LocktestClient.lost(lock, value, "notLeader, " + why + ": the latch lost its leadership");
            }
        }

        @Override
        public void release() throws Exception {
            synchronized (this) {
                released = true;
            }
            latch.close();
        }
    }

    /**
     * Logs, from a background read, whether the znode of a grant belongs
     * to the client's session now: a znode of an earlier session is one the
     * server deletes when it expires that session, with no word to this
     * client.
     */
    private void checkOwner(String what, String node) {
        long ours = sessionId();
        try {
            client.checkExists().inBackground((c, event) -> {
                long owner = event.getStat() != null ? event.getStat().getEphemeralOwner() : 0;
                if (event.getStat() == null) {
                    log("%s granted after a new session: its znode %s is gone already", what, node);
                } else if (owner != ours) {
                    log("%s granted after a new session: its znode %s belongs to the old session 0x%x, not to this one, 0x%x: the server deletes it when it expires that session", what, node, owner, ours);
                } else {
                    log("%s granted after a new session: its znode %s belongs to this session, 0x%x", what, node, ours);
                }
            }).forPath(node);
        } catch (Exception e) {
            log("%s: could not read the owner of %s: %s", what, node, e);
        }
    }

    /** The ZooKeeper session of the client now, or 0. */
    private long sessionId() {
        try {
            return client.getZookeeperClient().getZooKeeper().getSessionId();
        } catch (Exception e) {
            return 0;
        }
    }

    @Override
    public Map<String, Object> release(String lock, String value, Object token, long deadlineMs) throws Exception {
        // Curator deletes the lease's znode, and says nothing when the
        // server had deleted it already (an expired session). A release
        // that ends after its deadline is answered too late for locktest
        // to record: the log says how it ended.
        Lease lk = leases.lease(value);
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
        lastState = state;
        if (state == ConnectionState.LOST) {
            sessionChanges.incrementAndGet();
        }
        List<LocktestClient.Leases.Held<Lease>> held = leases.held();
        List<String> names = new ArrayList<>();
        for (LocktestClient.Leases.Held<Lease> h : held) {
            names.add(h.value() + " of " + h.lock());
        }
        log("connection %s%s%s", state, state == ConnectionState.RECONNECTED || state == ConnectionState.CONNECTED ? String.format(", session 0x%x", sessionId()) : "",
                names.isEmpty() ? "" : ", holding " + String.join(", ", names));
        String notice = notice(state);
        // A leader latch says it lost its leadership itself (notLeader).
        if (notice == null || recipe.equals(LEADER_LATCH)) {
            return;
        }
        for (LocktestClient.Leases.Held<Lease> h : held) {
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
        String name;
        String library;
        String notices;
        String doc;
        switch (recipe) {
            case MUTEX -> {
                name = "curator";
                library = "Apache Curator InterProcessMutex";
                notices = "its ConnectionStateListener hears SUSPENDED (may be lost) or LOST (lost)";
                doc = "Apache Curator's InterProcessMutex: an ephemeral sequential znode that waits for its predecessor; "
                        + "the server deletes it when the holder's session expires, and the holder goes on believing it holds the lock";
            }
            case SEMAPHORE_MUTEX -> {
                name = "curator-semaphore";
                library = "Apache Curator InterProcessSemaphoreMutex";
                notices = "its ConnectionStateListener hears SUSPENDED (may be lost) or LOST (lost)";
                doc = "Apache Curator's InterProcessSemaphoreMutex: a one-lease InterProcessSemaphoreV2, an ephemeral sequential lease znode "
                        + "taken under an inner mutex; the server deletes it when the holder's session expires, and the holder goes on believing it holds the lock";
            }
            default -> {
                name = "curator-leader-latch";
                library = "Apache Curator LeaderLatch";
                notices = "its LeaderLatchListener hears notLeader (on SUSPENDED and LOST)";
                doc = "Apache Curator's LeaderLatch: an ephemeral sequential znode, the lowest leads; acquire awaits leadership, release closes the latch, "
                        + "and the latch drops its leadership on SUSPENDED and LOST and takes it again after a reconnection";
            }
        }
        return LocktestClient.fields(
                "name", name,
                "library", library,
                "version", curatorVersion(),
                "fenced", false,
                "expires", false,
                "blocking", true,
                "points", List.of(),
                "notices", notices,
                "doc", doc);
    }

    /** The recipe the option recipe selects. */
    static String recipe(Map<String, Object> hello) {
        String r = String.valueOf(params(hello).getOrDefault("recipe", MUTEX));
        if (!r.equals(MUTEX) && !r.equals(SEMAPHORE_MUTEX) && !r.equals(LEADER_LATCH)) {
            throw new IllegalArgumentException("--client-opt recipe=" + r + ": want " + MUTEX + ", " + SEMAPHORE_MUTEX + " or " + LEADER_LATCH);
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
