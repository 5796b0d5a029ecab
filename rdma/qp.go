package rdma

import (
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// QPType is ibv_qp_type; only RC (reliable connected) is modelled.
type QPType int

// QPTypeRC is IBV_QPT_RC.
const QPTypeRC QPType = 2

// QPState is ibv_qp_state.
type QPState int

const (
	QPSReset QPState = iota // IBV_QPS_RESET
	QPSInit                 // IBV_QPS_INIT
	QPSRTR                  // IBV_QPS_RTR
	QPSRTS                  // IBV_QPS_RTS
	QPSSQD                  // IBV_QPS_SQD
	QPSSQE                  // IBV_QPS_SQE
	QPSErr                  // IBV_QPS_ERR
)

func (s QPState) String() string {
	if s >= 0 && int(s) < 7 {
		return [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}[s]
	}
	return fmt.Sprintf("QPState(%d)", int(s))
}

// AttrMask is ibv_qp_attr_mask: which fields of a QPAttr a ModifyQP
// sets.
type AttrMask uint32

const (
	AttrState           AttrMask = 1 << 0  // IBV_QP_STATE
	AttrAccessFlags     AttrMask = 1 << 3  // IBV_QP_ACCESS_FLAGS
	AttrPKeyIndex       AttrMask = 1 << 4  // IBV_QP_PKEY_INDEX
	AttrPort            AttrMask = 1 << 5  // IBV_QP_PORT
	AttrAV              AttrMask = 1 << 7  // IBV_QP_AV
	AttrPathMTU         AttrMask = 1 << 8  // IBV_QP_PATH_MTU
	AttrTimeout         AttrMask = 1 << 9  // IBV_QP_TIMEOUT
	AttrRetryCnt        AttrMask = 1 << 10 // IBV_QP_RETRY_CNT
	AttrRNRRetry        AttrMask = 1 << 11 // IBV_QP_RNR_RETRY
	AttrRQPSN           AttrMask = 1 << 12 // IBV_QP_RQ_PSN
	AttrMaxQPRdAtomic   AttrMask = 1 << 13 // IBV_QP_MAX_QP_RD_ATOMIC
	AttrMinRNRTimer     AttrMask = 1 << 15 // IBV_QP_MIN_RNR_TIMER
	AttrSQPSN           AttrMask = 1 << 16 // IBV_QP_SQ_PSN
	AttrMaxDestRdAtomic AttrMask = 1 << 17 // IBV_QP_MAX_DEST_RD_ATOMIC
	AttrDestQPN         AttrMask = 1 << 20 // IBV_QP_DEST_QPN
)

// The masks an RC QP's transitions require besides IBV_QP_STATE
// (qp_state_table in drivers/infiniband/core/verbs.c).
const (
	maskToInit = AttrPKeyIndex | AttrPort | AttrAccessFlags
	maskToRTR  = AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer
	maskToRTS  = AttrSQPSN | AttrMaxQPRdAtomic | AttrRetryCnt | AttrRNRRetry | AttrTimeout
)

// MTU is ibv_mtu.
type MTU int

const (
	MTU256  MTU = iota + 1 // IBV_MTU_256
	MTU512                 // IBV_MTU_512
	MTU1024                // IBV_MTU_1024
	MTU2048                // IBV_MTU_2048
	MTU4096                // IBV_MTU_4096
)

// Bytes is the MTU's payload size.
func (m MTU) Bytes() uint64 { return 128 << m }

// QPAttr is ibv_qp_attr, the fields the model uses.
type QPAttr struct {
	State       QPState
	AccessFlags Access // remote access the QP allows (IBV_QP_ACCESS_FLAGS)
	PKeyIndex   int
	PortNum     int
	PathMTU     MTU
	DestQPN     uint32
	RQPSN       uint32
	SQPSN       uint32
	// MaxDestRdAtomic and MaxRdAtomic: RDMA reads in flight as
	// responder and requester.
	MaxDestRdAtomic, MaxRdAtomic int
	// MinRNRTimer is the encoded RNR NAK timer the responder sends
	// (IBA table 45: 12 is 0.64 ms, 0 is 655.36 ms).
	MinRNRTimer uint8
	// Timeout is the local ACK timeout, 4.096 µs × 2^Timeout (0:
	// infinite); RetryCnt its retries; RNRRetry the retries after an
	// RNR NAK (7: infinite).
	Timeout, RetryCnt, RNRRetry uint8
}

// QPCap is ibv_qp_cap.
type QPCap struct {
	MaxSendWR, MaxRecvWR, MaxSendSGE, MaxRecvSGE int
}

// QPInitAttr is ibv_qp_init_attr.
type QPInitAttr struct {
	SendCQ, RecvCQ *CQ
	Cap            QPCap
	Type           QPType
	// SigAll: every send WR completes with a CQE (sq_sig_all);
	// otherwise only those with Signaled.
	SigAll bool
}

// QP is a queue pair (ibv_qp).
type QP struct {
	d      *Device
	pd     *PD
	Num    uint32
	init   QPInitAttr
	attr   QPAttr
	sqBuf  mem.VirtAddr
	sqBus  mem.DMAAddr
	rqBuf  mem.VirtAddr
	rqBus  mem.DMAAddr
	sqSize uint64
	rqSize uint64
	posted uint64 // send WQEs ever posted (the SQ's producer index)
	rposts uint64

	sq   []*sendWQE
	rq   []RecvWR
	busy bool
	dead bool
}

// Opcode is ibv_wr_opcode.
type Opcode int

const (
	WRRDMAWrite Opcode = 0 // IBV_WR_RDMA_WRITE
	WRSend      Opcode = 2 // IBV_WR_SEND
	WRRDMARead  Opcode = 4 // IBV_WR_RDMA_READ
)

func (o Opcode) String() string {
	switch o {
	case WRRDMAWrite:
		return "RDMA_WRITE"
	case WRSend:
		return "SEND"
	case WRRDMARead:
		return "RDMA_READ"
	}
	return fmt.Sprintf("Opcode(%d)", int(o))
}

// SGE is ibv_sge.
type SGE struct {
	Addr   uint64
	Length uint64
	LKey   uint32
}

// SendWR is ibv_send_wr.
type SendWR struct {
	WRID     uint64
	Opcode   Opcode
	SGList   []SGE
	Signaled bool // IBV_SEND_SIGNALED
	// RemoteAddr and RKey are wr.rdma's, for RDMA WRITE and READ.
	RemoteAddr uint64
	RKey       uint32
}

// RecvWR is ibv_recv_wr.
type RecvWR struct {
	WRID   uint64
	SGList []SGE
}

type sendWQE struct {
	wr     SendWR
	slot   uint64
	posted sim.Time
	rnr    int // RNR NAKs taken
}

// CreateQP is ibv_create_qp(pd, attr) for an RC QP in RESET: EINVAL
// for another type, a missing CQ, or capabilities beyond the device's
// (MaxQPWR, MaxSGE). Its send and receive queues are rings in coherent
// memory of the HCA (64-byte WQEs; 16 bytes a receive SGE).
func (pd *PD) CreateQP(t *sim.Proc, a QPInitAttr) (*QP, error) {
	d := pd.d
	c := a.Cap
	switch {
	case pd.dead:
		return nil, fmt.Errorf("ibv_create_qp: deallocated PD: %w", syscall.EINVAL)
	case a.Type != QPTypeRC:
		return nil, fmt.Errorf("ibv_create_qp: type %d: only RC is modelled: %w", a.Type, syscall.EINVAL)
	case a.SendCQ == nil || a.RecvCQ == nil || a.SendCQ.dead || a.RecvCQ.dead:
		return nil, fmt.Errorf("ibv_create_qp: missing CQ: %w", syscall.EINVAL)
	case c.MaxSendWR < 1 || c.MaxSendWR > MaxQPWR || c.MaxRecvWR < 0 || c.MaxRecvWR > MaxQPWR,
		c.MaxSendSGE < 0 || c.MaxSendSGE > MaxSGE || c.MaxRecvSGE < 0 || c.MaxRecvSGE > MaxSGE:
		return nil, fmt.Errorf("ibv_create_qp: cap %+v beyond max_qp_wr %d, max_sge %d: %w", c, MaxQPWR, MaxSGE, syscall.EINVAL)
	}
	qp := &QP{d: d, pd: pd, Num: d.nextQPN, init: a}
	qp.sqSize = uint64(c.MaxSendWR) * WQESize
	qp.rqSize = uint64(max(c.MaxRecvWR, 1)) * 16 * uint64(max(c.MaxRecvSGE, 1))
	var err error
	if qp.sqBuf, qp.sqBus, err = d.dev.AllocCoherent(t, qp.sqSize); err != nil {
		return nil, fmt.Errorf("ibv_create_qp: %v: %w", err, syscall.ENOMEM)
	}
	if qp.rqBuf, qp.rqBus, err = d.dev.AllocCoherent(t, qp.rqSize); err != nil {
		d.dev.FreeCoherent(t, qp.sqSize, qp.sqBuf, qp.sqBus)
		return nil, fmt.Errorf("ibv_create_qp: %v: %w", err, syscall.ENOMEM)
	}
	d.nextQPN++
	d.qps[qp.Num] = qp
	pd.users++
	a.SendCQ.users++
	a.RecvCQ.users++
	return qp, nil
}

// State is the QP's state.
func (qp *QP) State() QPState { return qp.attr.State }

// Attr is the QP's attributes (ibv_query_qp).
func (qp *QP) Attr() QPAttr { return qp.attr }

// Modify is ibv_modify_qp(qp, attr, mask): the transitions an RC QP
// allows, each with the attributes it requires (EINVAL otherwise, as
// ib_modify_qp_is_ok), to ERR or RESET from any state.
func (qp *QP) Modify(attr QPAttr, mask AttrMask) error {
	call := fmt.Sprintf("ibv_modify_qp(qp %#x, %v → %v, mask %#x)", qp.Num, qp.attr.State, attr.State, uint32(mask))
	if qp.dead {
		return fmt.Errorf("%s: destroyed: %w", call, syscall.EINVAL)
	}
	if mask&AttrState == 0 {
		return fmt.Errorf("%s: no IBV_QP_STATE: %w", call, syscall.EINVAL)
	}
	cur, next := qp.attr.State, attr.State
	var need, allowed AttrMask
	switch {
	case next == QPSReset || next == QPSErr:
	case cur == QPSReset && next == QPSInit:
		need, allowed = maskToInit, maskToInit
	case cur == QPSInit && next == QPSInit:
		allowed = maskToInit
	case cur == QPSInit && next == QPSRTR:
		need, allowed = maskToRTR, maskToRTR|AttrAccessFlags|AttrPKeyIndex
	case cur == QPSRTR && next == QPSRTS:
		need, allowed = maskToRTS, maskToRTS|AttrAccessFlags|AttrMinRNRTimer
	case cur == QPSRTS && next == QPSRTS:
		allowed = AttrAccessFlags | AttrMinRNRTimer
	default:
		return fmt.Errorf("%s: no such transition: %w", call, syscall.EINVAL)
	}
	other := mask &^ AttrState
	if other&need != need || other&^(allowed) != 0 {
		return fmt.Errorf("%s: attributes %#x required, %#x allowed: %w", call, uint32(need), uint32(allowed), syscall.EINVAL)
	}
	if mask&AttrPort != 0 && attr.PortNum != 1 {
		return fmt.Errorf("%s: port %d: %w", call, attr.PortNum, syscall.EINVAL)
	}
	if mask&AttrPathMTU != 0 && (attr.PathMTU < MTU256 || attr.PathMTU > MTU4096) {
		return fmt.Errorf("%s: path MTU %d: %w", call, attr.PathMTU, syscall.EINVAL)
	}
	if mask&(AttrRetryCnt|AttrRNRRetry) != 0 && (attr.RetryCnt > 7 || attr.RNRRetry > 7) {
		return fmt.Errorf("%s: retry counts above 7: %w", call, syscall.EINVAL)
	}
	if mask&(AttrTimeout|AttrMinRNRTimer) != 0 && (attr.Timeout > 31 || attr.MinRNRTimer > 31) {
		return fmt.Errorf("%s: timer codes above 31: %w", call, syscall.EINVAL)
	}
	a := &qp.attr
	set := func(m AttrMask, f func()) {
		if mask&m != 0 {
			f()
		}
	}
	set(AttrAccessFlags, func() { a.AccessFlags = attr.AccessFlags })
	set(AttrPKeyIndex, func() { a.PKeyIndex = attr.PKeyIndex })
	set(AttrPort, func() { a.PortNum = attr.PortNum })
	set(AttrPathMTU, func() { a.PathMTU = attr.PathMTU })
	set(AttrDestQPN, func() { a.DestQPN = attr.DestQPN })
	set(AttrRQPSN, func() { a.RQPSN = attr.RQPSN })
	set(AttrSQPSN, func() { a.SQPSN = attr.SQPSN })
	set(AttrMaxDestRdAtomic, func() { a.MaxDestRdAtomic = attr.MaxDestRdAtomic })
	set(AttrMaxQPRdAtomic, func() { a.MaxRdAtomic = attr.MaxRdAtomic })
	set(AttrMinRNRTimer, func() { a.MinRNRTimer = attr.MinRNRTimer })
	set(AttrTimeout, func() { a.Timeout = attr.Timeout })
	set(AttrRetryCnt, func() { a.RetryCnt = attr.RetryCnt })
	set(AttrRNRRetry, func() { a.RNRRetry = attr.RNRRetry })
	a.State = next
	switch next {
	case QPSReset:
		// The queues are emptied without completions.
		qp.sq, qp.rq = nil, nil
		qp.attr = QPAttr{}
	case QPSErr:
		qp.flush()
	}
	return nil
}

// Destroy is ibv_destroy_qp.
func (qp *QP) Destroy(t *sim.Proc) error {
	if qp.dead {
		return fmt.Errorf("ibv_destroy_qp: %w", syscall.EINVAL)
	}
	qp.dead = true
	qp.attr.State = QPSReset
	qp.sq, qp.rq = nil, nil
	delete(qp.d.qps, qp.Num)
	qp.pd.users--
	qp.init.SendCQ.users--
	qp.init.RecvCQ.users--
	qp.d.dev.FreeCoherent(t, qp.sqSize, qp.sqBuf, qp.sqBus)
	qp.d.dev.FreeCoherent(t, qp.rqSize, qp.rqBuf, qp.rqBus)
	return nil
}

// PostSend is ibv_post_send(qp, wr) from thread t: the CPU writes the
// WQE into the send queue and rings the doorbell; the HCA then fetches
// and executes WQEs in order, one at a time. EINVAL before RTS (as
// mlx5_post_send) or for too many SGEs or an unknown opcode, ENOMEM
// when the send queue is full. In ERR the WQE is accepted and completes
// with IBV_WC_WR_FLUSH_ERR.
func (qp *QP) PostSend(t *sim.Proc, wr SendWR) error {
	call := fmt.Sprintf("ibv_post_send(qp %#x, %v)", qp.Num, wr.Opcode)
	switch {
	case qp.dead || qp.attr.State < QPSRTS:
		return fmt.Errorf("%s: QP in %v: %w", call, qp.attr.State, syscall.EINVAL)
	case len(wr.SGList) > qp.init.Cap.MaxSendSGE:
		return fmt.Errorf("%s: %d SGEs, max %d: %w", call, len(wr.SGList), qp.init.Cap.MaxSendSGE, syscall.EINVAL)
	case wr.Opcode != WRRDMAWrite && wr.Opcode != WRSend && wr.Opcode != WRRDMARead:
		return fmt.Errorf("%s: %w", call, syscall.EINVAL)
	case len(qp.sq) >= qp.init.Cap.MaxSendWR:
		return fmt.Errorf("%s: send queue full (%d): %w", call, len(qp.sq), syscall.ENOMEM)
	}
	slot := qp.posted % uint64(qp.init.Cap.MaxSendWR)
	qp.posted++
	qp.d.env.Mem.Write(t, qp.pd.proc.Node(), qp.sqBuf+mem.VirtAddr(slot*WQESize), WQESize)
	t.Sleep(qp.d.prm.PostCost)
	qp.sq = append(qp.sq, &sendWQE{wr: wr, slot: slot, posted: t.Now()})
	qp.d.emit(t, sim.CauseCall, func(e *Event) {
		e.Op, e.PID, e.QPN, e.WRID, e.Opcode = OpPostSend, qp.pd.proc.PID(), qp.Num, wr.WRID, wr.Opcode
	})
	qp.kick()
	return nil
}

// PostRecv is ibv_post_recv(qp, wr): EINVAL in RESET or for too many
// SGEs, ENOMEM when the receive queue is full; in ERR it completes at
// once with IBV_WC_WR_FLUSH_ERR.
func (qp *QP) PostRecv(t *sim.Proc, wr RecvWR) error {
	call := fmt.Sprintf("ibv_post_recv(qp %#x)", qp.Num)
	switch {
	case qp.dead || qp.attr.State == QPSReset:
		return fmt.Errorf("%s: QP in %v: %w", call, qp.attr.State, syscall.EINVAL)
	case len(wr.SGList) > qp.init.Cap.MaxRecvSGE:
		return fmt.Errorf("%s: %d SGEs, max %d: %w", call, len(wr.SGList), qp.init.Cap.MaxRecvSGE, syscall.EINVAL)
	case len(qp.rq) >= qp.init.Cap.MaxRecvWR:
		return fmt.Errorf("%s: receive queue full (%d): %w", call, len(qp.rq), syscall.ENOMEM)
	}
	slot := qp.rposts % uint64(max(qp.init.Cap.MaxRecvWR, 1))
	qp.rposts++
	qp.d.env.Mem.Write(t, qp.pd.proc.Node(), qp.rqBuf+mem.VirtAddr(slot*16*uint64(max(qp.init.Cap.MaxRecvSGE, 1))), 16*uint64(max(len(wr.SGList), 1)))
	t.Sleep(qp.d.prm.PostCost)
	qp.d.emit(t, sim.CauseCall, func(e *Event) { e.Op, e.PID, e.QPN, e.WRID = OpPostRecv, qp.pd.proc.PID(), qp.Num, wr.WRID })
	if qp.attr.State == QPSErr {
		qp.init.RecvCQ.post(WC{WRID: wr.WRID, Status: WCWRFlushErr, Opcode: WCRecv, QPNum: qp.Num}, nil)
		return nil
	}
	qp.rq = append(qp.rq, wr)
	return nil
}

// flush completes every queued WQE with IBV_WC_WR_FLUSH_ERR (the QP
// entered ERR); the WQE being executed completes on its own.
func (qp *QP) flush() {
	start := 0
	if qp.busy && len(qp.sq) > 0 {
		start = 1
	}
	for _, w := range qp.sq[start:] {
		qp.init.SendCQ.post(WC{WRID: w.wr.WRID, Status: WCWRFlushErr, Opcode: wcOpcode(w.wr.Opcode), QPNum: qp.Num}, nil)
	}
	qp.sq = qp.sq[:start]
	for _, r := range qp.rq {
		qp.init.RecvCQ.post(WC{WRID: r.WRID, Status: WCWRFlushErr, Opcode: WCRecv, QPNum: qp.Num}, nil)
	}
	qp.rq = nil
}

func wcOpcode(o Opcode) WCOpcode {
	switch o {
	case WRRDMAWrite:
		return WCRDMAWrite
	case WRRDMARead:
		return WCRDMARead
	}
	return WCSend
}

// rnrTimer is IBA table 45: the RNR NAK timer field's delay.
var rnrTimer = [32]sim.Time{
	655360 * sim.Microsecond, 10 * sim.Microsecond, 20 * sim.Microsecond, 30 * sim.Microsecond,
	40 * sim.Microsecond, 60 * sim.Microsecond, 80 * sim.Microsecond, 120 * sim.Microsecond,
	160 * sim.Microsecond, 240 * sim.Microsecond, 320 * sim.Microsecond, 480 * sim.Microsecond,
	640 * sim.Microsecond, 960 * sim.Microsecond, 1280 * sim.Microsecond, 1920 * sim.Microsecond,
	2560 * sim.Microsecond, 3840 * sim.Microsecond, 5120 * sim.Microsecond, 7680 * sim.Microsecond,
	10240 * sim.Microsecond, 15360 * sim.Microsecond, 20480 * sim.Microsecond, 30720 * sim.Microsecond,
	40960 * sim.Microsecond, 61440 * sim.Microsecond, 81920 * sim.Microsecond, 122880 * sim.Microsecond,
	163840 * sim.Microsecond, 245760 * sim.Microsecond, 327680 * sim.Microsecond, 491520 * sim.Microsecond,
}

// RNRDelay is the delay the encoded RNR timer value code stands for.
func RNRDelay(code uint8) sim.Time { return rnrTimer[code&31] }

// AckTimeout is the local ACK timeout the encoded value code stands
// for: 4.096 µs × 2^code; 0 is infinite (-1).
func AckTimeout(code uint8) sim.Time {
	if code == 0 {
		return -1
	}
	return 4096 * sim.Nanosecond << (code & 31)
}
