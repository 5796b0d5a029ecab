package dmadebug

import "github.com/dmalab/dmalab/check"

// Class codes: stable, kebab-case, used as keys by scenarios, JSON and
// `dmalab check --classes`. The first 19 are kernel/dma/debug.c's checks
// (numbered 1..19 in this order, which the dma-bugs scenario keys on);
// the last three are dmalab's own, decided by the memory model.
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
	nClasses
)

const debugC = "kernel/dma/debug.c: "

// infos is indexed by cls.
var infos = [nClasses]check.ClassInfo{
	cUnmapUnknown: {Code: UnmapUnknown, Severity: check.Error,
		Summary: "unmap or free of a bus address the device has no mapping at (never mapped, already unmapped, or DMA_MAPPING_ERROR)",
		Source:  debugC + "check_unmap"},
	cUnmapSize: {Code: UnmapSize, Severity: check.Error,
		Summary: "unmap or free with a size other than the one mapped",
		Source:  debugC + "check_unmap"},
	cUnmapType: {Code: UnmapType, Severity: check.Error,
		Summary: "unmap with the wrong function family (single, page, sg, coherent, resource)",
		Source:  debugC + "check_unmap"},
	cFreeCoherentAddress: {Code: FreeCoherentAddress, Severity: check.Error,
		Summary: "dma_free_coherent with a CPU address other than the one dma_alloc_coherent returned",
		Source:  debugC + "check_unmap"},
	cUnmapSGCount: {Code: UnmapSGCount, Severity: check.Error,
		Summary: "dma_unmap_sg with an nents other than the one passed to dma_map_sg",
		Source:  debugC + "check_unmap"},
	cUnmapDirection: {Code: UnmapDirection, Severity: check.Error,
		Summary: "unmap with a direction other than the one mapped",
		Source:  debugC + "check_unmap"},
	cMapErrorUnchecked: {Code: MapErrorUnchecked, Severity: check.Warning,
		Summary: "a single, page or resource mapping was unmapped but dma_mapping_error() was never called on its handle",
		Source:  debugC + "check_unmap, debug_dma_mapping_error"},
	cSyncUnknown: {Code: SyncUnknown, Severity: check.Error,
		Summary: "dma_sync_* of a bus address inside no mapping of the device",
		Source:  debugC + "check_sync"},
	cSyncRange: {Code: SyncRange, Severity: check.Error,
		Summary: "dma_sync_* that starts inside a mapping but runs past its end",
		Source:  debugC + "check_sync"},
	cSyncDirection: {Code: SyncDirection, Severity: check.Error,
		Summary: "dma_sync_* with a direction other than the one mapped (DMA_BIDIRECTIONAL mappings exempt)",
		Source:  debugC + "check_sync"},
	cSyncCPUToDeviceBuffer: {Code: SyncCPUToDeviceBuffer, Severity: check.Error,
		Summary: "dma_sync_*_for_cpu of a DMA_TO_DEVICE mapping with another direction: the device never writes it",
		Source:  debugC + "check_sync"},
	cSyncDeviceFromDeviceBuffer: {Code: SyncDeviceFromDeviceBuffer, Severity: check.Error,
		Summary: "dma_sync_*_for_device of a DMA_FROM_DEVICE mapping with another direction: the device never reads it",
		Source:  debugC + "check_sync"},
	cSyncSGCount: {Code: SyncSGCount, Severity: check.Error,
		Summary: "dma_sync_sg_* with an nents other than the one passed to dma_map_sg",
		Source:  debugC + "check_sync"},
	cMapIllegalMemory: {Code: MapIllegalMemory, Severity: check.Error,
		Summary: "streaming map of memory DMA cannot reach: a kernel stack, vmalloc space, kernel text/rodata, or no RAM",
		Source:  debugC + "debug_dma_map_single, check_for_stack, check_for_illegal_area"},
	cMapResourceRAM: {Code: MapResourceRAM, Severity: check.Error,
		Summary: "dma_map_resource of RAM: it is for MMIO (another device's BAR), RAM goes through dma_map_page",
		Source:  debugC + "debug_dma_map_phys (DMA_ATTR_MMIO, pfn_valid)"},
	cSGSegment: {Code: SGSegment, Severity: check.Error,
		Summary: "mapped sg segment longer than the device's max_seg_size or crossing its segment boundary",
		Source:  debugC + "check_sg_segment"},
	cCachelineOverlap: {Code: CachelineOverlap, Severity: check.Error,
		Summary: "two active mappings that the device may write start in one cache line (DMA_TO_DEVICE exempt)",
		Source:  debugC + "add_dma_entry, active_cacheline_insert"},
	cCachelineOverflow: {Code: CachelineOverflow, Severity: check.Warning,
		Summary: "more than 7 overlapping mappings of one cache line: the overlap counter overflows, mappings are probably leaking",
		Source:  debugC + "active_cacheline_inc_overlap"},
	cUnbindLeak: {Code: UnbindLeak, Severity: check.Error,
		Summary: "the driver was unbound from a device that still has mappings or coherent buffers",
		Source:  debugC + "dma_debug_device_change"},
	cCPUAccessDeviceOwned: {Code: CPUAccessDeviceOwned, Severity: check.Error,
		Summary: "CPU read or write of a streaming buffer the device owns (between map and unmap, or sync_for_device and sync_for_cpu)",
		Source:  "dmalab"},
	cStaleRead: {Code: StaleRead, Severity: check.Error,
		Summary: "a reader (CPU or device) obtained bytes older than the latest write to them, proved by content versions",
		Source:  "dmalab"},
	cDeviceAccessUnmapped: {Code: DeviceAccessUnmapped, Severity: check.Error,
		Summary: "a device read or wrote bus addresses that no active mapping of that device covers",
		Source:  "dmalab"},
}

// classes are the registered handles, indexed by cls.
var classes = check.Register("dma-debug", 100, infos[:]...)

// Classes lists the pack's classes: the 19 of debug.c first in
// their fixed order, then dmalab's own three.
func Classes() []check.ClassInfo { return check.Infos(classes[:]) }
