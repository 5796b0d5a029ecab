package probe

import "unsafe"

// slot returns the release and status words of a spin slot in the mapped
// flag page (C memory, page-aligned, so both are 4-byte aligned).
func (d *cudaDevice) slot(i int) (release, status *uint32) {
	b := d.flags.Bytes()[i*8 : i*8+8]
	return (*uint32)(unsafe.Pointer(&b[0])), (*uint32)(unsafe.Pointer(&b[4]))
}
