// Package all registers every provider: importing it (run does) makes
// each one's --provider value, settings, set-up and cleanup known to the
// registry (clusters/provider). It is the one place that names the
// providers; a new provider is a folder under clusters, which registers
// itself in an init function, and one import here.
package all

import (
	_ "github.com/locktest/locktest/clusters/docker"
	_ "github.com/locktest/locktest/clusters/local/localprovider"
	_ "github.com/locktest/locktest/clusters/ssh"
)
