// Package cliflags is what the hidden `locktest flags` prints: the
// command line's account of itself for the tests that hold the docs to it
// (guards/), which do not import the command. It is every command's flags
// as JSON (Flag, by the command's path), and, with --check, what the
// command makes of a command line without running it (Line).
package cliflags

// Flag is one flag of a command.
type Flag struct {
	Name      string `json:"name"`
	Shorthand string `json:"shorthand,omitempty"`
	Default   string `json:"default"`
	Usage     string `json:"usage"`
}

// Line is a command line `locktest flags --check` reads, one JSON object
// a line (Path, the command's path such as "images build", and Args),
// and what it says of it: the flags' and the arguments' refusals, the
// values of the flags given, the positional arguments, and, for run and
// margin, the refusal of the run or the search they describe.
type Line struct {
	Path       string              `json:"path"`
	Args       []string            `json:"args"`
	ParseError string              `json:"parse_error,omitempty"`
	ArgsError  string              `json:"args_error,omitempty"`
	Values     map[string][]string `json:"values,omitempty"`
	Positional []string            `json:"positional,omitempty"`
	Error      string              `json:"error,omitempty"`
}
