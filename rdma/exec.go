package rdma

import (
	"fmt"

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

// pieces splits total bytes into at most max pieces of whole MTUs.
func pieces(total, mtu uint64, max int) (size uint64, n int) {
	if total == 0 {
		return 0, 1
	}
	pk := (total + mtu - 1) / mtu
	per := (pk + uint64(max) - 1) / uint64(max)
	size = per * mtu
	return size, int((total + size - 1) / size)
}

// wireBytes is what n payload bytes cost on the wire in packets of
// mtu: every packet carries the headers.
func wireBytes(n, mtu, header uint64) int64 {
	pk := max((n+mtu-1)/mtu, 1)
	return int64(n + pk*header)
}

// pipe runs pieces through stages, each stage one piece at a time and
// in order, a piece entering a stage once the previous stage is done
// with it.
type pipe struct {
	n      int
	stages []func(i int, done func())
	ready  []int
	next   []int
	busy   []bool
	end    func()
}

func runPipe(n int, end func(), stages ...func(i int, done func())) {
	p := &pipe{n: n, stages: stages, ready: make([]int, len(stages)), next: make([]int, len(stages)),
		busy: make([]bool, len(stages)), end: end}
	p.ready[0] = n
	p.pump()
}

func (p *pipe) pump() {
	for k := range p.stages {
		if p.busy[k] || p.next[k] >= p.ready[k] {
			continue
		}
		i := p.next[k]
		p.next[k]++
		p.busy[k] = true
		p.stages[k](i, func() {
			p.busy[k] = false
			if k+1 < len(p.stages) {
				p.ready[k+1]++
			} else if i == p.n-1 {
				p.end()
				return
			}
			p.pump()
		})
	}
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

// start is StartTransfer of a well-formed transfer.
func (d *Device) start(t *dma.Transfer, done func(*dma.TransferInfo)) {
	if _, err := d.dev.StartTransfer(t, done); err != nil {
		panic(fmt.Sprintf("rdma: %s: %s: %v", d.name, t.Name, err)) // a model bug
	}
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
	size, n := pieces(total, mtu, d.prm.MaxChunks)
	data := make([][]byte, n)
	var v *verdict
	var dst []part
	var recv RecvWR
	var resp *QP // the responder QP, once judged
	var readErr error
	piece := func(i int) (uint64, uint64) { return uint64(i) * size, min(size, total-uint64(i)*size) }
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
	read := func(i int, done func()) {
		if v.failed() {
			done()
			return
		}
		off, k := piece(i)
		spans, src := spansOf(local, off, k)
		if len(spans) == 0 {
			src, _ = d.env.Machine.HostMemory(d.dev.Node())
		}
		d.start(&dma.Transfer{Name: fmt.Sprintf("%s qp%#x %v read", d.name, qp.Num, wr.Opcode), Master: d.hw.DMA(),
			Src: src, Dst: d.hw.Side(), Bytes: int64(k), Read: spans}, func(info *dma.TransferInfo) {
			data[i] = info.Data
			if info.ReadErr != nil && readErr == nil {
				readErr = info.ReadErr
			}
			done()
		})
	}
	wire := func(i int, done func()) {
		if v.failed() && i > 0 {
			done()
			return
		}
		_, k := piece(i)
		d.port.send(fmt.Sprintf("%s qp%#x %v", d.name, qp.Num, wr.Opcode), wireBytes(k, mtu, d.prm.Header), done)
	}
	write := func(i int, done func()) {
		if i == 0 {
			judge()
		}
		if v.failed() || readErr != nil {
			data[i] = nil
			done()
			return
		}
		off, k := piece(i)
		spans, to := spansOf(dst, off, k)
		if len(spans) == 0 {
			to, _ = peer.env.Machine.HostMemory(peer.dev.Node())
		}
		peer.start(&dma.Transfer{Name: fmt.Sprintf("%s %v write", peer.name, wr.Opcode), Master: peer.hw.DMA(),
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
	runPipe(n, end, read, wire, write)
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
		size, n := pieces(total, mtu, d.prm.MaxChunks)
		data := make([][]byte, n)
		var rerr error
		piece := func(i int) (uint64, uint64) { return uint64(i) * size, min(size, total-uint64(i)*size) }
		read := func(i int, done func()) {
			off, k := piece(i)
			spans, from := spansOf(src, off, k)
			if len(spans) == 0 {
				from, _ = peer.env.Machine.HostMemory(peer.dev.Node())
			}
			peer.start(&dma.Transfer{Name: peer.name + " RDMA_READ response read", Master: peer.hw.DMA(),
				Src: from, Dst: peer.hw.Side(), Bytes: int64(k), Read: spans}, func(info *dma.TransferInfo) {
				data[i] = info.Data
				if info.ReadErr != nil && rerr == nil {
					rerr = info.ReadErr
				}
				done()
			})
		}
		wire := func(i int, done func()) {
			_, k := piece(i)
			peer.port.send(peer.name+" RDMA_READ response", wireBytes(k, mtu, d.prm.Header), done)
		}
		write := func(i int, done func()) {
			if rerr != nil {
				done()
				return
			}
			off, k := piece(i)
			spans, to := spansOf(local, off, k)
			if len(spans) == 0 {
				to, _ = d.env.Machine.HostMemory(d.dev.Node())
			}
			d.start(&dma.Transfer{Name: fmt.Sprintf("%s qp%#x RDMA_READ write", d.name, qp.Num), Master: d.hw.DMA(),
				Src: d.hw.Side(), Dst: to, Bytes: int64(k), Write: spans, Data: data[i]}, func(*dma.TransferInfo) {
				data[i] = nil
				done()
			})
		}
		runPipe(n, func() {
			if rerr != nil {
				qp.complete(w, WCRemOpErr, "responder: "+rerr.Error(), 0)
				return
			}
			qp.complete(w, WCSuccess, "", total)
		}, read, wire, write)
	})
}
