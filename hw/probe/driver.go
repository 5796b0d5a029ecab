package probe

import (
	"fmt"
	"time"

	"github.com/dmalab/dmalab/hw/cuda"
	"github.com/dmalab/dmalab/hw/topo"
	"github.com/dmalab/dmalab/xfer"
)

// Driver is what the probe needs from a GPU driver: the machine's identity
// and, per GPU, a Device to measure with. OpenCUDA returns the real one
// (CUDA driver API and NVML); NewFake a deterministic one for tests.
type Driver interface {
	// Machine describes the host and the driver.
	Machine() (Machine, error)
	// DeviceCount returns the number of GPUs.
	DeviceCount() (int, error)
	// WithDevice opens GPU ordinal, runs fn with it and closes it. fn runs
	// on the thread that owns the GPU's context: it must not hand the
	// Device to other goroutines.
	WithDevice(ordinal int, fn func(Device) error) error
}

// Device is the subset of the CUDA driver API that the measurements use, for
// one GPU with its context current. Buffers, streams and events belong to the
// Device that made them.
type Device interface {
	// Info describes the GPU (read once when it was opened).
	Info() DeviceInfo
	// Now is the host's monotonic clock, for paths that are synchronous by
	// nature; the fake's advances only with simulated work.
	Now() time.Duration
	// MemInfo returns free and total device memory.
	MemInfo() (free, total int64, err error)

	// Alloc allocates size bytes of a kind of memory. Host-visible kinds
	// have Buffer.Host; device-addressable kinds have a device address.
	Alloc(kind MemKind, size int64) (*Buffer, error)
	// Peers lists the other GPUs that this one and that one can each map
	// (cuDeviceCanAccessPeer both ways).
	Peers() ([]int, error)
	// AllocPeer allocates device memory on GPU ordinal, one of Peers, and
	// enables peer access both ways. The buffer (kind MemPeer) works with
	// Free, Upload, Download, CopyAsync and CopyKernel like local device
	// memory; copies between it and this GPU's memory use
	// cuMemcpyPeerAsync.
	AllocPeer(ordinal int, size int64) (*Buffer, error)
	// Free releases a buffer.
	Free(b *Buffer) error
	// Pin page-locks a pageable buffer (cuMemHostRegister); Unpin undoes it.
	Pin(b *Buffer) error
	Unpin(b *Buffer) error
	// PinRange page-locks size bytes of a pageable buffer from offset off
	// (cuMemHostRegister of a part of it; off and size page-aligned), for
	// a registration cache's pins; UnpinRange undoes it.
	PinRange(b *Buffer, off, size int64) error
	UnpinRange(b *Buffer, off, size int64) error
	// Upload replaces the first len(src) bytes of b, synchronously.
	Upload(b *Buffer, src []byte) error
	// Download reads the first len(dst) bytes of b, synchronously.
	Download(b *Buffer, dst []byte) error

	// Streams and events (cuStream*, cuEvent*).
	NewStream() (Stream, error)
	DestroyStream(s Stream) error
	Synchronize(s Stream) error
	NewEvent() (Event, error)
	DestroyEvent(e Event) error
	Record(e Event, s Stream) error
	WaitEvent(s Stream, e Event) error
	Elapsed(start, end Event) (time.Duration, error)

	// CopyAsync queues a copy-engine copy of size bytes (cuMemcpy*Async).
	CopyAsync(dst, src *Buffer, size int64, s Stream) error
	// Copy copies synchronously (cuMemcpyHtoD/DtoH/DtoD).
	Copy(dst, src *Buffer, size int64) error
	// CopyKernel queues the SM copy kernel over size bytes (a multiple of
	// 16) between two device-addressable buffers.
	CopyKernel(dst, src *Buffer, size int64, s Stream) error

	// Block queues the spin kernel on s: work queued behind it waits until
	// Release, or until timeout has passed. Release lets every blocked
	// stream go. Settle, after the streams are synchronized, returns how
	// many spins since the last Settle ended by timeout instead of by
	// Release.
	Block(s Stream, timeout time.Duration) error
	Release() error
	Settle() (timedOut int, err error)

	// Chase runs the pointer-chase kernel as one thread: steps dependent
	// loads through the chain of 64-bit device addresses that b holds,
	// from the device address start. It returns the last address loaded
	// and the loop's time as the kernel measured it (%globaltimer).
	Chase(b *Buffer, start cuda.DevicePtr, steps int) (end cuda.DevicePtr, elapsed time.Duration, err error)

	// Prefetch queues a migration of managed memory to the GPU or to the
	// host on s (cuMemPrefetchAsync_v2).
	Prefetch(b *Buffer, toGPU bool, s Stream) error
	// AdviseRemote sets (or, with on false, unsets) PreferredLocation=CPU
	// and AccessedBy=this GPU on managed memory (cuMemAdvise_v2): the
	// pages stay in host memory and the GPU maps them instead of faulting
	// them over.
	AdviseRemote(b *Buffer, on bool) error
	// Touch queues the page-touch kernel on s over the first size bytes of
	// device-addressable memory b: one 32-bit access every stride bytes, by
	// threads threads (1: in address order, one at a time). A write stores
	// the touch's index k at b + k*stride. If times is not nil (a device
	// buffer of size/stride u64), touch k's duration in nanoseconds lands
	// in its word k.
	Touch(b *Buffer, size, stride int64, write bool, threads int, times *Buffer, s Stream) error
	// HostTouch has one CPU thread access one byte every stride bytes of
	// the first size bytes of b.Host; a write stores byte(k) at touch k.
	HostTouch(b *Buffer, size, stride int64, write bool) error

	// NullCall makes the cheapest driver call, to measure what a call
	// through the binding costs.
	NullCall() error
	// ExportDMABuf exports a device buffer as a dma-buf fd
	// (cuMemGetHandleForAddressRange), timing the call alone, reads what
	// the kernel says of the fd (/proc/self/fdinfo/<fd>) and closes it.
	ExportDMABuf(b *Buffer) (DMABufExport, error)
	// BufferID returns CU_POINTER_ATTRIBUTE_BUFFER_ID of a device buffer.
	BufferID(b *Buffer) (uint64, error)
}

// MemKind is a kind of memory a buffer is allocated as.
type MemKind int

// Memory kinds; their String is the path name used in results.
const (
	MemDevice        MemKind = iota // cuMemAlloc
	MemPageable                     // anonymous mmap, not page-locked
	MemPinned                       // cuMemHostAlloc(PORTABLE)
	MemWriteCombined                // cuMemHostAlloc(PORTABLE|WRITECOMBINED)
	MemRegistered                   // mmap + cuMemHostRegister(PORTABLE|DEVICEMAP)
	MemMapped                       // cuMemHostAlloc(PORTABLE|DEVICEMAP), used through its device address
	MemManaged                      // cuMemAllocManaged(GLOBAL)
	MemPeer                         // cuMemAlloc on another GPU, mapped by peer access
)

var kindNames = [...]string{
	MemDevice:        string(xfer.Device),
	MemPageable:      string(xfer.Pageable),
	MemPinned:        string(xfer.Pinned),
	MemWriteCombined: string(xfer.WriteCombined),
	MemRegistered:    string(xfer.Registered),
	MemMapped:        string(xfer.Mapped),
	MemManaged:       string(xfer.Managed),
	MemPeer:          string(xfer.Peer),
}

func (k MemKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("memkind(%d)", int(k))
}

// IsHost reports whether the kind is host memory (a copy to or from it
// crosses the bus).
func (k MemKind) IsHost() bool { return k != MemDevice && k != MemManaged && k != MemPeer }

// Buffer is an allocation made by a Device.
type Buffer struct {
	Kind MemKind
	Size int64
	// Host is the CPU's view of host-visible kinds (and of managed memory);
	// nil for device memory.
	Host []byte
	// DevAddr is the device address of device-addressable kinds (device,
	// mapped, registered, managed); 0 otherwise.
	DevAddr cuda.DevicePtr
	// Peer is the GPU that holds MemPeer memory.
	Peer int
	impl any // the Device implementation's own handle
}

func (b *Buffer) String() string { return fmt.Sprintf("%v buffer of %d B", b.Kind, b.Size) }

// Stream and Event are opaque handles of a Device.
type (
	Stream uintptr
	Event  uintptr
)

// DeviceInfo describes one GPU.
type DeviceInfo struct {
	Ordinal     int    `json:"ordinal"`
	Name        string `json:"name"`
	PCIBusID    string `json:"pci_bus_id"`
	TotalMemory int64  `json:"total_memory_bytes"`
	// ComputeCapability is "9.0" style.
	ComputeCapability string `json:"compute_capability"`
	Multiprocessors   int    `json:"multiprocessors"`
	// Attributes holds device attributes by their cuda.h name in snake
	// case without the CU_DEVICE_ATTRIBUTE_ prefix.
	Attributes map[string]int `json:"attributes"`
	// PCIe and BAR1 come from NVML; NVMLError says why they are missing.
	PCIe      *PCIeLink `json:"pcie,omitempty"`
	BAR1      *BAR1     `json:"bar1,omitempty"`
	NVMLError string    `json:"nvml_error,omitempty"`
}

// PCIeLink is the GPU's PCIe link as NVML reports it.
type PCIeLink struct {
	CurrentGen   int `json:"current_gen"`
	CurrentWidth int `json:"current_width"`
	MaxGen       int `json:"max_gen"`
	MaxWidth     int `json:"max_width"`
}

// BAR1 is the GPU's BAR1 aperture as NVML reports it.
type BAR1 struct {
	TotalBytes uint64 `json:"total_bytes"`
	UsedBytes  uint64 `json:"used_bytes"`
}

// Machine describes the host and driver a report was measured on.
type Machine struct {
	Hostname      string `json:"hostname"`
	Kernel        string `json:"kernel"`
	CPU           string `json:"cpu"`
	CPUs          int    `json:"cpus"`
	NUMANodes     int    `json:"numa_nodes"`
	DriverVersion string `json:"driver_version"` // NVML, "580.159.04"
	// CUDAVersion is the CUDA version the driver supports, "13.0".
	CUDAVersion string `json:"cuda_version"`
	GPUCount    int    `json:"gpu_count"`
	// IOMMU is the IOMMU the measurements ran under, which every DMA of
	// the GPU's copy engines crosses; nil in reports written before it
	// was recorded.
	IOMMU *MachineIOMMU `json:"iommu,omitempty"`
	// PeerMemory are the GPUDirect peer-memory modules loaded
	// (nvidia_peermem, nv_peer_mem, gdrdrv); nil in reports written
	// before it was recorded.
	PeerMemory *PeerMemoryModules `json:"peer_memory_modules,omitempty"`
}

// MachineIOMMU is the machine's IOMMU as package hw/topo reads it from
// sysfs and the kernel command line (topo.IOMMU, the same reader as
// dmalab topo's).
type MachineIOMMU struct {
	// Mode is off, passthrough, strict, lazy, mixed, translated or
	// unknown (topo.IOMMUOff and the others); Why is its evidence.
	Mode string   `json:"mode"`
	Why  []string `json:"why"`
	// Units are the IOMMU units (/sys/class/iommu) and Kinds their
	// hardware families in the same order ("vtd", "amd-vi", "smmuv3";
	// empty when unrecognised).
	Units []string `json:"units"`
	Kinds []string `json:"kinds"`
	// DefaultDomain is the domain type most groups have ("DMA-FQ").
	DefaultDomain string `json:"default_domain"`
	// Cmdline are the kernel command line's IOMMU words.
	Cmdline []string `json:"cmdline"`
}

// iommuModes are the values MachineIOMMU.Mode may take.
var iommuModes = []string{topo.IOMMUOff, topo.IOMMUPassthrough, topo.IOMMUStrict, topo.IOMMULazy,
	topo.IOMMUMixed, topo.IOMMUTranslated, topo.IOMMUUnknown}

// readMachineIOMMU reads the IOMMU of the tree under root ("/" for this
// machine); nil when the root cannot be read.
func readMachineIOMMU(root string) *MachineIOMMU {
	m, err := topo.ReadIOMMU(root)
	if err != nil {
		return nil
	}
	out := &MachineIOMMU{Mode: m.Mode, Why: m.ModeWhy, Units: m.Units, Kinds: []string{},
		DefaultDomain: m.DefaultDomain, Cmdline: m.Cmdline}
	for _, u := range m.UnitList {
		out.Kinds = append(out.Kinds, u.Kind)
	}
	return out
}
