module github.com/locktest/locktest

go 1.26
