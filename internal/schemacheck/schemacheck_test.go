package schemacheck

import (
	"strings"
	"testing"
)

// The schemas compile, and each refuses what its layout does not allow:
// an unknown field, a wrong type, a missing field, a newer schema_version.
func TestSchemasRefuseBadDocuments(t *testing.T) {
	versions := `{"locktest": "v0 abc", "servers": {"redis": "7.0.15"}}`
	good := map[string]string{
		"scoreboard": `{"schema_version": 1, "date": "d", "commit": "c", "machine": "m", "seeds": 1, "parallel": 1, "max_rate": 0.15,
			"versions": ` + versions + `, "elapsed": "1s", "command": "locktest debate", "rows": []}`,
		"matrix": `{"schema_version": 1, "header": {"date": "2026-11-26T10:00:00Z", "commit": "c", "machine": "m", "seeds": 1, "duration": 1,
			"settings": "s", "store": "st", "elapsed": 2, "command": "locktest matrix", "versions": ` + versions + `}, "columns": [], "rows": [
			{"impl": "redlock", "backend": "redis", "nodes": 5, "doc": "d", "versions": ` + versions + `, "cells": {"mutex-none": {"status": "held", "runs": 1, "conclusive": 1, "hi": 0.79}}}]}`,
		"results": `{"schema_version": 1, "valid": "unknown", "checkers": [], "stats": {"ops": 3}, "run": {"versions": ` + versions + `,
			"name": "n", "impl": "redlock", "backend": "redis", "nodes": 5, "faults": null, "clients": 4, "locks": 1, "ttl": "1s",
			"duration": "2s", "seed": 1, "resource_mode": "none", "command": "c", "version": "v", "started": "s", "elapsed": "e", "expect": "valid"}}`,
	}
	bad := map[string][]string{
		"scoreboard": {`"rows": []`, `"rows": [], "colour": "red"`, `"seeds": 1`, `"seeds": "one"`, `"schema_version": 1`, `"schema_version": 2`},
		"matrix":     {`"status": "held"`, `"status": "fine"`, `"hi": 0.79`, `"hi": 1.5`, `"nodes": 5`, `"nodes": -5`},
		"results":    {`"valid": "unknown"`, `"valid": "maybe"`, `"expect": "valid"`, `"expect": "perhaps"`, `"stats": {"ops": 3}`, `"stats": {"ops": "three"}`},
	}
	for name, doc := range good {
		if err := Validate(name, []byte(doc)); err != nil {
			t.Errorf("%s: a good document refused: %v", name, err)
		}
		for i := 0; i+1 < len(bad[name]); i += 2 {
			from, to := bad[name][i], bad[name][i+1]
			if !strings.Contains(doc, from) {
				t.Fatalf("%s: the good document lacks %s", name, from)
			}
			if err := Validate(name, []byte(strings.Replace(doc, from, to, 1))); err == nil {
				t.Errorf("%s: %s accepted", name, to)
			}
		}
	}
	if err := Validate("scoreboard", []byte(`{"schema_version": 1`)); err == nil {
		t.Error("cut JSON accepted")
	}
	if err := Validate("nope", []byte(`{}`)); err == nil {
		t.Error("an unknown schema name accepted")
	}
}
