package broker

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/queue"
)

// queue's worker side must implement Broker: Of panics otherwise.
func TestOfImplementsBroker(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	c, err := queue.NewClient(rdb, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if Of(c).Redis() != rdb {
		t.Fatal("Of(c).Redis() is not the client's connection")
	}
}
