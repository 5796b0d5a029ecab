package dmalab

import (
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/uvm"
)

// HookAll subscribes fn to every event of every component of the system,
// in the order they happen: DMA calls and transfers (dma), memory accesses
// (mem), flows (fabric), processes and files (kernel), dma-bufs, heaps
// and fences (dmabuf), video devices (v4l2), the IOMMU units attached so
// far (iommu), the VFIO layer (vfio), the display controllers made so far
// (drm: System.Display), and, when the platform has GPUs the façade
// drives, GPU activities (gpu), CUDA calls (cuda) and unified-memory
// events (uvm).
// Each is an Event with its
// sim.Header (time, process, component, cause); fn reads the concrete
// type with a type switch and copies what it keeps, since components
// reuse their event structs. A subscriber to one kind of event hooks that
// component's Hooks instead.
func (s *System) HookAll(fn func(sim.Event)) {
	for _, h := range s.hookers() {
		h.HookAll(fn)
	}
}

func (s *System) hookers() []sim.Hooker {
	hs := []sim.Hooker{&s.DMA.Hooks, &s.Mem.Hooks, &s.Machine.Fabric.Hooks, &s.Kernel.Hooks, &s.bufs.Hooks, &s.video.Hooks}
	for _, u := range s.iommus {
		hs = append(hs, &u.Hooks)
	}
	if s.vfio != nil {
		hs = append(hs, &s.vfio.Hooks)
	}
	for _, d := range s.displays {
		hs = append(hs, &d.Hooks)
	}
	if s.p2p != nil {
		hs = append(hs, &s.p2p.Hooks)
	}
	if s.cuda != nil {
		hs = append(hs, &s.cuda.System().Hooks, &s.cuda.Hooks)
		if u := s.cuda.UVM(); u != nil {
			hs = append(hs, &u.Hooks)
		}
	}
	return hs
}

// attribute fills s.Result.Time from the system's events: each transfer
// of the DMA layer's split (the call's overhead, queueing for its
// engine, translation, the bytes on the wire) and each access's wait for
// unified-memory faults.
func (s *System) attribute() {
	t := &report.TimeSplit{}
	s.Result.Time = t
	s.DMA.Transfers.Hook(func(i *dma.TransferInfo) {
		t.Transfers++
		t.Call += i.Overhead.Seconds()
		t.Queue += i.Queue.Seconds()
		t.Translate += i.Translate.Seconds()
		t.Transfer += i.Move.Seconds()
	})
	if s.cuda == nil || s.cuda.UVM() == nil {
		return
	}
	s.cuda.UVM().Hooks.Hook(func(e *uvm.Event) {
		if e.Kind == uvm.KindStall {
			t.Stalls++
			t.Fault += e.Stall.Seconds()
		}
	})
}
