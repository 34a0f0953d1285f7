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
 * Everything here reaches the kernel by raw system calls, never through libc
 * or dlsym: redis-server's jemalloc reads the clock while it initialises, and
 * a shim that called malloc or dlsym then (as libfaketime does) would recurse
 * into the allocator being set up and crash the server at start-up.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <sys/mman.h>
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

/* offset points at the mapped offset word once the constructor ran. */
static volatile int64_t *offset;

static int64_t current_offset(void)
{
	volatile int64_t *p = __atomic_load_n(&offset, __ATOMIC_ACQUIRE);
	return p ? __atomic_load_n(p, __ATOMIC_RELAXED) : 0;
}

static const char envname[] = "LOCKTEST_CLOCK_FILE=";

/* glibc passes argc, argv and envp to the functions of .init_array. */
__attribute__((constructor)) static void locktest_clock_init(int argc, char **argv, char **envp)
{
	(void)argc;
	(void)argv;
	if (!envp)
		return;
	for (char **e = envp; *e; e++) {
		const char *s = *e;
		size_t i = 0;
		while (envname[i] && s[i] == envname[i])
			i++;
		if (envname[i])
			continue;
		long fd = raw_syscall6(SYS_openat, AT_FDCWD, (long)(s + i), O_RDONLY | O_CLOEXEC, 0, 0, 0);
		if (fd < 0)
			return;
		long m = raw_syscall6(SYS_mmap, 0, 4096, PROT_READ, MAP_SHARED, fd, 0);
		raw_syscall6(SYS_close, fd, 0, 0, 0, 0, 0);
		if (m < 0 && m > -4096)
			return;
		__atomic_store_n(&offset, (volatile int64_t *)m, __ATOMIC_RELEASE);
		return;
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
