package cuda

import (
	"errors"
	"syscall"
	"testing"

	kern "github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// upiBytes is what the socket link "upi" has carried, both ways.
func (r *rig) upiBytes() float64 {
	r.t.Helper()
	for _, l := range r.m.Fabric.Links() {
		if l.Name() == "upi" {
			st := l.Stats()
			return st.Bytes[0] + st.Bytes[1]
		}
	}
	r.t.Fatal("no link upi")
	return 0
}

// nodeOf is the node of the first page at va.
func (r *rig) nodeOf(va mem.VirtAddr) int {
	r.t.Helper()
	n, present, err := r.m.Mem.PageNode(va)
	if err != nil || !present {
		r.t.Fatalf("page node of %v: %d, present %v, %v", va, n, present, err)
	}
	return n
}

// TestHostAllocFollowsPolicy: cuMemAllocHost's pages go where the
// calling thread's policy and node say (nv_alloc_system_pages takes
// them with the task's mempolicy), for every policy that names a node
// and for a thread bound to the other socket, and a bind to full nodes
// is CUDA_ERROR_OUT_OF_MEMORY.
func TestHostAllocFollowsPolicy(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(p *sim.Proc, kp *kern.Process) error
		want  int
	}{
		{"default", func(*sim.Proc, *kern.Process) error { return nil }, 0},
		{"bind 1", func(_ *sim.Proc, kp *kern.Process) error { return kp.SetMemPolicy(kern.MPOLBind, 1) }, 1},
		{"preferred 1", func(_ *sim.Proc, kp *kern.Process) error { return kp.SetMemPolicy(kern.MPOLPreferred, 1) }, 1},
		{"thread on node 1", func(p *sim.Proc, kp *kern.Process) error {
			return kp.SetThreadAffinity(p, kp.Kernel().CPUsOfNode(1)[0])
		}, 1},
		{"thread on node 1, bind 0", func(p *sim.Proc, kp *kern.Process) error {
			if err := kp.SetThreadAffinity(p, kp.Kernel().CPUsOfNode(1)[0]); err != nil {
				return err
			}
			return kp.SetMemPolicy(kern.MPOLBind, 0)
		}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, "2s-4gpu-pcie", rigOpt{})
			r.run(func(p *sim.Proc) {
				must(t, c.setup(p, r.pr.KernelProcess()))
				va, err := r.ctx.MemAllocHost(p, 1<<20)
				must(t, err)
				if got := r.nodeOf(va); got != c.want {
					t.Errorf("pinned pages on node %d, want %d", got, c.want)
				}
				pg, err := r.pr.Malloc(1 << 20)
				must(t, err)
				if got := r.nodeOf(pg); c.name != "thread on node 1" && got != c.want {
					t.Errorf("malloc'd pages on node %d, want %d", got, c.want)
				}
			})
		})
	}
	t.Run("bind to a full node", func(t *testing.T) {
		r := newRig(t, "2s-4gpu-pcie", rigOpt{})
		r.run(func(p *sim.Proc) {
			must(t, r.pr.KernelProcess().SetMemPolicy(kern.MPOLBind, 1))
			_, err := r.ctx.MemAllocHost(p, 1<<40) // 1 TiB: more than node 1 has
			wantResult(t, err, ErrorOutOfMemory)
		})
	})
}

// TestRegisterPinsWhereTouched: cuMemHostRegister of anonymous memory
// pins pages where first touch placed them, and places the untouched
// ones for the registering thread (get_user_pages before the pin)
// instead of failing on them.
func TestRegisterPinsWhereTouched(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", rigOpt{})
	const size = 8 * mem.PageSize
	r.run(func(p *sim.Proc) {
		kp := r.pr.KernelProcess()
		va, err := kp.MmapAnon(size)
		must(t, err)
		// A worker on node 1 touches the first half.
		w := p.Spawn("worker", func(q *sim.Proc) {
			must(t, kp.SetThreadAffinity(q, kp.Kernel().CPUsOfNode(1)[0]))
			r.m.Mem.Write(q, kp.ThreadNode(q), va, size/2)
		})
		p.Join(w)
		must(t, r.ctx.MemHostRegister(p, va, size, HostRegisterDeviceMap))
		for i := range uint64(8) {
			want := 1
			if i >= 4 {
				want = 0 // placed by the pin, for main on node 0
			}
			if got := r.nodeOf(va + mem.VirtAddr(i*mem.PageSize)); got != want {
				t.Errorf("page %d on node %d, want %d", i, got, want)
			}
		}
		dev, err := r.ctx.MemAlloc(p, size)
		must(t, err)
		before := r.upiBytes()
		must(t, r.ctx.Memcpy(p, dev, mem.GPUAddr(va), size))
		if r.upiBytes() == before {
			t.Error("a copy from pages on node 1 to gpu0 on socket 0 did not cross UPI")
		}
	})
}

// TestPinnedRemoteCrossesUPI: a copy from pinned memory on the other
// socket crosses the socket link, and takes as long as a local one
// within the latency when PCIe binds (55.5 GB/s, under UPI's 113.8).
func TestPinnedRemoteCrossesUPI(t *testing.T) {
	const size = 256 << 20
	var local, remote sim.Time
	var crossed float64
	for _, bind := range []int{0, 1} {
		r := newRig(t, "2s-4gpu-pcie", rigOpt{})
		r.run(func(p *sim.Proc) {
			must(t, r.pr.KernelProcess().SetMemPolicy(kern.MPOLBind, bind))
			host, err := r.ctx.MemAllocHost(p, size)
			must(t, err)
			dev, err := r.ctx.MemAlloc(p, size)
			must(t, err)
			before := r.upiBytes()
			d := timed(p, func() { must(t, r.ctx.Memcpy(p, dev, mem.GPUAddr(host), size)) })
			if bind == 0 {
				local = d
				if r.upiBytes() != before {
					t.Error("a local copy crossed UPI")
				}
			} else {
				remote, crossed = d, r.upiBytes()-before
			}
		})
	}
	if crossed < size {
		t.Errorf("UPI carried %.0f bytes of a %d-byte remote copy", crossed, size)
	}
	if remote < local {
		t.Errorf("remote %v faster than local %v", remote, local)
	}
	// PCIe binds both: the difference is the route's latency, well under
	// a microsecond over a 4.8 ms copy.
	if remote-local > sim.Microsecond {
		t.Errorf("remote %v, local %v: more than the latency apart", remote, local)
	}
}

// TestPageableRemoteMemcpy: a pageable copy whose buffer lies on the
// other socket stages it through a remote memcpy (CPUCopyBetween),
// slower than the local one by the remote latency's toll on one
// thread's rate, and its bytes cross UPI.
func TestPageableRemoteMemcpy(t *testing.T) {
	const size = 64 << 20
	var took [2]sim.Time
	for _, bind := range []int{0, 1} {
		r := newRig(t, "2s-4gpu-pcie", rigOpt{})
		r.run(func(p *sim.Proc) {
			kp := r.pr.KernelProcess()
			va, err := kp.MmapAnon(size)
			must(t, err)
			must(t, kp.Mbind(p, va, size, kern.MPOLBind, 0, []int{bind}, 0))
			// Filled first, so that the copy's time is the memcpy's,
			// not the first-touch page faults'.
			r.m.Mem.Write(p, kp.ThreadNode(p), va, size)
			dev, err := r.ctx.MemAlloc(p, size)
			must(t, err)
			before := r.upiBytes()
			took[bind] = timed(p, func() { must(t, r.ctx.Memcpy(p, dev, mem.GPUAddr(va), size)) })
			if got := r.nodeOf(va); got != bind {
				t.Errorf("pageable pages on node %d, want %d", got, bind)
			}
			if crossed := r.upiBytes() - before; (bind == 1) != (crossed >= size) {
				t.Errorf("bind %d: UPI carried %.0f bytes", bind, crossed)
			}
		})
	}
	if !(took[1] > took[0]) {
		t.Errorf("remote pageable copy %v, local %v: want slower", took[1], took[0])
	}
	s := newRig(t, "2s-4gpu-pcie", rigOpt{}).m.Spec
	l, rl := float64(s.LoadLatency(0, 0)), float64(s.LoadLatency(0, 1))
	// The memcpy binds: its rate falls by local latency over the mean of
	// the two ends' (remote source, local staging buffer).
	want := (l + rl) / 2 / l
	if got := took[1].Seconds() / took[0].Seconds(); !near(got, want, 0.05) {
		t.Errorf("remote/local time %.3f, want about %.3f (latencies %v, %v ps)", got, want, l, rl)
	}
}

// TestRegisteredPagesDoNotMigrate: while registered, anonymous pages
// stay on their node through mbind MPOL_MF_MOVE (EIO with STRICT) and
// move_pages (-EBUSY), since the GPU holds their bus addresses; after
// cuMemHostUnregister (or cuCtxDestroy) they migrate.
func TestRegisteredPagesDoNotMigrate(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", rigOpt{})
	const size = 4 * mem.PageSize
	r.run(func(p *sim.Proc) {
		kp := r.pr.KernelProcess()
		va, err := kp.MmapAnon(size)
		must(t, err)
		must(t, r.ctx.MemHostRegister(p, va, size, 0))
		if err := kp.Mbind(p, va, size, kern.MPOLBind, 0, []int{1}, kern.MPOLMFMove|kern.MPOLMFStrict); !errors.Is(err, syscall.EIO) {
			t.Errorf("mbind MOVE|STRICT of registered pages: %v, want EIO", err)
		}
		st, err := kp.MovePages(p, kp, []mem.VirtAddr{va}, []int{1}, kern.MPOLMFMove)
		must(t, err)
		if st[0] != -int(syscall.EBUSY) {
			t.Errorf("move_pages status %d, want -EBUSY", st[0])
		}
		if got := r.nodeOf(va + 3*mem.PageSize); got != 0 {
			t.Errorf("registered page on node %d, want 0", got)
		}
		must(t, r.ctx.MemHostUnregister(p, va))
		must(t, kp.Mbind(p, va, size, kern.MPOLBind, 0, []int{1}, kern.MPOLMFMove|kern.MPOLMFStrict))
		if got := r.nodeOf(va + 3*mem.PageSize); got != 1 {
			t.Errorf("unregistered page on node %d, want 1", got)
		}
	})
}
