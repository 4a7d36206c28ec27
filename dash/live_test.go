package dash

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// liveClient reads /live's events.
type liveClient struct {
	resp *http.Response
	sc   *bufio.Scanner
}

func openLive(t *testing.T, b *bundle) *liveClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/live", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /live = %d %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &liveClient{resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// next returns the next stats snapshot.
func (l *liveClient) next(t *testing.T) liveData {
	t.Helper()
	for {
		event, v := l.nextEvent(t)
		if event != "stats" {
			continue
		}
		var d liveData
		if err := json.Unmarshal([]byte(v), &d); err != nil {
			t.Fatalf("live data %q: %v", v, err)
		}
		return d
	}
}

// TestLiveSharedSnapshots: three tabs on /live get the same snapshots, read once per
// tick for all of them, see an enqueue, and outlive the request timeout; once they
// close, the reads stop.
func TestLiveSharedSnapshots(t *testing.T) {
	b := setup(t, Options{LiveEvery: 50 * time.Millisecond, Timeout: 300 * time.Millisecond})
	b.enqueue(t, "t", "x")
	tabs := []*liveClient{openLive(t, b), openLive(t, b), openLive(t, b)}
	for _, tab := range tabs {
		if d := tab.next(t); len(d.Queues) != 1 || d.Queues[0].Ready != 1 {
			t.Fatalf("first snapshot = %+v, want default with 1 ready", d.Queues)
		}
	}
	start := time.Now()
	b.enqueue(t, "t", "x")
	for _, tab := range tabs {
		for deadline := time.Now().Add(5 * time.Second); ; {
			if d := tab.next(t); d.Queues[0].Ready == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no snapshot with 2 ready within 5s")
			}
		}
	}
	// Past the request timeout (300ms), the streams still flow.
	time.Sleep(400 * time.Millisecond)
	for _, tab := range tabs {
		tab.next(t)
	}
	elapsed := time.Since(start)
	b.h.hub.mu.Lock()
	reads := b.h.hub.reads
	b.h.hub.mu.Unlock()
	if ticks := int(elapsed/(50*time.Millisecond)) + 3; reads > ticks {
		t.Errorf("%d snapshot reads in %s for 3 tabs, want at most %d (one per tick, shared)", reads, elapsed, ticks)
	}
	for _, tab := range tabs {
		tab.resp.Body.Close()
	}
	waitUntil(t, 5*time.Second, "the live reads stop once every tab closed", func() bool {
		b.h.hub.mu.Lock()
		defer b.h.hub.mu.Unlock()
		return !b.h.hub.on
	})
}

func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, what)
		}
	}
}

// nextEvent returns the next event of any name, with its data.
func (l *liveClient) nextEvent(t *testing.T) (string, string) {
	t.Helper()
	event := ""
	for l.sc.Scan() {
		line := l.sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			return event, v
		}
	}
	t.Fatalf("live stream ended: %v", l.sc.Err())
	return "", ""
}

// TestLiveSaysWhenRedisIsDown: while Redis cannot be read the stream says so ("down",
// with the error), so an open overview does not go on showing its last counts as live;
// once Redis is back, snapshots flow again. Before, the stream just went quiet.
func TestLiveSaysWhenRedisIsDown(t *testing.T) {
	b, srv := setupOwnRedis(t, Options{LiveEvery: 50 * time.Millisecond, Timeout: 300 * time.Millisecond})
	tab := openLive(t, b)
	if ev, _ := tab.nextEvent(t); ev != "stats" {
		t.Fatalf("first event %q, want stats", ev)
	}
	srv.Kill()
	var down liveDown
	for deadline := time.Now().Add(5 * time.Second); ; {
		ev, data := tab.nextEvent(t)
		if ev == "down" {
			if err := json.Unmarshal([]byte(data), &down); err != nil || down.Error == "" || down.At.IsZero() {
				t.Fatalf("down event %s (%v), want its error and time", data, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no down event within 5s of Redis going away")
		}
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if ev, _ := tab.nextEvent(t); ev == "stats" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no stats event within 10s of Redis coming back")
		}
	}
}
