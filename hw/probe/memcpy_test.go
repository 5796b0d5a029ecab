package probe

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/hw/internal/libc"
)

// TestHostMemcpyOperations: on the fake, host_memcpy reports libc memcpy
// (where the C library loads), Go's copy and the ring copy-out, each
// verified with positive samples, in that order.
func TestHostMemcpyOperations(t *testing.T) {
	for _, sizes := range [][]int64{{64 << 10, 1 << 20}, {3<<20 + 5}} {
		f := NewFake(FakeConfig{})
		opts := Options{Sizes: sizes, SmallSizes: []int64{8}, Families: []string{FamilyHostMemcpy}}
		rep, err := run(t, f, opts)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{opGoCopy, opStreamOut}
		if err := libc.Available(); err == nil {
			want = slices.Insert(want, 0, opLibcMemcpy)
		} else {
			t.Logf("no memcpy measurement: %v", err)
		}
		var got []string
		for _, m := range rep.GPUs[0].Find(FamilyHostMemcpy, MemPageable.String(), "h2h") {
			got = append(got, m.Operation)
			if m.SizeBytes != sizes[len(sizes)-1] || !m.Verified || m.Samples < 3 || len(m.Values) != m.Samples || m.Min <= 0 {
				t.Errorf("%s: size %d, verified %v, samples %d, values %v", m.Key(), m.SizeBytes, m.Verified, m.Samples, m.Values)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("sizes %v: operations %v, want %v", sizes, got, want)
		}
		var table bytes.Buffer
		if err := rep.WriteTable(&table); err != nil {
			t.Fatal(err)
		}
		for _, op := range want {
			if !strings.Contains(table.String(), "h2h "+op) {
				t.Errorf("table lacks h2h %s:\n%s", op, table.String())
			}
		}
	}
}

// TestStreamOut: the copy-out alternates the ring's halves over the whole
// destination, a short last piece included, and a wrong piece fails the
// check with ErrVerify.
func TestStreamOut(t *testing.T) {
	ring := newPattern(3).bytes(2 * streamChunk)
	dst := make([]byte, 3*streamChunk+100)
	streamOut(dst, ring)
	for i, want := range [][]byte{ring[:streamChunk], ring[streamChunk:], ring[:streamChunk], ring[streamChunk : streamChunk+100]} {
		if !bytes.Equal(dst[i*streamChunk:min((i+1)*streamChunk, len(dst))], want) {
			t.Errorf("piece %d is not ring half %d", i, i%2)
		}
	}
	if err := verifyStreamOut(dst, ring); err != nil {
		t.Fatal(err)
	}
	dst[len(dst)-1] ^= 1
	if err := verifyStreamOut(dst, ring); !errors.Is(err, ErrVerify) {
		t.Errorf("corrupt last piece: %v", err)
	}
}
