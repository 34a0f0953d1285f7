package reports

import (
	"fmt"
	"os"
	"path/filepath"
)

// What a folder of outputs holds (HeldIn).
const (
	// HoldsScoreboard is a debate's output: a scoreboard.json, or the
	// folder that holds one.
	HoldsScoreboard = "debate"
	// HoldsMatrixStore is a matrix's store: the folder that holds its
	// header.
	HoldsMatrixStore = "matrix"
)

// HeldIn says what path d holds, HoldsScoreboard or HoldsMatrixStore, or
// returns an error naming d when it is neither or cannot be read. A path
// that is not a folder is taken to be a scoreboard.json.
func HeldIn(d string) (string, error) {
	st, err := os.Stat(d)
	switch {
	case err != nil:
		return "", err
	case !st.IsDir():
		return HoldsScoreboard, nil
	}
	if _, err := os.Stat(filepath.Join(d, ScoreboardJSONFile)); err == nil {
		return HoldsScoreboard, nil
	}
	if _, err := os.Stat(filepath.Join(d, MatrixHeaderFile)); err == nil {
		return HoldsMatrixStore, nil
	}
	return "", fmt.Errorf("%s holds neither a %s (a debate's output) nor a %s (a matrix store)", d, ScoreboardJSONFile, MatrixHeaderFile)
}
