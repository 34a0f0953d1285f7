package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MemAvailable returns how many bytes this process can still allocate
// before the kernel must reclaim or kill: MemAvailable of /proc/meminfo,
// capped, when the process's memory cgroup (v1 or v2) has a limit, by what
// that limit leaves above the cgroup's usage.
func MemAvailable() (uint64, error) {
	free, err := Meminfo("MemAvailable")
	if err != nil {
		return 0, err
	}
	if left, ok := cgroupLeft("/proc/self/cgroup", "/sys/fs/cgroup"); ok {
		free = min(free, left)
	}
	return free, nil
}

// Meminfo returns the field name ("MemTotal", "MemAvailable", ...) of
// /proc/meminfo, in bytes.
func Meminfo(name string) (uint64, error) { return meminfoField("/proc/meminfo", name) }

// meminfoField reads the line of field name of a meminfo file, in bytes.
func meminfoField(path, name string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), name+":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("%s: %s line %q not understood", path, name, s.Text())
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %s: %v", path, name, err)
		}
		return kb * 1024, nil
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no %s line", path, name)
}

// cgroupLeft returns the limit minus the usage of the memory cgroup that
// selfCgroup (a /proc/PID/cgroup file) names under root: memory.max and
// memory.current of cgroup v2 ("0::/path"), or memory.limit_in_bytes and
// memory.usage_in_bytes of cgroup v1 ("N:memory:/path"). It returns false
// when there is no such cgroup or it has no limit.
func cgroupLeft(selfCgroup, root string) (uint64, bool) {
	b, err := os.ReadFile(selfCgroup)
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(b) {
		parts := strings.SplitN(strings.TrimSpace(string(line)), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, limitFile, usageFile string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, limitFile, usageFile = filepath.Join(root, parts[2]), "memory.max", "memory.current"
		case parts[1] == "memory":
			dir, limitFile, usageFile = filepath.Join(root, "memory", parts[2]), "memory.limit_in_bytes", "memory.usage_in_bytes"
		default:
			continue
		}
		limit, lok := readUint(filepath.Join(dir, limitFile))
		used, uok := readUint(filepath.Join(dir, usageFile))
		if !lok || !uok || limit >= noLimit {
			continue
		}
		if used >= limit {
			return 0, true
		}
		return limit - used, true
	}
	return 0, false
}

// noLimit is where cgroup v1 limits mean none (it reports about 2^63,
// rounded down to a page).
const noLimit = 1 << 62

// readUint reads a file holding one unsigned number; "max" and anything
// unreadable give false.
func readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}
