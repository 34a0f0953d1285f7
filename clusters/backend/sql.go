package backend

// How a one-node SQL server of locktest is set up,
// the same for every provider that runs one: the arguments that create a
// data directory (mariadb-install-db, initdb), the server's command line
// (mariadbd, postgres), what lets the impls in over TCP (MariaDB's init
// SQL, PostgreSQL's pg_hba.conf line), and the query that tells the server
// is ready, made with the drivers the impls use. Paths and addresses come
// from the provider; nothing here starts a process.
//
// The impls (impls/mysql, impls/pg) connect over TCP from any address
// without a password: MariaDB as root, PostgreSQL as the superuser
// postgres to the database postgres.

import (
	"fmt"
)

// oneServer is the Configure of the SQL backends, which run one server.
func oneServer(l *Layout, nodes int, _ map[string]string) (int, error) {
	if nodes != 1 {
		return 0, fmt.Errorf("%s: %d nodes: the SQL backends run one server", l.Backend, nodes)
	}
	return 1, nil
}
