// Package gdr is gdrcopy (github.com/NVIDIA/gdrcopy): GPU memory mapped
// into a process's address space through BAR1 and accessed by the CPU
// with plain loads and stores, instead of a copy engine.
//
// The calls mirror gdrapi.h: Open (gdr_open, which opens /dev/gdrdrv: a
// file in the process's descriptor table), Handle.PinBuffer
// (gdr_pin_buffer: gdrdrv's pin ioctl, which calls nvidia_p2p_get_pages
// through package nvp2p on the range rounded out to 64 KiB GPU pages, so
// BAR1 exhaustion is nvp2p's ENOMEM and a foreign address its EINVAL),
// Handle.Map (gdr_map: the BAR1 pages mmap'ed write-combined, a VMA of
// the process), Handle.CopyToMapping and Handle.CopyFromMapping
// (gdr_copy_to_mapping, gdr_copy_from_mapping), Handle.Unmap,
// Handle.UnpinBuffer and Handle.Close.
//
// Costs. A store through the mapping is posted: write-combining buffers
// gather it into full-line PCIe writes, so the thread pays StoreOverhead
// and then bytes at WCStoreRate, capped by what the fabric gives it on
// the path from its node to the GPU (the GPU's PCIe link is shared with
// every other user), and the bytes land in VRAM one path latency later.
// A load is uncached: BAR1 memory is not prefetchable by the CPU, each
// load is a read request and its completion, a round trip over PCIe
// (twice the path latency); the CPU keeps LoadsInFlight loads of
// LoadBytes outstanding, so a large read runs at LoadBytes ×
// LoadsInFlight / round trip and a small one costs one round trip. That
// is why gdrcopy wins for small host-to-device writes against a
// cuMemcpy (a 6-7 µs call) and loses badly for large reads.
//
// Memory effect. Stores become new versions of the VRAM behind the BAR1
// pages (and their bytes, in payload mode); loads return VRAM's bytes.
//
// Invalidation. gdrdrv registers a free callback with each pin: when the
// application frees the memory (or exits), the driver zaps the CPU
// mapping and frees the page table; later accesses through the mapping
// fail with ErrInvalidated (the hardware's SIGBUS) and UnpinBuffer
// succeeds as gdrdrv's does for a revoked pin.
//
// Every call emits an Event through Driver.Hooks.
package gdr
