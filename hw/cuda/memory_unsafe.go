package cuda

// Every conversion between C memory and Go values is in this file.

import (
	"unsafe"
)

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// cString returns the Go string held in a NUL-padded buffer.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// slicePtr returns the address of b's first byte, or nil for an empty slice.
func slicePtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// hostBytes views n bytes of C memory at p as a slice.
func hostBytes(p unsafe.Pointer, n int) []byte {
	if p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

// managedBytes views n bytes of managed memory through its unified address:
// with unified addressing the CPU reaches managed memory at its device
// address. The conversion goes through a pointer-typed variable so that the
// integer never round-trips through uintptr arithmetic.
func managedBytes(p DevicePtr, n int) []byte {
	if p == 0 || n == 0 {
		return nil
	}
	addr := uintptr(p)
	return unsafe.Slice(*(**byte)(unsafe.Pointer(&addr)), n)
}
