package probe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrVerify is wrapped by every data-verification failure: a measurement
// whose destination does not hold the source's pattern after the copy.
var ErrVerify = errors.New("probe: data verification failed")

// patternPeriod is the length after which the base sequence repeats; each
// period is XORed with its index, so that a copy displaced by whole periods
// is caught too.
const patternPeriod = 2 << 20

// pattern is a deterministic fill: xorshift32 words from a seed (as
// nvbandwidth's xorshift2MBPattern), little-endian, period i XORed with
// i*0x9e3779b9. A byte's value depends only on its offset, so the fill of a
// short buffer is a prefix of the fill of a long one; the longest fill made
// so far is kept and served by prefix.
type pattern struct {
	seed uint32
	base []byte // one period
	buf  []byte // the first len(buf) bytes of the fill
}

func newPattern(seed uint32) *pattern {
	p := &pattern{seed: seed, base: make([]byte, patternPeriod)}
	v := seed
	for i := 0; i < patternPeriod; i += 4 {
		v ^= v << 13
		v ^= v >> 17
		v ^= v << 5
		binary.LittleEndian.PutUint32(p.base[i:], v)
	}
	return p
}

// bytes returns the first n bytes of the fill; do not modify them.
func (p *pattern) bytes(n int64) []byte {
	if int64(len(p.buf)) < n {
		// Grow to whole periods so that every chunk is generated once.
		size := (n + patternPeriod - 1) / patternPeriod * patternPeriod
		buf := make([]byte, size)
		for c := int64(0); c*patternPeriod < size; c++ {
			chunk := buf[c*patternPeriod : (c+1)*patternPeriod]
			copy(chunk, p.base)
			if c > 0 {
				var k [4]byte
				binary.LittleEndian.PutUint32(k[:], uint32(c)*0x9e3779b9)
				for i := range chunk {
					chunk[i] ^= k[i&3]
				}
			}
		}
		p.buf = buf
	}
	return p.buf[:n]
}

// fill writes the pattern over b.
func (p *pattern) fill(b []byte) { copy(b, p.bytes(int64(len(b)))) }

// verify checks that b holds the pattern; the error wraps ErrVerify and
// names the first differing byte.
func (p *pattern) verify(b []byte) error {
	want := p.bytes(int64(len(b)))
	if bytes.Equal(b, want) {
		return nil
	}
	for i := range want {
		if b[i] != want[i] {
			return fmt.Errorf("%w: byte %d of %d is %#02x, want %#02x (pattern %#x)", ErrVerify, i, len(b), b[i], want[i], p.seed)
		}
	}
	return nil
}
