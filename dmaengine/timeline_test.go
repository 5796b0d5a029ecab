package dmaengine_test

import (
	"bytes"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmaengine"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// pathOf walks the spec from device up to its root complex, as the
// machine builds links: each component's link latency (plus a switch's
// own), and the slowest link rate on the way.
func pathOf(t *testing.T, spec *platform.Spec, device string) (lat sim.Time, rate float64) {
	t.Helper()
	var parent string
	for _, d := range spec.Devices {
		if d.Name == device {
			lat, rate, parent = d.Link.Latency.V, float64(d.Link.Rate()), d.Parent
		}
	}
	for parent != "" {
		found := false
		for _, s := range spec.Switches {
			if s.Name == parent {
				lat += s.Link.Latency.V + s.Latency.V
				rate = min(rate, float64(s.Link.Rate()))
				parent, found = s.Parent, true
			}
		}
		for _, rc := range spec.RootComplexes {
			if rc.Name == parent {
				lat += rc.Latency.V
				if rc.Bandwidth.V != 0 {
					rate = min(rate, float64(rc.Bandwidth.V))
				}
				parent, found = "", true
			}
		}
		if !found {
			t.Fatalf("no parent %s", parent)
		}
	}
	return lat, rate
}

// TestCopyTimeline runs one 64 KiB memcpy through the engine (ring,
// doorbell, descriptor fetch, data, status, MSI → handler, or busy
// polling) and checks every step's virtual time against the platform's
// numbers, on a coherent PCIe device and on Zynq-7000's non-coherent AXI
// DMA (uncached ring).
func TestCopyTimeline(t *testing.T) {
	const size = 64 << 10
	for _, c := range []struct{ preset, device string }{
		{"2s-4gpu-pcie", "nic0"},
		{"zynq-7000", "axidma0"},
	} {
		for _, mode := range []dmaengine.Mode{dmaengine.Interrupt, dmaengine.Polling} {
			t.Run(c.preset+"/"+mode.String(), func(t *testing.T) {
				r := newRig(t, c.preset, c.device, true)
				spec := r.spec
				if spec.Fabric.Latency() != 1 || spec.Fabric.Bandwidth() != 1 {
					t.Fatal("test assumes fabric factors of 1")
				}
				node := spec.Nodes[r.node]
				P, link := pathOf(t, spec, c.device)
				D := node.DRAMLatency.V
				dram := float64(node.DRAMBandwidth.V)
				if P != r.ctl.OneWay() {
					t.Errorf("one-way latency %v, want %v from the spec", r.ctl.OneWay(), P)
				}
				// The ring is cached memory on a coherent device, uncached
				// on a non-coherent one.
				ringRate := float64(node.MemcpyRate.V)
				if !r.ctl.Device().Coherent() {
					ringRate = float64(node.Cache.UncachedRate.V)
				}
				W := sim.TransferTime(dmaengine.DescSize, ringRate)
				R := sim.TransferTime(dmaengine.StatusSize, ringRate)
				fetch := sim.TransferTime(dmaengine.DescSize, min(link, dram))
				// A copy crosses DRAM twice (read and write) and the
				// device's link once each way; the read's requests go
				// up beside the written data (machine.DMARoute).
				q := 0.0
				for _, d := range spec.Devices {
					if d.Name == c.device {
						q = machine.ReverseLoad(d.Link, true)
					}
				}
				data := sim.TransferTime(size, min(link/(1+q), dram/2))

				var done dmaengine.Completed
				var driverCPU, start, end sim.Time
				var irq *sim.Proc
				src := pattern(size, 0x5a)
				r.run(t, func(p *sim.Proc) {
					ch, err := r.ctl.NewChan(p, dmaengine.Config{Kind: dmaengine.MemToMem})
					if err != nil {
						t.Fatal(err)
					}
					if mode == dmaengine.Interrupt {
						irq = ch.RequestIRQ(nil)
					}
					s := r.mapBuffer(t, p, size, dma.ToDevice, src)
					d := r.mapBuffer(t, p, size, dma.FromDevice, nil)
					start, driverCPU = p.Now(), p.CPUTime()
					done, err = ch.Copy(p, d.addr, s.addr, size, mode)
					if err != nil {
						t.Fatal(err)
					}
					end, driverCPU = p.Now(), p.CPUTime()-driverCPU
					r.unmap(t, p, s)
					if got := r.unmap(t, p, d); !bytes.Equal(got, src) {
						t.Error("destination differs from source")
					}
					ch.FreeIRQ(p)
					if err := ch.Close(p); err != nil {
						t.Error(err)
					}
				})

				check := func(what string, got, want sim.Time) {
					t.Helper()
					if got != want {
						t.Errorf("%s: %v, want %v", what, got, want)
					}
				}
				check("submitted", done.Submitted, start)
				// Entry written (W), doorbell down (P), read request up
				// (P), DRAM, completion down (P) with 32 bytes.
				check("fetched", done.Fetched-done.Submitted, W+3*P+D+fetch)
				check("started", done.Started, done.Fetched)
				// Read request up (P); DRAM, down (P), up (P), DRAM with
				// the data.
				check("landed", done.Landed-done.Started, 3*P+2*D+data)
				if mode == dmaengine.Interrupt {
					// MSI to the handler, IRQ entry, one status read.
					check("reaped", done.Reaped-done.Landed, dmaengine.MSILatency+dmaengine.IRQEntryCost+R)
					check("driver CPU", driverCPU, W+dmaengine.MMIOWriteCost)
					// Entry, the status read, the unmask write.
					check("handler CPU", irq.CPUTime(), dmaengine.IRQEntryCost+R+dmaengine.MMIOWriteCost)
				} else {
					// Polls of one status read and one interval each,
					// from the end of the doorbell write; the first that
					// begins after the status landed sees it.
					poll := start + W + dmaengine.MMIOWriteCost
					for poll < done.Landed {
						poll += R + dmaengine.DefaultPollInterval
					}
					check("reaped", done.Reaped, poll+R)
					check("driver CPU", driverCPU, done.Reaped-start)
				}
				check("returned", end, done.Reaped)
				if !done.Status.Done || done.Status.Error || done.Status.Bytes != size {
					t.Errorf("status %+v", done.Status)
				}
			})
		}
	}
}
