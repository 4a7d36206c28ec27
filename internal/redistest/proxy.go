package redistest

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy on a loopback port in front of Redis. It can drop every
// connection at once (a network cut: clients see resets and reconnect), stall (accept
// and hold connections but forward nothing, as a partition that drops packets does, so
// clients hit their timeouts), and cut a connection right after forwarding a request
// that contains given bytes (the reply is lost, the command ran).
type Proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	flowing  chan struct{} // closed while forwarding; open while stalled
	cutAfter []byte        // one-shot: cut the connection after forwarding a request holding this
	cuts     int           // connections cut by cutAfter
	closed   bool
}

// NewProxy starts a proxy to target, closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, flowing: make(chan struct{})}
	close(p.flowing)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's address, for clients.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			in.Close()
			out.Close()
			return
		}
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.pipe(in, out, true)
		go p.pipe(out, in, false)
	}
}

// pipe forwards src to dst until either closes, holding data back while stalled.
func (p *Proxy) pipe(src, dst net.Conn, request bool) {
	defer p.drop(src, dst)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			flowing := p.flowing
			p.mu.Unlock()
			<-flowing // a stalled proxy holds what it read until it resumes (or is closed)
			cut := request && p.cutRequest(buf[:n])
			if cut {
				src.Close() // before Redis can answer: the client never sees the reply
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if cut {
				// Let Redis read the request before the reset reaches it: the command must run.
				time.Sleep(20 * time.Millisecond)
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// CutAfterRequest makes the proxy cut the next connection whose request contains b
// (case-insensitive: go-redis sends command names in lower case), right after forwarding
// that request.
func (p *Proxy) CutAfterRequest(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutAfter = b
}

// CutCount is how many connections CutAfterRequest cut.
func (p *Proxy) CutCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// cutRequest reports whether this request should be the one cut after forwarding.
func (p *Proxy) cutRequest(req []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cutAfter == nil || !bytes.Contains(bytes.ToUpper(req), bytes.ToUpper(p.cutAfter)) {
		return false
	}
	p.cutAfter = nil
	p.cuts++
	return true
}

func (p *Proxy) drop(a, b net.Conn) {
	a.Close()
	b.Close()
	p.mu.Lock()
	delete(p.conns, a)
	delete(p.conns, b)
	p.mu.Unlock()
}

// Cut closes every connection through the proxy; new ones are accepted as before.
func (p *Proxy) Cut() {
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Stall stops forwarding (connections stay open and new ones are accepted) until Resume.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flowing:
		p.flowing = make(chan struct{})
	default:
	}
}

// Resume forwards again, including what was held back while stalled.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flowing:
	default:
		close(p.flowing)
	}
}

// Close stops the proxy and drops its connections (NewProxy registers it with t.Cleanup).
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Resume()
	p.Cut()
}
