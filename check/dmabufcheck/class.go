package dmabufcheck

import "github.com/dmalab/dmalab/check"

// DMA-BUF class codes. They never change.
const (
	FenceRace         = "dmabuf-fence-race"
	UseAfterDetach    = "dmabuf-use-after-detach"
	CPUAccessUnsynced = "dmabuf-cpu-access-unsynced"
	FDNotOwned        = "dmabuf-fd-not-owned"
	FDAliased         = "dmabuf-fd-aliased"
	ReleaseMapped     = "dmabuf-release-mapped"
	FenceNeverSignal  = "fence-never-signaled"
	FenceDoubleSignal = "fence-double-signal"
)

// cls indexes classes.
type cls uint8

const (
	cRace cls = iota
	cDetach
	cUnsynced
	cNotOwned
	cAliased
	cReleaseMapped
	cNever
	cDouble
	nClasses
)

// infos is indexed by cls.
var infos = [nClasses]check.ClassInfo{
	cRace: {Code: FenceRace, Severity: check.Error,
		Summary: "a device or CPU access to a dma-buf while a fence of a conflicting usage in its dma_resv is unsignalled (a reader before the writer's fence, a writer before the readers'): a race",
		Source:  "dmalab"},
	cDetach: {Code: UseAfterDetach, Severity: check.Error,
		Summary: "dma_buf_map_attachment, unmap or detach of an attachment already detached, or a device access to a dma-buf after its attachment was unmapped or detached",
		Source:  "dmalab"},
	cUnsynced: {Code: CPUAccessUnsynced, Severity: check.Error,
		Summary: "a CPU access to a dma-buf mapped by a non-coherent importer without DMA_BUF_IOCTL_SYNC (begin/end_cpu_access) around it, proved by stale bytes",
		Source:  "dmalab"},
	cNotOwned: {Code: FDNotOwned, Severity: check.Error,
		Summary: "dma_buf_get of a descriptor the process does not have (EBADF: a number sent as data, not by SCM_RIGHTS) or that is not a dma-buf",
		Source:  "drivers/dma-buf/dma-buf.c: dma_buf_get"},
	cAliased: {Code: FDAliased, Severity: check.Warning,
		Summary: "dma_buf_get of a descriptor that is another dma-buf in a process that shares no descriptor with it: a number sent as data may name the wrong buffer",
		Source:  "dmalab"},
	cReleaseMapped: {Code: ReleaseMapped, Severity: check.Error,
		Summary: "a dma-buf's last reference dropped, and its exporter's release run, while an importer's attachment is still mapped",
		Source:  "dmalab"},
	cNever: {Code: FenceNeverSignal, Severity: check.Error,
		Summary: "a fence that a process waited on, or that sat in a dma_resv, never signalled by the end of the run",
		Source:  "dmalab"},
	cDouble: {Code: FenceDoubleSignal, Severity: check.Error,
		Summary: "dma_fence_signal of a fence already signalled",
		Source:  "drivers/dma-buf/dma-fence.c: dma_fence_signal"},
}

// classes are the registered handles, indexed by cls. DMA-BUF ranks
// after the IOMMU (300).
var classes = check.Register("dmabuf", 400, infos[:]...)

// Classes lists the pack's classes, in the order `dmalab check
// --classes` prints them.
func Classes() []check.ClassInfo { return check.Infos(classes[:]) }
