package nvme_test

import (
	"encoding/binary"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvme"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

const preset, device = "2s-4gpu-pcie", "nvme0"

// rig is a machine in payload mode with its DMA layer and the NVMe
// controller of nvme0.
type rig struct {
	m    *machine.Machine
	x    *dma.DMA
	c    *nvme.Controller
	dev  *dma.Device
	node int
}

func newRig(t testing.TB, opt nvme.Options) *rig {
	t.Helper()
	spec, err := platform.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	m, err := machine.NewWithOptions(spec, 1, machine.Options{Payload: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	x, err := dma.New(m, m.Mem)
	if err != nil {
		t.Fatal(err)
	}
	c, err := nvme.New(m, m.Mem, x, device, opt)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{m: m, x: x, c: c, dev: c.DMA(), node: c.Node()}
}

// run runs body as the driver's process to the end of the simulation
// and fails the test if a process is left blocked.
func (r *rig) run(t *testing.T, body func(p *sim.Proc)) {
	t.Helper()
	r.m.Engine.Spawn("driver", body)
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 {
		t.Errorf("blocked processes: %v", b)
	}
}

// queue is a queue pair as the driver keeps it (struct nvme_queue):
// both rings in coherent memory, the SQ tail and CQ head it owns, the
// phase it expects.
type queue struct {
	id           uint16
	n            int
	sqVA, cqVA   mem.VirtAddr
	sqDMA, cqDMA mem.DMAAddr
	tail, head   int
	phase        bool
	cid          uint16
}

// host is a driver of the controller as nvme.ko is written: register
// accesses through BAR0, queues and buffers from dma_alloc_coherent,
// entries written with CPU stores, completions polled by phase.
type host struct {
	t     *testing.T
	r     *rig
	admin *queue
	dstrd uint8
}

func newHost(t *testing.T, r *rig) *host { return &host{t: t, r: r} }

func (h *host) rd(p *sim.Proc, off uint64, size int) uint64 {
	h.t.Helper()
	v, err := h.r.c.BARs()[0].Regs.ReadReg(p, off, size)
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

func (h *host) wr(p *sim.Proc, off uint64, size int, v uint64) {
	h.t.Helper()
	if err := h.r.c.BARs()[0].Regs.WriteReg(p, off, size, v); err != nil {
		h.t.Fatal(err)
	}
}

func (h *host) alloc(p *sim.Proc, size uint64) (mem.VirtAddr, mem.DMAAddr) {
	h.t.Helper()
	va, addr, err := h.r.dev.AllocCoherent(p, size)
	if err != nil {
		h.t.Fatal(err)
	}
	return va, addr
}

func (h *host) newQueue(p *sim.Proc, id uint16, n int) *queue {
	q := &queue{id: id, n: n, phase: true}
	q.sqVA, q.sqDMA = h.alloc(p, uint64(n*nvme.SQESize))
	q.cqVA, q.cqDMA = h.alloc(p, uint64(n*nvme.CQESize))
	return q
}

// enable is nvme_pci_configure_admin_queue: disable, program the admin
// queue, enable, and wait for CSTS.RDY (nvme_wait_ready: a read every
// millisecond up to CAP.TO). It returns CSTS.
func (h *host) enable(p *sim.Proc, entries int) uint64 {
	h.t.Helper()
	capReg := h.rd(p, nvme.RegCAP, 8)
	h.dstrd = uint8(capReg >> nvme.CapDSTRDShift & 0xf)
	if h.admin == nil {
		h.admin = h.newQueue(p, 0, entries)
	}
	q := h.admin
	q.tail, q.head, q.phase, q.cid = 0, 0, true, 0
	// nvme_init_queue clears the completion ring: entries left from
	// before a reset would otherwise look new.
	h.r.m.Mem.WriteBytes(p, h.r.node, q.cqVA, make([]byte, entries*nvme.CQESize))
	h.wr(p, nvme.RegAQA, 4, uint64(entries-1)|uint64(entries-1)<<16)
	h.wr(p, nvme.RegASQ, 8, uint64(q.sqDMA))
	h.wr(p, nvme.RegACQ, 8, uint64(q.cqDMA))
	h.wr(p, nvme.RegCC, 4, nvme.CCEnable|nvme.CCIOSQES64|nvme.CCIOCQES16)
	return h.waitCSTS(p, capReg, nvme.CSTSReady|nvme.CSTSFatal, true)
}

// waitCSTS polls CSTS every millisecond until (CSTS & mask != 0) == set,
// failing after CAP.TO.
func (h *host) waitCSTS(p *sim.Proc, capReg, mask uint64, set bool) uint64 {
	h.t.Helper()
	deadline := p.Now() + sim.Time(capReg>>nvme.CapTOShift&0xff)*500*sim.Millisecond
	for {
		csts := h.rd(p, nvme.RegCSTS, 4)
		if (csts&mask != 0) == set {
			return csts
		}
		if p.Now() > deadline {
			h.t.Fatalf("CSTS %#x: timed out after CAP.TO", csts)
		}
		p.Sleep(sim.Millisecond)
	}
}

// submit writes cmd into q's next entry and rings the tail doorbell; it
// returns the command's CID.
func (h *host) submit(p *sim.Proc, q *queue, cmd nvme.Command) uint16 {
	cmd.CID = q.cid
	q.cid++
	b := make([]byte, nvme.SQESize)
	cmd.Marshal(b)
	h.r.m.Mem.WriteBytes(p, h.r.node, q.sqVA+mem.VirtAddr(q.tail*nvme.SQESize), b)
	q.tail = (q.tail + 1) % q.n
	h.wr(p, nvme.DoorbellOffset(q.id, false, h.dstrd), 4, uint64(q.tail))
	return cmd.CID
}

// reap takes the completion at q's head if its phase says it is new,
// and rings the head doorbell.
func (h *host) reap(p *sim.Proc, q *queue) (nvme.Completion, bool) {
	b := make([]byte, nvme.CQESize)
	h.r.m.Mem.ReadBytes(p, h.r.node, q.cqVA+mem.VirtAddr(q.head*nvme.CQESize), b)
	e := nvme.ParseCompletion(b)
	if e.Phase != q.phase {
		return e, false
	}
	if q.head++; q.head == q.n {
		q.head, q.phase = 0, !q.phase
	}
	h.wr(p, nvme.DoorbellOffset(q.id, true, h.dstrd), 4, uint64(q.head))
	return e, true
}

// wait polls q every microsecond until a completion arrives, for at
// most a second of virtual time.
func (h *host) wait(p *sim.Proc, q *queue) nvme.Completion {
	h.t.Helper()
	deadline := p.Now() + sim.Second
	for p.Now() < deadline {
		if e, ok := h.reap(p, q); ok {
			return e
		}
		p.Sleep(sim.Microsecond)
	}
	h.t.Fatalf("queue %d: no completion within a second", q.id)
	return nvme.Completion{}
}

// do submits cmd on q and waits for its completion.
func (h *host) do(p *sim.Proc, q *queue, cmd nvme.Command) nvme.Completion {
	h.t.Helper()
	cid := h.submit(p, q, cmd)
	e := h.wait(p, q)
	if e.CID != cid {
		h.t.Fatalf("completion of CID %d, want %d", e.CID, cid)
	}
	return e
}

// ioQueue creates I/O queue pair id with n entries, its CQ on vector iv
// with interrupts enabled if ien.
func (h *host) ioQueue(p *sim.Proc, id uint16, n int, iv int, ien bool) *queue {
	h.t.Helper()
	q := h.newQueue(p, id, n)
	flags := uint32(1)
	if ien {
		flags |= 2
	}
	cq := nvme.Command{Opcode: nvme.AdminCreateCQ, PRP1: uint64(q.cqDMA), CDW10: uint32(id) | uint32(n-1)<<16, CDW11: flags | uint32(iv)<<16}
	if e := h.do(p, h.admin, cq); !e.Status.OK() {
		h.t.Fatalf("create I/O CQ %d: %v", id, e.Status)
	}
	sq := nvme.Command{Opcode: nvme.AdminCreateSQ, PRP1: uint64(q.sqDMA), CDW10: uint32(id) | uint32(n-1)<<16, CDW11: 1 | uint32(id)<<16}
	if e := h.do(p, h.admin, sq); !e.Status.OK() {
		h.t.Fatalf("create I/O SQ %d: %v", id, e.Status)
	}
	return q
}

// buffer is a DMA buffer of whole pages, not necessarily contiguous.
type buffer struct {
	va    []mem.VirtAddr
	pages []mem.DMAAddr
}

// pages allocates n pages one by one (dma_alloc_coherent each).
func (h *host) pages(p *sim.Proc, n int) buffer {
	var b buffer
	for range n {
		va, addr := h.alloc(p, mem.PageSize)
		b.va, b.pages = append(b.va, va), append(b.pages, addr)
	}
	return b
}

// fill writes data into b from byte off of its first page.
func (h *host) fill(p *sim.Proc, b buffer, off uint64, data []byte) {
	for i := 0; len(data) > 0; i++ {
		k := min(uint64(len(data)), mem.PageSize-off)
		h.r.m.Mem.WriteBytes(p, h.r.node, b.va[i]+mem.VirtAddr(off), data[:k])
		data, off = data[k:], 0
	}
}

// read reads n bytes of b from byte off of its first page.
func (h *host) read(p *sim.Proc, b buffer, off, n uint64) []byte {
	out := make([]byte, 0, n)
	for i := 0; uint64(len(out)) < n; i++ {
		k := min(n-uint64(len(out)), mem.PageSize-off)
		chunk := make([]byte, k)
		h.r.m.Mem.ReadBytes(p, h.r.node, b.va[i]+mem.VirtAddr(off), chunk)
		out, off = append(out, chunk...), 0
	}
	return out
}

// prp builds the data pointer of n bytes from byte off of b's first
// page, as nvme_pci_setup_prps does: PRP1, then PRP2 as the second
// page or a PRP list. The list starts listOff bytes into its page, so
// that a test can make it chain.
func (h *host) prp(p *sim.Proc, b buffer, off, n, listOff uint64) (prp1, prp2 uint64) {
	prp1 = uint64(b.pages[0]) + off
	first := mem.PageSize - off
	if n <= first {
		return prp1, 0
	}
	rest := b.pages[1:]
	if n-first <= mem.PageSize {
		return prp1, uint64(rest[0])
	}
	need := int((n - first + mem.PageSize - 1) / mem.PageSize)
	rest = rest[:need]
	va, addr := h.alloc(p, mem.PageSize)
	listVA, listDMA := va+mem.VirtAddr(listOff), uint64(addr)+listOff
	prp2 = listDMA
	for len(rest) > 0 {
		room := int((mem.PageSize - uint64(listDMA)%mem.PageSize) / 8)
		k := len(rest)
		chain := k > room
		if chain {
			k = room - 1
		}
		buf := make([]byte, 0, 8*room)
		for _, a := range rest[:k] {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(a))
		}
		rest = rest[k:]
		var nextVA mem.VirtAddr
		var nextDMA mem.DMAAddr
		if chain {
			nextVA, nextDMA = h.alloc(p, mem.PageSize)
			buf = binary.LittleEndian.AppendUint64(buf, uint64(nextDMA))
		}
		h.r.m.Mem.WriteBytes(p, h.r.node, listVA, buf)
		listVA, listDMA = nextVA, uint64(nextDMA)
	}
	return prp1, prp2
}

// rw is a Read or Write command of nlb blocks at slba.
func rw(op uint8, slba uint64, nlb int, prp1, prp2 uint64) nvme.Command {
	return nvme.Command{Opcode: op, NSID: 1, PRP1: prp1, PRP2: prp2,
		CDW10: uint32(slba), CDW11: uint32(slba >> 32), CDW12: uint32(nlb - 1)}
}

// pattern is n bytes that differ with seed and offset.
func pattern(n int, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>9 + seed*31)
	}
	return b
}

func mustStatus(t *testing.T, what string, e nvme.Completion, want nvme.Status) {
	t.Helper()
	if e.Status != want {
		t.Errorf("%s: status %v, want %v", what, e.Status, want)
	}
}
