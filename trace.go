package dmalab

import (
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
)

// factors lists the platform's efficiency factors with their sources.
func factors(spec *platform.Spec) map[string]report.Factor {
	f := map[string]report.Factor{
		"fabric.bandwidth_factor": {Value: spec.Fabric.Bandwidth(), Source: spec.Fabric.BandwidthFactor.Source},
		"fabric.latency_factor":   {Value: spec.Fabric.Latency(), Source: spec.Fabric.LatencyFactor.Source},
		"fabric.cross_traffic":    {Value: spec.Fabric.Cross(), Source: spec.Fabric.CrossTraffic.Source},
	}
	link := func(name string, l platform.PCIeLink) {
		if l.Bandwidth.V > 0 {
			return // a link given by its bandwidth has no efficiency factor
		}
		f[name+".link.efficiency"] = report.Factor{Value: l.Efficiency.V, Source: l.Efficiency.Source}
	}
	for _, s := range spec.Switches {
		link(s.Name, s.Link)
	}
	for _, g := range spec.GPUs {
		if !g.Integrated {
			link(g.Name, g.Link)
		}
	}
	for _, d := range spec.Devices {
		link(d.Name, d.Link)
	}
	for _, l := range spec.NVLinks {
		f["nvlink."+l.A+"-"+l.B+".efficiency"] = report.Factor{Value: l.Efficiency.V, Source: l.Efficiency.Source}
	}
	return f
}

// traceMachine records a slice per transfer of a copy engine (the DMA
// layer's OpTransfer events) on the engine's track and a slice per flow
// on every link direction it crossed.
func traceMachine(m *machine.Machine, d *dma.DMA, t *report.Trace) {
	d.Hooks.Hook(func(e *dma.Event) {
		tr := e.Transfer
		if e.Op != dma.OpTransfer || tr.Engine == "" {
			return
		}
		t.Slice(tr.Engine, tr.Name, tr.Start, tr.End, map[string]any{
			"bytes": tr.Bytes, "src": tr.Src.String(), "dst": tr.Dst.String(),
			"call_us": float64(tr.Call) / 1e6,
		})
	})
	m.Fabric.Hooks.Hook(func(ev *fabric.Event) {
		if ev.Kind != fabric.FlowEnd {
			return
		}
		fl := ev.Flow
		for _, h := range fl.Route().Hops {
			track := h.Link.Name() + " " + h.Dir.String()
			if h.Link.Sharing() == fabric.Shared {
				track = h.Link.Name()
			}
			t.Slice(track, fl.Name(), fl.ActiveAt(), fl.End(), map[string]any{"bytes": fl.Bytes()})
		}
	})
}
