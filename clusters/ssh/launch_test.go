package ssh

import (
	"errors"
	"regexp"
	"testing"
)

// TestStartStepsSayWhereTheTimeWent checks that a failed start's error
// keeps its cause and names each step before it with its time, ending
// with the step that failed, and that a step that did not fail is
// no error.
func TestStartStepsSayWhereTheTimeWent(t *testing.T) {
	st := newStartSteps()
	st.done("probe")
	if err := st.failed("start command", nil); err != nil {
		t.Fatalf("a step that did not fail returned %v", err)
	}
	st.done("start command")
	cause := errors.New("node n1 on h1: context deadline exceeded")
	err := st.failed("readiness", cause)
	if !errors.Is(err, cause) {
		t.Fatalf("%v does not wrap its cause", err)
	}
	want := regexp.MustCompile(`^node n1 on h1: context deadline exceeded \(probe [0-9.]+[mµn]?s, start command [0-9.]+[mµn]?s, readiness [0-9.]+[mµn]?s\)$`)
	if !want.MatchString(err.Error()) {
		t.Errorf("error %q does not match %s", err, want)
	}
}
