// Package shellquote quotes words for a POSIX shell, for the command
// lines locktest hands to sh: on an ssh provider's hosts, and in a SQL
// server's container.
package shellquote

import "strings"

// Quote returns s as one word for a POSIX shell: in single quotes, each
// single quote of s closing the quotes, escaped, and opening them again.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes each of args (Quote) and joins them with spaces: a command
// line that sh splits back into args.
func Join(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}
