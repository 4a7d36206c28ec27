package queue

import (
	"testing"

	"github.com/jobs-dev/jobs/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func setup(t *testing.T, cfg Config) *Client {
	t.Helper()
	t.Parallel()
	rdb := redistest.Client(t)
	cfg.Prefix = redistest.Prefix(t)
	c, err := NewClient(rdb, cfg)
	if err != nil {
		t.Fatalf("NewClient() err = %v", err)
	}
	return c
}
