package dmaengine_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmaengine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestPollingVersusInterrupt: busy polling spends the whole wait as CPU
// time and sees the completion within a poll; an interrupt frees the
// CPU but adds the MSI's latency and the handler's entry.
func TestPollingVersusInterrupt(t *testing.T) {
	for _, size := range []uint64{4 << 10, 1 << 20} {
		type out struct {
			latency, cpu sim.Time
		}
		res := map[dmaengine.Mode]out{}
		for _, mode := range []dmaengine.Mode{dmaengine.Interrupt, dmaengine.Polling} {
			r := newRig(t, "2s-4gpu-pcie", "nic0", false)
			var irq *sim.Proc
			r.run(t, func(p *sim.Proc) {
				ch, err := r.ctl.NewChan(p, dmaengine.Config{Kind: dmaengine.MemToMem})
				if err != nil {
					t.Fatal(err)
				}
				if mode == dmaengine.Interrupt {
					irq = ch.RequestIRQ(nil)
				}
				s := r.mapBuffer(t, p, size, dma.ToDevice, nil)
				d := r.mapBuffer(t, p, size, dma.FromDevice, nil)
				t0, c0 := p.Now(), p.CPUTime()
				if _, err := ch.Copy(p, d.addr, s.addr, size, mode); err != nil {
					t.Fatal(err)
				}
				o := out{latency: p.Now() - t0, cpu: p.CPUTime() - c0}
				if irq != nil {
					o.cpu += irq.CPUTime()
				}
				res[mode] = o
				r.unmap(t, p, s)
				r.unmap(t, p, d)
				ch.FreeIRQ(p)
				if err := ch.Close(p); err != nil {
					t.Error(err)
				}
			})
		}
		irq, poll := res[dmaengine.Interrupt], res[dmaengine.Polling]
		t.Logf("%d B: interrupt %v latency, %v CPU; polling %v latency, %v CPU", size, irq.latency, irq.cpu, poll.latency, poll.cpu)
		if poll.cpu != poll.latency {
			t.Errorf("polling: CPU %v, want all of the %v wait", poll.cpu, poll.latency)
		}
		if irq.cpu >= poll.cpu/2 {
			t.Errorf("interrupt CPU %v is not much below polling's %v", irq.cpu, poll.cpu)
		}
		extra := dmaengine.MSILatency + dmaengine.IRQEntryCost
		if d := irq.latency - poll.latency; d < extra-dmaengine.DefaultPollInterval || d > extra {
			t.Errorf("interrupt adds %v of latency, want about %v (MSI + IRQ entry, less a poll)", d, extra)
		}
	}
}

// TestDescriptorOrder submits copies of decreasing size that run at
// once (Inflight): the small ones' data lands first, but descriptors
// complete, write their status and are reaped in ring order; every
// destination gets its source's bytes.
func TestDescriptorOrder(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", "nic0", true)
	sizes := []uint64{1 << 20, 256 << 10, 4 << 10, 64}
	var statusWrites []mem.DMAAddr
	var ring mem.DMAAddr
	r.d.Hooks.Hook(func(e *dma.Event) {
		if e.Op == dma.OpDeviceAccess && e.Write && e.Size == dmaengine.StatusSize {
			statusWrites = append(statusWrites, e.Addr)
		}
	})
	r.run(t, func(p *sim.Proc) {
		ch, err := r.ctl.NewChan(p, dmaengine.Config{Kind: dmaengine.MemToMem})
		if err != nil {
			t.Fatal(err)
		}
		_, ring = ch.Ring()
		var srcs, dsts []buffer
		for i, n := range sizes {
			srcs = append(srcs, r.mapBuffer(t, p, n, dma.ToDevice, pattern(int(n), byte(i))))
			dsts = append(dsts, r.mapBuffer(t, p, n, dma.FromDevice, nil))
			if _, err := ch.Submit(p, dmaengine.Descriptor{Src: srcs[i].addr, Dst: dsts[i].addr, Len: n}); err != nil {
				t.Fatal(err)
			}
		}
		ch.IssuePending(p)
		var reaped []dmaengine.Completed
		ch.Poll(p, dmaengine.Cookie(len(sizes)), func(c dmaengine.Completed) { reaped = append(reaped, c) })
		for i, c := range reaped {
			if c.Cookie != dmaengine.Cookie(i+1) || c.Desc.Len != sizes[i] {
				t.Errorf("reaped #%d: cookie %d, %d B", i, c.Cookie, c.Desc.Len)
			}
		}
		if len(reaped) != len(sizes) {
			t.Fatalf("reaped %d, want %d", len(reaped), len(sizes))
		}
		if !(reaped[3].Landed < reaped[0].Landed) {
			t.Errorf("the 64 B copy landed at %v, not before the 1 MiB one (%v): transfers did not overlap", reaped[3].Landed, reaped[0].Landed)
		}
		for i := range sizes {
			r.unmap(t, p, srcs[i])
			if got := r.unmap(t, p, dsts[i]); !bytes.Equal(got, pattern(int(sizes[i]), byte(i))) {
				t.Errorf("copy %d: wrong bytes", i)
			}
		}
		if err := ch.Close(p); err != nil {
			t.Error(err)
		}
	})
	for i, a := range statusWrites {
		if want := ring + mem.DMAAddr(i*dmaengine.DescSize+dmaengine.StatusOffset); a != want {
			t.Errorf("status write #%d at %v, want %v", i, a, want)
		}
	}
}

// TestFence chains two copies, a → b then b → c: without FlagFence the
// engine overlaps them and the second reads b before the first has
// written it; with it, c gets a's bytes.
func TestFence(t *testing.T) {
	const size = 256 << 10
	for _, fence := range []bool{false, true} {
		r := newRig(t, "2s-4gpu-pcie", "nic0", true)
		a := pattern(size, 1)
		var c []byte
		r.run(t, func(p *sim.Proc) {
			ch, err := r.ctl.NewChan(p, dmaengine.Config{Kind: dmaengine.MemToMem})
			if err != nil {
				t.Fatal(err)
			}
			ba := r.mapBuffer(t, p, size, dma.ToDevice, a)
			bb := r.mapBuffer(t, p, size, dma.Bidirectional, nil)
			bc := r.mapBuffer(t, p, size, dma.FromDevice, nil)
			var flags dmaengine.Flags
			if fence {
				flags = dmaengine.FlagFence
			}
			ch.Submit(p, dmaengine.Descriptor{Src: ba.addr, Dst: bb.addr, Len: size})
			last, _ := ch.Submit(p, dmaengine.Descriptor{Src: bb.addr, Dst: bc.addr, Len: size, Flags: flags})
			ch.IssuePending(p)
			ch.Poll(p, last, nil)
			r.unmap(t, p, ba)
			r.unmap(t, p, bb)
			c = r.unmap(t, p, bc)
			if err := ch.Close(p); err != nil {
				t.Error(err)
			}
		})
		if got := bytes.Equal(c, a); got != fence {
			t.Errorf("fence %v: c equals a: %v", fence, got)
		}
	}
}

// TestRingWrap pushes five times the ring's size through a ring of 4
// with polling: fetches never cross the ring's end, and everything
// completes in order.
func TestRingWrap(t *testing.T) {
	r := newRig(t, "zynq-7000", "axidma0", true)
	const entries, n, size = 4, 20, 2048
	var ring mem.DMAAddr
	fetches := 0
	r.d.Hooks.Hook(func(e *dma.Event) {
		if e.Op != dma.OpDeviceAccess || e.Write || e.Addr < ring || e.Addr >= ring+entries*dmaengine.DescSize {
			return
		}
		fetches++
		if e.Size%dmaengine.DescSize != 0 || e.Addr+mem.DMAAddr(e.Size) > ring+entries*dmaengine.DescSize {
			t.Errorf("fetch of %d B at %v crosses the end of the ring at %v", e.Size, e.Addr, ring)
		}
	})
	r.run(t, func(p *sim.Proc) {
		ch, err := r.ctl.NewChan(p, dmaengine.Config{Kind: dmaengine.MemToMem, Entries: entries, Fetch: 3})
		if err != nil {
			t.Fatal(err)
		}
		_, ring = ch.Ring()
		s := r.mapBuffer(t, p, size*n, dma.ToDevice, pattern(size*n, 3))
		d := r.mapBuffer(t, p, size*n, dma.FromDevice, nil)
		var next dmaengine.Cookie = 1
		inOrder := func(c dmaengine.Completed) {
			if c.Cookie != next {
				t.Errorf("reaped cookie %d, want %d", c.Cookie, next)
			}
			next++
		}
		for i := range n {
			ch.WaitSpace(p, dmaengine.Polling, inOrder)
			off := mem.DMAAddr(i * size)
			if _, err := ch.Submit(p, dmaengine.Descriptor{Src: s.addr + off, Dst: d.addr + off, Len: size}); err != nil {
				t.Fatal(err)
			}
			ch.IssuePending(p)
		}
		ch.Poll(p, n, inOrder)
		r.unmap(t, p, s)
		if got := r.unmap(t, p, d); !bytes.Equal(got, pattern(size*n, 3)) {
			t.Error("wrong bytes after wrapping")
		}
		if st := ch.Stats(); st.Completed != n || st.FetchedDescs != n || int(st.Fetches) != fetches {
			t.Errorf("stats %+v, %d fetches seen", st, fetches)
		}
		if err := ch.Close(p); err != nil {
			t.Error(err)
		}
	})
}

// TestSubmitErrors: lengths the descriptor cannot hold, a full ring, a
// closed channel, closing a busy one.
func TestSubmitErrors(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", "nic0", false)
	r.run(t, func(p *sim.Proc) {
		ch, err := r.ctl.NewChan(p, dmaengine.Config{Kind: dmaengine.MemToMem, Entries: 2})
		if err != nil {
			t.Fatal(err)
		}
		b := r.mapBuffer(t, p, 4096, dma.Bidirectional, nil)
		for _, l := range []uint64{0, dmaengine.MaxLen + 1} {
			if _, err := ch.Submit(p, dmaengine.Descriptor{Src: b.addr, Dst: b.addr, Len: l}); !errors.Is(err, dmaengine.ErrBadLength) {
				t.Errorf("length %d: %v", l, err)
			}
		}
		d := dmaengine.Descriptor{Src: b.addr, Dst: b.addr + 2048, Len: 2048}
		ch.Submit(p, d)
		last, _ := ch.Submit(p, d)
		if _, err := ch.Submit(p, d); !errors.Is(err, dmaengine.ErrRingFull) {
			t.Errorf("third submit on a ring of 2: %v", err)
		}
		ch.IssuePending(p)
		p.Sleep(r.ctl.OneWay() + 1)
		if err := ch.Close(p); !errors.Is(err, dmaengine.ErrBusy) {
			t.Errorf("close while copying: %v", err)
		}
		ch.Poll(p, last, nil)
		r.unmap(t, p, b)
		if err := ch.Close(p); err != nil {
			t.Error(err)
		}
		if _, err := ch.Submit(p, d); !errors.Is(err, dmaengine.ErrClosed) {
			t.Errorf("submit after close: %v", err)
		}
	})
}

// TestCPUCopy: the CPU path costs size/memcpy rate of CPU time and
// copies the bytes.
func TestCPUCopy(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", "nic0", true)
	const size = 1 << 20
	r.run(t, func(p *sim.Proc) {
		src, _ := r.mem.Kmalloc(r.node, size)
		dst, _ := r.mem.Kmalloc(r.node, size)
		r.mem.WriteBytes(p, r.node, src, pattern(size, 9))
		t0 := p.CPUTime()
		if err := dmaengine.CPUCopy(p, r.mem, r.node, dst, src, size); err != nil {
			t.Fatal(err)
		}
		want := sim.TransferTime(size, float64(r.spec.Nodes[r.node].MemcpyRate.V))
		if got := p.CPUTime() - t0; got != want {
			t.Errorf("CPU time %v, want %v", got, want)
		}
		got := make([]byte, size)
		r.mem.ReadBytes(p, r.node, dst, got)
		if !bytes.Equal(got, pattern(size, 9)) {
			t.Error("wrong bytes")
		}
		vm, _ := r.mem.Vmalloc(r.node, size)
		if err := dmaengine.CPUCopy(p, r.mem, r.node, vm, src, size); err == nil {
			t.Error("CPUCopy to vmalloc memory: no error")
		}
		r.mem.Vfree(vm)
		r.mem.Kfree(src)
		r.mem.Kfree(dst)
	})
}

// TestCores accounts attached processes and direct charges per core.
func TestCores(t *testing.T) {
	e := sim.New(1)
	defer e.Close()
	c := dmaengine.NewCores(2)
	a := e.Spawn("a", func(p *sim.Proc) {
		p.Sleep(10)
		c.Attach(p, 0)
		p.Sleep(5)
		c.Attach(p, 1) // migrates: 5 stay on core 0
		p.Sleep(7)
		c.Detach(p)
		p.Sleep(100)
	})
	e.Spawn("b", func(p *sim.Proc) {
		c.Attach(p, 1)
		p.Wait(a.Exited()) // idle
		p.Sleep(3)
	})
	c.Charge(0, 1)
	e.Run()
	if got := c.Busy(0); got != 6 {
		t.Errorf("core 0: %v, want 6ps", got)
	}
	if got := c.Busy(1); got != 10 {
		t.Errorf("core 1: %v, want 10ps", got)
	}
	if got := c.Total(); got != 16 {
		t.Errorf("total %v, want 16ps", got)
	}
}

// TestMissingUnmapIsCaught is the counter-test of the NIC's clean runs:
// on Zynq's non-coherent GEM, a driver that peeks at an rx buffer while
// the device owns it and reads the packet without unmapping gets stale
// bytes, and the checker says so.
func TestMissingUnmapIsCaught(t *testing.T) {
	r := newRig(t, "zynq-7000", "gem0", true)
	const size = 1500
	var stale bool
	r.m.Engine.Spawn("driver", func(p *sim.Proc) {
		ch, err := r.ctl.NewChan(p, dmaengine.Config{Kind: dmaengine.DevToMem})
		if err != nil {
			t.Fatal(err)
		}
		b := r.mapBuffer(t, p, size, dma.FromDevice, nil)
		c, _ := ch.Submit(p, dmaengine.Descriptor{Dst: b.addr, Len: size})
		ch.IssuePending(p)
		peek := make([]byte, size)
		r.mem.ReadBytes(p, r.node, b.va, peek) // the bug: the device owns it
		ch.Deliver(size, p.Now(), pattern(size, 7))
		ch.Poll(p, c, nil)
		got := make([]byte, size)
		a := r.mem.ReadBytes(p, r.node, b.va, got) // the bug: no unmap first
		stale = a.Stale && !bytes.Equal(got, pattern(size, 7))
		r.ctl.Device().UnmapSingle(p, b.addr, size, dma.FromDevice)
		r.mem.Kfree(b.va)
		ch.Terminate(p)
		ch.Close(p)
	})
	r.m.Engine.Run()
	if !stale {
		t.Error("the read without unmap was not stale")
	}
	if len(r.ck.Diagnostics()) == 0 {
		t.Error("the checker found nothing")
	}
	for _, d := range r.ck.Diagnostics() {
		t.Log(d)
	}
}
