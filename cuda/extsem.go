package cuda

import (
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/sim"
)

// ExternalSemaphoreHandleType is CUexternalSemaphoreHandleType, with
// cuda.h's values. None is a sync_file (Vulkan's
// VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_SYNC_FD_BIT has no CUDA
// counterpart): CUDA cannot import a dma_fence exported as a sync_file.
type ExternalSemaphoreHandleType int

const (
	ExternalSemaphoreHandleTypeOpaqueFD               ExternalSemaphoreHandleType = 1  // CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD
	ExternalSemaphoreHandleTypeOpaqueWin32            ExternalSemaphoreHandleType = 2  // ..._OPAQUE_WIN32
	ExternalSemaphoreHandleTypeOpaqueWin32KMT         ExternalSemaphoreHandleType = 3  // ..._OPAQUE_WIN32_KMT
	ExternalSemaphoreHandleTypeD3D12Fence             ExternalSemaphoreHandleType = 4  // ..._D3D12_FENCE
	ExternalSemaphoreHandleTypeD3D11Fence             ExternalSemaphoreHandleType = 5  // ..._D3D11_FENCE
	ExternalSemaphoreHandleTypeNvSciSync              ExternalSemaphoreHandleType = 6  // ..._NVSCISYNC
	ExternalSemaphoreHandleTypeKeyedMutex             ExternalSemaphoreHandleType = 7  // ..._D3D11_KEYED_MUTEX
	ExternalSemaphoreHandleTypeKeyedMutexKMT          ExternalSemaphoreHandleType = 8  // ..._D3D11_KEYED_MUTEX_KMT
	ExternalSemaphoreHandleTypeTimelineSemaphoreFD    ExternalSemaphoreHandleType = 9  // ..._TIMELINE_SEMAPHORE_FD
	ExternalSemaphoreHandleTypeTimelineSemaphoreWin32 ExternalSemaphoreHandleType = 10 // ..._TIMELINE_SEMAPHORE_WIN32
)

// NvSciSyncObj is an NvSciSync object as Tegra's NvSciSync library gives
// it to the producers and consumers of a pipeline (camera, ISP, encoder,
// display, CUDA): on Jetson Linux backed by a host1x syncpoint, whose
// thresholds the kernel exposes as dma_fences. The model keeps a fence
// context of the machine's DMA-BUF layer: each signal operation is a new
// dma_fence on it.
type NvSciSyncObj struct {
	Name string
	l    *dmabuf.Layer
	ctx  uint64
	seq  uint64
}

// NewNvSciSyncObj is NvSciSyncObjAlloc of an object on layer l (its
// attribute lists, reconciled between the parties, are not modelled).
func NewNvSciSyncObj(l *dmabuf.Layer, name string) *NvSciSyncObj {
	return &NvSciSyncObj{Name: name, l: l, ctx: l.ContextAlloc(1)}
}

// Next is the object's next fence, not yet signalled: what another
// engine's driver generates when it is asked to signal the object
// (NvSciSyncObjGenerateFence in a producer).
func (o *NvSciSyncObj) Next() NvSciSyncFence {
	o.seq++
	return NvSciSyncFence{Fence: o.l.NewFence("nvsci", o.Name, o.ctx, o.seq)}
}

// NvSciSyncFence is an NvSciSyncFence: one threshold of a syncpoint,
// carried here as its dma_fence.
type NvSciSyncFence struct{ Fence *dmabuf.Fence }

// ExternalSemaphoreHandleDesc is CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC.
type ExternalSemaphoreHandleDesc struct {
	Type ExternalSemaphoreHandleType
	// FD is handle.fd, for OPAQUE_FD and TIMELINE_SEMAPHORE_FD.
	FD int
	// NvSciSyncObj is handle.nvSciSyncObj, for NVSCISYNC.
	NvSciSyncObj *NvSciSyncObj
	Flags        uint32 // must be 0
}

// ExternalSemaphore is a CUexternalSemaphore: a synchronisation object of
// another API imported into a context.
type ExternalSemaphore struct {
	Type      ExternalSemaphoreHandleType
	obj       *NvSciSyncObj
	ctx       *Context
	destroyed bool
}

// ExternalSemaphoreWaitParams is CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS:
// for NVSCISYNC, the fence to wait for (params.nvSciSync.fence).
type ExternalSemaphoreWaitParams struct {
	Fence NvSciSyncFence
}

// ExternalSemaphoreSignalParams is CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS:
// for NVSCISYNC, params.nvSciSync.fence, which the call fills with the
// fence that will signal when the stream reaches the operation.
type ExternalSemaphoreSignalParams struct {
	Fence *NvSciSyncFence
}

// ImportExternalSemaphore is cuImportExternalSemaphore. What the model
// accepts is what the real driver does (cuda/doc.go has the table):
//
//   - NVSCISYNC with an NvSciSyncObj, on an integrated GPU (NvSciSync
//     ships with Jetson Linux and DRIVE OS; on a discrete GPU the model
//     says CUDA_ERROR_NOT_SUPPORTED).
//   - OPAQUE_FD and TIMELINE_SEMAPHORE_FD take a Vulkan semaphore's fd.
//     The model has no Vulkan; a sync_file fd (a dma_fence) is not one,
//     and any fd is CUDA_ERROR_INVALID_VALUE (assumed the code). The real
//     workaround for a sync_file is the CPU's: a thread waits for the
//     fence (poll on the fd; dmabuf.SyncFile.Wait) and then launches, or
//     a host function in the stream (cuLaunchHostFunc) waits for it.
//   - Windows and D3D types are CUDA_ERROR_NOT_SUPPORTED on Linux;
//     other values and flags CUDA_ERROR_INVALID_VALUE.
//
// The host pays gpu.EnqueueCost (assumed).
func (c *Context) ImportExternalSemaphore(p *sim.Proc, desc ExternalSemaphoreHandleDesc) (*ExternalSemaphore, error) {
	const call = "cuImportExternalSemaphore"
	if err := c.check(call); err != nil {
		return nil, err
	}
	p.Sleep(gpu.EnqueueCost)
	if desc.Flags != 0 {
		return nil, failf(call, ErrorInvalidValue, "flags %#x", desc.Flags)
	}
	switch desc.Type {
	case ExternalSemaphoreHandleTypeNvSciSync:
		switch {
		case !c.d.integrated(c.dev.Index):
			return nil, failf(call, ErrorNotSupported, "%s is discrete: no NvSciSync", c.dev.Name)
		case desc.NvSciSyncObj == nil || desc.NvSciSyncObj.l != c.d.bufs:
			return nil, failf(call, ErrorInvalidValue, "no NvSciSyncObj of this machine")
		}
		return &ExternalSemaphore{Type: desc.Type, obj: desc.NvSciSyncObj, ctx: c}, nil
	case ExternalSemaphoreHandleTypeOpaqueFD, ExternalSemaphoreHandleTypeTimelineSemaphoreFD:
		f, err := c.proc.kp.File(call, desc.FD)
		if err != nil {
			return nil, fail(call, ErrorInvalidValue, err)
		}
		if _, ok := f.(*dmabuf.SyncFile); ok {
			return nil, failf(call, ErrorInvalidValue, "%s is a sync_file: CUDA has no sync_fd handle type; wait for its fence on the CPU, then launch", f.FileName())
		}
		return nil, failf(call, ErrorInvalidValue, "%s is not a Vulkan semaphore", f.FileName())
	case ExternalSemaphoreHandleTypeOpaqueWin32, ExternalSemaphoreHandleTypeOpaqueWin32KMT, ExternalSemaphoreHandleTypeD3D12Fence,
		ExternalSemaphoreHandleTypeD3D11Fence, ExternalSemaphoreHandleTypeKeyedMutex, ExternalSemaphoreHandleTypeKeyedMutexKMT,
		ExternalSemaphoreHandleTypeTimelineSemaphoreWin32:
		return nil, failf(call, ErrorNotSupported, "handle type %d is a Windows handle", desc.Type)
	}
	return nil, failf(call, ErrorInvalidValue, "handle type %d", desc.Type)
}

// semaphores checks the arrays of a wait or signal call.
func (c *Context) semaphores(call string, sems []*ExternalSemaphore, n int) error {
	if len(sems) == 0 || len(sems) != n {
		return failf(call, ErrorInvalidValue, "%d semaphores, %d parameters", len(sems), n)
	}
	for _, x := range sems {
		if x == nil || x.destroyed || x.ctx.proc != c.proc {
			return failf(call, ErrorInvalidHandle, "semaphore destroyed or of another process")
		}
	}
	return nil
}

// WaitExternalSemaphoresAsync is cuWaitExternalSemaphoresAsync: the
// stream's later work waits, in virtual time, until every given fence
// has signalled; the host does not wait. The GPU waits in its front end
// (a syncpoint wait in the push buffer); the model runs the wait as a
// stream operation (gpu.Stream.LaunchHostFunc's), so it shows in traces
// as one. A fence that is missing is CUDA_ERROR_INVALID_VALUE. The host
// pays gpu.EnqueueCost.
func (c *Context) WaitExternalSemaphoresAsync(p *sim.Proc, sems []*ExternalSemaphore, params []ExternalSemaphoreWaitParams, s *Stream) error {
	const call = "cuWaitExternalSemaphoresAsync"
	st, err := c.stream(call, s)
	if err != nil {
		return err
	}
	if err := c.semaphores(call, sems, len(params)); err != nil {
		return err
	}
	fences := make([]*dmabuf.Fence, len(params))
	for i, pr := range params {
		if pr.Fence.Fence == nil {
			return failf(call, ErrorInvalidValue, "semaphore %d: no NvSciSyncFence", i)
		}
		fences[i] = pr.Fence.Fence
	}
	return wrap(call, st.s.LaunchHostFunc(p, "wait external semaphores", func(w *sim.Proc) {
		for _, f := range fences {
			// A wait without a timeout: it ends when the fence signals
			// (or the run guard reports a fence never signalled).
			_ = f.Wait(w)
		}
	}))
}

// SignalExternalSemaphoresAsync is cuSignalExternalSemaphoresAsync: each
// semaphore gets a new fence, returned in its parameters, which signals
// when the stream reaches the operation (its earlier work done), so that
// another engine (a display, an encoder) can wait for the GPU's work.
// The host pays gpu.EnqueueCost.
func (c *Context) SignalExternalSemaphoresAsync(p *sim.Proc, sems []*ExternalSemaphore, params []ExternalSemaphoreSignalParams, s *Stream) error {
	const call = "cuSignalExternalSemaphoresAsync"
	st, err := c.stream(call, s)
	if err != nil {
		return err
	}
	if err := c.semaphores(call, sems, len(params)); err != nil {
		return err
	}
	for i, pr := range params {
		if pr.Fence == nil {
			return failf(call, ErrorInvalidValue, "semaphore %d: nowhere to put the fence", i)
		}
	}
	fences := make([]*dmabuf.Fence, len(params))
	for i, x := range sems {
		*params[i].Fence = x.obj.Next()
		fences[i] = params[i].Fence.Fence
	}
	return wrap(call, st.s.LaunchHostFunc(p, "signal external semaphores", func(w *sim.Proc) {
		for _, f := range fences {
			// Only a fence signalled by someone else fails; the DMA-BUF
			// layer reports that (a fence signalled twice) itself.
			_ = f.Signal(w)
		}
	}))
}

// DestroyExternalSemaphore is cuDestroyExternalSemaphore; a second
// destroy is CUDA_ERROR_INVALID_HANDLE.
func (c *Context) DestroyExternalSemaphore(x *ExternalSemaphore) error {
	const call = "cuDestroyExternalSemaphore"
	if err := c.check(call); err != nil {
		return err
	}
	if x == nil || x.destroyed || x.ctx.proc != c.proc {
		return failf(call, ErrorInvalidHandle, "semaphore destroyed or of another process")
	}
	x.destroyed = true
	return nil
}
