package check

// Severities, as the kernel would treat the finding: an error is a bug
// that corrupts data or state on some machine; a warning is a finding
// that is a bug only on some paths (an unchecked map may have succeeded).
const (
	Error   = "error"
	Warning = "warning"
)

// Class codes: stable, kebab-case, used as keys by scenarios, JSON and
// `dmalab check --classes`. The first 19 are kernel/dma/debug.c's checks
// (REFERENCE.md numbers them 1..19 in this order); the last three are
// dmalab's own, decided by the memory model.
const (
	UnmapUnknown               = "unmap-unknown"
	UnmapSize                  = "unmap-size"
	UnmapType                  = "unmap-type"
	FreeCoherentAddress        = "free-coherent-address"
	UnmapSGCount               = "unmap-sg-count"
	UnmapDirection             = "unmap-direction"
	MapErrorUnchecked          = "map-error-unchecked"
	SyncUnknown                = "sync-unknown"
	SyncRange                  = "sync-range"
	SyncDirection              = "sync-direction"
	SyncCPUToDeviceBuffer      = "sync-cpu-to-device-buffer"
	SyncDeviceFromDeviceBuffer = "sync-device-from-device-buffer"
	SyncSGCount                = "sync-sg-count"
	MapIllegalMemory           = "map-illegal-memory"
	MapResourceRAM             = "map-resource-ram"
	SGSegment                  = "sg-segment"
	CachelineOverlap           = "cacheline-overlap"
	CachelineOverflow          = "cacheline-overflow"
	UnbindLeak                 = "unbind-leak"
	CPUAccessDeviceOwned       = "cpu-access-device-owned"
	StaleRead                  = "stale-read"
	DeviceAccessUnmapped       = "device-access-unmapped"
)

// GPU-memory class codes: misuse of the CUDA driver API's memory, decided
// from the cuda façade's observations (gpu.go). They are dmalab's too.
const (
	CPUDerefDevicePointer    = "cpu-deref-device-pointer"
	ManagedAccessRule        = "managed-access-rule"
	UseAfterFree             = "use-after-free"
	KernelUnpinnedHostMemory = "kernel-unpinned-host-memory"
	ForeignContextPointer    = "foreign-context-pointer"
)

// ClassInfo describes one diagnostic class.
type ClassInfo struct {
	Code     string `json:"code"`
	Severity string `json:"severity"`
	// Summary is one line for `dmalab check --classes`.
	Summary string `json:"summary"`
	// Source is the function of kernel/dma/debug.c that makes the check,
	// or "dmalab" for checks the kernel cannot make.
	Source string `json:"source"`
}

// cls indexes classes.
type cls uint8

const (
	cUnmapUnknown cls = iota
	cUnmapSize
	cUnmapType
	cFreeCoherentAddress
	cUnmapSGCount
	cUnmapDirection
	cMapErrorUnchecked
	cSyncUnknown
	cSyncRange
	cSyncDirection
	cSyncCPUToDeviceBuffer
	cSyncDeviceFromDeviceBuffer
	cSyncSGCount
	cMapIllegalMemory
	cMapResourceRAM
	cSGSegment
	cCachelineOverlap
	cCachelineOverflow
	cUnbindLeak
	cCPUAccessDeviceOwned
	cStaleRead
	cDeviceAccessUnmapped
	// nDMAClasses ends the DMA API's classes, which Classes lists.
	nDMAClasses
)

// The GPU-memory classes, which GPUClasses lists.
const (
	cCPUDerefDevicePointer cls = nDMAClasses + iota
	cManagedAccessRule
	cUseAfterFree
	cKernelUnpinnedHostMemory
	cForeignContextPointer
	nClasses
)

const debugC = "kernel/dma/debug.c: "

// classes is indexed by cls.
var classes = [nClasses]ClassInfo{
	cUnmapUnknown: {UnmapUnknown, Error,
		"unmap or free of a bus address the device has no mapping at (never mapped, already unmapped, or DMA_MAPPING_ERROR)",
		debugC + "check_unmap"},
	cUnmapSize: {UnmapSize, Error,
		"unmap or free with a size other than the one mapped",
		debugC + "check_unmap"},
	cUnmapType: {UnmapType, Error,
		"unmap with the wrong function family (single, page, sg, coherent, resource)",
		debugC + "check_unmap"},
	cFreeCoherentAddress: {FreeCoherentAddress, Error,
		"dma_free_coherent with a CPU address other than the one dma_alloc_coherent returned",
		debugC + "check_unmap"},
	cUnmapSGCount: {UnmapSGCount, Error,
		"dma_unmap_sg with an nents other than the one passed to dma_map_sg",
		debugC + "check_unmap"},
	cUnmapDirection: {UnmapDirection, Error,
		"unmap with a direction other than the one mapped",
		debugC + "check_unmap"},
	cMapErrorUnchecked: {MapErrorUnchecked, Warning,
		"a single, page or resource mapping was unmapped but dma_mapping_error() was never called on its handle",
		debugC + "check_unmap, debug_dma_mapping_error"},
	cSyncUnknown: {SyncUnknown, Error,
		"dma_sync_* of a bus address inside no mapping of the device",
		debugC + "check_sync"},
	cSyncRange: {SyncRange, Error,
		"dma_sync_* that starts inside a mapping but runs past its end",
		debugC + "check_sync"},
	cSyncDirection: {SyncDirection, Error,
		"dma_sync_* with a direction other than the one mapped (DMA_BIDIRECTIONAL mappings exempt)",
		debugC + "check_sync"},
	cSyncCPUToDeviceBuffer: {SyncCPUToDeviceBuffer, Error,
		"dma_sync_*_for_cpu of a DMA_TO_DEVICE mapping with another direction: the device never writes it",
		debugC + "check_sync"},
	cSyncDeviceFromDeviceBuffer: {SyncDeviceFromDeviceBuffer, Error,
		"dma_sync_*_for_device of a DMA_FROM_DEVICE mapping with another direction: the device never reads it",
		debugC + "check_sync"},
	cSyncSGCount: {SyncSGCount, Error,
		"dma_sync_sg_* with an nents other than the one passed to dma_map_sg",
		debugC + "check_sync"},
	cMapIllegalMemory: {MapIllegalMemory, Error,
		"streaming map of memory DMA cannot reach: a kernel stack, vmalloc space, kernel text/rodata, or no RAM",
		debugC + "debug_dma_map_single, check_for_stack, check_for_illegal_area"},
	cMapResourceRAM: {MapResourceRAM, Error,
		"dma_map_resource of RAM: it is for MMIO (another device's BAR), RAM goes through dma_map_page",
		debugC + "debug_dma_map_phys (DMA_ATTR_MMIO, pfn_valid)"},
	cSGSegment: {SGSegment, Error,
		"mapped sg segment longer than the device's max_seg_size or crossing its segment boundary",
		debugC + "check_sg_segment"},
	cCachelineOverlap: {CachelineOverlap, Error,
		"two active mappings that the device may write start in one cache line (DMA_TO_DEVICE exempt)",
		debugC + "add_dma_entry, active_cacheline_insert"},
	cCachelineOverflow: {CachelineOverflow, Warning,
		"more than 7 overlapping mappings of one cache line: the overlap counter overflows, mappings are probably leaking",
		debugC + "active_cacheline_inc_overlap"},
	cUnbindLeak: {UnbindLeak, Error,
		"the driver was unbound from a device that still has mappings or coherent buffers",
		debugC + "dma_debug_device_change"},
	cCPUAccessDeviceOwned: {CPUAccessDeviceOwned, Error,
		"CPU read or write of a streaming buffer the device owns (between map and unmap, or sync_for_device and sync_for_cpu)",
		"dmalab"},
	cStaleRead: {StaleRead, Error,
		"a reader (CPU or device) obtained bytes older than the latest write to them, proved by content versions",
		"dmalab"},
	cDeviceAccessUnmapped: {DeviceAccessUnmapped, Error,
		"a device read or wrote bus addresses that no active mapping of that device covers",
		"dmalab"},
	cCPUDerefDevicePointer: {CPUDerefDevicePointer, Error,
		"CPU load or store through a device pointer: VRAM of a PCIe GPU is not mapped on the CPU (SIGSEGV)",
		"dmalab"},
	cManagedAccessRule: {ManagedAccessRule, Error,
		"CPU access to managed memory while a GPU without concurrent managed access (pre-Pascal, Tegra) is active: launched and not synchronised (SIGSEGV)",
		"dmalab"},
	cUseAfterFree: {UseAfterFree, Error,
		"a copy, kernel, CPU access, prefetch, advice, export or free of GPU or pinned host memory after cuMemFree or cuMemFreeHost",
		"dmalab"},
	cKernelUnpinnedHostMemory: {KernelUnpinnedHostMemory, Error,
		"a kernel given host memory that is not pinned and mapped: pageable, or registered without CU_MEMHOSTREGISTER_DEVICEMAP (CUDA_ERROR_ILLEGAL_ADDRESS)",
		"dmalab"},
	cForeignContextPointer: {ForeignContextPointer, Error,
		"a pointer of another process, or given to a kernel from another context: its device memory on the same GPU, its non-portable registered memory",
		"dmalab"},
}

var codeIndex = func() map[string]cls {
	m := make(map[string]cls, nClasses)
	for i, c := range classes {
		m[c.Code] = cls(i)
	}
	return m
}()

// Classes lists the classes of the DMA API: the 19 of debug.c first in
// REFERENCE.md's order, then dmalab's own three. The GPU-memory classes
// are GPUClasses.
func Classes() []ClassInfo {
	out := make([]ClassInfo, nDMAClasses)
	copy(out, classes[:nDMAClasses])
	return out
}

// GPUClasses lists the GPU-memory classes, decided from the cuda
// façade's observations (Checker.CUDA).
func GPUClasses() []ClassInfo {
	out := make([]ClassInfo, nClasses-nDMAClasses)
	copy(out, classes[nDMAClasses:])
	return out
}

// Lookup returns the class with code, of either list.
func Lookup(code string) (ClassInfo, bool) {
	i, ok := codeIndex[code]
	if !ok {
		return ClassInfo{}, false
	}
	return classes[i], true
}
