// Package libc binds memcpy from the C library (libc.so.6, or the path in
// DMALAB_LIBC) without cgo, through package dl and purego, so that Go code
// can measure the copy C programs get: glibc's memcpy, which for copies of
// a few MiB uses ordinary (temporal) stores where Go's runtime memmove
// switches to non-temporal ones. The library is opened once per process; a
// missing library or symbol is an error value, never a panic.
//
// Go slices are passed to C directly: Go's garbage collector does not move
// heap objects, and the call keeps its arguments alive.
package libc

import (
	"fmt"
	"unsafe"

	"github.com/dmalab/dmalab/hw/internal/dl"
)

// LibraryName is the C library opened when DMALAB_LIBC is not set.
const LibraryName = "libc.so.6"

type library struct {
	handle uintptr
	memcpy func(dst, src unsafe.Pointer, n uintptr) uintptr
}

func (l *library) symbols() []dl.Symbol {
	return []dl.Symbol{{Fn: &l.memcpy, Names: []string{"memcpy"}}}
}

// loader binds the library once per process.
var loader = dl.Loader[library]{Default: LibraryName, Env: "DMALAB_LIBC", Open: openLibrary}

func openLibrary(path string) (*library, error) {
	h, err := dl.Open(path)
	if err != nil {
		return nil, fmt.Errorf("libc: %v", err)
	}
	l := &library{handle: h}
	if missing := dl.Bind(h, l.symbols()); len(missing) > 0 {
		return nil, fmt.Errorf("libc: %s lacks %v", path, missing)
	}
	return l, nil
}

// Available loads the C library, once per process, and reports why it
// cannot be used, or nil.
func Available() error {
	_, err := loader.Load()
	return err
}

// Memcpy copies min(len(dst), len(src)) bytes from src to dst with the C
// library's memcpy. The slices must not overlap. It fails only when the
// library cannot be loaded.
func Memcpy(dst, src []byte) error {
	l, err := loader.Load()
	if err != nil {
		return err
	}
	l.copy(dst, src)
	return nil
}

func (l *library) copy(dst, src []byte) {
	n := min(len(dst), len(src))
	if n == 0 {
		return
	}
	l.memcpy(unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src)), uintptr(n))
}
