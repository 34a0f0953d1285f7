package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit/genhist"
)

// BenchmarkCheck runs `locktest check` end to end — reading the history,
// the four checkers, porcupine where it applies, results.json and the
// report — as a separate process on generated valid histories of 16
// processes, and reports its wall time (s/check), the times it prints for
// reading (s/read) and for writing the report (s/report), and its peak
// RSS. The lease histories carry valid_until, so porcupine is left out;
// the mutex ones do not, so it runs; the overlapping ones are lease
// histories with a second holder in every critical section, which gives
// about one anomaly per 10 ops. LOCKTEST_BENCH_10M=1 adds histories of
// 10M ops.
func BenchmarkCheck(b *testing.B) {
	sizes := []int{10_000, 100_000, 1_000_000}
	if os.Getenv("LOCKTEST_BENCH_10M") != "" {
		sizes = append(sizes, 10_000_000)
	}
	readRe := regexp.MustCompile(`read \d+ ops in (\S+)`)
	reportRe := regexp.MustCompile(`report written in (\S+)`)
	for _, n := range sizes {
		for _, kind := range []string{"lease", "mutex", "overlapping"} {
			var h history.History
			switch kind {
			case "overlapping":
				h = genhist.Overlapping(42, n, 16, 1)
			default:
				h = genhist.Valid(42, n, 16)
			}
			if kind == "mutex" {
				for i := range h {
					h[i].Value.ValidUntil = 0
				}
			}
			dir := b.TempDir()
			if err := history.WriteFile(filepath.Join(dir, runstore.HistoryFile), h); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%s/ops=%d", kind, n), func(b *testing.B) {
				var wall, read, report time.Duration
				var rss int64
				for range b.N {
					cmd := exec.Command(bin, "check", dir)
					var buf bytes.Buffer
					cmd.Stdout, cmd.Stderr = &buf, &buf
					start := time.Now()
					err := cmd.Start()
					if err == nil {
						peak := watchPeakRSS(cmd.Process.Pid)
						err = cmd.Wait()
						rss = max(rss, <-peak)
					}
					wall += time.Since(start)
					out := buf.Bytes()
					// The overlapping history is invalid, which a run
					// expected valid answers with exit 1.
					if code := cmd.ProcessState.ExitCode(); err != nil && !(kind == "overlapping" && code == 1) {
						b.Fatalf("check: %v\n%s", err, out)
					}
					for _, m := range []struct {
						re  *regexp.Regexp
						sum *time.Duration
					}{{readRe, &read}, {reportRe, &report}} {
						sub := m.re.FindSubmatch(out)
						if sub == nil {
							b.Fatalf("no %s in %s", m.re, out)
						}
						d, _ := time.ParseDuration(string(sub[1]))
						*m.sum += d
					}
				}
				b.ReportMetric(wall.Seconds()/float64(b.N), "s/check")
				b.ReportMetric(read.Seconds()/float64(b.N), "s/read")
				b.ReportMetric(report.Seconds()/float64(b.N), "s/report")
				b.ReportMetric(float64(rss)/(1<<20), "MB-rss")
			})
		}
	}
}

// watchPeakRSS reads the peak RSS (VmHWM) of process pid every 10 ms until
// it is gone, and then sends the last it read, in bytes. The peak of the
// process's own memory, that is: the ru_maxrss that wait4 reports of a
// child carries over across execve the peak of the process it was forked
// from, here this benchmark, which holds the generated histories.
func watchPeakRSS(pid int) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var peak int64
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				break
			}
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
					if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
						peak = max(peak, kb<<10)
					}
				}
			}
			if strings.Contains(string(b), "State:\tZ") {
				break // exited, not yet reaped
			}
			time.Sleep(10 * time.Millisecond)
		}
		out <- peak
	}()
	return out
}
