package libc

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"
)

// TestMemcpy: the C library's memcpy copies min(len) bytes, for empty,
// small, odd and multi-MiB sizes at unaligned offsets, and leaves the
// bytes after them alone.
func TestMemcpy(t *testing.T) {
	if err := Available(); err != nil {
		if runtime.GOOS == "linux" {
			t.Fatalf("no C library on Linux: %v", err)
		}
		t.Skipf("no C library: %v", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 7, 63, 4096, 65537, 3<<20 + 5} {
		for _, off := range [][2]int{{0, 0}, {1, 3}, {13, 0}} {
			src := make([]byte, size+off[0])
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			dst := make([]byte, size+off[1]+16)
			for i := range dst {
				dst[i] = 0xa5
			}
			s, d := src[off[0]:], dst[off[1]:off[1]+size]
			if err := Memcpy(d, s); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(d, s) {
				t.Fatalf("size %d offsets %v: copy differs", size, off)
			}
			for i, b := range append(dst[:off[1]:off[1]], dst[off[1]+size:]...) {
				if b != 0xa5 {
					t.Fatalf("size %d offsets %v: byte %d outside the copy written", size, off, i)
				}
			}
		}
	}
	// min(len): a shorter destination takes a prefix, a shorter source
	// fills a prefix.
	src, dst := []byte("abcdef"), make([]byte, 3)
	if err := Memcpy(dst, src); err != nil || string(dst) != "abc" {
		t.Errorf("short destination: %q, %v", dst, err)
	}
	dst = []byte("xxxxxx")
	if err := Memcpy(dst, src[:2]); err != nil || string(dst) != "abxxxx" {
		t.Errorf("short source: %q, %v", dst, err)
	}
	if err := Memcpy(nil, src); err != nil {
		t.Errorf("nil destination: %v", err)
	}
}

// TestMissingLibrary: a library that is not there is an error, not a panic.
// The process-wide loader opens once, so the open function is called
// directly, as the loader would with DMALAB_LIBC set to this path.
func TestMissingLibrary(t *testing.T) {
	l, err := openLibrary(filepath.Join(t.TempDir(), "libc-missing.so.6"))
	if err == nil || l != nil {
		t.Fatalf("open of a missing library = %v, %v", l, err)
	}
}
