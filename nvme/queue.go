package nvme

import (
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// subQueue is a submission queue as the controller tracks it: the
// driver advances tail with its doorbell, the controller head as it
// fetches.
type subQueue struct {
	id         uint16
	base       mem.DMAAddr
	size       int
	cqid       uint16
	head, tail int
	fetching   bool
}

// compQueue is a completion queue: the controller posts at tail with
// the current phase tag, the driver frees entries up to head with its
// doorbell. pending holds completions waiting for room.
type compQueue struct {
	id         uint16
	base       mem.DMAAddr
	size       int
	head, tail int
	phase      bool
	ien        bool
	iv         int
	pending    []Completion
	// sqs is how many submission queues post here.
	sqs int
}

func (q *compQueue) full() bool { return (q.tail+1)%q.size == q.head }

func (c *Controller) addSQ(q *subQueue) {
	c.sqs[q.id] = q
	c.cqs[q.cqid].sqs++
	i, _ := slices.BinarySearch(c.sqOrder, q.id)
	c.sqOrder = slices.Insert(c.sqOrder, i, q.id)
}

func (c *Controller) removeSQ(id uint16) {
	q := c.sqs[id]
	delete(c.sqs, id)
	if cq := c.cqs[q.cqid]; cq != nil {
		cq.sqs--
	}
	if i, ok := slices.BinarySearch(c.sqOrder, id); ok {
		c.sqOrder = slices.Delete(c.sqOrder, i, i+1)
	}
}

// doorbell handles a doorbell write that has reached the controller.
// A doorbell of a queue that does not exist, or a value outside the
// queue, is reported as an asynchronous error event (NVMe Base 2.0,
// 5.27.1.1) and otherwise ignored.
func (c *Controller) doorbell(off uint64, v uint32) {
	c.stats.Doorbells++
	if c.cc&CCEnable == 0 || c.csts&CSTSReady == 0 || c.fatal {
		return
	}
	idx := (off - RegDoorbells) / (4 << c.opt.DoorbellStride)
	qid, isCQ := uint16(idx/2), idx%2 == 1
	if isCQ {
		q := c.cqs[qid]
		if q == nil {
			c.event(EventInvalidDoorbell)
			return
		}
		// The new head may not pass the entries posted.
		posted := (q.tail - q.head + q.size) % q.size
		if int(v) >= q.size || (int(v)-q.head+q.size)%q.size > posted {
			c.event(EventInvalidDoorbellValue)
			return
		}
		q.head = int(v)
		c.postCQ(q)
		return
	}
	q := c.sqs[qid]
	if q == nil {
		c.event(EventInvalidDoorbell)
		return
	}
	if int(v) >= q.size {
		c.event(EventInvalidDoorbellValue)
		return
	}
	q.tail = int(v)
	c.kick()
}

// kick starts what the controller can start: a fetch on each queue
// with entries, round robin from where the last pass stopped, while
// fewer than MaxInflight commands are under way.
func (c *Controller) kick() {
	if c.fatal || c.csts&CSTSReady == 0 {
		return
	}
	n, start := len(c.sqOrder), c.rr
	for k := 0; k < n && c.inflight < c.opt.MaxInflight; k++ {
		i := (start + k) % n
		q := c.sqs[c.sqOrder[i]]
		if q.fetching || q.head == q.tail {
			continue
		}
		avail := (q.tail - q.head + q.size) % q.size
		cnt := min(avail, q.size-q.head, c.opt.MaxInflight-c.inflight)
		c.fetch(q, cnt)
		c.rr = (i + 1) % n
	}
}

// fetch reads cnt contiguous entries from q's head by DMA. A fetch
// that faults is a controller fatal error (CSTS.CFS): the controller
// cannot know which commands it lost.
func (c *Controller) fetch(q *subQueue, cnt int) {
	q.fetching = true
	c.inflight += cnt
	c.stats.Fetches++
	addr := q.base + mem.DMAAddr(q.head*SQESize)
	c.readHost(c.flow.fetch, addr, uint64(cnt*SQESize), func(i *dma.TransferInfo) {
		q.fetching = false
		if i.Err != nil || len(i.Data) < cnt*SQESize {
			c.fail()
			return
		}
		q.head = (q.head + cnt) % q.size
		for k := range cnt {
			cmd := ParseCommand(i.Data[k*SQESize:])
			c.stats.Commands++
			c.execute(q, cmd)
		}
		c.kick()
	})
}

// fail is a controller fatal error: CSTS.CFS, and nothing more is
// fetched until the host resets the controller.
func (c *Controller) fail() {
	c.fatal = true
	c.csts |= CSTSFatal
}

// complete ends a command of sq: its completion goes to sq's CQ.
func (c *Controller) complete(sq *subQueue, cmd Command, st Status, dw0 uint32) {
	c.inflight--
	c.stats.Completions++
	if !st.OK() {
		c.stats.Errors++
	}
	if cq := c.cqs[sq.cqid]; cq != nil {
		cq.pending = append(cq.pending, Completion{DW0: dw0, SQHead: uint16(sq.head), SQID: sq.id, CID: cmd.CID, Status: st})
		c.postCQ(cq)
	}
	c.kick()
}

// postCQ writes pending completions into q while it has room: each a
// posted DMA write of 16 bytes with the phase tag, then the queue's
// MSI-X vector once it has landed.
func (c *Controller) postCQ(q *compQueue) {
	for len(q.pending) > 0 && !q.full() {
		e := q.pending[0]
		q.pending = q.pending[1:]
		e.Phase = q.phase
		addr := q.base + mem.DMAAddr(q.tail*CQESize)
		if q.tail++; q.tail == q.size {
			q.tail, q.phase = 0, !q.phase
		}
		b := make([]byte, CQESize)
		e.Marshal(b)
		c.transfer(c.flow.cqe, c.fromDev, CQESize, nil, []dma.Span{dma.BusSpan(addr, CQESize)}, b, func(i *dma.TransferInfo) {
			if i.Err != nil {
				// The host can never learn of this completion.
				c.fail()
				return
			}
			c.interrupt(q)
		})
	}
}

// interrupt sends q's MSI-X message if the queue has interrupts
// enabled and its vector is not masked with INTMS; the handler routed
// to the vector runs MSI later, in a thread of the device's, unless
// the vector is masked (no handler) by then.
func (c *Controller) interrupt(q *compQueue) {
	if !q.ien || q.iv < 32 && c.intms&(1<<q.iv) != 0 {
		return
	}
	v := q.iv
	c.after(c.opt.MSI, func() {
		h := c.vectors[v]
		if h == nil {
			c.stats.Dropped++
			return
		}
		c.stats.Interrupts++
		c.m.Engine.Spawn(fmt.Sprintf("%s msix%d", c.name, v), func(p *sim.Proc) { h(p) })
	})
}

// event reports an asynchronous error event: to an outstanding
// Asynchronous Event Request if there is one, else when the next
// arrives.
func (c *Controller) event(info uint8) {
	c.events = append(c.events, AsyncEvent{Type: EventTypeError, Info: info, LogPage: LogErrorInformation})
	c.deliverEvents()
}

func (c *Controller) deliverEvents() {
	for len(c.events) > 0 && len(c.aers) > 0 {
		e, cmd := c.events[0], c.aers[0]
		c.events, c.aers = c.events[1:], c.aers[1:]
		c.stats.AsyncEvents++
		c.complete(c.sqs[0], cmd, StatusSuccess, e.DW0())
	}
}
