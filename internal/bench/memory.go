package bench

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/broker"
)

// memory measures Redis's used_memory growth per pending job: N jobs enqueued in batches
// (timed like enqueue-batch) and left pending while memory is read.
func (b *bench) memory(ctx context.Context) (Record, error) {
	if err := b.warmUp(ctx); err != nil {
		return Record{}, err
	}
	rdb := broker.Of(b.client).Redis()
	before, err := usedMemory(ctx, rdb)
	if err != nil {
		return Record{}, err
	}
	var done atomic.Int64
	b.prog.phase("enqueue", int64(b.o.N), done.Load)
	start := time.Now()
	took, err := b.enqueueBatches(ctx, b.o.N, b.o.Concurrency, &done, nil)
	elapsed := time.Since(start)
	if err != nil {
		return Record{}, err
	}
	after, err := usedMemory(ctx, rdb)
	if err != nil {
		return Record{}, err
	}
	rec := summary(b.o.N, elapsed, took)
	rec.BytesPerJob = math.Round(float64(after-before)/float64(b.o.N)*10) / 10
	return rec, nil
}

// usedMemory returns INFO memory's used_memory, summed over the masters of a cluster.
func usedMemory(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var sum int64
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			n, err := usedMemory(ctx, c)
			mu.Lock()
			sum += n
			mu.Unlock()
			return err
		})
		return sum, err
	}
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("bench: INFO memory: %w", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("bench: INFO memory has no used_memory field")
}
