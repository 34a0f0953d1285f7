// Package schemacheck validates locktest's JSON outputs (results.json,
// scoreboard.json, matrix.json) against the JSON Schemas published in
// docs/schemas, for tests: a field added to an output without its schema,
// or a schema that no longer matches, fails the test that wrote it.
package schemacheck

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Dir returns the repository's docs/schemas folder, found by walking up
// from the working directory to the go.mod of the module.
func Dir() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "docs", "schemas"), nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", errors.New("schemacheck: no go.mod above the working directory")
		}
		d = up
	}
}

var (
	once     sync.Once
	compiled map[string]*jsonschema.Schema
	loadErr  error
)

// load compiles every NAME.schema.json of Dir under its $id, so that
// their $refs to one another resolve without a network.
func load() {
	dir, err := Dir()
	if err != nil {
		loadErr = err
		return
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.schema.json"))
	if err != nil || len(files) == 0 {
		loadErr = fmt.Errorf("schemacheck: no schemas in %s (%v)", dir, err)
		return
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	ids := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			loadErr = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			loadErr = fmt.Errorf("%s: %w", f, err)
			return
		}
		m, _ := doc.(map[string]any)
		id, _ := m["$id"].(string)
		if id == "" {
			loadErr = fmt.Errorf("%s: no $id", f)
			return
		}
		if err := c.AddResource(id, doc); err != nil {
			loadErr = fmt.Errorf("%s: %w", f, err)
			return
		}
		ids[strings.TrimSuffix(filepath.Base(f), ".schema.json")] = id
	}
	compiled = map[string]*jsonschema.Schema{}
	for name, id := range ids {
		s, err := c.Compile(id)
		if err != nil {
			loadErr = fmt.Errorf("schema %s: %w", name, err)
			return
		}
		compiled[name] = s
	}
}

// Validate checks the JSON document doc against docs/schemas/NAME.schema.json
// ("results", "scoreboard", "matrix"); the error says what does not match
// and where.
func Validate(name string, doc []byte) error {
	once.Do(load)
	if loadErr != nil {
		return loadErr
	}
	s, ok := compiled[name]
	if !ok {
		return fmt.Errorf("schemacheck: no schema %q", name)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return s.Validate(v)
}

// ValidateFile is Validate of the file at path.
func ValidateFile(name, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := Validate(name, b); err != nil {
		return fmt.Errorf("%s against the %s schema: %w", path, name, err)
	}
	return nil
}
