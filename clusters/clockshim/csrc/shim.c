/*
 * locktest clock shim: preloaded (LD_PRELOAD) into a node process, it adds a
 * per-node offset to the wall clock the process reads — clock_gettime for
 * CLOCK_REALTIME and CLOCK_REALTIME_COARSE, gettimeofday and time — and leaves
 * every other clock (CLOCK_MONOTONIC above all) alone.
 *
 * The offset is a signed 64-bit count of nanoseconds at the start of a file
 * named by LOCKTEST_CLOCK_FILE, mapped shared and read-only, so the nemesis
 * moves the clock by rewriting that word: no signal, no restart.
 *
 * When LOCKTEST_SYNC_FILE names a file, the shim also records what the
 * process has made durable, for the power-loss fault: after each fsync or
 * fdatasync of a regular file that succeeds, it appends one line to that
 * file (see record_sync for the format) with the file's identity and the
 * size it had when the sync began, which the sync guarantees is on disk.
 * A forked child (Redis's AOF rewrite) records its own syncs the same way.
 * LOCKTEST_SYNC_DELAY_MS makes every fsync and fdatasync begin that many
 * milliseconds late, recorded or not: a slow disk, made exact.
 *
 * The same mapped file holds, in its second signed 64-bit word (bytes 8 to
 * 15), a sync delay in nanoseconds that the harness sets and clears at run
 * time (the slow-disk fault): each fsync and fdatasync reads it as it
 * begins, and waits the longer of it and LOCKTEST_SYNC_DELAY_MS. A sync
 * already waiting reads it again every 10 ms, so that a delay cleared (or
 * shortened) releases it then; it never waits less than the delay in force
 * since it began.
 *
 * Everything here reaches the kernel by raw system calls, never through libc
 * or dlsym: redis-server's jemalloc reads the clock while it initialises, and
 * a shim that called malloc or dlsym then (as libfaketime does) would recurse
 * into the allocator being set up and crash the server at start-up. The
 * sync interposers use no lock and no heap, only the stack and system
 * calls, and leave errno as the sync set it.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <errno.h>

static long raw_syscall6(long n, long a, long b, long c, long d, long e, long f)
{
	long ret;
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;
	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	ret = x0;
#else
#error "locktest clock shim: only x86_64 and aarch64 are supported"
#endif
	return ret;
}

/*
 * offset points at the mapped offset word once the constructor ran; the
 * word after it is the sync delay the harness sets (mapped_sync_delay).
 */
static volatile int64_t *offset;

static int64_t current_offset(void)
{
	volatile int64_t *p = __atomic_load_n(&offset, __ATOMIC_ACQUIRE);
	return p ? __atomic_load_n(p, __ATOMIC_RELAXED) : 0;
}

/* max_sync_delay_ns is the longest delay a sync takes: 600 s. */
#define max_sync_delay_ns (600000 * 1000000LL)

/*
 * mapped_sync_delay returns the sync delay the harness set in the mapped
 * file, in nanoseconds, within [0, max_sync_delay_ns]; 0 without a file.
 */
static int64_t mapped_sync_delay(void)
{
	volatile int64_t *p = __atomic_load_n(&offset, __ATOMIC_ACQUIRE);
	int64_t d = p ? __atomic_load_n(p + 1, __ATOMIC_RELAXED) : 0;
	if (d < 0)
		return 0;
	return d > max_sync_delay_ns ? max_sync_delay_ns : d;
}

static const char clock_env[] = "LOCKTEST_CLOCK_FILE=";
static const char sync_env[] = "LOCKTEST_SYNC_FILE=";
static const char delay_env[] = "LOCKTEST_SYNC_DELAY_MS=";

/*
 * sync_delay_ns, when LOCKTEST_SYNC_DELAY_MS names a positive count of
 * milliseconds (decimal digits, at most 600000), is how much longer every
 * fsync and fdatasync takes: a slow disk, made exact. The process sleeps
 * that long before the sync begins. 0 (the default) delays nothing.
 */
static int64_t sync_delay_ns;

/*
 * sync_path is the record file of LOCKTEST_SYNC_FILE, copied at start-up:
 * redis-server rewrites the memory of its environment to set its process
 * title, so a pointer into it would not last. Empty when syncs are not
 * recorded.
 */
static char sync_path[4096];

/* env_value returns the value of e if it starts with name, or NULL. */
static const char *env_value(const char *e, const char *name)
{
	size_t i = 0;
	while (name[i] && e[i] == name[i])
		i++;
	return name[i] ? NULL : e + i;
}

static void map_offset(const char *path)
{
	long fd = raw_syscall6(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0);
	if (fd < 0)
		return;
	long m = raw_syscall6(SYS_mmap, 0, 4096, PROT_READ, MAP_SHARED, fd, 0);
	raw_syscall6(SYS_close, fd, 0, 0, 0, 0, 0);
	if (m < 0 && m > -4096)
		return;
	__atomic_store_n(&offset, (volatile int64_t *)m, __ATOMIC_RELEASE);
}

/* glibc passes argc, argv and envp to the functions of .init_array. */
__attribute__((constructor)) static void locktest_clock_init(int argc, char **argv, char **envp)
{
	(void)argc;
	(void)argv;
	if (!envp)
		return;
	for (char **e = envp; *e; e++) {
		const char *v;
		if ((v = env_value(*e, clock_env)) != NULL) {
			map_offset(v);
		} else if ((v = env_value(*e, delay_env)) != NULL) {
			int64_t ms = 0;
			size_t i = 0;
			for (; v[i] >= '0' && v[i] <= '9' && ms <= 600000; i++)
				ms = ms * 10 + (v[i] - '0');
			if (v[i] == 0 && i > 0 && ms <= 600000)
				sync_delay_ns = ms * 1000000LL;
		} else if ((v = env_value(*e, sync_env)) != NULL) {
			size_t n = 0;
			while (v[n] && n < sizeof sync_path - 1)
				n++;
			if (v[n])
				continue; /* too long: record nothing rather than elsewhere */
			for (size_t i = 0; i < n; i++)
				sync_path[i] = v[i];
			sync_path[n] = 0;
			/* The record exists from the start: proof that the shim is
			 * loaded, before the process has synced anything. */
			long fd = raw_syscall6(SYS_openat, AT_FDCWD, (long)sync_path,
					       O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644, 0, 0);
			if (fd >= 0)
				raw_syscall6(SYS_close, fd, 0, 0, 0, 0, 0);
		}
	}
}

static int shifted(clockid_t id)
{
	return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE;
}

static void add_offset(struct timespec *ts)
{
	int64_t ns = (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec + current_offset();
	int64_t sec = ns / 1000000000LL, rem = ns % 1000000000LL;
	if (rem < 0) {
		rem += 1000000000LL;
		sec--;
	}
	ts->tv_sec = sec;
	ts->tv_nsec = rem;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
	long r = raw_syscall6(SYS_clock_gettime, id, (long)ts, 0, 0, 0, 0);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	if (shifted(id))
		add_offset(ts);
	return 0;
}

int gettimeofday(struct timeval *tv, void *tz)
{
	(void)tz;
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
		return -1;
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

time_t time(time_t *t)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
		return (time_t)-1;
	if (t)
		*t = ts.tv_sec;
	return ts.tv_sec;
}

/* put_u64 writes v in decimal at p and returns the end. */
static char *put_u64(char *p, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

static char *put_i64(char *p, int64_t v)
{
	if (v < 0) {
		*p++ = '-';
		return put_u64(p, (uint64_t)0 - (uint64_t)v);
	}
	return put_u64(p, (uint64_t)v);
}

/* A sync about to happen: what record_sync writes if it succeeds. */
struct pending_sync {
	int ok; /* fd is a regular file and the record is wanted */
	int64_t began;
	struct statx st;
};

/*
 * before_sync notes the file's identity and size, and the monotonic time,
 * before the sync starts: the sync guarantees what was written before it
 * began, not what a concurrent write adds while it runs.
 */
static void before_sync(int fd, struct pending_sync *ps)
{
	ps->ok = 0;
	if (!sync_path[0])
		return;
	long r = raw_syscall6(SYS_statx, fd, (long)"", AT_EMPTY_PATH,
			      STATX_TYPE | STATX_INO | STATX_SIZE | STATX_BTIME, (long)&ps->st, 0);
	if (r < 0 || !S_ISREG(ps->st.stx_mode))
		return;
	struct timespec ts;
	if (raw_syscall6(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&ts, 0, 0, 0, 0) < 0)
		return;
	ps->began = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
	ps->ok = 1;
}

/*
 * record_sync appends one line to the sync record for a sync of fd that
 * succeeded:
 *
 *	<began> <major>:<minor> <inode> <birth> <size> <pid> <path>\n
 *
 * began is CLOCK_MONOTONIC in ns when the sync began; major:minor and inode
 * identify the file, birth is its creation time in ns (0 where the file
 * system keeps none), which tells a file from a later one that reuses its
 * inode; size is its size when the sync began; path is where /proc/self/fd
 * says the file is, for people (a rename moves the file, not its record).
 * The line is written in one write(2) to a file opened O_APPEND, so lines
 * of concurrent threads and processes do not mix.
 */
static void record_sync(int fd, const struct pending_sync *ps)
{
	char line[4096 + 160];
	char *p = line;
	p = put_i64(p, ps->began);
	*p++ = ' ';
	p = put_u64(p, ps->st.stx_dev_major);
	*p++ = ':';
	p = put_u64(p, ps->st.stx_dev_minor);
	*p++ = ' ';
	p = put_u64(p, ps->st.stx_ino);
	*p++ = ' ';
	int64_t birth = 0;
	if (ps->st.stx_mask & STATX_BTIME)
		birth = (int64_t)ps->st.stx_btime.tv_sec * 1000000000LL + ps->st.stx_btime.tv_nsec;
	p = put_i64(p, birth);
	*p++ = ' ';
	p = put_u64(p, ps->st.stx_size);
	*p++ = ' ';
	p = put_i64(p, raw_syscall6(SYS_getpid, 0, 0, 0, 0, 0, 0));
	*p++ = ' ';
	char link[32] = "/proc/self/fd/";
	*put_u64(link + 14, (uint64_t)fd) = 0;
	long n = raw_syscall6(SYS_readlinkat, AT_FDCWD, (long)link, (long)p, 4096 - 1, 0, 0);
	if (n < 0)
		n = 0;
	for (long i = 0; i < n; i++)
		if (p[i] == '\n')
			p[i] = '?';
	p += n;
	*p++ = '\n';
	long rec = raw_syscall6(SYS_openat, AT_FDCWD, (long)sync_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644, 0, 0);
	if (rec < 0)
		return;
	raw_syscall6(SYS_write, rec, (long)line, p - line, 0, 0, 0);
	raw_syscall6(SYS_close, rec, 0, 0, 0, 0, 0);
}

static int64_t monotonic_ns(void)
{
	struct timespec ts;
	if (raw_syscall6(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&ts, 0, 0, 0, 0) < 0)
		return -1;
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* sync_poll_ns is how often a waiting sync reads the mapped delay again. */
#define sync_poll_ns 10000000LL

/*
 * delay_sync waits, before a sync begins, the longer of the delay of
 * LOCKTEST_SYNC_DELAY_MS and the mapped one, counted from its call. It
 * reads the mapped delay again every sync_poll_ns while it waits, and ends
 * once the delay then in force has passed since its call: a delay cleared
 * by the harness releases the syncs waiting for it.
 */
static void delay_sync(void)
{
	int64_t d = mapped_sync_delay();
	if (d < sync_delay_ns)
		d = sync_delay_ns;
	if (d <= 0)
		return;
	int64_t start = monotonic_ns();
	if (start < 0)
		return;
	for (;;) {
		int64_t now = monotonic_ns();
		if (now < 0)
			return;
		int64_t left = start + d - now;
		if (left <= 0)
			return;
		if (left > sync_poll_ns)
			left = sync_poll_ns;
		struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
		raw_syscall6(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, (long)&ts, 0, 0, 0);
		d = mapped_sync_delay();
		if (d < sync_delay_ns)
			d = sync_delay_ns;
	}
}

/* synced runs the sync system call nr on fd and records it if it succeeds. */
static int synced(long nr, int fd)
{
	struct pending_sync ps;
	delay_sync();
	before_sync(fd, &ps);
	long r = raw_syscall6(nr, fd, 0, 0, 0, 0, 0);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	if (ps.ok)
		record_sync(fd, &ps);
	return 0;
}

/*
 * fsync and fdatasync are the syncs recorded. sync_file_range is not: it
 * writes no metadata (a grown file's new size among it) and, with the flags
 * Redis gives it, does not even wait, so it guarantees nothing a power loss
 * would respect. Writes through O_SYNC or O_DSYNC descriptors, sync, syncfs
 * and msync are not recorded either: a node that relies on them is not one
 * whose power can be cut.
 */
int fsync(int fd)
{
	return synced(SYS_fsync, fd);
}

int fdatasync(int fd)
{
	return synced(SYS_fdatasync, fd);
}
