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
		"scoreboard": `{"schema_version": 2, "date": "d", "commit": "c", "machine": "m", "seeds": 1, "parallel": 1, "max_rate": 0.15,
			"versions": ` + versions + `, "elapsed": "1s", "command": "locktest debate", "rows": []}`,
		"matrix": `{"schema_version": 2, "header": {"date": "2026-11-26T10:00:00Z", "commit": "c", "machine": "m", "seeds": 1, "duration": 1,
			"settings": "s", "store": "st", "elapsed": 2, "command": "locktest matrix", "versions": ` + versions + `}, "columns": [], "rows": [
			{"impl": "redlock", "backend": "redis", "nodes": 5, "doc": "d", "versions": ` + versions + `, "cells": {"mutex-none": {"status": "held", "runs": 1, "conclusive": 1, "hi": 0.79,
				"survival": {"runs": 1, "violations": 0, "exposure_s": 8, "rate_per_hour": 0, "rate_upper_per_hour": 1348, "observations": [{"t_s": 8, "violation": false}]}}}}]}`,
		"results": `{"schema_version": 1, "valid": "unknown", "checkers": [], "stats": {"ops": 3}, "run": {"versions": ` + versions + `,
			"name": "n", "impl": "redlock", "backend": "redis", "nodes": 5, "faults": null, "clients": 4, "locks": 1, "ttl": "1s",
			"duration": "2s", "seed": 1, "resource_mode": "none", "command": "c", "version": "v", "started": "s", "elapsed": "e", "expect": "valid"}}`,
		"schedule": `{"schema_version": 1, "seed": 7, "began": "1.2s", "workload": {"impl": "redlock"}, "faults": [
			{"at": "1s", "fault": "pause-client", "settings": {"pause": "1s"}, "pins": ["p0"], "lasts": "1s", "healed": "2.1s", "outcome": "ok"}]}`,
		"shrink": `{"schema_version": 1, "from": "store/x/1", "anomaly": {"checker": "resource", "kind": "stale-write"}, "need": 2, "replays": 3,
			"grace": "1.3s", "budget": "30m0s", "started": "s", "elapsed": "1m", "before": {"faults": 4, "time": "8s", "clients": 5, "locks": 1},
			"after": {"faults": 1, "time": "2s", "clients": 2, "locks": 1}, "smallest": "c004", "replays_run": 9, "steps": [
			{"id": "c001", "change": "end at 2s", "size": {"faults": 1, "time": "2s", "clients": 5, "locks": 1}, "schedule": "c001.json",
			"trials": [{"run": "r", "verdict": "INVALID", "failed": true, "first_violation_ns": 5}], "accepted": true}], "confirmations": []}`,
	}
	bad := map[string][]string{
		"scoreboard": {`"rows": []`, `"rows": [], "colour": "red"`, `"seeds": 1`, `"seeds": "one"`, `"schema_version": 2`, `"schema_version": 3`},
		"matrix":     {`"status": "held"`, `"status": "fine"`, `"hi": 0.79`, `"hi": 1.5`, `"nodes": 5`, `"nodes": -5`, `"violation": false`, `"violation": "no"`},
		"results":    {`"valid": "unknown"`, `"valid": "maybe"`, `"expect": "valid"`, `"expect": "perhaps"`, `"stats": {"ops": 3}`, `"stats": {"ops": "three"}`},
		"schedule":   {`"seed": 7`, `"seed": 7, "colour": "red"`, `"lasts": "1s"`, `"lasts": 1`, `"fault": "pause-client", `, ``},
		"shrink":     {`"need": 2`, `"need": 0`, `"id": "c001"`, `"id": "one"`, `"accepted": true`, `"accepted": true, "colour": "red"`},
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
