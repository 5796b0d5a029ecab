package gpu

import (
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// ManagedHandler is the unified-memory driver as the GPU model sees it
// (package uvm implements it; nvidia-uvm.ko is the real one): a kernel's
// access to managed memory is handed to it, because only it knows where
// the pages are and what touching them costs.
//
// GPUAccess is called once for each managed Access of a kernel, when
// the kernel starts, on a process of its own that runs concurrently
// with the kernel's other accesses and compute; the kernel ends only
// after every GPUAccess has returned. The handler makes [addr,
// addr+size) of managed memory accessible to GPU gpu (servicing its
// faults in batches, migrating pages, or mapping them remotely, as its
// policy says) and moves the bytes (its own flows, over the VRAM bus or
// PCIe, wherever the pages are), blocking p for all of it; it returns
// when the access is complete. size is the region the access touches;
// the access's pattern and byte count are not passed (the handler treats
// the region as read or written once).
type ManagedHandler interface {
	GPUAccess(p *sim.Proc, gpu int, addr mem.GPUAddr, size uint64, write bool)
}

// ManagedStridedHandler is a ManagedHandler told a strided access's
// walk: Elem bytes every Stride bytes from addr, inside [addr,
// addr+size). Only the pages the elements touch fault, as on the GPU,
// where an SM raises a fault for the pages its loads and stores name and
// no other. The GPU model calls GPUAccessStrided instead of GPUAccess
// for an access whose Pattern is Strided with a stride over its element
// when the handler implements it.
type ManagedStridedHandler interface {
	ManagedHandler
	GPUAccessStrided(p *sim.Proc, gpu int, addr mem.GPUAddr, size, stride, elem uint64, write bool)
}

// ManagedLaunchHandler is a ManagedHandler that also acts at kernel
// boundaries, as the pre-Pascal and Tegra models must (dirty managed
// pages migrate at launch; CPU access while a kernel runs faults; cache
// maintenance at launch). The GPU model calls BeforeKernel on the
// stream's worker after the launch latency and before the kernel's
// accesses (it may block: the kernel waits), and AfterKernel once the
// kernel's work is done, before its completion is visible to the
// stream. Every kernel on every GPU is reported, whether or not it
// touches managed memory.
type ManagedLaunchHandler interface {
	ManagedHandler
	BeforeKernel(p *sim.Proc, gpu int)
	AfterKernel(p *sim.Proc, gpu int)
}
