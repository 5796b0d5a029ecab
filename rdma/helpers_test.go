package rdma

import (
	"runtime/debug"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// host is one booted machine with an HCA and a process.
type host struct {
	m    *machine.Machine
	dev  *Device
	proc *kernel.Process
	pd   *PD
	cq   *CQ
}

// pair is two hosts of one preset on one engine, nic0 of each joined by
// the default cable.
type pair struct {
	eng  *sim.Engine
	a, b *host
	wire *Wire
}

func newHost(t *testing.T, eng *sim.Engine, preset string, payload bool, set ...string) *host {
	t.Helper()
	spec, err := platform.Resolve(preset)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(set); i += 2 {
		if spec, err = platform.Set(spec, set[i], set[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	m, err := machine.NewWithOptions(spec, 1, machine.Options{Payload: payload, Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dma.New(m, m.Mem)
	if err != nil {
		t.Fatal(err)
	}
	k := kernel.New(eng, m.Mem.Nodes())
	dev, err := Open(Env{Machine: m, Mem: m.Mem, DMA: d, Kernel: k}, "nic0", Params{})
	if err != nil {
		t.Fatal(err)
	}
	proc, err := k.NewProcess("app", 0)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := dev.AllocPD(proc)
	if err != nil {
		t.Fatal(err)
	}
	return &host{m: m, dev: dev, proc: proc, pd: pd}
}

func newPair(t *testing.T, payload bool) *pair {
	t.Helper()
	eng := sim.New(1)
	p := &pair{eng: eng, a: newHost(t, eng, "2s-4gpu-pcie", payload), b: newHost(t, eng, "2s-4gpu-pcie", payload)}
	w, err := Connect(p.a.dev, p.b.dev, DefaultCable)
	if err != nil {
		t.Fatal(err)
	}
	p.wire = w
	return p
}

// run runs body as a thread and the engine to the end.
func (p *pair) run(t *testing.T, body func(th *sim.Proc)) {
	t.Helper()
	p.eng.Spawn("test", func(th *sim.Proc) {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		body(th)
	})
	p.eng.Run()
	if b := p.eng.Blocked(); len(b) > 0 {
		t.Fatalf("blocked: %v", b)
	}
}

// buf maps size bytes of anonymous memory into h's process.
func (h *host) buf(t *testing.T, size uint64) uint64 {
	t.Helper()
	va, err := h.m.Mem.Vmalloc(0, size)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.proc.MM.Map(kernel.VMA{Start: va, Size: (size + 4095) &^ 4095, Name: "anon"}); err != nil {
		t.Fatal(err)
	}
	return uint64(va)
}

func (h *host) fill(th *sim.Proc, va uint64, data []byte) {
	h.m.Mem.WriteBytes(th, 0, mem.VirtAddr(va), data)
}

func (h *host) read(th *sim.Proc, va uint64, n uint64) []byte {
	b := make([]byte, n)
	h.m.Mem.ReadBytes(th, 0, mem.VirtAddr(va), b)
	return b
}

// qp makes an RC QP on h with its own CQ (h.cq, made once).
func (h *host) qp(t *testing.T, th *sim.Proc) *QP {
	t.Helper()
	if h.cq == nil {
		cq, err := h.dev.CreateCQ(th, 256)
		if err != nil {
			t.Fatal(err)
		}
		h.cq = cq
	}
	qp, err := h.pd.CreateQP(th, QPInitAttr{SendCQ: h.cq, RecvCQ: h.cq, Type: QPTypeRC,
		Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 4, MaxRecvSGE: 4}})
	if err != nil {
		t.Fatal(err)
	}
	return qp
}

// rts brings qp to RTS connected to remote QP number dest, allowing
// remote access, with retry counts and RNR timer as given.
func rts(t *testing.T, qp *QP, dest uint32, access Access, rnrRetry, rnrTimer uint8) {
	t.Helper()
	steps := []struct {
		a QPAttr
		m AttrMask
	}{
		{QPAttr{State: QPSInit, PortNum: 1, AccessFlags: access}, AttrState | maskToInit},
		{QPAttr{State: QPSRTR, PathMTU: MTU4096, DestQPN: dest, MaxDestRdAtomic: 16, MinRNRTimer: rnrTimer}, AttrState | maskToRTR},
		{QPAttr{State: QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: rnrRetry, MaxRdAtomic: 16}, AttrState | maskToRTS},
	}
	for _, s := range steps {
		if err := qp.Modify(s.a, s.m); err != nil {
			t.Fatal(err)
		}
	}
}

// connect makes a QP on each host and connects them.
func (p *pair) connect(t *testing.T, th *sim.Proc, access Access, rnrRetry, rnrTimer uint8) (qa, qb *QP) {
	qa, qb = p.a.qp(t, th), p.b.qp(t, th)
	rts(t, qa, qb.Num, access, rnrRetry, rnrTimer)
	rts(t, qb, qa.Num, access, rnrRetry, rnrTimer)
	return qa, qb
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

// physOf is where va's first byte is.
func physOf(t *testing.T, h *host, va uint64) mem.PhysAddr {
	t.Helper()
	r, _, _, err := h.m.Mem.Translate(mem.VirtAddr(va), 1)
	if err != nil {
		t.Fatal(err)
	}
	return r[0].Start
}
