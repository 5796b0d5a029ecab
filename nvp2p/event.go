package nvp2p

import (
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Op is what an Event reports.
type Op uint8

const (
	// OpGetPages: a pin (get_pages, its persistent or Tegra variant);
	// Err set when refused.
	OpGetPages Op = iota + 1
	// OpPutPages: an unpin; InCallback when called from the table's own
	// free callback (a deadlock on the hardware).
	OpPutPages
	// OpFreePageTable: free_page_table, InCallback when from the
	// callback (what it should do).
	OpFreePageTable
	// OpFreeDMAMapping: free_dma_mapping.
	OpFreeDMAMapping
	// OpDMAMapPages and OpDMAUnmapPages: a peer's mapping; IOMMU set
	// when refused because the peer's IOMMU translates.
	OpDMAMapPages
	OpDMAUnmapPages
	// OpFreeCallback: the driver calls a table's free callback (the
	// memory is being freed, or its process exits).
	OpFreeCallback
	// OpCallbackReturned: it returned after Held; FreedTable says it
	// called free_page_table.
	OpCallbackReturned
	// OpFreedWhilePinned: memory under a persistent pin was freed.
	OpFreedWhilePinned
)

var opNames = [...]string{"", "get_pages", "put_pages", "free_page_table", "free_dma_mapping",
	"dma_map_pages", "dma_unmap_pages", "free_callback", "callback_returned", "freed_while_pinned"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// Event is one nvidia_p2p call or driver action, for the checker's
// gpudirect pack and traces.
type Event struct {
	sim.Header
	Op Op
	// Call is the entry point ("nvidia_p2p_get_pages").
	Call string
	// Process is the calling process (get_pages), Owner the memory's.
	Process, Owner string
	// Device is the GPU index; Peer the third-party device.
	Device int
	Peer   string
	// Addr and Size are the range; Pages its page count; BufferID the
	// allocation's; Token the p2p token passed.
	Addr     mem.GPUAddr
	Size     uint64
	Pages    int
	BufferID uint64
	Token    uint64
	// BARFree is BAR1's free space after the call (or at exhaustion).
	BARFree uint64
	// Persistent, Tegra: which flavour.
	Persistent, Tegra bool
	// InCallback: made from the table's free callback.
	InCallback bool
	// FreedTable: the callback called free_page_table (OpCallbackReturned).
	FreedTable bool
	// Held is how long the callback ran (OpCallbackReturned).
	Held sim.Time
	// IOMMU: refused because the peer's IOMMU translates.
	IOMMU bool
	// Path is the peer path (OpDMAMapPages).
	Path machine.PeerPath
	// BAR is, for a pin that succeeded, the BAR1 address of each of its
	// pages, in order: what a checker needs to name the GPU memory a
	// peer's access to a BAR1 address reaches.
	BAR []mem.PhysAddr
	// Err is the error returned, nil on success.
	Err error
}

// fill copies a table's identity into the event.
func (e *Event) fill(pt *PageTable) {
	e.Addr, e.Size, e.Pages, e.BufferID = pt.addr, pt.length, len(pt.Pages), pt.bufferID
	e.Persistent, e.Tegra = pt.persistent, pt.tegra
	e.Owner = procName(pt.owner)
	if pt.dev != nil {
		e.Device = pt.dev.Index
	}
}

func (d *Driver) emit(t *sim.Proc, e *Event) {
	if !d.Hooks.Active() {
		return
	}
	e.Component = "nvp2p"
	e.Cause = sim.CauseCall
	if e.Op == OpFreeCallback || e.Op == OpCallbackReturned || e.Op == OpFreedWhilePinned {
		e.Cause = sim.CauseLifecycle
	}
	if t != nil {
		e.Time, e.Proc = t.Now(), t.Name()
	}
	d.Hooks.Emit(e)
}
