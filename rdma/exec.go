package rdma

import (
	"fmt"
	"math"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/sim"
)

// The data path. The HCA executes a QP's send WQEs in order, one at a
// time: it fetches the WQE from the send queue by DMA, checks the local
// keys (IBV_WC_LOC_PROT_ERR), and moves the message as pieces that
// overlap: the requester's DMA read of piece i+1, the wire carrying
// piece i, the responder's DMA write of piece i-1. The responder checks
// the remote key (or takes a receive WQE) when the first piece
// arrives: a bad key, a missing permission or a missing receive drops
// every piece unwritten and answers with a NAK; a QP that is not there
// answers nothing, and the requester times out. The ACK (or the last
// piece of an RDMA READ's response) ends the operation; a CQE written
// by DMA into the CQ completes it.

// part is one scatter-gather element resolved to its MR.
type part struct {
	mr   *MR
	addr uint64
	len  uint64
}

// spansOf are the bus spans of bytes [off, off+n) of the message that
// parts lay out, and the memory of the first.
func spansOf(parts []part, off, n uint64) ([]dma.Span, machine.Endpoint) {
	var out []dma.Span
	var where machine.Endpoint
	for _, p := range parts {
		if n == 0 {
			break
		}
		if off >= p.len {
			off -= p.len
			continue
		}
		k := min(p.len-off, n)
		if len(out) == 0 {
			where = p.mr.memory
		}
		out = append(out, p.mr.spans(p.addr+off, k)...)
		n -= k
		off = 0
	}
	return out, where
}

// pieces splits total bytes into pieces of whole MTUs: a first of
// least bytes, each next twice the one before until they reach the
// size that makes at most most pieces (and at least least), so that the
// pipeline fills after a small piece and a large message costs few
// transfers. It returns the pieces' offsets, with total last.
func pieces(total, mtu, least uint64, most int) []uint64 {
	if total == 0 {
		return []uint64{0, 0}
	}
	up := func(n uint64) uint64 { return max((n+mtu-1)/mtu, 1) * mtu }
	first := up(least)
	size := max(up((total+uint64(most)-1)/uint64(most)), first)
	offs := []uint64{0}
	for off, next := uint64(0), first; off < total; {
		off = min(off+next, total)
		offs = append(offs, off)
		next = min(2*next, size)
	}
	return offs
}

// wireBytes is what n payload bytes cost on the wire in packets of
// mtu: every packet carries the headers.
func wireBytes(n, mtu, header uint64) int64 {
	pk := max((n+mtu-1)/mtu, 1)
	return int64(n + pk*header)
}

// Window is how many pieces a stage has under way at once: one moving
// its bytes, the next in its latency.
const Window = 2

// stage moves piece i and calls done when it has landed; it returns
// how long the piece spends before its bytes start moving (translation
// and the route's latency): the next piece may be issued then, so that
// latencies overlap the bytes as a NIC's outstanding requests do.
type stage func(i int, done func()) (lead sim.Time)

// pipe runs pieces through stages in order: a piece enters a stage once
// the previous stage is done with it and every earlier piece, and once
// the stage's previous piece has its bytes moving.
type pipe struct {
	eng    *sim.Engine
	n      int
	stages []stage
	// done[k] is how many pieces stage k finished in order; fin[k][i]
	// whether it finished piece i.
	done  []int
	fin   [][]bool
	next  []int
	until []sim.Time // the stage may issue its next piece from then on
	armed []bool     // a pump is scheduled at until
	end   func()
	ended bool
}

func runPipe(eng *sim.Engine, n int, end func(), stages ...stage) {
	p := &pipe{eng: eng, n: n, stages: stages, done: make([]int, len(stages)), fin: make([][]bool, len(stages)),
		next: make([]int, len(stages)), until: make([]sim.Time, len(stages)), armed: make([]bool, len(stages)), end: end}
	for k := range stages {
		p.fin[k] = make([]bool, n)
	}
	p.pump()
}

func (p *pipe) pump() {
	for k := range p.stages {
		for {
			ready := p.n
			if k > 0 {
				ready = p.done[k-1]
			}
			if p.next[k] >= ready {
				break
			}
			// At most Window pieces in the stage at once: more would
			// share its links and delay the first.
			if p.next[k]-p.done[k] >= Window {
				break
			}
			now := p.eng.Now()
			if now < p.until[k] {
				if !p.armed[k] {
					p.armed[k] = true
					p.eng.At(p.until[k], func() { p.armed[k] = false; p.pump() })
				}
				break
			}
			i := p.next[k]
			p.next[k]++
			p.until[k] = now + p.stages[k](i, func() { p.finish(k, i) })
		}
	}
}

func (p *pipe) finish(k, i int) {
	p.fin[k][i] = true
	for p.done[k] < p.n && p.fin[k][p.done[k]] {
		p.done[k]++
	}
	if k == len(p.stages)-1 && p.done[k] == p.n {
		if !p.ended {
			p.ended = true
			p.end()
		}
		return
	}
	p.pump()
}

// verdict is the responder's answer to a message's first piece.
type verdict struct {
	// drop: nothing answers (no such QP, not ready): the requester
	// times out.
	drop bool
	// rnr: receiver not ready (no receive WQE posted).
	rnr bool
	// status is the requester's completion status for a NAK.
	status Status
	why    string
}

func (v *verdict) failed() bool { return v != nil }

// kick starts the next WQE if the QP's send side is idle.
func (qp *QP) kick() {
	if qp.busy || len(qp.sq) == 0 || qp.dead {
		return
	}
	qp.busy = true
	w := qp.sq[0]
	if qp.attr.State == QPSErr {
		qp.complete(w, WCWRFlushErr, "", 0)
		return
	}
	d := qp.d
	host, _ := d.env.Machine.HostMemory(d.dev.Node())
	d.start(&dma.Transfer{
		Name: d.name + " wqe fetch", Master: d.hw.DMA(), Src: host, Dst: d.hw.Side(), Bytes: WQESize,
		Read: []dma.Span{dma.PinnedSpan(qp.sqBus+mem64(w.slot*WQESize), WQESize)},
	}, func(*dma.TransferInfo) { qp.execute(w) })
}

// start is StartTransfer of a well-formed transfer; it returns the
// time before its bytes move: the translation and the route's latency.
func (d *Device) start(t *dma.Transfer, done func(*dma.TransferInfo)) sim.Time {
	lead, err := d.dev.StartTransfer(t, done)
	if err != nil {
		panic(fmt.Sprintf("rdma: %s: %s: %v", d.name, t.Name, err)) // a model bug
	}
	m := d.env.Machine
	if r, err := m.DMARoute(t.Src, t.Dst, t.Master); err == nil {
		lat := r.Latency()
		if f := m.Fabric.Factors().Latency; f != 1 {
			lat = sim.Time(math.Round(float64(lat) * f))
		}
		lead += lat
	}
	return lead
}

// complete ends w with status st: its CQE (when signalled, or for any
// error), an error moving the QP to ERR and flushing the rest, then the
// next WQE.
func (qp *QP) complete(w *sendWQE, st Status, why string, n uint64) {
	if len(qp.sq) == 0 || qp.sq[0] != w {
		return // the QP was reset or destroyed meanwhile
	}
	qp.sq = qp.sq[1:]
	wc := WC{WRID: w.wr.WRID, Status: st, Opcode: wcOpcode(w.wr.Opcode), ByteLen: n, QPNum: qp.Num, Detail: why}
	next := func() {
		qp.busy = false
		qp.kick()
	}
	if st != WCSuccess || w.wr.Signaled || qp.init.SigAll {
		qp.init.SendCQ.post(wc, nil)
	}
	if st != WCSuccess && st != WCWRFlushErr {
		qp.attr.State = QPSErr
		qp.busy = false
		qp.flush()
		return
	}
	next()
}

// execute runs w after its fetch.
func (qp *QP) execute(w *sendWQE) {
	d, wr := qp.d, w.wr
	need := Access(0)
	if wr.Opcode == WRRDMARead {
		need = AccessLocalWrite
	}
	var local []part
	var total uint64
	for _, s := range wr.SGList {
		mr, why := d.lookup(qp.pd, s.LKey, s.Addr, s.Length, need)
		if mr == nil {
			qp.complete(w, WCLocProtErr, "local "+why, 0)
			return
		}
		local = append(local, part{mr, s.Addr, s.Length})
		total += s.Length
	}
	if d.port == nil {
		qp.timedOut(w, "port not cabled")
		return
	}
	if wr.Opcode == WRRDMARead {
		qp.pull(w, local, total)
		return
	}
	qp.push(w, local, total)
}

// remote is the responder QP, or why the packet is dropped.
func (qp *QP) remote() (*QP, string) {
	r := qp.d.port.peer.qps[qp.attr.DestQPN]
	switch {
	case r == nil:
		return nil, fmt.Sprintf("no QP %#x on %s", qp.attr.DestQPN, qp.d.port.peer.name)
	case r.attr.State < QPSRTR || r.attr.State == QPSErr:
		return nil, fmt.Sprintf("remote QP %#x in %v", r.Num, r.attr.State)
	}
	return r, ""
}

// timedOut completes w with IBV_WC_RETRY_EXC_ERR after the ACK timeout
// and its retries; an infinite timeout never completes.
func (qp *QP) timedOut(w *sendWQE, why string) {
	to := AckTimeout(qp.attr.Timeout)
	if to < 0 {
		return
	}
	qp.d.env.Machine.Engine.After(to*sim.Time(qp.attr.RetryCnt+1), func() {
		qp.complete(w, WCRetryExcErr, why, 0)
	})
}

// reply sends the responder's ACK or NAK back, then runs then.
func (qp *QP) reply(name string, then func()) {
	qp.d.port.peer.port.send(name, int64(qp.d.prm.Header), then)
}

func (qp *QP) mtu(r *QP) uint64 {
	m := qp.attr.PathMTU.Bytes()
	if r != nil {
		m = min(m, r.attr.PathMTU.Bytes())
	}
	return m
}

// push moves an RDMA WRITE or SEND from local memory to the responder.
func (qp *QP) push(w *sendWQE, local []part, total uint64) {
	d, wr := qp.d, w.wr
	peer := d.port.peer
	r, _ := qp.remote()
	mtu := qp.mtu(r)
	offs := pieces(total, mtu, d.prm.MinPiece, d.prm.MaxChunks)
	n := len(offs) - 1
	data := make([][]byte, n)
	var v *verdict
	var dst []part
	var recv RecvWR
	var resp *QP // the responder QP, once judged
	var readErr error
	piece := func(i int) (uint64, uint64) { return offs[i], offs[i+1] - offs[i] }
	judge := func() {
		r, why := qp.remote()
		if r == nil {
			v = &verdict{drop: true, why: why}
			return
		}
		resp = r
		if wr.Opcode == WRRDMAWrite {
			if r.attr.AccessFlags&AccessRemoteWrite == 0 {
				v = &verdict{status: WCRemAccessErr, why: fmt.Sprintf("remote QP %#x does not allow REMOTE_WRITE", r.Num)}
				return
			}
			mr, why := peer.lookup(r.pd, wr.RKey, wr.RemoteAddr, total, AccessRemoteWrite)
			if mr == nil {
				v = &verdict{status: WCRemAccessErr, why: "remote " + why}
				return
			}
			dst = []part{{mr, wr.RemoteAddr, total}}
			return
		}
		if len(r.rq) == 0 {
			v = &verdict{rnr: true, why: fmt.Sprintf("no receive posted on QP %#x", r.Num)}
			return
		}
		recv = r.rq[0]
		r.rq = r.rq[1:]
		var room uint64
		for _, s := range recv.SGList {
			mr, why := peer.lookup(r.pd, s.LKey, s.Addr, s.Length, AccessLocalWrite)
			if mr == nil {
				r.init.RecvCQ.post(WC{WRID: recv.WRID, Status: WCLocProtErr, Opcode: WCRecv, QPNum: r.Num, Detail: why}, nil)
				v = &verdict{status: WCRemOpErr, why: "responder: " + why}
				return
			}
			dst = append(dst, part{mr, s.Addr, s.Length})
			room += s.Length
		}
		if room < total {
			r.init.RecvCQ.post(WC{WRID: recv.WRID, Status: WCLocLenErr, Opcode: WCRecv, QPNum: r.Num}, nil)
			v = &verdict{status: WCRemInvReqErr, why: fmt.Sprintf("message of %d bytes, receive of %d", total, room)}
		}
	}
	read := func(i int, done func()) sim.Time {
		if v.failed() {
			done()
			return 0
		}
		off, k := piece(i)
		spans, src := spansOf(local, off, k)
		if len(spans) == 0 {
			src, _ = d.env.Machine.HostMemory(d.dev.Node())
		}
		return d.start(&dma.Transfer{Name: fmt.Sprintf("%s qp%#x %v read", d.name, qp.Num, wr.Opcode), Master: d.hw.DMA(),
			Src: src, Dst: d.hw.Side(), Bytes: int64(k), Read: spans}, func(info *dma.TransferInfo) {
			data[i] = info.Data
			if info.ReadErr != nil && readErr == nil {
				readErr = info.ReadErr
			}
			done()
		})
	}
	wire := func(i int, done func()) sim.Time {
		if v.failed() && i > 0 {
			done()
			return 0
		}
		_, k := piece(i)
		return d.port.send(fmt.Sprintf("%s qp%#x %v", d.name, qp.Num, wr.Opcode), wireBytes(k, mtu, d.prm.Header), done)
	}
	write := func(i int, done func()) sim.Time {
		if i == 0 {
			judge()
		}
		if v.failed() || readErr != nil {
			data[i] = nil
			done()
			return 0
		}
		off, k := piece(i)
		spans, to := spansOf(dst, off, k)
		if len(spans) == 0 {
			to, _ = peer.env.Machine.HostMemory(peer.dev.Node())
		}
		return peer.start(&dma.Transfer{Name: fmt.Sprintf("%s %v write", peer.name, wr.Opcode), Master: peer.hw.DMA(),
			Src: peer.hw.Side(), Dst: to, Bytes: int64(k), Write: spans, Data: data[i]}, func(*dma.TransferInfo) {
			data[i] = nil
			done()
		})
	}
	end := func() {
		switch {
		case v == nil && readErr != nil:
			qp.complete(w, WCLocProtErr, readErr.Error(), 0)
		case v == nil:
			if wr.Opcode == WRSend {
				resp.init.RecvCQ.post(WC{WRID: recv.WRID, Status: WCSuccess, Opcode: WCRecv, ByteLen: total, QPNum: resp.Num}, nil)
			}
			qp.reply(d.name+" ack", func() { qp.complete(w, WCSuccess, "", total) })
		case v.drop:
			qp.timedOut(w, v.why)
		case v.rnr:
			r := resp
			qp.reply(d.name+" rnr nak", func() {
				if qp.attr.RNRRetry != 7 && w.rnr >= int(qp.attr.RNRRetry) {
					qp.complete(w, WCRNRRetryExcErr, v.why, 0)
					return
				}
				w.rnr++
				d.env.Machine.Engine.After(RNRDelay(r.attr.MinRNRTimer), func() { qp.execute(w) })
			})
		default:
			qp.reply(d.name+" nak", func() { qp.complete(w, v.status, v.why, 0) })
		}
	}
	runPipe(d.env.Machine.Engine, n, end, read, wire, write)
}

// pull moves an RDMA READ: the request crosses the wire, the responder
// reads its memory and sends the response, which the requester writes
// into local memory.
func (qp *QP) pull(w *sendWQE, local []part, total uint64) {
	d, wr := qp.d, w.wr
	peer := d.port.peer
	d.port.send(fmt.Sprintf("%s qp%#x read request", d.name, qp.Num), int64(d.prm.Header+16), func() {
		r, why := qp.remote()
		if r == nil {
			qp.timedOut(w, why)
			return
		}
		var mr *MR
		if r.attr.AccessFlags&AccessRemoteRead == 0 {
			why = fmt.Sprintf("remote QP %#x does not allow REMOTE_READ", r.Num)
		} else if mr, why = peer.lookup(r.pd, wr.RKey, wr.RemoteAddr, total, AccessRemoteRead); mr != nil {
			why = ""
		}
		if why != "" {
			why = "remote " + why
			qp.reply(d.name+" nak", func() { qp.complete(w, WCRemAccessErr, why, 0) })
			return
		}
		src := []part{{mr, wr.RemoteAddr, total}}
		mtu := qp.mtu(r)
		offs := pieces(total, mtu, d.prm.MinPiece, d.prm.MaxChunks)
		n := len(offs) - 1
		data := make([][]byte, n)
		var rerr error
		piece := func(i int) (uint64, uint64) { return offs[i], offs[i+1] - offs[i] }
		read := func(i int, done func()) sim.Time {
			off, k := piece(i)
			spans, from := spansOf(src, off, k)
			if len(spans) == 0 {
				from, _ = peer.env.Machine.HostMemory(peer.dev.Node())
			}
			return peer.start(&dma.Transfer{Name: peer.name + " RDMA_READ response read", Master: peer.hw.DMA(),
				Src: from, Dst: peer.hw.Side(), Bytes: int64(k), Read: spans}, func(info *dma.TransferInfo) {
				data[i] = info.Data
				if info.ReadErr != nil && rerr == nil {
					rerr = info.ReadErr
				}
				done()
			})
		}
		wire := func(i int, done func()) sim.Time {
			_, k := piece(i)
			return peer.port.send(peer.name+" RDMA_READ response", wireBytes(k, mtu, d.prm.Header), done)
		}
		write := func(i int, done func()) sim.Time {
			if rerr != nil {
				done()
				return 0
			}
			off, k := piece(i)
			spans, to := spansOf(local, off, k)
			if len(spans) == 0 {
				to, _ = d.env.Machine.HostMemory(d.dev.Node())
			}
			return d.start(&dma.Transfer{Name: fmt.Sprintf("%s qp%#x RDMA_READ write", d.name, qp.Num), Master: d.hw.DMA(),
				Src: d.hw.Side(), Dst: to, Bytes: int64(k), Write: spans, Data: data[i]}, func(*dma.TransferInfo) {
				data[i] = nil
				done()
			})
		}
		runPipe(d.env.Machine.Engine, n, func() {
			if rerr != nil {
				qp.complete(w, WCRemOpErr, "responder: "+rerr.Error(), 0)
				return
			}
			qp.complete(w, WCSuccess, "", total)
		}, read, wire, write)
	})
}
