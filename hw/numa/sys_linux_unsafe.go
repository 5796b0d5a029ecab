//go:build linux

package numa

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mbind binds b to node with MPOL_BIND: mbind(addr, len, MPOL_BIND,
// nodemask, maxnode, 0). maxnode is one more than the mask's bits, as
// libnuma passes it (get_nodes in mm/mempolicy.c counts maxnode-1 bits).
func mbind(b []byte, node int) error {
	if node < 0 {
		return fmt.Errorf("mbind node %d: %w", node, unix.EINVAL)
	}
	mask := make([]uint64, node/64+1)
	mask[node/64] |= 1 << (node % 64)
	_, _, e := unix.Syscall6(unix.SYS_MBIND, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)),
		mpolBind, uintptr(unsafe.Pointer(&mask[0])), uintptr(len(mask)*64+1), 0)
	if e != 0 {
		return fmt.Errorf("mbind MPOL_BIND node %d: %w", node, e)
	}
	return nil
}

// movePages asks where the pages at offsets of b are: move_pages(0, n,
// pages, NULL, status, 0) moves nothing and writes each page's node, or
// a negative errno (-ENOENT: not present), into status.
func movePages(b []byte, offsets []int) ([]int32, error) {
	if len(offsets) == 0 {
		return nil, nil
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	pages := make([]uintptr, len(offsets))
	for i, off := range offsets {
		if off < 0 || off >= len(b) {
			return nil, fmt.Errorf("move_pages: offset %d outside %d bytes", off, len(b))
		}
		pages[i] = base + uintptr(off)
	}
	status := make([]int32, len(offsets))
	_, _, e := unix.Syscall6(unix.SYS_MOVE_PAGES, 0, uintptr(len(pages)),
		uintptr(unsafe.Pointer(&pages[0])), 0, uintptr(unsafe.Pointer(&status[0])), 0)
	if e != 0 {
		return nil, fmt.Errorf("move_pages query of %d pages: %w", len(pages), e)
	}
	return status, nil
}
