package uvm

import (
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// pingPong has one process write page 0 of a on a, then b, then a, ...
// (n accesses, each waiting for the previous) and returns each access.
func pingPong(t *testing.T, d *Driver, p *sim.Proc, base Addr, a, b Processor, n int) []Access {
	t.Helper()
	var out []Access
	for i := range n {
		who := a
		if i%2 == 1 {
			who = b
		}
		var acc Access
		if who == CPU {
			acc = ok(t)(d.CPUAccess(p, base, 4, true))
		} else {
			acc = ok(t)(d.GPUAccess(p, who.GPUIndex(), base, 4, true))
		}
		out = append(out, acc)
	}
	return out
}

// firstPage keeps the events about the page at addr.
func firstPage(evs []Event, addr Addr) []Event {
	var out []Event
	for _, e := range evs {
		if e.Addr == addr {
			out = append(out, e)
		}
	}
	return out
}

// TestThrashingThrottle: the CPU and a PCIe GPU write one page in turn.
// Times (testParams, 64 KiB/us): a CPU fault takes 5 us and then its
// move; a GPU fault 12.1 us (batch 10, entry 0.1, block 2) and then its
// move; 64 KiB moves in 1 us, 4 KiB in 62.5 ns.
//
//	t(us)     who  what
//	0         cpu  first touch: big page 0..15 populated; done at 5
//	5         gpu  migrates 0..15 (1 us): 18.1, the block's first migration
//	18.1      cpu  migrates back: 24.1, a different processor within a
//	               lapse: per-page tracking starts (pages first seen)
//	24.1      gpu  37.2: 1st thrashing event of the pages
//	37.2      cpu  43.2: 2nd
//	43.2      gpu  56.3: 3rd = threshold: thrashing detected
//	56.3      cpu  hint at 61.3 starts a throttling period to 561.3, the
//	               CPU not throttled; thrashing pages do not grow to big
//	               pages: page 0 alone moves, done at 61.3625
//	61.3625   gpu  hint at 73.4625: throttled until 561.3; refaults then,
//	               hint at 573.4: throttling over, and 512 us since the
//	               page last moved is over a lapse: no longer thrashing;
//	               page 0 moves, done at 573.4625: 512.1 us stalled
//
// A CPU fault 1.2 s later finds the block's epoch (2000 lapses) over:
// its thrashing state is forgotten and whole big pages move again.
func TestThrashingThrottle(t *testing.T) {
	d, env := newDriver(t, oneGPU(1<<30))
	a := mustAlloc(t, d, BlockSize)
	evs := record(d, KindThrashing, KindThrottle, KindPin)
	var accs []Access
	run(t, env, func(p *sim.Proc) {
		accs = pingPong(t, d, p, a.Base, CPU, GPU(0), 8)
		sleepUntil(p, 1200*sim.Millisecond)
		ok(t)(d.CPUAccess(p, a.Base+PageSize, 4, false))
	})
	got := firstPage(*evs, a.Base)
	if len(got) != 2 {
		t.Fatalf("events %v, want thrashing then throttle", got)
	}
	if e := got[0]; e.Kind != KindThrashing || e.Time != us(56.3) || e.Processors != ProcSet(0).With(CPU).With(GPU(0)) {
		t.Errorf("detected %+v, want at 56.3us between cpu and gpu0", e)
	}
	if e := got[1]; e.Kind != KindThrottle || e.Processor != GPU(0) || e.Time != us(73.4625) || e.Until != us(561.3) {
		t.Errorf("throttle %+v, want gpu0 at 73.4625us until 561.3us", e)
	}
	if acc := accs[7]; acc.Stall != us(512.1) || acc.Faults != 2 {
		t.Errorf("throttled access %+v, want 2 faults, 512.1us stall", acc)
	}
	if st := d.Stats(); st.Throttles != 1 || st.Pins != 0 || st.Thrashing != 16 {
		t.Errorf("stats: %d throttles, %d pins, %d pages thrashing; want 1, 0, 16", st.Throttles, st.Pins, st.Thrashing)
	}
	if last := env.moves[len(env.moves)-1]; last != "gpu0->cpu 65536" {
		t.Errorf("after the epoch the fault moved %q, want a whole big page", last)
	}
}

// TestThrashingPin: two GPUs on NVLink write one page in turn. At the
// third thrashing event (77.6 us, as in TestThrashingThrottle but every
// fault a 13.1 us GPU fault), the next fault (GPU 0, hint at 89.7 us)
// finds that both thrashing processors reach the page's location, GPU 1,
// over NVLink with native atomics: the page is pinned there for 300
// lapses and GPU 0 maps it remotely. Neither faults again until the pin
// expires at 89.7 us + 150 ms; then the remote mapping goes and GPU 0's
// next write migrates the page.
func TestThrashingPin(t *testing.T) {
	cfg := Config{
		GPUs:   []GPUConfig{{Generation: PascalPlus, ManagedMemory: 1 << 30}, {Generation: PascalPlus, ManagedMemory: 1 << 30}},
		Peers:  [][]Link{{LinkNone, LinkNVLink}, {LinkNVLink, LinkNone}},
		Params: testParams(),
	}
	d, env := newDriver(t, cfg)
	a := mustAlloc(t, d, BlockSize)
	evs := record(d, KindPin, KindUnpin, KindThrottle)
	var accs []Access
	var mappedBefore bool
	run(t, env, func(p *sim.Proc) {
		accs = pingPong(t, d, p, a.Base, GPU(0), GPU(1), 11)
		mappedBefore = d.MapsRemotely(GPU(0), a.Base)
		sleepUntil(p, 150100*sim.Microsecond)
		if d.MapsRemotely(GPU(0), a.Base) {
			t.Error("GPU 0 still maps the page after the pin expired")
		}
		ok(t)(d.GPUAccess(p, 0, a.Base, 4, true))
	})
	got := firstPage(*evs, a.Base)
	if len(got) != 2 || got[0].Kind != KindPin || got[1].Kind != KindUnpin {
		t.Fatalf("events %v, want pin then unpin", got)
	}
	if e := got[0]; e.Time != us(89.7) || e.To != GPU(1) || e.Until != us(150089.7) {
		t.Errorf("pin %+v, want to gpu1 at 89.7us until 150089.7us", e)
	}
	if e := got[1]; e.Time != us(150089.7) {
		t.Errorf("unpin at %v, want 150089.7us", e.Time)
	}
	if acc := accs[6]; acc.Where != GPU(1) || acc.RemoteBytes != 4 || !mappedBefore {
		t.Errorf("pinning access %+v, mapped %v: want served remotely from gpu1", acc, mappedBefore)
	}
	for i, acc := range accs[7:] {
		if acc.Faults != 0 {
			t.Errorf("access %d after the pin faulted", 7+i)
		}
	}
	if r := d.Residency(a.Base); r != ProcSet(0).With(GPU(0)) {
		t.Errorf("after the pin the page is on %v, want gpu0", r)
	}
	if st := d.Stats(); st.Pins != 1 || st.Unpins != 1 || st.Throttles != 0 {
		t.Errorf("stats: %d pins, %d unpins, %d throttles", st.Pins, st.Unpins, st.Throttles)
	}

	t.Run("PCIe peers throttle instead", func(t *testing.T) {
		cfg.Peers = [][]Link{{LinkNone, LinkPCIe}, {LinkPCIe, LinkNone}}
		d, env := newDriver(t, cfg)
		a := mustAlloc(t, d, BlockSize)
		run(t, env, func(p *sim.Proc) { pingPong(t, d, p, a.Base, GPU(0), GPU(1), 11) })
		if st := d.Stats(); st.Pins != 0 || st.Throttles == 0 {
			t.Errorf("stats: %d pins, %d throttles; want none, some", st.Pins, st.Throttles)
		}
	})
}

// TestThrashingPinCPU: on a system where the CPU reaches GPU memory over
// NVLink (Grace, POWER9), CPU and GPU thrashing on a page pin it on the
// GPU and the CPU maps it remotely: CPU access to GPU memory, which x86
// PCIe cannot do.
func TestThrashingPinCPU(t *testing.T) {
	cfg := oneGPU(1 << 30)
	cfg.GPUs[0].CPULink = LinkNVLink
	d, env := newDriver(t, cfg)
	a := mustAlloc(t, d, BlockSize)
	var accs []Access
	var mapped bool
	var on ProcSet
	run(t, env, func(p *sim.Proc) {
		accs = pingPong(t, d, p, a.Base, GPU(0), CPU, 10)
		mapped, on = d.MapsRemotely(CPU, a.Base), d.Residency(a.Base)
	})
	if st := d.Stats(); st.Pins != 1 || st.Throttles != 0 {
		t.Errorf("stats: %d pins, %d throttles", st.Pins, st.Throttles)
	}
	if !mapped || on != ProcSet(0).With(GPU(0)) {
		t.Errorf("page on %v, CPU maps remotely %v; want pinned on gpu0, mapped by the CPU", on, mapped)
	}
	if acc := accs[9]; acc.Faults != 0 || acc.Where != GPU(0) {
		t.Errorf("last CPU access %+v, want remote, no fault", acc)
	}
}
