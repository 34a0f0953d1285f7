//go:build !locktest_clockrate

package rate

func set(float64) error { return ErrNotBuilt }

func setWall(int64) error { return ErrNotBuilt }
