package backend

import "fmt"

// The persistence modes of a Redis node (--persistence).
const (
	// PersistenceOff keeps data in memory only: a killed node comes back
	// empty.
	PersistenceOff = "off"
	// PersistenceEverysec writes an append-only file fsynced once a
	// second: a node that loses power may lose up to a second of writes; a
	// killed process loses what the kernel's page cache holds, which is
	// all it wrote (but Redis postpones its writes while a background
	// fsync runs: see docs/findings.md).
	PersistenceEverysec = "everysec"
	// PersistenceAlways fsyncs the append-only file before each reply,
	// the setting antirez recommends for Redlock nodes that restart at
	// once.
	PersistenceAlways = "always"
)

// Persistences are the persistence modes, the default first.
var Persistences = []string{PersistenceOff, PersistenceEverysec, PersistenceAlways}

// CheckPersistence returns the persistence mode p names, "" meaning
// PersistenceOff, or an error naming the modes there are.
func CheckPersistence(p string) (string, error) {
	switch p {
	case "":
		return PersistenceOff, nil
	case PersistenceOff, PersistenceEverysec, PersistenceAlways:
		return p, nil
	}
	return "", fmt.Errorf("unknown persistence %q (want %s, %s or %s)", p, PersistenceOff, PersistenceEverysec, PersistenceAlways)
}

// RedisPersistence returns the redis.conf directives of persistence mode
// p, each a name and its value: the append-only file with p's fsync
// policy, or none for PersistenceOff (and ""). The same directives go on
// a redis-server command line as "--name value".
func RedisPersistence(p string) [][2]string {
	switch p {
	case PersistenceEverysec, PersistenceAlways:
		return [][2]string{{"appendonly", "yes"}, {"appendfsync", p}}
	}
	return [][2]string{{"appendonly", "no"}}
}
