package probe

import "unsafe"

// hostAddr is the virtual address of a host buffer's first byte, the
// address a registration cache keys on.
func hostAddr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
