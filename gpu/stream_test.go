package gpu

import (
	"math"
	"testing"

	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/sim"
)

const copySize = 256 << 20

// TestEnqueueIsAsynchronous: an enqueueing call returns after
// EnqueueCost, before the work is done; Synchronize blocks the host,
// without CPU time, until it is; Query says which.
func TestEnqueueIsAsynchronous(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		s := r.d.NewStream(0)
		must(t, s.Launch(p, spin("k", 100*sim.Microsecond)))
		if p.Now() != EnqueueCost || p.CPUTime() != EnqueueCost {
			t.Errorf("launch returned at %v (CPU %v), want EnqueueCost", p.Now(), p.CPUTime())
		}
		if s.Query() {
			t.Error("stream idle right after a launch")
		}
		s.Synchronize(p)
		if want := EnqueueCost + 100*sim.Microsecond; p.Now() != want {
			t.Errorf("synchronize returned at %v, want %v", p.Now(), want)
		}
		if !s.Query() || p.CPUTime() != EnqueueCost {
			t.Errorf("after synchronize: query %v, CPU %v", s.Query(), p.CPUTime())
		}
	})
}

// TestOneStreamSerializes: two copies in one stream run one after the
// other.
func TestOneStreamSerializes(t *testing.T) {
	r := h200(t)
	host := r.hostBuf(2*copySize, 0)
	h, _ := r.m.HostMemory(0)
	one := copyTime(t, r.m, h, r.d.GPU.Memory(), copySize)
	r.run(func(p *sim.Proc) {
		dev := r.alloc(p, r.d, 2*copySize)
		t0 := p.Now()
		s := r.d.NewStream(0)
		must(t, s.Launch(p, spin("hold", 10*sim.Microsecond)))
		must(t, s.Memcpy(p, dev, host, copySize))
		must(t, s.Memcpy(p, dev+copySize, host+copySize, copySize))
		s.Synchronize(p)
		if want := t0 + EnqueueCost + 10*sim.Microsecond + 2*one; p.Now() != want {
			t.Errorf("two copies in one stream ended at %v, want %v (back to back, %v each)", p.Now(), want, one)
		}
	})
}

// TestStreamsOverlap: a host-to-device copy and a device-to-host copy in
// two streams run at once, on two copy engines and the two directions of
// the PCIe link, each as fast as alone. Two copies in the same direction
// share one engine and take turns.
func TestStreamsOverlap(t *testing.T) {
	r := h200(t)
	host := r.hostBuf(2*copySize, 0)
	h, _ := r.m.HostMemory(0)
	h2d := copyTime(t, r.m, h, r.d.GPU.Memory(), copySize)
	d2h := copyTime(t, r.m, r.d.GPU.Memory(), h, copySize)
	r.run(func(p *sim.Proc) {
		dev := r.alloc(p, r.d, 2*copySize)
		a, b := r.d.NewStream(0), r.d.NewStream(0)
		must(t, a.Memcpy(p, dev, host, copySize))
		must(t, b.Memcpy(p, host+copySize, dev+copySize, copySize))
		r.d.Synchronize(p)
	})
	up, down := r.log[len(r.log)-2], r.log[len(r.log)-1]
	if up.Copy != HostToDevice {
		up, down = down, up
	}
	// Both directions busy: the host-to-device copy's read requests share
	// the upstream direction with the device-to-host data, so each runs
	// at 1/(1+q) of the link.
	q := machine.ReverseLoad(r.d.GPU.Spec.Link, true)
	fixed := CopyStreamOverhead + latency(t, r.m, h, r.d.GPU.Memory())
	slow := func(alone sim.Time) sim.Time { return sim.Time(float64(alone-fixed)*(1+q)) + fixed }
	near := func(a, b sim.Time) bool { return math.Abs(float64(a-b)) <= 1e-3*float64(b) }
	if q <= 0 || !near(up.End-up.Start, slow(h2d)) || !near(down.End-down.Start, slow(d2h)) || up.Engine == down.Engine {
		t.Errorf("h2d %v on %s, d2h %v on %s: want %v and %v on two engines", up.End-up.Start, up.Engine, down.End-down.Start, down.Engine, slow(h2d), slow(d2h))
	}

	r = h200(t)
	host = r.hostBuf(2*copySize, 0)
	r.run(func(p *sim.Proc) {
		dev := r.alloc(p, r.d, 2*copySize)
		a, b := r.d.NewStream(0), r.d.NewStream(0)
		must(t, a.Memcpy(p, dev, host, copySize))
		must(t, b.Memcpy(p, dev+copySize, host+copySize, copySize))
		r.d.Synchronize(p)
	})
	first, second := r.log[len(r.log)-2], r.log[len(r.log)-1]
	if first.Engine != second.Engine || second.End-first.End < h2d-CopyStreamOverhead {
		t.Errorf("two h2d copies on %s and %s ended %v apart: want one engine, in turn", first.Engine, second.Engine, second.End-first.End)
	}
}

// TestEventsMeasureExactly: events around a copy queued behind a spin
// kernel (nvbandwidth's method) measure the copy's time exactly.
func TestEventsMeasureExactly(t *testing.T) {
	r := h200(t)
	host := r.hostBuf(copySize, 0)
	h, _ := r.m.HostMemory(0)
	want := copyTime(t, r.m, h, r.d.GPU.Memory(), copySize)
	r.run(func(p *sim.Proc) {
		dev := r.alloc(p, r.d, copySize)
		s := r.d.NewStream(0)
		start, end := r.sys.NewEvent(0), r.sys.NewEvent(0)
		must(t, s.Launch(p, spin("spin", 50*sim.Microsecond)))
		must(t, start.Record(p, s))
		must(t, s.Memcpy(p, dev, host, copySize))
		must(t, end.Record(p, s))
		_, err := ElapsedTime(start, end)
		mustErr(t, err, ErrNotReady)
		end.Synchronize(p)
		got, err := ElapsedTime(start, end)
		must(t, err)
		if got != want {
			t.Errorf("elapsed %v, want %v", got, want)
		}
		// 256 MiB at the model's 55.5 GB/s plus 1.76 us of overhead and
		// latency: 55.49 GB/s. Measured here (ce_copy, 256 MiB): 55.54.
		if gbps := float64(copySize) / got.Seconds() / 1e9; gbps < 55.4 || gbps > 55.5 {
			t.Errorf("%.2f GB/s", gbps)
		}
	})
}

// TestEventErrors: ElapsedTime refuses events never recorded or created
// without timing; an event never recorded is complete for Query and
// Synchronize, as in CUDA.
func TestEventErrors(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		s := r.d.DefaultStream()
		never, notiming, ok := r.sys.NewEvent(0), r.sys.NewEvent(EventDisableTiming), r.sys.NewEvent(0)
		if !never.Query() {
			t.Error("an event never recorded is not complete")
		}
		never.Synchronize(p)
		must(t, ok.Record(p, s))
		must(t, notiming.Record(p, s))
		s.Synchronize(p)
		_, err := ElapsedTime(never, ok)
		mustErr(t, err, ErrInvalidHandle)
		_, err = ElapsedTime(ok, notiming)
		mustErr(t, err, ErrInvalidHandle)
		if at, done := ok.Time(); !done || at != EnqueueCost {
			t.Errorf("event time %v %v, want %v", at, done, EnqueueCost)
		}
	})
}

// TestLegacyDefaultStream: work in the legacy default stream waits for
// the blocking streams' earlier work, and their later work waits for it;
// a non-blocking stream does neither.
func TestLegacyDefaultStream(t *testing.T) {
	r := h200(t)
	us := sim.Microsecond
	r.run(func(p *sim.Proc) {
		blocking, free := r.d.NewStream(0), r.d.NewStream(StreamNonBlocking)
		must(t, blocking.Launch(p, spin("a", 100*us)))           // enqueued at 1
		must(t, r.d.DefaultStream().Launch(p, spin("b", 10*us))) // at 2, after a
		must(t, free.Launch(p, spin("c", 10*us)))                // at 3, at once
		must(t, blocking.Launch(p, spin("d", 5*us)))             // at 4, after b
		r.d.Synchronize(p)
	})
	for _, c := range []struct {
		name       string
		start, end sim.Time
	}{
		{"a", 1 * us, 101 * us},
		{"b", 101 * us, 111 * us},
		{"c", 3 * us, 13 * us},
		{"d", 111 * us, 116 * us},
	} {
		a := r.find(c.name)
		if a.Start != c.start || a.End != c.end {
			t.Errorf("%s ran %v..%v, want %v..%v", c.name, a.Start, a.End, c.start, c.end)
		}
	}
}

// TestWaitEventAndHostFunc: cuStreamWaitEvent orders work across
// streams; a host function runs in stream order on the stream's worker.
func TestWaitEventAndHostFunc(t *testing.T) {
	r := h200(t)
	us := sim.Microsecond
	var ranAt sim.Time
	r.run(func(p *sim.Proc) {
		a, b := r.d.NewStream(StreamNonBlocking), r.d.NewStream(StreamNonBlocking)
		e := r.sys.NewEvent(0)
		must(t, a.Launch(p, spin("producer", 50*us))) // 1..51
		must(t, e.Record(p, a))
		must(t, b.WaitEvent(p, e))
		must(t, b.Launch(p, spin("consumer", 5*us)))
		must(t, b.LaunchHostFunc(p, "callback", func(w *sim.Proc) {
			ranAt = w.Now()
			w.Sleep(2 * us)
		}))
		must(t, b.Launch(p, spin("after", 1*us)))
		b.Synchronize(p)
	})
	if c := r.find("consumer"); c.Start != 51*us {
		t.Errorf("consumer started at %v, want the producer's end 51us", c.Start)
	}
	if ranAt != 56*us || r.find("after").Start != 58*us {
		t.Errorf("callback at %v, next kernel at %v: want 56us and 58us", ranAt, r.find("after").Start)
	}
}

// TestDestroyedStream: destroying lets queued work finish; new work is
// refused, and so is destroying the default stream.
func TestDestroyedStream(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		s := r.d.NewStream(0)
		must(t, s.Launch(p, spin("last", 10*sim.Microsecond)))
		must(t, s.Destroy())
		mustErr(t, s.Launch(p, spin("late", 1)), ErrInvalidHandle)
		mustErr(t, s.Destroy(), ErrInvalidHandle)
		mustErr(t, r.d.DefaultStream().Destroy(), ErrInvalidHandle)
		r.d.Synchronize(p)
	})
	if r.find("last").End != 11*sim.Microsecond {
		t.Errorf("queued work did not finish after destroy: %v", r.log)
	}
	if len(r.d.streams) != 0 {
		t.Errorf("%d streams left after the destroyed one drained", len(r.d.streams))
	}
}
