package nvp2p

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	kern "github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// ENOTSUPP is the kernel's ENOTSUPP (524), which nv-p2p.c returns for
// what it does not support: not a user-space errno, so package syscall
// has no name for it.
const ENOTSUPP = syscall.Errno(524)

// Versions of the structures, as nv-p2p.h defines them.
const (
	PageTableVersion  = 0x00010002 // NVIDIA_P2P_PAGE_TABLE_VERSION
	DMAMappingVersion = 0x00020003 // NVIDIA_P2P_DMA_MAPPING_VERSION
)

// GPUPageSize is the granule of discrete GPUs' pins: 64 KiB
// (NVRM_P2P_PAGESIZE_BIG_64K; nv_p2p_get_pages refuses an address or
// length not aligned to it with -EINVAL).
const GPUPageSize = gpu.BARPageSize

// TegraPageSize is the granule of the Tegra flavour: the host page.
const TegraPageSize = mem.PageSize

// PageSize is enum nvidia_p2p_page_size_type.
type PageSize uint32

const (
	PageSize4KB   PageSize = iota // NVIDIA_P2P_PAGE_SIZE_4KB
	PageSize64KB                  // NVIDIA_P2P_PAGE_SIZE_64KB
	PageSize128KB                 // NVIDIA_P2P_PAGE_SIZE_128KB
)

// Bytes is the page size in bytes.
func (s PageSize) Bytes() uint64 {
	switch s {
	case PageSize4KB:
		return 4 << 10
	case PageSize64KB:
		return 64 << 10
	case PageSize128KB:
		return 128 << 10
	}
	return 0
}

// Flags of the persistent calls (NVIDIA_P2P_FLAGS_*).
const (
	FlagsDefault          = 0
	FlagsForceBAR1Mapping = 1 // NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING
)

// Costs the driver charges the calling thread. NVIDIA publishes none and
// docs/measurements records none for nvidia_p2p: both are assumed, of
// the order of cuMemHostRegister's per-page cost scaled to 64 KiB pages
// plus an RM call. The one public order of magnitude, gdrcopy's README
// (github.com/NVIDIA/gdrcopy: pinning is "potentially expensive, 10us-1ms
// depending on the buffer size"), covers gdr_pin_buffer's whole path;
// the model's 64 KiB pin (6 µs) sits below its low end and a 64 MiB pin
// (1 ms) at its high end.
var (
	// CallCost is one RM call (get_pages, put_pages, dma_map_pages).
	CallCost = 5 * sim.Microsecond
	// PinCostPerPage is pinning and mapping one 64 KiB page into BAR1.
	PinCostPerPage = 1 * sim.Microsecond
	// UnpinCostPerPage is unmapping one.
	UnpinCostPerPage = 500 * sim.Nanosecond
)

// FreeCallback is the free_callback a third-party driver registers with
// GetPages: the NVIDIA driver calls it, in the thread freeing the
// memory (cuMemFree, or the process's exit), before the memory goes.
// It must call FreePageTable (and FreeDMAMapping) only, may block
// briefly, and must not call PutPages: NVIDIA's guide ("Unpin
// Callback").
type FreeCallback func(t *sim.Proc, data any)

// Page is struct nvidia_p2p_page: the BAR1 (bus) address of one GPU page.
type Page struct {
	PhysicalAddress mem.PhysAddr
}

// PageTable is struct nvidia_p2p_page_table: the pinned pages of a range
// of GPU memory, in order.
type PageTable struct {
	Version  uint32
	PageSize PageSize
	Pages    []Page
	// GPUUUID names the GPU (the model gives its name).
	GPUUUID string

	d          *Driver
	dev        *gpu.Device
	bar        *gpu.BARMapping
	owner      *kern.Process
	addr       mem.GPUAddr
	length     uint64
	bufferID   uint64
	persistent bool
	forcePCIe  bool
	tegra      bool
	phys       []mem.PhysRange // Tegra: the host pages
	cb         FreeCallback
	data       any
	maps       []*DMAMapping
	// state: live until put or freed by the driver.
	put, revoked bool
	inCallback   bool
	freedInCB    bool
}

// Entries is the number of pages.
func (pt *PageTable) Entries() int { return len(pt.Pages) }

// Addr and Length are the pinned range.
func (pt *PageTable) Addr() mem.GPUAddr { return pt.addr }

// Length is the pinned range's length.
func (pt *PageTable) Length() uint64 { return pt.length }

// BufferID is the allocation's CU_POINTER_ATTRIBUTE_BUFFER_ID: a
// middleware caching pins checks it to see the memory was not freed and
// allocated again at the same address.
func (pt *PageTable) BufferID() uint64 { return pt.bufferID }

// Persistent says it came from GetPagesPersistent.
func (pt *PageTable) Persistent() bool { return pt.persistent }

// Live says it is neither put nor revoked by the driver.
func (pt *PageTable) Live() bool { return !pt.put && !pt.revoked }

// Revoked says the driver took the pages back (the memory was freed,
// or its process exited) and called the free callback.
func (pt *PageTable) Revoked() bool { return pt.revoked }

// DMAMapping is struct nvidia_p2p_dma_mapping: the page table's pages
// as a third-party device addresses them.
type DMAMapping struct {
	Version      uint32
	PageSizeType PageSize
	DMAAddresses []mem.DMAAddr
	// Peer is the device (pci_dev; on Tegra, struct device).
	Peer *dma.Device

	pt   *PageTable
	dir  dma.Direction
	live bool
}

// Entries is the number of addresses.
func (m *DMAMapping) Entries() int { return len(m.DMAAddresses) }

// Driver is the nvidia_p2p interface of nvidia.ko for one machine:
// pins of GPU memory through BAR1 for third-party devices (GPUDirect
// RDMA), their page tables, free callbacks and DMA mappings. On a
// machine whose GPU is integrated (Jetson) it is the Tegra flavour
// (tegra.go).
type Driver struct {
	cu *cuda.Driver
	x  *dma.DMA
	// Hooks receives every Event.
	Hooks sim.Hooks[Event]
	tegra bool
	// tables are the live page tables, in pin order.
	tables []*PageTable
}

// New loads the interface over the CUDA driver cu and the DMA layer x:
// each discrete GPU's BAR1 is a peer window of x (gpu.New registers
// it: a device's access to a BAR1 address lands in the VRAM mapped
// there; New registers any that is not), and the
// driver watches frees (cuMemFree, cuMemFreeHost, a process's exit)
// to revoke pins.
func New(cu *cuda.Driver, x *dma.DMA) (*Driver, error) {
	if cu == nil || x == nil {
		return nil, errors.New("nvp2p: no CUDA driver or DMA layer")
	}
	d := &Driver{cu: cu, x: x}
	sys := cu.System()
	for _, g := range sys.Devices {
		if g.Integrated() {
			d.tegra = true
			continue
		}
		if x.PeerAt(g.BAR1().Base()) == nil {
			x.AddPeerMemory(g.BAR1())
		}
	}
	sys.OnFree(d.freed)
	cu.SetMemopsWindow(d.memopsWindow)
	return d, nil
}

// MemopsWindow is how long after a synchronous cuMemcpy into pinned
// device memory without CU_POINTER_ATTRIBUTE_SYNC_MEMOPS returns its
// data may still be invisible to a third-party reader: assumed (NVIDIA
// gives no number; the guide says only that such a copy "may return
// before" the data is visible), of the order of a PCIe round trip and
// the copy engine's write drain.
var MemopsWindow = 2 * sim.Microsecond

// memopsWindow is MemopsWindow for memory some live pin holds, 0 for
// the rest.
func (d *Driver) memopsWindow(a gpu.Allocation) sim.Time {
	for _, pt := range d.tables {
		if pt.Live() && pt.bufferID == a.BufferID {
			return MemopsWindow
		}
	}
	return 0
}

// Tegra says the machine's GPU is integrated: only the Tegra calls
// work.
func (d *Driver) Tegra() bool { return d.tegra }

// Tables are the live page tables, in pin order.
func (d *Driver) Tables() []*PageTable {
	var out []*PageTable
	for _, pt := range d.tables {
		if pt.Live() {
			out = append(out, pt)
		}
	}
	return out
}

// Tokens is cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_P2P_TOKENS) of
// device memory at addr: the p2pToken and vaSpaceToken a process passes
// to a third-party driver so that it may pin the memory from another
// address space. Deprecated since CUDA 6.0, as the guide says; the
// model derives both from the owning process.
func (d *Driver) Tokens(addr mem.GPUAddr) (p2pToken uint64, vaSpace uint32, err error) {
	r, err := d.cu.P2PRange(addr, 1)
	if err != nil {
		return 0, 0, fmt.Errorf("nvp2p: tokens of %v: %w", addr, syscall.EINVAL)
	}
	return 0x1000_0000 + uint64(r.Owner.PID()), uint32(r.Owner.PID()), nil
}

func (d *Driver) errno(t *sim.Proc, ev Event, call string, errno syscall.Errno, format string, a ...any) error {
	err := fmt.Errorf("nvp2p: %s: %s: %w", call, fmt.Sprintf(format, a...), errno)
	ev.Err = err
	d.emit(t, &ev)
	return err
}

// GetPages is nvidia_p2p_get_pages: pin [addr, addr+length) of device
// memory and map it through its GPU's BAR1 in 64 KiB pages, for
// thread t of process caller (the third-party driver runs in the
// context of the process that asked it: current). With token and
// vaSpace 0 the range must belong to caller's address space, else
// -EINVAL (rm_p2p_get_pages looks the address up in the current
// process); other tokens must be the owner's (Tokens). The free
// callback is required (-EINVAL without one). An unaligned address or
// length is -EINVAL; BAR1 exhaustion -ENOMEM; overlapping pins share
// BAR1 pages. The calling thread pays CallCost and PinCostPerPage.
func (d *Driver) GetPages(t *sim.Proc, caller *kern.Process, token uint64, vaSpace uint32,
	addr mem.GPUAddr, length uint64, cb FreeCallback, data any) (*PageTable, error) {
	const call = "nvidia_p2p_get_pages"
	ev := Event{Op: OpGetPages, Call: call, Addr: addr, Size: length, Token: token, Process: procName(caller)}
	t.Sleep(CallCost)
	if d.tegra {
		return nil, d.errno(t, ev, call, ENOTSUPP, "an integrated GPU has no BAR1: the Tegra get_pages takes (vaddr, size)")
	}
	if cb == nil {
		return nil, d.errno(t, ev, call, syscall.EINVAL, "no free callback")
	}
	return d.getPages(t, ev, caller, token, vaSpace, addr, length, cb, data, false)
}

// GetPagesPersistent is nvidia_p2p_get_pages_persistent: a pin with no
// free callback that lasts until PutPagesPersistent, whatever the
// application does (the memory must not be freed meanwhile). flags may
// be FlagsForceBAR1Mapping (kept; dma_map_pages then refuses, as
// nv-p2p.c: forced PCIe mappings are for CPU mappings only).
func (d *Driver) GetPagesPersistent(t *sim.Proc, caller *kern.Process, addr mem.GPUAddr, length uint64, flags uint32) (*PageTable, error) {
	const call = "nvidia_p2p_get_pages_persistent"
	ev := Event{Op: OpGetPages, Call: call, Addr: addr, Size: length, Persistent: true, Process: procName(caller)}
	t.Sleep(CallCost)
	if d.tegra {
		return nil, d.errno(t, ev, call, ENOTSUPP, "no persistent pins on Tegra")
	}
	if flags&^FlagsForceBAR1Mapping != 0 {
		return nil, d.errno(t, ev, call, syscall.EINVAL, "flags %#x", flags)
	}
	pt, err := d.getPages(t, ev, caller, 0, 0, addr, length, nil, nil, true)
	if pt != nil {
		pt.forcePCIe = flags&FlagsForceBAR1Mapping != 0
	}
	return pt, err
}

func (d *Driver) getPages(t *sim.Proc, ev Event, caller *kern.Process, token uint64, vaSpace uint32,
	addr mem.GPUAddr, length uint64, cb FreeCallback, data any, persistent bool) (*PageTable, error) {
	call := ev.Call
	if uint64(addr)%GPUPageSize != 0 || length%GPUPageSize != 0 || length == 0 {
		return nil, d.errno(t, ev, call, syscall.EINVAL, "address %v or length %#x not aligned to 64 KiB", addr, length)
	}
	r, err := d.cu.P2PRange(addr, length)
	if err != nil {
		return nil, d.errno(t, ev, call, syscall.EINVAL, "%v", err)
	}
	ev.BufferID, ev.Device, ev.Owner = r.Alloc.BufferID, r.Alloc.Device, procName(r.Owner)
	switch {
	case token == 0 && vaSpace == 0:
		if caller != r.Owner {
			return nil, d.errno(t, ev, call, syscall.EINVAL, "token 0: %v is not in %s's address space (it is %s's)", addr, procName(caller), procName(r.Owner))
		}
	default:
		wt, wv, _ := d.Tokens(addr)
		if token != wt || vaSpace != wv {
			return nil, d.errno(t, ev, call, syscall.EINVAL, "tokens %#x/%d are not those of %v", token, vaSpace, addr)
		}
	}
	dev := d.cu.System().Devices[r.Alloc.Device]
	m, err := dev.BAR1().Map(addr, length)
	switch {
	case errors.Is(err, gpu.ErrBARExhausted):
		ev.BARFree = dev.BAR1().Info().Free
		return nil, d.errno(t, ev, call, syscall.ENOMEM, "%v", err)
	case err != nil:
		return nil, d.errno(t, ev, call, syscall.EINVAL, "%v", err)
	}
	pt := &PageTable{
		Version: PageTableVersion, PageSize: PageSize64KB, GPUUUID: dev.Name,
		d: d, dev: dev, bar: m, owner: r.Owner, addr: addr, length: length, bufferID: r.Alloc.BufferID,
		persistent: persistent, cb: cb, data: data,
	}
	for _, p := range m.Pages {
		pt.Pages = append(pt.Pages, Page{PhysicalAddress: p.BAR})
		ev.BAR = append(ev.BAR, p.BAR)
	}
	t.Sleep(sim.Time(len(pt.Pages)) * PinCostPerPage)
	d.tables = append(d.tables, pt)
	ev.Pages, ev.BARFree = len(pt.Pages), dev.BAR1().Info().Free
	d.emit(t, &ev)
	return pt, nil
}

// PutPages is nvidia_p2p_put_pages: unpin a page table GetPages gave,
// with its DMA mappings. A nil table, or one the driver already revoked
// (its free callback ran), is 0, as nv-p2p.c returns when the RM no
// longer tracks it. Called from inside the table's own free callback it
// would deadlock on the lock the freeing thread holds: the model
// returns EDEADLK and reports it (OpPutPages with InCallback). A
// persistent table is -EINVAL (PutPagesPersistent).
func (d *Driver) PutPages(t *sim.Proc, token uint64, vaSpace uint32, addr mem.GPUAddr, pt *PageTable) error {
	const call = "nvidia_p2p_put_pages"
	ev := Event{Op: OpPutPages, Call: call, Addr: addr, Token: token}
	if pt == nil {
		return nil
	}
	ev.fill(pt)
	if pt.inCallback || (pt.revoked && d.callbackRunning()) {
		ev.InCallback = true
		return d.errno(t, ev, call, syscall.EDEADLK, "called from the free callback")
	}
	t.Sleep(CallCost)
	switch {
	case pt.revoked:
		d.emit(t, &ev)
		return nil
	case pt.put:
		return d.errno(t, ev, call, syscall.EINVAL, "page table already put")
	case pt.persistent:
		return d.errno(t, ev, call, syscall.EINVAL, "a persistent page table: nvidia_p2p_put_pages_persistent")
	case addr != pt.addr:
		return d.errno(t, ev, call, syscall.EINVAL, "address %v is not the pinned %v", addr, pt.addr)
	}
	d.release(t, pt)
	pt.put = true
	d.emit(t, &ev)
	return nil
}

// PutPagesPersistent is nvidia_p2p_put_pages_persistent; flags must be 0.
func (d *Driver) PutPagesPersistent(t *sim.Proc, addr mem.GPUAddr, pt *PageTable, flags uint32) error {
	const call = "nvidia_p2p_put_pages_persistent"
	ev := Event{Op: OpPutPages, Call: call, Addr: addr, Persistent: true}
	if flags != 0 {
		return d.errno(t, ev, call, syscall.EINVAL, "flags %#x", flags)
	}
	if pt == nil {
		return nil
	}
	ev.fill(pt)
	t.Sleep(CallCost)
	switch {
	case !pt.persistent:
		return d.errno(t, ev, call, syscall.EINVAL, "not a persistent page table")
	case pt.put:
		return d.errno(t, ev, call, syscall.EINVAL, "page table already put")
	}
	d.release(t, pt)
	pt.put = true
	d.emit(t, &ev)
	return nil
}

// FreePageTable is nvidia_p2p_free_page_table, what a free callback
// calls: in the open modules a no-op returning 0 (the RM frees the table
// after the callback), here also the record that the callback did.
func (d *Driver) FreePageTable(t *sim.Proc, pt *PageTable) error {
	ev := Event{Op: OpFreePageTable, Call: "nvidia_p2p_free_page_table"}
	if pt != nil {
		ev.fill(pt)
		ev.InCallback = pt.inCallback
		if pt.inCallback {
			pt.freedInCB = true
		}
	}
	d.emit(t, &ev)
	return nil
}

// FreeDMAMapping is nvidia_p2p_free_dma_mapping, which a free callback
// may call for each mapping: also a no-op (the RM frees them).
func (d *Driver) FreeDMAMapping(t *sim.Proc, m *DMAMapping) error {
	ev := Event{Op: OpFreeDMAMapping, Call: "nvidia_p2p_free_dma_mapping"}
	if m != nil {
		ev.fill(m.pt)
		ev.InCallback = m.pt.inCallback
		ev.Peer = m.Peer.Name()
	}
	d.emit(t, &ev)
	return nil
}

// DMAMapPages is nvidia_p2p_dma_map_pages: the page table's pages as
// peer addresses them. GPUDirect RDMA needs peer-to-peer to reach BAR1
// untranslated: a peer behind an IOMMU that translates (strict or lazy)
// is refused with -ENOTSUPP (NVIDIA's guide: disable the IOMMU, or use
// passthrough, for GPUDirect RDMA), as is a peer below another socket's
// root complex (the guide: across CPU/IOH it is not supported), unless
// the DMA layer was told to carry cross-socket peer traffic. A BAR1
// address beyond the peer's DMA mask is -EINVAL. The addresses are the
// BAR1 addresses (dma-direct).
func (d *Driver) DMAMapPages(t *sim.Proc, peer *dma.Device, pt *PageTable) (*DMAMapping, error) {
	const call = "nvidia_p2p_dma_map_pages"
	ev := Event{Op: OpDMAMapPages, Call: call}
	t.Sleep(CallCost)
	if peer == nil || pt == nil || !pt.Live() || pt.tegra {
		return nil, d.errno(t, ev, call, syscall.EINVAL, "no peer, or not a live page table")
	}
	ev.fill(pt)
	ev.Peer = peer.Name()
	if pt.forcePCIe {
		return nil, d.errno(t, ev, call, ENOTSUPP, "forced BAR1 mapping")
	}
	if _, direct := peer.Translator().(dma.Direct); !direct {
		ev.IOMMU = true
		return nil, d.errno(t, ev, call, ENOTSUPP, "%s is behind %s: GPUDirect RDMA needs the IOMMU off or in passthrough", peer.Name(), peer.Translator().Name())
	}
	path, err := d.Path(peer, pt.dev)
	if err != nil {
		return nil, d.errno(t, ev, call, syscall.EINVAL, "%v", err)
	}
	ev.Path = path
	if path.Kind == machine.PeerCrossSocket && !d.crossSocket() {
		return nil, d.errno(t, ev, call, ENOTSUPP, "%s and %s are below different sockets (%s)", peer.Name(), pt.dev.Name, path.At)
	}
	m := &DMAMapping{Version: DMAMappingVersion, PageSizeType: pt.PageSize, Peer: peer, pt: pt, live: true}
	for _, p := range pt.Pages {
		a := mem.DMAAddr(p.PhysicalAddress)
		if end := uint64(a) + GPUPageSize - 1; end > peer.Mask() {
			return nil, d.errno(t, ev, call, syscall.EINVAL, "BAR1 address %v beyond %s's DMA mask %#x", a, peer.Name(), peer.Mask())
		}
		m.DMAAddresses = append(m.DMAAddresses, a)
	}
	pt.maps = append(pt.maps, m)
	d.emit(t, &ev)
	return m, nil
}

// DMAUnmapPages is nvidia_p2p_dma_unmap_pages. A mapping the driver
// already tore down (revoked table) is 0.
func (d *Driver) DMAUnmapPages(t *sim.Proc, peer *dma.Device, pt *PageTable, m *DMAMapping) error {
	const call = "nvidia_p2p_dma_unmap_pages"
	ev := Event{Op: OpDMAUnmapPages, Call: call}
	if peer == nil || pt == nil || m == nil {
		return d.errno(t, ev, call, syscall.EINVAL, "no peer, table or mapping")
	}
	ev.fill(pt)
	ev.Peer = peer.Name()
	if m.pt != pt || m.Peer != peer {
		return d.errno(t, ev, call, syscall.EINVAL, "mapping of another table or peer")
	}
	if m.live {
		m.live = false
		pt.dropMap(m)
	}
	d.emit(t, &ev)
	return nil
}

// Path is where peer-to-peer traffic between dev and the GPU turns.
func (d *Driver) Path(peer *dma.Device, g *gpu.Device) (machine.PeerPath, error) {
	mach := d.x.Machine()
	for _, md := range mach.Devices {
		if md.Name == peer.Name() {
			return mach.PeerPath(md.Side(), g.GPU.Memory())
		}
	}
	for _, mg := range mach.GPUs {
		if mg.Name == peer.Name() {
			return mach.PeerPath(mg.Memory(), g.GPU.Memory())
		}
	}
	return machine.PeerPath{}, fmt.Errorf("%s is no PCIe agent of %s", peer.Name(), mach.Spec.Name)
}

// crossSocket says the DMA layer carries cross-socket peer traffic.
func (d *Driver) crossSocket() bool { return d.x.CrossSocketPeers() > 0 }

func (pt *PageTable) dropMap(m *DMAMapping) {
	for i, x := range pt.maps {
		if x == m {
			pt.maps = append(pt.maps[:i], pt.maps[i+1:]...)
			return
		}
	}
}

// release unmaps the table's pages (and tears down its DMA mappings).
func (d *Driver) release(t *sim.Proc, pt *PageTable) {
	for _, m := range pt.maps {
		if pt.tegra && m.live {
			d.unmapTegra(t, m)
		}
		m.live = false
	}
	pt.maps = nil
	if pt.tegra {
		t.Sleep(sim.Time(len(pt.Pages)) * UnpinCostPerPage)
	} else if pt.bar != nil && pt.bar.Live() {
		// The mapping is the driver's own: Unmap cannot fail on it.
		_ = pt.dev.BAR1().Unmap(pt.bar)
		t.Sleep(sim.Time(len(pt.Pages)) * UnpinCostPerPage)
	}
	for i, x := range d.tables {
		if x == pt {
			d.tables = append(d.tables[:i], d.tables[i+1:]...)
			break
		}
	}
}

func (d *Driver) callbackRunning() bool {
	for _, pt := range d.tables {
		if pt.inCallback {
			return true
		}
	}
	return false
}

// freed is the RM's teardown when memory goes (cuMemFree,
// cuMemFreeHost, context destruction at exit), in the freeing thread t:
// each non-persistent table pinning part of it gets its free callback
// (nv_p2p_mem_info_free_callback), then the RM unmaps its pages and
// frees the table. A persistent pin is left alone (the application
// broke its promise not to free it): reported, its BAR1 pages kept.
func (d *Driver) freed(t *sim.Proc, a gpu.Allocation) {
	for _, pt := range append([]*PageTable(nil), d.tables...) {
		if !pt.Live() || pt.bufferID != a.BufferID {
			continue
		}
		ev := Event{Op: OpFreeCallback, Call: "free_callback"}
		ev.fill(pt)
		if pt.persistent {
			ev.Op, ev.Call = OpFreedWhilePinned, "free of persistently pinned memory"
			d.emit(t, &ev)
			continue
		}
		start := t.Now()
		pt.inCallback = true
		d.emit(t, &ev)
		pt.cb(t, pt.data)
		pt.inCallback = false
		ev.Op, ev.Call = OpCallbackReturned, "free_callback returned"
		ev.Held = t.Now() - start
		ev.FreedTable = pt.freedInCB
		d.emit(t, &ev)
		d.release(t, pt)
		pt.revoked = true
	}
}

func procName(p *kern.Process) string {
	if p == nil {
		return ""
	}
	return p.Name()
}

// Acquire is a peer-memory client's acquire (nvidia_peermem's
// nv_mem_acquire, ib_peer_memory's peer_memory_client.acquire): whether
// [addr, addr+size) is device memory of a discrete GPU that this
// interface can pin, so that the RDMA core routes its registration
// here rather than to get_user_pages. It pins nothing.
func (d *Driver) Acquire(addr mem.GPUAddr, size uint64) bool {
	if d.tegra {
		return false
	}
	_, err := d.cu.P2PRange(addr, size)
	return err == nil
}

// Owner is the process whose context allocated device memory at addr
// (nil for anything else): the address space a token-0 pin must come
// from.
func (d *Driver) Owner(addr mem.GPUAddr) *kern.Process {
	r, err := d.cu.P2PRange(addr, 1)
	if err != nil {
		return nil
	}
	return r.Owner
}

// GPU is the GPU whose memory a page table pins (nil for the Tegra
// flavour's host memory).
func (pt *PageTable) GPU() *gpu.Device { return pt.dev }
