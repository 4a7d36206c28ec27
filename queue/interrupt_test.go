package queue

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// A lone Enqueue runs on the caller's goroutine (see interrupt.go); when its ctx is
// cancelled while Redis's reply is held back, it returns at once saying the job may have
// been written, and the Client goes on working: the cut connection is not reused.
func TestLoneEnqueueReturnsWhenCancelled(t *testing.T) {
	c, p := proxied(t)
	if c.enqueues.Interrupt == nil {
		t.Fatal("a Client over a Redis client not yet connected has no interrupter; want one")
	}
	p.HoldReply([]byte("held-type"), 3*time.Second)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	id, err := c.Enqueue(cctx, "held-type", nil)
	if took := time.Since(start); took > time.Second {
		t.Errorf("Enqueue() cancelled after 100ms returned after %v", took)
	}
	if !errors.Is(err, ErrUncertain) || !errors.Is(err, context.Canceled) || id == "" {
		t.Fatalf("Enqueue() cancelled in flight = %q, %v; want its ID, ErrUncertain and context.Canceled", id, err)
	}
	// The command ran (only its reply was held).
	if _, err := c.Get(ctx, "default", id); err != nil {
		t.Errorf("Get() of the job sent before the cancel: %v", err)
	}
	for i := range 20 {
		lctx, lcancel := context.WithCancel(ctx)
		if _, err := c.Enqueue(lctx, "after", nil); err != nil {
			t.Fatalf("Enqueue() %d after a cut: %v", i, err)
		}
		lcancel()
	}
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after a cut: %v", err)
	}
}

// A Redis client that has connected already may hold connections the hook never wrapped:
// no interrupter then, and a cancellable Enqueue waits on the flusher goroutine.
func TestNoInterrupterOverConnectedClient(t *testing.T) {
	c := setup(t, Config{})
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	c2, err := NewClient(c.rdb, c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c2.enqueues.Interrupt != nil {
		t.Error("a Client over a connected Redis client has an interrupter; want none")
	}
}

// echoConn returns a connection wrapped by in's dial hook to a loopback server that
// echoes what it reads, and the server's side.
func echoConn(t *testing.T, in *interrupter) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		s, err := ln.Accept()
		if err == nil {
			accepted <- s
		}
	}()
	var d net.Dialer
	conn, err := in.DialHook(d.DialContext)(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	t.Cleanup(func() { conn.Close(); srv.Close() })
	return conn, srv
}

// readWithin reads from conn as go-redis does (a read deadline first) and returns the
// error, failing the test if the read takes longer than d.
func readWithin(t *testing.T, conn net.Conn, d time.Duration) error {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	start := time.Now()
	_, err := conn.Read(make([]byte, 64))
	if took := time.Since(start); took > d {
		t.Errorf("Read() returned after %v, want within %v", took, d)
	}
	return err
}

// waitCut waits until a's ctx end has been handled (the AfterFunc ran).
func waitCut(t *testing.T, in *interrupter, a *armedCall) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		in.mu.Lock()
		ended := a.ended
		in.mu.Unlock()
		if ended {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the cut never ran")
		}
	}
}

func TestCutConn(t *testing.T) {
	t.Parallel()
	t.Run("in flight", func(t *testing.T) {
		in := &interrupter{}
		conn, _ := echoConn(t, in) // the server never answers
		cctx, cancel := context.WithCancel(ctx)
		release, ok := in.arm(cctx, "JOB1")
		if !ok {
			t.Fatal("arm() = false with nothing armed")
		}
		defer release()
		if _, ok := in.arm(ctx, "JOB2"); ok {
			t.Error("arm() of a second call = true; want false while one is armed")
		}
		// A long command in two pieces: the second has no marker but is still the call's.
		conn.Write([]byte("evalsha ... JOB1 ..."))
		conn.Write([]byte("the rest of the payload"))
		time.AfterFunc(50*time.Millisecond, cancel)
		if err := readWithin(t, conn, time.Second); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Read() of a cut call = %v; want a timeout", err)
		}
	})
	t.Run("ended before written", func(t *testing.T) {
		in := &interrupter{}
		conn, _ := echoConn(t, in)
		cctx, cancel := context.WithCancel(ctx)
		release, _ := in.arm(cctx, "JOB1")
		defer release()
		cancel()
		waitCut(t, in, in.armed.Load())
		if n, err := conn.Write([]byte("evalsha JOB1")); n != 0 || err == nil {
			t.Errorf("Write() of a call whose ctx ended = %d, %v; want 0 and an error", n, err)
		}
	})
	t.Run("cut after the reply", func(t *testing.T) {
		// The ctx ends as the reply is read: the connection goes back to the pool cut,
		// and the next command on it, another's, must not be.
		in := &interrupter{}
		conn, srv := echoConn(t, in)
		go func() {
			buf := make([]byte, 64)
			for {
				n, err := srv.Read(buf)
				if err != nil {
					return
				}
				srv.Write(buf[:n])
			}
		}()
		cctx, cancel := context.WithCancel(ctx)
		release, _ := in.arm(cctx, "JOB1")
		conn.Write([]byte("JOB1"))
		if err := readWithin(t, conn, time.Second); err != nil {
			t.Fatalf("Read() of the reply: %v", err)
		}
		a := in.armed.Load()
		cancel()
		waitCut(t, in, a)
		conn.Write([]byte("ping")) // another command, before the caller's release
		if err := readWithin(t, conn, time.Second); err != nil {
			t.Errorf("Read() of another command after a late cut: %v", err)
		}
		release()
		conn.Write([]byte("ping"))
		if err := readWithin(t, conn, time.Second); err != nil {
			t.Errorf("Read() after release: %v", err)
		}
	})
	t.Run("released cut", func(t *testing.T) {
		// Cut just before release: release takes the past deadline back.
		in := &interrupter{}
		conn, srv := echoConn(t, in)
		cctx, cancel := context.WithCancel(ctx)
		release, _ := in.arm(cctx, "JOB1")
		conn.Write([]byte("JOB1"))
		a := in.armed.Load()
		cancel()
		waitCut(t, in, a)
		release()
		srv.Write([]byte("+OK\r\n"))
		// go-redis may read without setting a deadline (ReadTimeout -1).
		if _, err := conn.Read(make([]byte, 8)); err != nil {
			t.Errorf("Read() after release of a cut call: %v", err)
		}
	})
}
