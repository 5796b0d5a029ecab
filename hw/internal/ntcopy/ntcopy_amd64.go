package ntcopy

import "unsafe"

const streaming = true

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// stream copies n bytes, a multiple of 64, to the 16-byte aligned dst
// with MOVNTDQ and fences them (ntcopy_amd64.s).
//
//go:noescape
func stream(dst, src *byte, n uintptr)
