module github.com/jobs-dev/jobs/bench/peers/harness

go 1.26.0
