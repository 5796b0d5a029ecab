//go:build !amd64

package ntcopy

const streaming = false

func addr([]byte) uintptr { return 0 }

func stream(dst, src *byte, n uintptr) { panic("ntcopy: no streaming stores on this architecture") }
