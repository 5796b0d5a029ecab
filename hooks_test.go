package dmalab

import (
	"math"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// pinnedCopy is a program copying n bytes from pinned host memory to the
// GPU with cuMemcpy.
func pinnedCopy(n uint64) func(p *Process) error {
	return func(p *Process) error {
		pr, err := p.CUDA()
		if err != nil {
			return err
		}
		ctx, err := pr.PrimaryContext(0)
		if err != nil {
			return err
		}
		host, err := ctx.MemAllocHost(p.Thread, n)
		if err != nil {
			return err
		}
		dev, err := ctx.MemAlloc(p.Thread, n)
		if err != nil {
			return err
		}
		return ctx.Memcpy(p.Thread, dev, mem.GPUAddr(host), n)
	}
}

// TestHookAll: one subscription hears every component, each event with
// its header filled in; and the GPU's copy is a transfer of the DMA
// layer, its host end a device access the DMA-API checker sees.
func TestHookAll(t *testing.T) {
	sys, err := Boot("h200-pcie", Options{Check: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	seen := map[string]int{}
	var gpuDMA, pinnedReads int
	sys.HookAll(func(e sim.Event) {
		h := e.Head()
		if h.Component == "" || h.Cause == 0 {
			t.Errorf("event %T without a component or cause: %+v", e, *h)
		}
		if h.Time > sys.Engine.Now() {
			t.Errorf("event %T from the future: %v at %v", e, h.Time, sys.Engine.Now())
		}
		seen[h.Component]++
		if d, ok := e.(*dma.Event); ok {
			switch {
			case d.Op == dma.OpTransfer && d.Device == "gpu0" && d.Transfer.Engine == "gpu0.ce0":
				gpuDMA++
			case d.Op == dma.OpDeviceAccess && d.Device == "gpu0" && d.Pinned && !d.Write:
				pinnedReads++
			}
		}
	})
	if err := sys.Run("app", pinnedCopy(1<<20)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"dma", "mem", "fabric", "kernel", "gpu", "cuda"} {
		if seen[c] == 0 {
			t.Errorf("no event from %s (saw %v)", c, seen)
		}
	}
	if gpuDMA != 1 || pinnedReads == 0 {
		t.Errorf("the pinned copy made %d copy-engine transfers and %d reads of pinned memory; want 1 and some", gpuDMA, pinnedReads)
	}
	if n := len(sys.Diagnostics()); n != 0 {
		t.Errorf("a correct copy got %d diagnostics: %v", n, sys.Diagnostics())
	}
}

// TestAttribution: the time split of one synchronous pinned copy is the
// GPU's per-call overhead, no queueing or translation, and the route's
// latency plus the bytes at the link's rate: together the copy's time.
func TestAttribution(t *testing.T) {
	sys, err := Boot("h200-pcie", Options{Attribution: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	const n = 64 << 20
	var took sim.Time
	err = sys.Run("app", func(p *Process) error {
		t0 := p.Now()
		err := pinnedCopy(n)(p)
		took = p.Now() - t0
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := sys.Result.Time
	if ts == nil || ts.Transfers != 1 {
		t.Fatalf("time split %+v, want one transfer", ts)
	}
	overhead := sys.Spec.GPUs[0].CopyOverhead.V.Seconds()
	if math.Abs(ts.Call-overhead) > 1e-12 || ts.Queue != 0 || ts.Translate != 0 || ts.Fault != 0 {
		t.Errorf("split %+v: want call %g s and nothing queued, translated or faulted", ts, overhead)
	}
	if rate := float64(n) / ts.Transfer / 1e9; rate < 54 || rate > 56 {
		t.Errorf("transfer part %g s = %.2f GB/s, want about the link's 55.5", ts.Transfer, rate)
	}
	if sum := ts.Call + ts.Transfer; sum > took.Seconds() {
		t.Errorf("split sums to %g s, more than the program's %g s", sum, took.Seconds())
	}
}
