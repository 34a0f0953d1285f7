module github.com/locktest/locktest

go 1.26.0

require (
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/redis/go-redis/v9 v9.23.0
)

// A replace of a module pinned by --lib gives way to the pin.
replace github.com/redis/go-redis/v9 => github.com/redis/go-redis/v9 v9.20.0

// A replace by a relative folder is relative to locktest's tree.
replace example.com/local => ./third_party/local

replace github.com/Azure/go-ansiterm => github.com/Azure/go-ansiterm v0.0.0-20250102033503-faa5f7b0171c
