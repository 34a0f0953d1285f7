package nodeflags

import (
	"errors"
	"flag"
	"io"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // the error, "" for none, "help" for ErrHelp
	}{
		{"all given", []string{"--name", "n1", "--dir", "/d"}, ""},
		{"help", []string{"-h"}, "help"},
		{"unknown flag", []string{"--name", "n1", "--dir", "/d", "--bogus"}, "test node: flag provided but not defined: -bogus"},
		{"positional", []string{"--name", "n1", "--dir", "/d", "extra"}, `test node: unexpected arguments ["extra"]`},
		{"first missing named first", []string{}, "test node: --name is required"},
		{"empty is missing", []string{"--name", "n1", "--dir", ""}, "test node: --dir is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			fs.String("name", "", "")
			fs.String("dir", "", "")
			fs.String("optional", "", "")
			err := Parse(fs, "test node", tc.args, "name", "dir")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case tc.want == "help" && !errors.Is(err, ErrHelp):
				t.Fatalf("Parse = %v, want ErrHelp", err)
			case tc.want != "" && tc.want != "help" && (err == nil || err.Error() != tc.want):
				t.Fatalf("Parse = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParseRefusesAnUndeclaredRequiredFlag(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	if err := Parse(fs, "test node", nil, "name"); err == nil {
		t.Fatal("Parse accepted a required flag that the set does not declare")
	}
}
