package procfs

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMeminfoField(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	write(t, good, "MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:   2048 kB\n")
	if n, err := meminfoField(good, "MemAvailable"); err != nil || n != 2048*1024 {
		t.Fatalf("meminfoField MemAvailable = %d, %v; want %d", n, err, 2048*1024)
	}
	if n, err := meminfoField(good, "MemTotal"); err != nil || n != 24576000*1024 {
		t.Fatalf("meminfoField MemTotal = %d, %v; want %d", n, err, 24576000*1024)
	}
	for name, text := range map[string]string{
		"missing": "MemTotal: 10 kB\n",
		"unit":    "MemAvailable: 10 MB\n",
		"number":  "MemAvailable: x kB\n",
	} {
		p := filepath.Join(dir, name)
		write(t, p, text)
		if n, err := meminfoField(p, "MemAvailable"); err == nil {
			t.Errorf("%s: meminfoField = %d, want an error", name, n)
		}
	}
	if _, err := MemAvailable(); err != nil {
		t.Errorf("MemAvailable on this machine: %v", err)
	}
}

func TestCgroupLeft(t *testing.T) {
	tests := []struct {
		name   string
		self   string
		files  map[string]string
		left   uint64
		limits bool
	}{
		{"v2 limit", "0::/job\n", map[string]string{"job/memory.max": "1000\n", "job/memory.current": "300\n"}, 700, true},
		{"v2 max", "0::/job\n", map[string]string{"job/memory.max": "max\n", "job/memory.current": "300\n"}, 0, false},
		{"v2 over", "0::/job\n", map[string]string{"job/memory.max": "100\n", "job/memory.current": "300\n"}, 0, true},
		{"v1 limit", "4:memory:/a/b\n0::/\n", map[string]string{"memory/a/b/memory.limit_in_bytes": "5000", "memory/a/b/memory.usage_in_bytes": "1000"}, 4000, true},
		{"v1 none", "4:memory:/a\n", map[string]string{"memory/a/memory.limit_in_bytes": "9223372036854771712", "memory/a/memory.usage_in_bytes": "1000"}, 0, false},
		{"no cgroup files", "0::/gone\n", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			self := filepath.Join(root, "self")
			write(t, self, tt.self)
			for p, text := range tt.files {
				write(t, filepath.Join(root, p), text)
			}
			left, ok := cgroupLeft(self, root)
			if left != tt.left || ok != tt.limits {
				t.Errorf("cgroupLeft = %d, %v; want %d, %v", left, ok, tt.left, tt.limits)
			}
		})
	}
}
