// Package reports turns a checked run into what people read: a run's HTML
// report with its timeline and porcupine's visualization, the index of a
// store, the debate's scoreboard and the backend matrix. It reads only
// histories, stored results (package runstore) and checker results, never a
// live system, and it decides nothing: the verdict is package checker's.
package reports
