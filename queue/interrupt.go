package queue

import (
	"bytes"
	"cmp"
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// A lone Enqueue runs its script call on the caller's goroutine when it can: handing it to
// the coalescer's flusher goroutine and waiting for the answer there cost a one-goroutine
// enqueue loop about a third of its time on 2 CPUs (the Go scheduler wakes a second thread
// for each hand-off, and it spins on the CPU Redis needs). go-redis honours a context's
// deadline only with ContextTimeoutEnabled, and its cancellation never: a call blocked
// reading the reply returns when the reply comes. So Enqueue may block on the caller's
// goroutine only when it can cut that read short itself: the interrupter wraps every
// connection of the Redis client (a go-redis dial hook), recognizes the one that carries
// the armed call by the call's job ID in the bytes written, and, when the call's ctx ends
// first, gives that connection's read a past deadline. go-redis then sees an i/o timeout,
// drops the connection (a timed-out connection is never reused) and returns; a retry it
// would make first waits on the same ctx and returns its error at once.
//
// Only a connection this hook dialed can be cut, so the interrupter exists only over a
// *redis.Client that had not connected yet when the Client was made (the common
// construction: NewClient right after redis.NewClient) and that opens no connections on
// its own (MinIdleConns 0). Over any other client, a cancellable Enqueue takes the
// flusher goroutine as before.

// interrupter is the hook's shared state: the call armed now (at most one: the coalescer
// runs at most one call inline at a time) and the lock over every wrapped connection's
// state.
type interrupter struct {
	armed   atomic.Pointer[armedCall]
	bufSize int // the size of go-redis's write buffer: what its first write of a command holds
	// mu guards armedCall's and cutConn's fields below: contended only while a call is
	// armed, and then only by writes to the Redis client's connections.
	mu sync.Mutex
}

// armedCall is one inline call that may have to be cut.
type armedCall struct {
	marker []byte   // its job ID, in the command it writes
	conn   *cutConn // the connection that wrote it last (go-redis may resend it on another)
	ended  bool     // its ctx ended: cut its read, or fail its write
}

// newInterrupter installs the hook on rdb and returns its state, or nil when rdb is not a
// client whose every connection the hook will have dialed (see above).
func newInterrupter(rdb redis.UniversalClient) *interrupter {
	cl, ok := rdb.(*redis.Client)
	if !ok || cl.Options().MinIdleConns > 0 || !neverConnected(cl) {
		return nil
	}
	in := &interrupter{bufSize: cmp.Or(cl.Options().WriteBufferSize, proto32KiB)}
	if in.bufSize < 0 {
		in.bufSize = 4096 // bufio's size for a size that is not positive
	}
	cl.AddHook(in)
	// A connection dialed between the check and the hook would escape it.
	if !neverConnected(cl) {
		return nil
	}
	return in
}

// neverConnected reports whether cl's pools have never handed out a connection.
func neverConnected(cl *redis.Client) bool {
	s := cl.PoolStats()
	return s.TotalConns == 0 && s.Hits == 0 && s.Misses == 0 && s.PendingRequests == 0 &&
		s.PubSubStats.Created == 0 && (s.PipelineStats == nil || s.PipelineStats.TotalConns == 0 && s.PipelineStats.Misses == 0)
}

// arm arms the call that writes id on ctx: until release is called, ctx's end cuts it. It
// reports false, arming nothing, when another call is armed.
func (in *interrupter) arm(ctx context.Context, id string) (release func(), ok bool) {
	a := &armedCall{marker: []byte(id)}
	if !in.armed.CompareAndSwap(nil, a) {
		return nil, false
	}
	stop := context.AfterFunc(ctx, func() { in.cut(a) })
	return func() {
		stop()
		in.mu.Lock()
		in.armed.CompareAndSwap(a, nil)
		if cn := a.conn; cn != nil && cn.owner == a {
			// Cut as the reply came in, the connection went back to the pool with a past
			// deadline, which its next command must not meet.
			cn.disown()
		}
		in.mu.Unlock()
	}, true
}

// cut ends armed call a: its connection's read gets a past deadline, or, not written yet,
// its write will fail.
func (in *interrupter) cut(a *armedCall) {
	in.mu.Lock()
	defer in.mu.Unlock()
	a.ended = true
	if cn := a.conn; cn != nil && cn.owner == a {
		cn.cut = true
		_ = cn.Conn.SetReadDeadline(past)
	}
}

// proto32KiB is go-redis's write buffer size when Options.WriteBufferSize is 0.
const proto32KiB = 32 << 10

// past is a read deadline that has passed.
var past = time.Unix(1, 0)

// cutConn is a connection of the Redis client, as the hook wraps it.
type cutConn struct {
	net.Conn
	in *interrupter
	// owner is the armed call whose command this connection carries (from its write until
	// the next command's); cut: owner's ctx ended, so every read deadline set is past.
	// Both guarded by in.mu; flagged mirrors owner != nil for a lock-free fast path.
	owner *armedCall
	cut   bool
	// read: owner's reply is being read, so the next write is another command's, not
	// the rest of owner's (a long command is written in several pieces).
	read    bool
	flagged atomic.Bool
}

// sysCutConn is a cutConn over a connection with a file descriptor, which go-redis's
// health check of idle connections reads (syscall.Conn); a wrapper without the method
// would turn the check off.
type sysCutConn struct{ *cutConn }

func (c sysCutConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}

// NetConn returns the wrapped connection, as crypto/tls.Conn does, for go-redis's
// look-through to a descriptor.
func (c *cutConn) NetConn() net.Conn { return c.Conn }

func (c *cutConn) Write(b []byte) (int, error) {
	a := c.in.armed.Load()
	if a == nil && !c.flagged.Load() {
		return c.Conn.Write(b)
	}
	c.in.mu.Lock()
	if a != nil && bytes.Contains(b, a.marker) {
		if a.ended {
			c.in.mu.Unlock()
			return 0, os.ErrDeadlineExceeded // not written: nothing was sent
		}
		if old := a.conn; old != nil && old != c && old.owner == a { // resent elsewhere
			old.disown()
		}
		a.conn, c.owner, c.read = c, a, false
		c.flagged.Store(true)
	} else if c.owner != nil && c.read {
		c.disown() // another command: whatever was armed here is over
	}
	c.in.mu.Unlock()
	return c.Conn.Write(b)
}

// disown ends c's part in an armed call. Called with in.mu held.
func (c *cutConn) disown() {
	c.owner = nil
	c.flagged.Store(false)
	if c.cut {
		c.cut = false
		_ = c.Conn.SetReadDeadline(time.Time{})
	}
}

func (c *cutConn) Read(b []byte) (int, error) {
	if c.flagged.Load() {
		c.in.mu.Lock()
		c.read = c.owner != nil
		c.in.mu.Unlock()
	}
	return c.Conn.Read(b)
}

func (c *cutConn) SetReadDeadline(t time.Time) error {
	if !c.flagged.Load() {
		return c.Conn.SetReadDeadline(t)
	}
	c.in.mu.Lock()
	defer c.in.mu.Unlock()
	if c.cut {
		t = past
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *cutConn) SetDeadline(t time.Time) error {
	if !c.flagged.Load() {
		return c.Conn.SetDeadline(t)
	}
	c.in.mu.Lock()
	defer c.in.mu.Unlock()
	if err := c.Conn.SetDeadline(t); err != nil || !c.cut {
		return err
	}
	return c.Conn.SetReadDeadline(past)
}

// DialHook wraps each new connection.
func (in *interrupter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			return conn, err
		}
		c := &cutConn{Conn: conn, in: in}
		if _, ok := conn.(syscall.Conn); ok {
			return sysCutConn{c}, nil
		}
		return c, nil
	}
}

func (in *interrupter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (in *interrupter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
