package sshlab

import (
	"context"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/images"
)

// labSQLTools are the programs the ssh provider's SQL servers need on a
// host besides those of labPrograms: the user look-ups of their
// set-up, mariadb-install-db's dirname and uname, chown and setpriv to run
// PostgreSQL as its own user, and ipcrm to remove the shared memory of a
// killed PostgreSQL.
var labSQLTools = []string{"id", "chown", "dirname", "uname", "setpriv", "ipcrm"}

// addLabSQL adds to the lab's image this host's MariaDB and PostgreSQL
// servers, each when this host has it: mariadbd with its libraries,
// mariadb-install-db and my_print_defaults, which it calls, MariaDB's
// share directory (the bootstrap SQL, error messages, character sets) and
// plugin directory; PostgreSQL's postgres and initdb of the highest
// /usr/lib/postgresql/<version>/bin with their libraries, the server's
// modules of lib (plpgsql, the text search dictionaries, the encoding
// conversions) but the JIT, its share directory but the manual, the time
// zones, and a postgres user and group, the server's, with this host's
// ids; and, with either, the tools of labSQLTools. It returns the
// servers it added, by their kinds of node (backend.KindMariaDB,
// backend.KindPostgres).
func addLabSQL(ctx context.Context, r *images.Rootfs) ([]string, error) {
	var added []string
	maria, err := images.AddMariaDB(ctx, r)
	if err != nil {
		return nil, err
	}
	if maria {
		added = append(added, backend.KindMariaDB)
	}
	pg, err := images.AddPostgres(ctx, r)
	if err != nil {
		return nil, err
	}
	if pg {
		added = append(added, backend.KindPostgres)
	}
	if len(added) == 0 {
		return nil, nil
	}
	if err := images.AddHostPrograms(ctx, r, "lab", " (the SQL servers' set-up on the hosts needs it)", labSQLTools); err != nil {
		return nil, err
	}
	return added, nil
}
