package queue

import (
	"math/rand/v2"
	"sync"
	"time"
)

// crockford is the base32 alphabet of ULIDs: no I, L, O, U, so IDs read aloud unambiguously.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// crockfordValue is each byte's value in crockford, -1 for a byte not in it: idTime
// reads every claimed job's ID (26 bytes), once a job.
var crockfordValue = func() (v [256]int8) {
	for i := range v {
		v[i] = -1
	}
	for i := range len(crockford) {
		v[crockford[i]] = int8(i)
	}
	return v
}()

// idGen makes a Client's job IDs: 26 characters that sort by creation time (48-bit
// milliseconds, then 80 random bits), in the ULID layout, so `jobs ls` and redis-cli
// listings read in order. It is monotonic (ULID's monotonic mode): within one
// millisecond, each ID is the previous one's random part plus one instead of fresh random
// bits, so one Client's IDs strictly increase in the order they are made. That order
// matters beyond listings: the scheduled and retry sets break ties of equal due times by
// member, so one Client's jobs due at the same instant are promoted, and run, in the
// order they were enqueued. A clock that steps back keeps the last millisecond until it
// catches up. Safe for concurrent use.
type idGen struct {
	mu     sync.Mutex
	ms     uint64 // the time part of the last ID
	hi, lo uint64 // its random part: hi holds the top 16 of the 80 bits
}

// next returns a new ID made at now.
func (g *idGen) next(now time.Time) string {
	t := uint64(max(now.UnixMilli(), 0))
	g.mu.Lock()
	if t > g.ms {
		g.ms, g.hi, g.lo = t, rand.Uint64()&0xffff, rand.Uint64()
	} else {
		g.lo++
		if g.lo == 0 {
			g.hi = (g.hi + 1) & 0xffff
			if g.hi == 0 { // 2^80 IDs in one millisecond: borrow the next one
				g.ms, g.hi, g.lo = g.ms+1, rand.Uint64()&0xffff, rand.Uint64()
			}
		}
	}
	t, hi, lo := g.ms, g.hi, g.lo
	g.mu.Unlock()
	return encodeID(t, hi, lo)
}

// encodeID writes a ULID: 10 characters of time, then 16 of the 80 random bits, most
// significant first, so IDs compare as strings the way their numbers do.
func encodeID(ms, hi, lo uint64) string {
	var b [26]byte
	for i := 9; i >= 0; i-- {
		b[i] = crockford[ms&31]
		ms >>= 5
	}
	for i := 25; i >= 10; i-- { // 16 characters x 5 bits = 80 bits, the lowest last
		b[i] = crockford[lo&31]
		lo = lo>>5 | (hi&31)<<59
		hi >>= 5
	}
	return string(b[:])
}

// idTime is the time a generated ID was made at (its first 10 characters), or the zero
// time when id is not a ULID: the creation time of a job whose hash has no created_at
// (enqueue.lua leaves it out when the ID's time is within 1 s before Redis's clock).
func idTime(id string) time.Time {
	if len(id) != 26 {
		return time.Time{}
	}
	var ms int64
	for i := range len(id) {
		v := crockfordValue[id[i]]
		if v < 0 {
			return time.Time{}
		}
		if i < 10 {
			ms = ms<<5 | int64(v)
		}
	}
	if ms <= 0 || ms > maxJobMs {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
