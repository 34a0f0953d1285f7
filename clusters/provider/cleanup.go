package provider

import (
	"context"
	"fmt"
	"io"
)

// This file is `locktest cleanup` over the registry: which providers it
// clears, and with which of their flags. The command only declares the
// flags (CleanupFlags) and prints.

// CleanupFlags returns the flags of `locktest cleanup` the providers
// declare (Cleanup.Flags), over the values they set, by provider: the
// flags of one provider share its values.
func CleanupFlags() ([]*Flag, map[string]*Values) {
	var flags []*Flag
	values := map[string]*Values{}
	for _, d := range defs {
		if d.Cleanup == nil {
			continue
		}
		vs := &Values{}
		values[d.Name] = vs
		for _, s := range d.Cleanup.Flags {
			flags = append(flags, vs.Flag(s))
		}
	}
	return flags, values
}

// ClearedAlone returns the providers whose cleanup takes flags, which
// `locktest cleanup` clears only when --provider names them ("ssh"), and
// those it clears without it.
func ClearedAlone() (with, without []string) {
	for _, d := range defs {
		if d.Cleanup != nil && len(d.Cleanup.Flags) > 0 {
			with = append(with, d.Name)
		} else {
			without = append(without, d.Name)
		}
	}
	return with, without
}

// Clear is `locktest cleanup`. With name "" it clears what runs left
// for every provider whose cleanup takes no flags, and refuses the flags
// of the others (given says whether a flag was given on the command
// line); with a name, that provider's cleanup, which must take flags,
// with its values. It writes to w what it removed (with dry, what it
// would remove). Its errors in the command line and the providers'
// settings are *SettingError.
func Clear(ctx context.Context, w io.Writer, name string, values map[string]*Values, given func(flag string) bool, dry bool) error {
	if name != "" {
		d, ok := Lookup(name)
		if !ok || d.Cleanup == nil || len(d.Cleanup.Flags) == 0 {
			with, without := ClearedAlone()
			return &SettingError{fmt.Errorf("cleanup --provider %q: want %s (without it, cleanup clears what %s runs left)", name, OrList(with), AndList(without))}
		}
		return d.Cleanup.Clear(ctx, w, *values[d.Name], dry)
	}
	for _, d := range defs {
		if d.Cleanup == nil || len(d.Cleanup.Flags) == 0 {
			continue
		}
		var names []string
		set := false
		for _, s := range d.Cleanup.Flags {
			names = append(names, "--"+s.Name)
			set = set || given(s.Name)
		}
		if set {
			return &SettingError{fmt.Errorf("%s need --provider %s", AndList(names), d.Name)}
		}
	}
	for _, d := range defs {
		if d.Cleanup != nil && len(d.Cleanup.Flags) == 0 {
			if err := d.Cleanup.Clear(ctx, w, nil, dry); err != nil {
				return err
			}
		}
	}
	return nil
}
