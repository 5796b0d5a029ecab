package cuda

import (
	"errors"
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/gpu"
	// Imported as kern: the package's tests name a gpu.Kernel builder kernel.
	kern "github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/uvm"
)

// FreedRemembered is how many freed allocations the driver remembers, to
// name the allocation behind a use after free (package check keeps as
// many unmapped DMA mappings for the same reason).
const FreedRemembered = 256

// Driver is the CUDA driver of one machine (libcuda with nvidia.ko and
// nvidia-uvm.ko under it), after cuInit: the GPUs' unified address map
// (package gpu), the unified-memory driver (package uvm), the processes
// that use them and their contexts. Build it with New. Processes are the
// kernel's (package kernel): the driver keeps its per-process state
// (contexts) beside each kernel process it is used in, and reclaims it
// when that process exits.
//
// The model has one unified address space for all processes, which is
// what lets it recognise a pointer of another process instead of
// reading whatever lies there; and one unified-memory driver, so that
// managed memory of all processes competes for VRAM as it does in the
// real driver's PMM.
type Driver struct {
	m   *machine.Machine
	sys *gpu.System
	// memopsWindow is the GPUDirect RDMA driver's (SetMemopsWindow).
	memopsWindow func(gpu.Allocation) sim.Time
	// um drives managed memory; nil when the GPUs' architecture has no
	// unified-memory model (umErr says why).
	um    *uvm.Driver
	umErr error
	gen   uvm.Generation
	// umMoves are the migrations' shared parts, one per (from, to) in
	// the order first asked: a machine has few processors, and a list
	// of them is read faster than a map on every migration.
	umMoves []*umMove

	// k is the operating system whose processes use the driver.
	k *kern.Kernel
	// procs are the processes attached, in order (a slice, not a map
	// keyed by the kernel process: nothing here may depend on map order).
	procs []*Process
	// bufs is the dma-buf layer the driver exports into.
	bufs   *dmabuf.Layer
	ctxs   []*Context // by ID - 1
	allocs map[uint64]*alloc
	// freed is a ring of the last FreedRemembered frees.
	freed  [FreedRemembered]freedAlloc
	nFreed int
	// active[i]: GPU i has had a kernel launched and not synchronised
	// since (what the no-concurrent-access rule looks at).
	active   []bool
	streams  [][]*Stream // per GPU: every stream made through the façade
	coherent []bool      // per GPU: its DMA snoops the CPU caches
	// Hooks receives every Observation; it is valid only during the
	// call.
	Hooks sim.Hooks[Observation]
	ev    Observation
	// tegra is the managed memory awaiting cache maintenance on an
	// integrated GPU (tegra.go).
	tegra tegraState
	// staging are the pageable copies' staging buffers by GPU and node,
	// made at the first such copy when the GPU is behind an IOMMU.
	staging map[[2]int]*StagingMemory
	// stagedTails are pageable copies to a GPU whose call returned
	// before their DMA landed (waitStaged).
	stagedTails []stagedTail
	// umChunks are managed memory's CPU chunks mapped for GPUs behind an
	// IOMMU, by VA block (umdma.go).
	umChunks map[uvm.Addr]*umChunk
	// opaques numbers the opaque memory fds exported (extmem.go).
	opaques int
}

// alloc is one allocation made through the façade.
type alloc struct {
	a    gpu.Allocation
	kind MemKind
	ctx  *Context
	// origin is the allocating call, with its time and thread.
	origin string
	// flags are the CU_MEMHOSTALLOC_* or CU_MEMHOSTREGISTER_* flags of
	// host memory, CU_MEM_ATTACH_* of managed memory.
	flags uint32
	// Host memory the driver allocated: its pages, and its uncached
	// remap for write-combined (or uncached Tegra) memory.
	pa    mem.PhysAddr
	bytes uint64
	remap mem.VirtAddr
	um    *uvm.Allocation
	// pin holds registered (cuMemHostRegister) anonymous pages in place
	// until cuMemHostUnregister: they must not migrate under DMA.
	pin *mem.PagePin
	// syncMemops is CU_POINTER_ATTRIBUTE_SYNC_MEMOPS.
	syncMemops bool
	// exports counts live dma-bufs of the range; freedBy is set when the
	// program freed it while one was live: the memory goes with the last.
	exports int
	freedBy string
}

// freedAlloc is a freed allocation, remembered for provenance.
type freedAlloc struct{ t Target }

// Option configures New.
type Option func(*Driver)

// WithKernel makes the driver serve the processes of k, the machine's
// operating system (the one its other drivers and programs share).
// Without it New starts a kernel of its own for the machine.
func WithKernel(k *kern.Kernel) Option { return func(d *Driver) { d.k = k } }

// WithDMABuf makes the driver export dma-bufs into l, the machine's
// DMA-BUF layer (the one its importers and heaps use). Without it New
// makes a layer of its own.
func WithDMABuf(l *dmabuf.Layer) Option { return func(d *Driver) { d.bufs = l } }

// DMABufs is the dma-buf layer the driver exports into: where an
// importer gets (dma_buf_get) the buffers of MemGetHandleForAddressRange.
func (d *Driver) DMABufs() *dmabuf.Layer { return d.bufs }

// New is cuInit on the GPUs of sys: it builds the unified-memory driver
// for the machine's GPUs (their generation from the platform's arch, its
// parameters from the platform's UVM section, data movement over the
// machine's links) and installs it as sys's ManagedHandler.
func New(sys *gpu.System, opts ...Option) (*Driver, error) {
	m := sys.Machine()
	d := &Driver{
		m: m, sys: sys, allocs: map[uint64]*alloc{},
		active: make([]bool, len(sys.Devices)), streams: make([][]*Stream, len(sys.Devices)),
	}
	for _, o := range opts {
		o(d)
	}
	if d.bufs == nil {
		d.bufs = dmabuf.New(m.Engine)
	} else if d.bufs.Engine() != m.Engine {
		return nil, errors.New("cuda: the dma-buf layer given runs on another engine")
	}
	if d.k == nil {
		// Its own kernel places memory by policy on the machine's nodes.
		d.k = kern.New(m.Engine, m.Mem.Nodes())
		d.k.SetMemory(m.Mem)
	} else if d.k.Engine() != m.Engine || d.k.Nodes() != m.Mem.Nodes() {
		return nil, fmt.Errorf("cuda: the kernel given runs another machine (%d node(s), the GPUs' has %d)", d.k.Nodes(), m.Mem.Nodes())
	}
	for _, dev := range sys.Devices {
		c, err := m.Spec.DeviceCoherent(dev.Name)
		if err != nil {
			return nil, fmt.Errorf("cuda: %w", err)
		}
		d.coherent = append(d.coherent, c)
	}
	if len(sys.Devices) == 0 {
		return d, nil
	}
	um, gen, err := newUVM(d)
	if err != nil {
		d.umErr = err
		return d, nil
	}
	d.um, d.gen = um, gen
	sys.SetManagedHandler(&managedHandler{d: d})
	if gen == uvm.Tegra {
		// Managed memory going back to the node must not be cleaned or
		// invalidated later on someone else's behalf.
		sys.OnFree(func(_ *sim.Proc, a gpu.Allocation) {
			if a.Type == gpu.MemoryManaged {
				d.forgetDirty(d.managedPhys(a.Addr, a.Size))
			}
		})
	}
	return d, nil
}

// System is the GPU model under the driver.
func (d *Driver) System() *gpu.System { return d.sys }

// Machine is the machine.
func (d *Driver) Machine() *machine.Machine { return d.m }

// Kernel is the operating system whose processes use the driver.
func (d *Driver) Kernel() *kern.Kernel { return d.k }

// UVM is the unified-memory driver (nil when the GPUs have none).
func (d *Driver) UVM() *uvm.Driver { return d.um }

// DeviceCount is cuDeviceGetCount.
func (d *Driver) DeviceCount() int { return len(d.sys.Devices) }

// ConcurrentManagedAccess is
// CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: the CPU may touch
// managed memory while kernels run (Pascal and later discrete GPUs).
func (d *Driver) ConcurrentManagedAccess() bool {
	return d.um != nil && d.gen.ConcurrentAccess()
}

// Process is the driver's state in one host process (a kernel.Process):
// what libcuda and nvidia.ko keep per process, its contexts. Its threads
// are the kernel process's sim.Procs that call its contexts' methods;
// its file descriptors (dma-buf handles among them) are the kernel
// process's. When the kernel process exits, its contexts are destroyed
// and the memory they hold is reclaimed, as the driver does when a
// process dies (the release of its /dev/nvidia* files).
type Process struct {
	d  *Driver
	kp *kern.Process
	// name and node are kp's at attach: the node is where the process's
	// host memory and CPU copies go (sched_setaffinity after attach does
	// not move them; the model has no migration of a running process).
	name    string
	node    int
	primary []*Context
	// ctxs are the live contexts, in creation order.
	ctxs []*Context
}

// NewProcess starts a kernel process called name whose threads run on
// NUMA node node (their CPU accesses and memcpys use that node's caches
// and memory), and attaches the driver to it.
func (d *Driver) NewProcess(name string, node int) (*Process, error) {
	kp, err := d.k.NewProcess(name, node)
	if err != nil {
		return nil, fmt.Errorf("cuda: new process: %w", err)
	}
	return d.Attach(kp)
}

// Attach is the driver's first use in kernel process kp (cuInit in that
// process: libcuda opens /dev/nvidiactl): it returns the driver's state
// for kp, made on first use, and registers its reclaim at kp's exit. kp
// must be a live process of the driver's kernel.
func (d *Driver) Attach(kp *kern.Process) (*Process, error) {
	for _, pr := range d.procs {
		if pr.kp == kp {
			return pr, nil
		}
	}
	switch {
	case kp == nil || kp.Kernel() != d.k:
		return nil, errors.New("cuda: attach: the process is not one of the driver's kernel")
	case kp.Exited():
		return nil, fmt.Errorf("cuda: attach %s: %w", kp.Name(), kern.ErrExited)
	}
	pr := &Process{d: d, kp: kp, name: kp.Name(), node: kp.Node(), primary: make([]*Context, len(d.sys.Devices))}
	d.procs = append(d.procs, pr)
	kp.OnExit("cuda", pr.exit)
	return pr, nil
}

// exit reclaims what the process held when its kernel process exited
// (after its descriptors were closed): every live context is destroyed,
// newest first, which waits for its work and frees its memory. Memory a
// dma-buf still exports stays until the dma-buf's last reference goes,
// in another process (the exporter's reference, as with cuMemFree).
func (pr *Process) exit(t *sim.Proc) error {
	if t == nil {
		return fmt.Errorf("cuda: exit of %s: no thread to wait for its contexts' work", pr.name)
	}
	var errs []error
	for i := len(pr.ctxs) - 1; i >= 0; i-- {
		c := pr.ctxs[i]
		if err := c.Destroy(t); err != nil {
			errs = append(errs, fmt.Errorf("context %d: %w", c.id, err))
			c.gone = true
		}
	}
	pr.ctxs = nil
	clear(pr.primary)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cuda: exit of %s: %w", pr.name, err)
	}
	return nil
}

// Name is the process's name.
func (pr *Process) Name() string { return pr.name }

// Node is the NUMA node its threads run on.
func (pr *Process) Node() int { return pr.node }

// Driver is the driver the process uses.
func (pr *Process) Driver() *Driver { return pr.d }

// KernelProcess is the kernel's process: its pid, descriptors (Dup,
// SendFD, Close), address space and exit.
func (pr *Process) KernelProcess() *kern.Process { return pr.kp }

// Contexts lists the process's live contexts, in creation order.
func (pr *Process) Contexts() []*Context { return slices.Clone(pr.ctxs) }

// live refuses calls of a process that has exited.
func (pr *Process) live(call string) error {
	if pr.kp.Exited() {
		return failf(call, ErrorDeinitialized, "process %s has exited", pr.name)
	}
	return nil
}

// PrimaryContext is cuDevicePrimaryCtxRetain: the device's primary
// context in this process, made on first use (what the runtime API
// uses).
func (pr *Process) PrimaryContext(dev int) (*Context, error) {
	if err := pr.live("cuDevicePrimaryCtxRetain"); err != nil {
		return nil, err
	}
	if dev < 0 || dev >= len(pr.primary) {
		return nil, failf("cuDevicePrimaryCtxRetain", ErrorInvalidDevice, "device %d of %d", dev, len(pr.primary))
	}
	if c := pr.primary[dev]; c != nil {
		return c, nil
	}
	c := pr.d.newContext(pr, dev)
	pr.primary[dev] = c
	return c, nil
}

// CtxCreate is cuCtxCreate: a new context on dev, apart from the
// primary one. Memory allocated in one context is not usable by kernels
// of another (foreign-context-pointer).
func (pr *Process) CtxCreate(dev int) (*Context, error) {
	if err := pr.live("cuCtxCreate"); err != nil {
		return nil, err
	}
	if dev < 0 || dev >= len(pr.primary) {
		return nil, failf("cuCtxCreate", ErrorInvalidDevice, "device %d of %d", dev, len(pr.primary))
	}
	return pr.d.newContext(pr, dev), nil
}

// Malloc is malloc(3): size bytes of pageable memory of the process, on
// the node its memory policy gives the process's node
// (kernel.Process.AllocNodes: its node by default, the policy's under
// MPOL_BIND or MPOL_PREFERRED), placed at once; for pages placed at
// first touch by the touching thread, a program maps memory with the
// kernel process's MmapAnon instead (copies from it are pageable
// copies too). Below HugePage it is page-scattered as user memory is
// (mem.Vmalloc: the model's host addresses are kernel addresses); from
// HugePage up it is physically contiguous when the node has the room, as
// a large anonymous mapping backed by transparent huge pages is in 2 MiB
// pieces (the model does not keep the 2 MiB seams: it has no page
// tables for user memory; what it changes is only that the content
// model holds one span, not one per 4 KiB page). The driver does not
// know it: a copy from it is staged, a kernel may not touch it.
func (pr *Process) Malloc(size uint64) (mem.VirtAddr, error) {
	if pr.kp.Exited() {
		return 0, fmt.Errorf("cuda: malloc(%#x) in %s: %w", size, pr.name, kern.ErrExited)
	}
	va, err := pr.malloc(size)
	if err != nil {
		return 0, fmt.Errorf("cuda: malloc(%#x) in %s: %w", size, pr.name, err)
	}
	// The kernel process's address space records it, so that the
	// process's exit frees what the program did not.
	err = pr.kp.MM.Map(kern.VMA{Start: va, Size: size, Name: "anon",
		Close: func(*sim.Proc) error { return pr.free(va) }})
	if err != nil {
		return 0, errors.Join(fmt.Errorf("cuda: malloc(%#x) in %s: %w", size, pr.name, err), pr.free(va))
	}
	pr.d.reclaim(mem.GPUAddr(va), size)
	return va, nil
}

func (pr *Process) malloc(size uint64) (mem.VirtAddr, error) {
	m := pr.d.m.Mem
	nodes := pr.kp.AllocNodes(nil)
	if nodes == nil {
		nodes = []int{pr.node}
	}
	var errs []error
	for _, n := range nodes {
		if size >= HugePage {
			if va, err := m.Kmalloc(n, size); err == nil {
				return va, nil
			}
		}
		va, err := m.Vmalloc(n, size)
		if err == nil {
			return va, nil
		}
		errs = append(errs, fmt.Errorf("node %d: %w", n, err))
	}
	return 0, errors.Join(errs...)
}

// reclaim forgets the freed allocations that [base, base+size) reuses:
// memory handed out again (a malloc at an address cuMemFreeHost gave
// back) is live, not a use after free.
func (d *Driver) reclaim(base mem.GPUAddr, size uint64) {
	end := base + mem.GPUAddr(size)
	for i := range min(d.nFreed, FreedRemembered) {
		f := &d.freed[i]
		if f.t.Base < end && base < f.t.Base+mem.GPUAddr(f.t.Size) {
			f.t.Size = 0
		}
	}
}

// HugePage is the transparent huge page size from which Malloc backs
// memory contiguously (x86-64 PMD pages, THP).
const HugePage = 2 << 20

// FreePageable is free(3) of what Malloc returned: EINVAL for an
// address Malloc of this process did not return or that was freed.
func (pr *Process) FreePageable(va mem.VirtAddr) error {
	if _, err := pr.kp.MM.Unmap(va); err != nil {
		return fmt.Errorf("cuda: free(%v) in %s: %w", va, pr.name, err)
	}
	if err := pr.free(va); err != nil {
		return fmt.Errorf("cuda: free(%v) in %s: %w", va, pr.name, err)
	}
	return nil
}

func (pr *Process) free(va mem.VirtAddr) error {
	m := pr.d.m.Mem
	if c, _, _ := m.Classify(va); c == mem.ClassLinear {
		return m.Kfree(va)
	}
	return m.Vfree(va)
}

// Context is a CUDA context: one process's use of one GPU (CUcontext).
// Its methods are the driver API calls made with it current; p is the
// calling thread, which pays each call's host time.
type Context struct {
	d       *Driver
	proc    *Process
	dev     *gpu.Device
	id      int
	primary bool
	legacy  *Stream
	gone    bool
	// imports are the external memory objects not yet destroyed, in
	// import order (extmem.go).
	imports []*ExternalMemory
}

func (d *Driver) newContext(pr *Process, dev int) *Context {
	c := &Context{d: d, proc: pr, dev: d.sys.Devices[dev], id: len(d.ctxs) + 1}
	c.legacy = &Stream{ctx: c, s: c.dev.DefaultStream()}
	d.ctxs = append(d.ctxs, c)
	pr.ctxs = append(pr.ctxs, c)
	if !d.hasStream(dev, c.legacy.s) {
		d.streams[dev] = append(d.streams[dev], c.legacy)
	}
	return c
}

func (d *Driver) hasStream(dev int, s *gpu.Stream) bool {
	for _, x := range d.streams[dev] {
		if x.s == s {
			return true
		}
	}
	return false
}

// ID is the context's number in the driver (CU_POINTER_ATTRIBUTE_CONTEXT
// answers it), from 1.
func (c *Context) ID() int { return c.id }

// Device is the context's GPU ordinal.
func (c *Context) Device() int { return c.dev.Index }

// GPU is the context's GPU in the model.
func (c *Context) GPU() *gpu.Device { return c.dev }

// Process is the process the context belongs to.
func (c *Context) Process() *Process { return c.proc }

// Driver is the driver.
func (c *Context) Driver() *Driver { return c.d }

// check refuses calls on a destroyed context.
func (c *Context) check(call string) error {
	if c == nil || c.gone {
		return failf(call, ErrorInvalidContext, "context destroyed")
	}
	return nil
}

// Synchronize is cuCtxSynchronize: p blocks until the GPU's work
// enqueued so far is done (every stream of the GPU: the model's contexts
// on one GPU share its streams' engines, and the wait covers them all).
func (c *Context) Synchronize(p *sim.Proc) error {
	if err := c.check("cuCtxSynchronize"); err != nil {
		return err
	}
	c.dev.Synchronize(p)
	c.d.waitStaged(p, c.dev.Index)
	c.d.active[c.dev.Index] = false
	return nil
}

// synced clears the GPU's active flag when nothing is left in flight
// after a stream or event synchronisation.
func (d *Driver) synced(dev int) {
	for _, s := range d.streams[dev] {
		if !s.s.Query() {
			return
		}
	}
	d.active[dev] = false
}

// EnablePeerAccess is cuCtxEnablePeerAccess: kernels of c may then
// access peer's device memory.
func (c *Context) EnablePeerAccess(peer *Context) error {
	const call = "cuCtxEnablePeerAccess"
	if err := c.check(call); err != nil {
		return err
	}
	if peer == nil || peer.gone || peer.d != c.d {
		return failf(call, ErrorInvalidContext, "peer context")
	}
	return wrap(call, c.dev.EnablePeerAccess(peer.dev))
}

// MemGetInfo is cuMemGetInfo: free and total memory of the GPU.
func (c *Context) MemGetInfo() (free, total uint64) { return c.dev.MemGetInfo() }

// Destroy is cuCtxDestroy: the context's work is waited for, its memory
// freed (device and managed memory, host memory it allocated or
// registered), and the context can no longer be used. A primary context
// is released (cuDevicePrimaryCtxRelease to zero) the same way.
func (c *Context) Destroy(p *sim.Proc) error {
	if err := c.check("cuCtxDestroy"); err != nil {
		return err
	}
	c.dev.Synchronize(p)
	for _, a := range c.d.sys.Allocations() {
		r := c.d.allocs[a.BufferID]
		if r == nil || r.ctx != c || r.freedBy != "" {
			continue
		}
		var err error
		switch r.kind {
		case MemPinned:
			if r.bytes > 0 {
				err = c.MemFreeHost(p, r.a.HostVA)
			} else {
				err = c.MemHostUnregister(p, r.a.HostVA)
			}
		default:
			err = c.MemFree(p, r.a.Addr)
		}
		if err != nil {
			return fail("cuCtxDestroy", ResultOf(err), err)
		}
	}
	// The driver drops what the context imported, as
	// cuDestroyExternalMemory would.
	for len(c.imports) > 0 {
		if err := c.DestroyExternalMemory(p, c.imports[0]); err != nil {
			return fail("cuCtxDestroy", ResultOf(err), err)
		}
	}
	c.gone = true
	pr := c.proc
	if pr.primary[c.dev.Index] == c {
		pr.primary[c.dev.Index] = nil
	}
	pr.ctxs = slices.DeleteFunc(pr.ctxs, func(x *Context) bool { return x == c })
	return nil
}

// ---- resolving pointers ----

// place is what a range resolved to.
type place struct {
	t    Target
	a    *alloc // live allocation
	node int    // host memory's node
	// inside: the whole range lies in the allocation (or is mapped, for
	// pageable memory).
	inside bool
}

// resolve is the driver's view of [addr, addr+size): an allocation of
// the unified address map, a recently freed one, pageable host memory,
// or nothing.
func (d *Driver) resolve(addr mem.GPUAddr, size uint64) place {
	if attr, err := d.sys.PointerAttributes(addr); err == nil {
		a := d.allocs[attr.BufferID]
		if a == nil {
			// Made under the façade (gpu directly): no provenance.
			a = &alloc{a: gpu.Allocation{Addr: attr.RangeStart, Size: attr.RangeSize, Type: attr.Type,
				Device: attr.Device, BufferID: attr.BufferID, HostVA: attr.HostPointer, Mapped: attr.Mapped}}
			a.kind = kindOf(attr.Type)
		}
		pl := place{t: d.target(a), a: a, node: -1}
		if a.freedBy != "" {
			pl.t.Kind, pl.t.Freed, pl.a = MemFreed, a.freedBy, nil
		}
		end, ok := addr.Add(size)
		pl.inside = ok && size > 0 && end <= a.a.End()
		if a.kind == MemPinned {
			pl.node = d.hostNode(a.a.HostVA)
		}
		return pl
	}
	for i := range min(d.nFreed, FreedRemembered) {
		f := &d.freed[(d.nFreed-1-i)%FreedRemembered]
		if f.t.Base <= addr && addr < f.t.Base+mem.GPUAddr(f.t.Size) {
			end, ok := addr.Add(size)
			return place{t: f.t, node: -1, inside: ok && end <= f.t.Base+mem.GPUAddr(f.t.Size)}
		}
	}
	if size > 0 {
		phys, c, _, err := d.m.Mem.Translate(mem.VirtAddr(addr), size)
		if err == nil {
			n, ok := d.m.Mem.NodeOf(phys[0].Start)
			if ok {
				return place{t: Target{Kind: MemPageable, Base: addr, Size: size, Device: -1}, node: n, inside: true}
			}
		} else if c == mem.ClassAnon && errors.Is(err, mem.ErrNotPresent) {
			// Anonymous memory not touched yet: pageable, its node
			// -1 until the copy's CPU touches it (Context.place).
			return place{t: Target{Kind: MemPageable, Base: addr, Size: size, Device: -1}, node: -1, inside: true}
		}
	}
	return place{t: Target{Kind: MemInvalid, Device: -1}, node: -1}
}

func kindOf(t gpu.MemoryType) MemKind {
	switch t {
	case gpu.MemoryHost:
		return MemPinned
	case gpu.MemoryDevice:
		return MemDevice
	case gpu.MemoryManaged:
		return MemManaged
	}
	return MemInvalid
}

// hostNode is the NUMA node of host memory at va: of its first page
// (any mapping: the linear map of cuMemHostAlloc's pages, the pages of
// registered pageable or anonymous memory).
func (d *Driver) hostNode(va mem.VirtAddr) int {
	if phys, _, _, err := d.m.Mem.Translate(va, 1); err == nil {
		if n, ok := d.m.Mem.NodeOf(phys[0].Start); ok {
			return n
		}
	}
	return 0
}

// target describes a live allocation.
func (d *Driver) target(a *alloc) Target {
	t := Target{
		Kind: a.kind, Base: a.a.Addr, Size: a.a.Size, Device: a.a.Device, Mapped: a.a.Mapped,
		Origin: a.origin, ConcurrentManaged: d.ConcurrentManagedAccess(),
	}
	if a.kind == MemPinned {
		t.Portable = a.flags&HostAllocPortable != 0
	}
	if a.ctx != nil {
		t.Context, t.Process = a.ctx.id, a.ctx.proc.name
	}
	for _, on := range d.active {
		t.GPUActive = t.GPUActive || on
	}
	return t
}

// record enters a new allocation.
func (d *Driver) record(c *Context, p *sim.Proc, call string, ga gpu.Allocation, kind MemKind, flags uint32) *alloc {
	a := &alloc{a: ga, kind: kind, ctx: c, origin: origin(call, p.Now(), p), flags: flags}
	d.allocs[ga.BufferID] = a
	return a
}

// forget removes a freed allocation and remembers it for use after
// free.
func (d *Driver) forget(a *alloc, freedBy string) {
	t := d.target(a)
	t.Kind, t.Freed = MemFreed, freedBy
	d.freed[d.nFreed%FreedRemembered] = freedAlloc{t: t}
	d.nFreed++
	delete(d.allocs, a.a.BufferID)
}

// observe reports one use of memory to the observers.
func (c *Context) observe(p *sim.Proc, op Op, call string, addr mem.GPUAddr, size uint64, write bool, pl place, err error) {
	if !c.d.Hooks.Active() {
		return
	}
	c.d.ev = Observation{
		Header: sim.Header{Time: p.Now(), Proc: p.Name(), Component: "cuda", Cause: sim.CauseCall},
		Op:     op, Call: call, Process: c.proc.name, Context: c.id,
		Device: c.dev.Index, DeviceName: c.dev.Name, Addr: addr, Size: size, Write: write, Target: pl.t, Err: err,
	}
	c.d.Hooks.Emit(&c.d.ev)
}

// observeUnflushed reports a copy into device memory that returned
// before its writes are visible to a third-party reader (for visible).
func (c *Context) observeUnflushed(p *sim.Proc, call string, addr mem.GPUAddr, size uint64, pl place, visible sim.Time) {
	if !c.d.Hooks.Active() {
		return
	}
	c.d.ev = Observation{
		Header: sim.Header{Time: p.Now(), Proc: p.Name(), Component: "cuda", Cause: sim.CauseCall},
		Op:     OpCopyUnflushed, Call: call, Process: c.proc.name, Context: c.id,
		Device: c.dev.Index, DeviceName: c.dev.Name, Addr: addr, Size: size, Write: true, Target: pl.t, Visible: visible,
	}
	c.d.Hooks.Emit(&c.d.ev)
}

// foreign reports whether memory of pl may not be used by c's process
// at all: it belongs to another process (whose pointers mean nothing
// here; the model's one address space is what recognises them).
func (c *Context) foreign(pl place) bool {
	return pl.t.Process != "" && pl.t.Process != c.proc.name
}

// foreignToKernel reports whether a kernel of c may not use pl although
// its process may: device memory of another context on the same GPU,
// non-portable pinned memory of another context.
func (c *Context) foreignToKernel(pl place) bool {
	if c.foreign(pl) {
		return true
	}
	if pl.t.Context == 0 || pl.t.Context == c.id {
		return false
	}
	switch pl.t.Kind {
	case MemDevice:
		return pl.t.Device == c.dev.Index
	case MemPinned:
		return !pl.t.Portable
	}
	return false
}
