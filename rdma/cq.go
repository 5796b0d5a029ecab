package rdma

import (
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Status is ibv_wc_status.
type Status int

const (
	WCSuccess        Status = iota // IBV_WC_SUCCESS
	WCLocLenErr                    // IBV_WC_LOC_LEN_ERR
	WCLocQPOpErr                   // IBV_WC_LOC_QP_OP_ERR
	WCLocEECOpErr                  // IBV_WC_LOC_EEC_OP_ERR
	WCLocProtErr                   // IBV_WC_LOC_PROT_ERR
	WCWRFlushErr                   // IBV_WC_WR_FLUSH_ERR
	WCMWBindErr                    // IBV_WC_MW_BIND_ERR
	WCBadRespErr                   // IBV_WC_BAD_RESP_ERR
	WCLocAccessErr                 // IBV_WC_LOC_ACCESS_ERR
	WCRemInvReqErr                 // IBV_WC_REM_INV_REQ_ERR
	WCRemAccessErr                 // IBV_WC_REM_ACCESS_ERR
	WCRemOpErr                     // IBV_WC_REM_OP_ERR
	WCRetryExcErr                  // IBV_WC_RETRY_EXC_ERR
	WCRNRRetryExcErr               // IBV_WC_RNR_RETRY_EXC_ERR
)

var statusNames = [...]string{
	"IBV_WC_SUCCESS", "IBV_WC_LOC_LEN_ERR", "IBV_WC_LOC_QP_OP_ERR", "IBV_WC_LOC_EEC_OP_ERR",
	"IBV_WC_LOC_PROT_ERR", "IBV_WC_WR_FLUSH_ERR", "IBV_WC_MW_BIND_ERR", "IBV_WC_BAD_RESP_ERR",
	"IBV_WC_LOC_ACCESS_ERR", "IBV_WC_REM_INV_REQ_ERR", "IBV_WC_REM_ACCESS_ERR", "IBV_WC_REM_OP_ERR",
	"IBV_WC_RETRY_EXC_ERR", "IBV_WC_RNR_RETRY_EXC_ERR",
}

func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// WCOpcode is ibv_wc_opcode.
type WCOpcode int

const (
	WCSend      WCOpcode = 0   // IBV_WC_SEND
	WCRDMAWrite WCOpcode = 1   // IBV_WC_RDMA_WRITE
	WCRDMARead  WCOpcode = 2   // IBV_WC_RDMA_READ
	WCRecv      WCOpcode = 128 // IBV_WC_RECV
)

// WC is a work completion (ibv_wc).
type WC struct {
	WRID    uint64
	Status  Status
	Opcode  WCOpcode
	ByteLen uint64
	QPNum   uint32
	// Time is when the HCA wrote the CQE (the model's addition).
	Time sim.Time
	// Detail says why, for an error (the model's addition).
	Detail string
}

// CQ is a completion queue (ibv_cq): a ring of CQEs in coherent memory
// the HCA writes by DMA and ibv_poll_cq reads with the CPU.
type CQ struct {
	d       *Device
	entries int
	va      mem.VirtAddr
	bus     mem.DMAAddr
	size    uint64
	// wcs are the CQEs written and not yet polled, oldest first;
	// written counts every CQE the HCA wrote (its producer index).
	wcs     []WC
	written uint64
	// Overruns counts CQEs lost to a full queue (the CQ's async
	// IBV_EVENT_CQ_ERR).
	Overruns uint64
	users    int
	cond     *sim.Cond
	dead     bool
}

// CreateCQ is ibv_create_cq(context, cqe): at least cqe entries,
// rounded up to a power of two as mlx5 does, in coherent memory of the
// HCA; EINVAL for cqe < 1 or above MaxCQE.
func (d *Device) CreateCQ(t *sim.Proc, cqe int) (*CQ, error) {
	if cqe < 1 || cqe > MaxCQE {
		return nil, fmt.Errorf("ibv_create_cq(%s, %d): %w", d.name, cqe, syscall.EINVAL)
	}
	n := 1
	for n < cqe+1 {
		n <<= 1
	}
	size := uint64(n) * CQESize
	va, bus, err := d.dev.AllocCoherent(t, size)
	if err != nil {
		return nil, fmt.Errorf("ibv_create_cq(%s, %d): %v: %w", d.name, cqe, err, syscall.ENOMEM)
	}
	return &CQ{d: d, entries: n - 1, va: va, bus: bus, size: size, cond: sim.NewCond("cq " + d.name)}, nil
}

// Entries is the CQ's capacity.
func (cq *CQ) Entries() int { return cq.entries }

// Destroy is ibv_destroy_cq: EBUSY while a QP uses it.
func (cq *CQ) Destroy(t *sim.Proc) error {
	switch {
	case cq.dead:
		return fmt.Errorf("ibv_destroy_cq: %w", syscall.EINVAL)
	case cq.users > 0:
		return fmt.Errorf("ibv_destroy_cq: %d QP(s) use it: %w", cq.users, syscall.EBUSY)
	}
	cq.dead = true
	cq.d.dev.FreeCoherent(t, cq.size, cq.va, cq.bus)
	return nil
}

// post writes wc into the ring by DMA (64 bytes, device → host) and
// makes it visible when the write lands; done runs then.
func (cq *CQ) post(wc WC, done func()) {
	d := cq.d
	slot := cq.written % uint64(cq.entries+1)
	cq.written++
	host, _ := d.env.Machine.HostMemory(d.dev.Node())
	_, err := d.dev.StartTransfer(&dma.Transfer{
		Name: d.name + " cqe", Master: d.hw.DMA(), Src: d.hw.Side(), Dst: host,
		Bytes: CQESize, Write: []dma.Span{dma.PinnedSpan(cq.bus+mem.DMAAddr(slot*CQESize), CQESize)},
	}, func(*dma.TransferInfo) {
		wc.Time = d.env.Machine.Engine.Now()
		d.emit(nil, sim.CauseTransfer, func(e *Event) {
			e.Op, e.QPN, e.WRID, e.WC, e.Status, e.Len, e.Detail = OpComplete, wc.QPNum, wc.WRID, wc.Opcode, wc.Status, wc.ByteLen, wc.Detail
		})
		if len(cq.wcs) >= cq.entries {
			cq.Overruns++
		} else {
			cq.wcs = append(cq.wcs, wc)
		}
		cq.cond.Broadcast()
		if done != nil {
			done()
		}
	})
	if err != nil {
		panic(fmt.Sprintf("rdma: %s: CQE write: %v", d.name, err)) // a model bug: the transfer is well formed
	}
}

// Poll is ibv_poll_cq(cq, n, wc): up to n completions, oldest first,
// each CQE read from memory by the CPU of thread t's node.
func (cq *CQ) Poll(t *sim.Proc, node, n int) []WC {
	t.Sleep(cq.d.prm.PollCost)
	k := min(n, len(cq.wcs))
	out := make([]WC, k)
	copy(out, cq.wcs[:k])
	cq.wcs = cq.wcs[k:]
	read := cq.written - uint64(len(cq.wcs)) - uint64(k)
	for i := range k {
		slot := (read + uint64(i)) % uint64(cq.entries+1)
		cq.d.env.Mem.Read(t, node, cq.va+mem.VirtAddr(slot*CQESize), CQESize)
	}
	return out
}

// Wait blocks t until the CQ holds at least n completions (a busy poll
// loop's wait, without its events), then polls them.
func (cq *CQ) Wait(t *sim.Proc, node, n int) []WC {
	t.WaitUntil(cq.cond, func() bool { return len(cq.wcs) >= n })
	return cq.Poll(t, node, n)
}

// machineOf is where the HCA's side is.
func (d *Device) side() machine.Endpoint { return d.hw.Side() }
