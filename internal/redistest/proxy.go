package redistest

import (
	"bytes"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy on a loopback port in front of Redis. It can drop every
// connection at once (a network cut: clients see resets and reconnect), stall (accept
// and hold connections but forward nothing, as a partition that drops packets does, so
// clients hit their timeouts), and act once on the next request that contains given
// bytes: cut the connection right after forwarding it (the command ran, the reply is
// lost), cut it instead of forwarding it (the command never ran), or hold its reply back
// for a while (a slow or hung call).
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	flowing chan struct{} // closed while forwarding; open while stalled
	rules   []*rule       // one-shot actions on the next request that matches
	cuts    int           // connections cut by CutAfterRequest
	closed  bool
}

// rule is a one-shot action on the next request that contains match.
type rule struct {
	match  []byte
	action action
	hold   time.Duration
}

type action uint8

const (
	cutAfter  action = iota // forward, then cut: the command ran, its reply is lost
	cutBefore               // cut instead of forwarding: the command never ran
	holdReply               // forward, and hold the replies on that connection for rule.hold
)

// link is one proxied connection: its request side tells its reply side to hold.
type link struct {
	mu        sync.Mutex
	holdUntil time.Time
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
		ln := &link{}
		go p.pipe(in, out, ln, true)
		go p.pipe(out, in, ln, false)
	}
}

// pipe forwards src to dst until either closes, holding data back while stalled.
func (p *Proxy) pipe(src, dst net.Conn, ln *link, request bool) {
	defer p.drop(src, dst)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			flowing := p.flowing
			p.mu.Unlock()
			<-flowing // a stalled proxy holds what it read until it resumes (or is closed)
			var r *rule
			if request {
				r = p.matchRule(buf[:n])
			} else {
				ln.mu.Lock()
				until := ln.holdUntil
				ln.mu.Unlock()
				time.Sleep(time.Until(until))
			}
			switch {
			case r == nil:
			case r.action == cutBefore:
				return
			case r.action == cutAfter:
				src.Close() // before Redis can answer: the client never sees the reply
			case r.action == holdReply:
				ln.mu.Lock()
				ln.holdUntil = time.Now().Add(r.hold)
				ln.mu.Unlock()
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if r != nil && r.action == cutAfter {
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
func (p *Proxy) CutAfterRequest(b []byte) { p.addRule(&rule{match: b, action: cutAfter}) }

// CutBeforeRequest makes the proxy cut the next connection whose request contains b
// instead of forwarding that request: the call fails and the command never ran.
func (p *Proxy) CutBeforeRequest(b []byte) { p.addRule(&rule{match: b, action: cutBefore}) }

// HoldReply makes the proxy forward the next request that contains b at once and hold
// the replies on its connection for d: the command runs, its caller waits.
func (p *Proxy) HoldReply(b []byte, d time.Duration) {
	p.addRule(&rule{match: b, action: holdReply, hold: d})
}

func (p *Proxy) addRule(r *rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, r)
}

// CutCount is how many connections CutAfterRequest and CutBeforeRequest cut.
func (p *Proxy) CutCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// matchRule takes the first rule whose bytes this request contains.
func (p *Proxy) matchRule(req []byte) *rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, r := range p.rules {
		if bytes.Contains(bytes.ToUpper(req), bytes.ToUpper(r.match)) {
			p.rules = slices.Delete(p.rules, i, i+1)
			if r.action != holdReply {
				p.cuts++
			}
			return r
		}
	}
	return nil
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
