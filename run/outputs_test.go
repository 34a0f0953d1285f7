package run

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOutputChecks: an output path is refused before a long command, not
// at its end, and checking it leaves nothing behind.
func TestOutputChecks(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		check func(string) error
		path  string
		ok    bool
	}{
		{"a folder takes files", WritableDir, dir, true},
		{"a missing folder does not", WritableDir, filepath.Join(dir, "missing"), false},
		{"a file in a folder", WritableFile, filepath.Join(dir, "out.json"), true},
		{"a file over a file", WritableFile, file, true},
		{"a file that is a folder", WritableFile, dir, false},
		{"a file in a missing folder", WritableFile, filepath.Join(dir, "missing", "out.json"), false},
		{"a file under a file", WritableFile, filepath.Join(file, "out.json"), false},
		{"a folder to make", CreatableDir, filepath.Join(dir, "a", "b"), true},
		{"a folder that is", CreatableDir, dir, true},
		{"a folder over a file", CreatableDir, file, false},
		{"a folder under a file", CreatableDir, filepath.Join(file, "a"), false},
	} {
		if err := tt.check(tt.path); (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok %v", tt.name, err, tt.ok)
		}
	}
	if es, err := os.ReadDir(dir); err != nil || len(es) != 1 {
		t.Errorf("the checks left %v (%v)", es, err)
	}
}

// TestCheckOutputsNamesTheFlag: CheckOutputs makes an output folder,
// skips an output not asked for, and names the flag of the first output
// it cannot write.
func TestCheckOutputsNamesTheFlag(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	made := filepath.Join(dir, "a", "b")
	if err := CheckOutputs(Output{Flag: "--json"}, Output{Flag: "--out", Path: made, Dir: true}, Output{Flag: "--md", Path: filepath.Join(made, "m.md")}); err != nil {
		t.Fatalf("CheckOutputs: %v", err)
	}
	if st, err := os.Stat(made); err != nil || !st.IsDir() {
		t.Errorf("the output folder was not made: %v", err)
	}
	for _, tt := range []struct {
		outs []Output
		want string
	}{
		{[]Output{{Flag: "--out", Path: filepath.Join(file, "out"), Dir: true}}, "--out: mkdir " + file + ": not a directory"},
		{[]Output{{Flag: "--junit", Path: dir + "/j.xml"}, {Flag: "--json", Path: dir}}, "--json: " + dir + " is a folder"},
	} {
		if err := CheckOutputs(tt.outs...); err == nil || err.Error() != tt.want {
			t.Errorf("CheckOutputs(%v) = %v, want %q", tt.outs, err, tt.want)
		}
	}
}
