// Package guards holds the tests that guard the whole module and its
// docs, rather than one package: the layers of the imports and the
// drawing of them in docs/architecture.md, the docs against the command's
// flags, help and registries, the files the docs cite, the CI recipes of
// docs/ci.md, and docs/testing.md against the Makefile. It holds no
// product code. The tests reach the command only as a user does, through
// its binary, built once for them (`locktest flags` prints its flags).
package guards
