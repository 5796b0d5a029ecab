package dmabuf

import (
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Op is what an Event reports.
type Op uint8

const (
	// OpExport is dma_buf_export: a buffer now exists (a heap's
	// allocation, a driver's export).
	OpExport Op = iota + 1
	// OpGet is dma_buf_get(fd) in an importing driver: a reference
	// (Failed, with no Buffer, for a bad descriptor).
	OpGet
	// OpPut is dma_buf_put: that reference dropped.
	OpPut
	// OpAttach is dma_buf_attach of Device.
	OpAttach
	// OpDetach is dma_buf_detach.
	OpDetach
	// OpMap is dma_buf_map_attachment: the buffer mapped for Device,
	// Nents DMA segments from Addr (Failed and Err when it was refused).
	OpMap
	// OpUnmap is dma_buf_unmap_attachment.
	OpUnmap
	// OpBeginCPU is dma_buf_begin_cpu_access (DMA_BUF_IOCTL_SYNC with
	// DMA_BUF_SYNC_START): after the fences it waits for, the CPU owns
	// the buffer.
	OpBeginCPU
	// OpEndCPU is dma_buf_end_cpu_access (DMA_BUF_SYNC_END): the devices
	// own it again.
	OpEndCPU
	// OpMmap is mmap of the buffer's file into a process (Process).
	OpMmap
	// OpMunmap is the end of that mapping.
	OpMunmap
	// OpVmap is dma_buf_vmap: a kernel mapping.
	OpVmap
	// OpVunmap is dma_buf_vunmap.
	OpVunmap
	// OpRelease is the file's last reference going: the exporter's
	// release ran (Err if it failed, Warn if attachments were left).
	OpRelease
	// OpFenceSignal is dma_fence_signal (Failed for a second signal).
	OpFenceSignal
	// OpFenceWait is the end of a wait on a fence or a reservation
	// object: Waited is how long the process blocked, Failed a timeout.
	OpFenceWait
	// OpResvAdd is dma_resv_add_fence with Usage.
	OpResvAdd
	// OpExportSyncFile is DMA_BUF_IOCTL_EXPORT_SYNC_FILE.
	OpExportSyncFile
	// OpImportSyncFile is DMA_BUF_IOCTL_IMPORT_SYNC_FILE.
	OpImportSyncFile
	// OpMerge is SYNC_IOC_MERGE.
	OpMerge
	// OpFenceInit is dma_fence_init: a fence now exists (Fence, Context,
	// Seqno, FenceIDs its one id). Its time is the origin of the
	// checker's findings about it.
	OpFenceInit
	// OpFenceWaitBegin is a process starting to block on fences
	// (FenceIDs, those not yet signalled; Buffer for a reservation
	// object's wait): a waiter that never wakes has no OpFenceWait.
	OpFenceWaitBegin
)

var opNames = [...]string{"", "export", "get", "put", "attach", "detach", "map", "unmap",
	"begin-cpu-access", "end-cpu-access", "mmap", "munmap", "vmap", "vunmap", "release",
	"fence-signal", "fence-wait", "resv-add", "export-sync-file", "import-sync-file", "merge",
	"fence-init", "fence-wait-begin"}

func (o Op) String() string {
	if int(o) < len(opNames) && o != 0 {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Event is one DMA-BUF, fence or reservation event, delivered through
// Layer.Hooks. The Header's Proc is the thread that made the call
// (empty for a fence signalled by hardware).
type Event struct {
	sim.Header
	Op Op
	// Buffer names the buffer's file ("dmabuf:3"); Exporter its
	// exporter (exp_name: "system", "nv_dmabuf").
	Buffer   string
	Exporter string
	// Size is the buffer's size.
	Size uint64
	// Device is the importer's device (attach, map, unmap, detach).
	Device string
	// Process is the process of an fd, mmap or munmap.
	Process string
	// Dir is the direction of a map, unmap or CPU access.
	Dir dma.Direction
	// Nents and Addr are a mapping's DMA segments and the first one's
	// address.
	Nents int
	Addr  mem.DMAAddr
	// Fence names the fence ("ctx:seq", or the sync_file's fences);
	// Usage is a reservation usage.
	Fence string
	Usage Usage
	// FenceIDs identify the fences concerned (fence-init, signal, wait,
	// resv-add and import-sync-file: a fence array's parts), each
	// fence's id unique in its layer, as Fence.ID gives it; names can
	// repeat, ids do not. Context and Seqno are a fence-init's.
	FenceIDs       []uint64
	Context, Seqno uint64
	// FD is the descriptor of a get, valid or not.
	FD int
	// Attachment numbers the attachment of an attach, detach, map or
	// unmap among its buffer's (1 for the first attach): which one a
	// map or unmap used, detached or not.
	Attachment int
	// Pages are the physical runs of the buffer's memory at export,
	// when its exporter says (Pages); nil otherwise.
	Pages []mem.PhysRange
	// Waited is how long a wait blocked.
	Waited sim.Time
	// Failed says the call failed; Err says why. Warn is what Linux
	// would WARN about while going on.
	Failed bool
	Err    string
	Warn   string
}

// emit delivers e with the layer's component and the time filled in.
func (l *Layer) emit(p *sim.Proc, e Event) {
	if !l.Hooks.Active() {
		return
	}
	e.Time, e.Component = l.eng.Now(), "dmabuf"
	if p != nil {
		e.Proc = p.Name()
	}
	if e.Cause == 0 {
		e.Cause = sim.CauseCall
	}
	l.Hooks.Emit(&e)
}

// fail marks e as failed with err.
func (e Event) fail(err error) Event {
	if err != nil {
		e.Failed, e.Err = true, err.Error()
	}
	return e
}
