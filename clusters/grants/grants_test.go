package grants

import "testing"

// newGrant finds a lease that was not held before: a new key, or a key
// whose value changed (taken again); a lease held all along, or one that
// went away, is none.
func TestNewGrant(t *testing.T) {
	l := func(kv ...string) []Grant {
		var out []Grant
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, Grant{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		before, now []Grant
		want        string // "" for none
	}{
		{"nothing held, nothing granted", nil, nil, ""},
		{"held all along", l("lock", "a"), l("lock", "a"), ""},
		{"released", l("lock", "a"), nil, ""},
		{"a new key", nil, l("lock", "a"), "lock"},
		{"taken again with a new value", l("lock", "a"), l("lock", "b"), "lock"},
		{"a second lock beside one held", l("lock-0", "a"), l("lock-0", "a", "lock-1", "c"), "lock-1"},
	} {
		g, ok := newGrant(tc.before, tc.now)
		if got := map[bool]string{true: g.Key}[ok]; got != tc.want {
			t.Errorf("%s: newGrant = %q, %v; want %q", tc.name, g.Key, ok, tc.want)
		}
	}
}
