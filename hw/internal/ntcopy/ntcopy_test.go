package ntcopy

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestCopy: every length and alignment around the 16-byte alignment and
// the 64-byte blocks copies exactly, touching nothing past the end.
func TestCopy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 4096+64)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	for _, n := range []int{0, 1, 15, 16, 63, 64, 65, 127, 128, 200, 1000, 4096} {
		for off := range 17 {
			dst := make([]byte, n+off+32)
			for i := range dst {
				dst[i] = 0xee
			}
			if got := Copy(dst[off:off+n], src[3:]); got != n {
				t.Fatalf("n %d off %d: copied %d", n, off, got)
			}
			if !bytes.Equal(dst[off:off+n], src[3:3+n]) {
				t.Fatalf("n %d off %d: bytes differ", n, off)
			}
			for i, b := range append(dst[:off:off], dst[off+n:]...) {
				if b != 0xee {
					t.Fatalf("n %d off %d: byte %d outside the destination changed", n, off, i)
				}
			}
		}
	}
	if Copy(make([]byte, 10), make([]byte, 4)) != 4 {
		t.Error("Copy does not stop at the shorter slice")
	}
}

// BenchmarkStreamOut is the copy-out of a 2 MiB ring into 256 MiB, 1 MiB
// at a time, streaming and with Go's copy.
func BenchmarkStreamOut(b *testing.B) {
	ring, dst := make([]byte, 2<<20), make([]byte, 256<<20)
	for _, c := range []struct {
		name string
		fn   func(d, s []byte) int
	}{{"ntcopy", Copy}, {"copy", func(d, s []byte) int { return copy(d, s) }}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(dst)))
			for b.Loop() {
				for i, off := 0, 0; off < len(dst); i, off = i+1, off+1<<20 {
					c.fn(dst[off:off+1<<20], ring[i%2<<20:])
				}
			}
		})
	}
}
