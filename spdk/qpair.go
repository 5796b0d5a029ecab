package spdk

import (
	"encoding/binary"
	"fmt"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvme"
	"github.com/dmalab/dmalab/sim"
)

// QPair is a submission queue and its completion queue (struct
// nvme_pcie_qpair): both rings in the driver's memory, the tail and head
// it owns, the phase it expects, and a tracker per command slot with its
// PRP list page and callback (struct nvme_tracker).
type QPair struct {
	c      *Ctrlr
	id     uint16
	n      int
	sq, cq Buf
	tail   int
	head   int
	phase  bool
	// trackers are indexed by CID; free holds the free ones.
	trackers []tracker
	free     []uint16
	stats    QPairStats
	entry    [nvme.SQESize]byte
	cqe      [nvme.CQESize]byte
}

type tracker struct {
	prpList Buf
	cb      func(nvme.Completion)
	busy    bool
}

// QPairStats count a queue pair's work.
type QPairStats struct {
	// Submitted and Completed commands; Errors completions with an
	// error status; Doorbells register writes; Polls completion-entry
	// reads that found nothing new.
	Submitted, Completed, Errors, Doorbells, EmptyPolls uint64
}

func (c *Ctrlr) newQPair(p *sim.Proc, id uint16, n int) (*QPair, error) {
	q := &QPair{c: c, id: id, n: n, phase: true, trackers: make([]tracker, n-1)}
	var err error
	if q.sq, err = c.m.Alloc(uint64(n*nvme.SQESize), c.page); err != nil {
		return nil, err
	}
	if q.cq, err = c.m.Alloc(uint64(n*nvme.CQESize), c.page); err != nil {
		return nil, err
	}
	// spdk_dma_zmalloc: an old entry with the phase set would look new.
	c.m.write(p, q.cq.VA, make([]byte, q.cq.Size))
	for i := n - 2; i >= 0; i-- {
		q.free = append(q.free, uint16(i))
	}
	return q, nil
}

// ID is the queue pair's queue identifier.
func (q *QPair) ID() uint16 { return q.id }

// Outstanding is the number of commands submitted and not completed.
func (q *QPair) Outstanding() int { return len(q.trackers) - len(q.free) }

// Stats are the queue pair's counts.
func (q *QPair) Stats() QPairStats { return q.stats }

// Read submits a Read of nlb blocks at lba into buf; cb runs when it
// completes, from Process (spdk_nvme_ns_cmd_read).
func (q *QPair) Read(p *sim.Proc, lba uint64, nlb int, buf Buf, cb func(nvme.Completion)) error {
	return q.rw(p, nvme.CmdRead, lba, nlb, buf, cb)
}

// Write submits a Write of nlb blocks at lba from buf
// (spdk_nvme_ns_cmd_write).
func (q *QPair) Write(p *sim.Proc, lba uint64, nlb int, buf Buf, cb func(nvme.Completion)) error {
	return q.rw(p, nvme.CmdWrite, lba, nlb, buf, cb)
}

func (q *QPair) rw(p *sim.Proc, op uint8, lba uint64, nlb int, buf Buf, cb func(nvme.Completion)) error {
	c := q.c
	n := uint64(nlb) * c.lbaSize
	if nlb < 1 || nlb > 1<<16 || n > buf.Size {
		return fmt.Errorf("spdk: qpair %d: %d blocks of %d bytes into a %d-byte buffer: %w", q.id, nlb, c.lbaSize, buf.Size, mem.ErrInvalid)
	}
	if c.maxXfer != 0 && n > c.maxXfer {
		return fmt.Errorf("spdk: qpair %d: %d bytes above MDTS's %d: %w", q.id, n, c.maxXfer, mem.ErrInvalid)
	}
	cmd := nvme.Command{Opcode: op, NSID: 1, CDW10: uint32(lba), CDW11: uint32(lba >> 32), CDW12: uint32(nlb - 1)}
	return q.submit(p, cmd, Buf{VA: buf.VA, IOVA: buf.IOVA, Size: n}, cb)
}

// Submit submits cmd as it is (its PRPs the caller's), for commands the
// driver has no helper for, and for drivers that get them wrong.
func (q *QPair) Submit(p *sim.Proc, cmd nvme.Command, cb func(nvme.Completion)) error {
	return q.submit(p, cmd, Buf{}, cb)
}

// submit takes a tracker, points cmd's PRPs at data (when data.Size is
// not zero) as nvme_pcie_qpair_build_contig_request does, writes the
// entry at the tail and rings the doorbell.
func (q *QPair) submit(p *sim.Proc, cmd nvme.Command, data Buf, cb func(nvme.Completion)) error {
	if len(q.free) == 0 || q.full() {
		return fmt.Errorf("spdk: qpair %d: %d outstanding: %w", q.id, q.Outstanding(), ErrQueueFull)
	}
	cid := q.free[len(q.free)-1]
	t := &q.trackers[cid]
	if data.Size != 0 {
		if err := q.buildPRPs(p, t, &cmd, data); err != nil {
			return err
		}
	}
	q.free = q.free[:len(q.free)-1]
	t.cb, t.busy = cb, true
	cmd.CID = cid
	cmd.Marshal(q.entry[:])
	q.c.m.write(p, q.sq.VA+mem.VirtAddr(q.tail*nvme.SQESize), q.entry[:])
	q.tail = (q.tail + 1) % q.n
	q.stats.Submitted++
	q.stats.Doorbells++
	return q.c.regs.WriteReg(p, nvme.DoorbellOffset(q.id, false, q.c.dstrd), 4, uint64(q.tail))
}

// full reports a submission ring with no free entry: the controller has
// not consumed it yet (the model tracks consumption by completions, as
// the driver's trackers do).
func (q *QPair) full() bool { return q.Outstanding() >= q.n-1 }

// buildPRPs sets PRP1 to data's IOVA and PRP2 to the next page, or to
// the tracker's PRP list holding every further page.
func (q *QPair) buildPRPs(p *sim.Proc, t *tracker, cmd *nvme.Command, data Buf) error {
	page := q.c.page
	cmd.PRP1 = uint64(data.IOVA)
	first := page - uint64(data.IOVA)%page
	if data.Size <= first {
		return nil
	}
	next := uint64(data.IOVA) + first
	rest := data.Size - first
	if rest <= page {
		cmd.PRP2 = next
		return nil
	}
	pages := (rest + page - 1) / page
	if pages > page/8 {
		return fmt.Errorf("spdk: qpair %d: %d bytes need %d PRP entries, above a list page's %d: %w", q.id, data.Size, pages, page/8, mem.ErrInvalid)
	}
	if t.prpList.Size == 0 {
		b, err := q.c.m.Alloc(page, page)
		if err != nil {
			return fmt.Errorf("spdk: qpair %d: PRP list: %w", q.id, err)
		}
		t.prpList = b
	}
	list := make([]byte, 0, 8*pages)
	for i := range pages {
		list = binary.LittleEndian.AppendUint64(list, next+i*page)
	}
	q.c.m.write(p, t.prpList.VA, list)
	cmd.PRP2 = uint64(t.prpList.IOVA)
	return nil
}

// Process reaps up to max completions (all that are there when max is
// 0) by their phase tags, runs their callbacks, then rings the head
// doorbell once for the batch (spdk_nvme_qpair_process_completions). It
// returns how many it reaped.
func (q *QPair) Process(p *sim.Proc, max int) int {
	done := 0
	for max == 0 || done < max {
		q.c.m.read(p, q.cq.VA+mem.VirtAddr(q.head*nvme.CQESize), q.cqe[:])
		e := nvme.ParseCompletion(q.cqe[:])
		if e.Phase != q.phase {
			break
		}
		if q.head++; q.head == q.n {
			q.head, q.phase = 0, !q.phase
		}
		done++
		q.complete(e)
	}
	if done == 0 {
		q.stats.EmptyPolls++
		return 0
	}
	q.stats.Doorbells++
	// A doorbell write that fails is a driver's view of a dead BAR: the
	// completions are reaped all the same.
	_ = q.c.regs.WriteReg(p, nvme.DoorbellOffset(q.id, true, q.c.dstrd), 4, uint64(q.head))
	return done
}

func (q *QPair) complete(e nvme.Completion) {
	q.stats.Completed++
	if !e.Status.OK() {
		q.stats.Errors++
	}
	if int(e.CID) >= len(q.trackers) || !q.trackers[e.CID].busy {
		// A completion for no command: SPDK logs and drops it.
		return
	}
	t := &q.trackers[e.CID]
	cb := t.cb
	t.cb, t.busy = nil, false
	q.free = append(q.free, e.CID)
	if cb != nil {
		cb(e)
	}
}
