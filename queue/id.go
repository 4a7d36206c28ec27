package queue

import (
	"math/rand/v2"
	"time"
)

// crockford is the base32 alphabet of ULIDs: no I, L, O, U, so IDs read aloud unambiguously.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// newID returns a 26-character ID that sorts by creation time (48-bit milliseconds, then
// 80 random bits), in the ULID layout, so `jobs ls` and redis-cli listings read in order.
func newID(now time.Time) string {
	var b [26]byte
	t := uint64(now.UnixMilli())
	for i := 9; i >= 0; i-- {
		b[i] = crockford[t&31]
		t >>= 5
	}
	hi, lo := rand.Uint64(), rand.Uint64()
	for i := 10; i < 26; i++ { // 16 characters x 5 bits = 80 random bits
		b[i] = crockford[lo&31]
		lo = lo>>5 | (hi&31)<<59
		hi >>= 5
	}
	return string(b[:])
}
