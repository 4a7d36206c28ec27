module github.com/jobs-dev/jobs/bench/peers/rttproxy

go 1.22
