package run

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// WritableDir checks that files can be created in dir, by creating and
// removing one.
func WritableDir(dir string) error {
	f, err := os.CreateTemp(dir, ".locktest-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// CreatableDir checks that dir exists as a folder that takes new files, or
// can be made: its nearest existing ancestor is a folder that does. It
// creates nothing.
func CreatableDir(dir string) error {
	d := filepath.Clean(dir)
	for {
		st, err := os.Stat(d)
		switch {
		case err == nil && !st.IsDir():
			return fmt.Errorf("%s is not a folder", d)
		case err == nil:
			return WritableDir(d)
		case !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return err
		}
		up := filepath.Dir(d)
		if up == d {
			return err
		}
		d = up
	}
}

// WritableFile checks, before a long command, that path can be written at
// its end: its folder exists and takes new files, and path is not a folder.
// It leaves no file behind.
func WritableFile(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a folder", path)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a folder", dir)
	}
	return WritableDir(dir)
}

// Output is one output of a long command (a debate, a matrix, a merge):
// the flag that names it, its path ("": none) and whether it is a folder.
type Output struct {
	Flag, Path string
	Dir        bool
}

// CheckOutputs makes sure, before a long command, that it can write each
// of its outputs at its end: a file's folder exists and takes new files
// (WritableFile), a folder is made and takes them (WritableDir). An
// output without a path is skipped; an error names its flag.
func CheckOutputs(outs ...Output) error {
	for _, o := range outs {
		var err error
		switch {
		case o.Path == "":
			continue
		case !o.Dir:
			err = WritableFile(o.Path)
		default:
			if err = os.MkdirAll(o.Path, 0o755); err == nil {
				err = WritableDir(o.Path)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %v", o.Flag, err)
		}
	}
	return nil
}

// ToGo estimates, for a progress line, the time the left runs take at the
// pace of the done ones since started: ", about 3m10s to go", or "" when
// none is left.
func ToGo(started time.Time, done, left int) string {
	if left <= 0 || done <= 0 {
		return ""
	}
	return fmt.Sprintf(", about %s to go", (time.Since(started) / time.Duration(done) * time.Duration(left)).Round(time.Second))
}
