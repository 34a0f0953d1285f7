#!/bin/sh
# run.sh: the launcher of the Curator adapter (CuratorLock.java). It compiles
# the adapter's .java files with Debian's javac against Debian's jars in
# /usr/share/java on first use, into a cache folder named after a checksum
# of the sources and of the jars they were compiled against, then runs it
# with java. Two clients that start at once each compile into a temporary
# folder and rename it into place; the second rename fails harmlessly and
# that client uses the first's classes. A missing javac, java or jar stops
# it with one line on stderr that says what to install, and exit status 2.
#
# The cache is $LOCKTEST_CACHE/curator, else $XDG_CACHE_HOME/locktest/curator,
# else ~/.cache/locktest/curator.
#
# run.sh --build only compiles (when the cache has no classes of these
# sources yet), removes the classes of older sources or jars, and exits:
# make setup runs it.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
jars=/usr/share/java

fail() {
	echo "curator/run.sh: $*" >&2
	exit 2
}

# The jars the adapter compiles and runs against, each with the Debian
# package that installs it. The ZooKeeper client talks over NIO, so it needs
# no netty; jackson (which ZooKeeper and Curator depend on in Debian) reads
# and writes the protocol's JSON; slf4j-simple prints Curator's and
# ZooKeeper's warnings on stderr, which is the worker's log.
cp=
for need in curator-recipes:libcurator-recipes-java curator-framework:libcurator-framework-java \
	curator-client:libcurator-client-java zookeeper:libzookeeper-java zookeeper-jute:libzookeeper-java \
	guava:libguava-java slf4j-api:libslf4j-java slf4j-simple:libslf4j-java \
	jackson-databind:libjackson2-databind-java jackson-core:libjackson2-core-java jackson-annotations:libjackson2-annotations-java; do
	jar=$jars/${need%%:*}.jar
	pkg=${need#*:}
	[ -f "$jar" ] || fail "$jar is missing: install $pkg (apt-get install $pkg, or make setup)"
	cp=$cp${cp:+:}$jar
done
command -v java >/dev/null 2>&1 || fail "java is missing: install openjdk-17-jdk-headless (apt-get install openjdk-17-jdk-headless, or make setup)"

if [ -n "${LOCKTEST_CACHE:-}" ]; then
	cache=$LOCKTEST_CACHE/curator
elif [ -n "${XDG_CACHE_HOME:-}" ]; then
	cache=$XDG_CACHE_HOME/locktest/curator
elif [ -n "${HOME:-}" ]; then
	cache=$HOME/.cache/locktest/curator
else
	cache=${TMPDIR:-/tmp}/locktest-curator-$(id -u)
fi

# The classes of these sources, compiled against these jars (their sizes and
# times change when Debian upgrades them).
# shellcheck disable=SC2046
sum=$({
	cat "$here"/*.java
	stat -L -c '%n %s %Y' $(echo "$cp" | tr : ' ')
} | sha256sum | cut -c1-16)
classes=$cache/classes-$sum

if [ ! -f "$classes/CuratorLock.class" ]; then
	command -v javac >/dev/null 2>&1 ||
		fail "javac is missing, and the adapter is not compiled yet: install openjdk-17-jdk-headless (apt-get install openjdk-17-jdk-headless, or make setup)"
	mkdir -p "$cache" || fail "cannot make the cache folder $cache"
	tmp=$(mktemp -d "$cache/.build.XXXXXX") || fail "cannot make a folder in $cache"
	chmod 755 "$tmp"
	if ! javac -nowarn -encoding UTF-8 --release 17 -cp "$cp" -d "$tmp" "$here"/*.java >"$tmp.log" 2>&1; then
		cat "$tmp.log" >&2
		rm -rf "$tmp" "$tmp.log"
		fail "javac could not compile $here/*.java (its errors are above)"
	fi
	rm -f "$tmp.log"
	# An atomic rename: it fails when another client put the classes there
	# first, and then those are used.
	mv -T "$tmp" "$classes" 2>/dev/null || rm -rf "$tmp"
	[ -f "$classes/CuratorLock.class" ] || fail "no classes in $classes after compiling"
fi

if [ "${1:-}" = --build ]; then
	# Classes of older sources or jars are of no use any more; at setup
	# no client runs them.
	for old in "$cache"/classes-*; do
		[ "$old" = "$classes" ] || [ ! -d "$old" ] || rm -rf "$old"
	done
	echo "curator/run.sh: the adapter's classes are in $classes"
	exit 0
fi

# A small JVM that starts fast: serial GC, the C1 compiler only, no
# perf-data file in /tmp. locktest.adapter names this folder on the command
# line, where a test can see that a client program is still running.
exec java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData -Xss512k -Xmx128m \
	-Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dorg.slf4j.simpleLogger.showDateTime=true \
	-Dorg.slf4j.simpleLogger.dateTimeFormat="yyyy-MM-dd'T'HH:mm:ss.SSSXXX" \
	-Dlocktest.adapter="$here/CuratorLock.java" \
	-cp "$classes:$cp" CuratorLock "$@"
