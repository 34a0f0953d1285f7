//go:build !locktest_clockrate

package rate

func set(float64) error { return ErrNotBuilt }
