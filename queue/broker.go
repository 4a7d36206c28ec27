package queue

import (
	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/proto"
)

// broker is a Client's worker side: the transitions of claimed jobs (lifecycle.go), the
// waits on wake lists (wait.go) and the cancel notices (cancelwatch.go). Its methods are
// exported so that package internal/broker can name them in an interface, but the type
// is not: applications see Enqueue and the admin calls, and the protocol may change
// between releases. Package worker, cron and the CLI reach it through internal/broker.
type broker struct{ *Client }

func init() {
	proto.SetBrokerOf(func(client any) any { return broker{client.(*Client)} })
}

// broker returns c's worker side.
func (c *Client) broker() broker { return broker{c} }

// Redis returns the client's Redis connection.
func (c broker) Redis() redis.UniversalClient { return c.rdb }
