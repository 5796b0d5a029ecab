package nic

import (
	"runtime"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// BenchmarkRxStream64GiB receives 64 GiB (1 Mi packets of 64 KiB) on
// 2s-4gpu-pcie's nic0 without payload mode, the driver reading every
// packet. Goal (issue 4): the heap stays under 100 MiB, whatever the
// bytes moved (heap-MiB is the largest HeapInuse sampled every 10 ms of
// virtual time); packets/s is wall-clock simulation speed.
func BenchmarkRxStream64GiB(b *testing.B) {
	const size, packets = 64 << 10, 1 << 20
	spec, err := platform.Preset("2s-4gpu-pcie")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var peak uint64
	var ms runtime.MemStats
	for b.Loop() {
		m, err := machine.New(spec, 1)
		if err != nil {
			b.Fatal(err)
		}
		memory := m.Mem
		d, err := dma.New(m, memory)
		if err != nil {
			b.Fatal(err)
		}
		n, err := Start(m, memory, d, Options{Dir: Rx, PacketSize: size, Packets: packets})
		if err != nil {
			b.Fatal(err)
		}
		// Sample the heap every 10 ms of virtual time while packets flow.
		var sample func()
		sample = func() {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			if !n.rxDone() {
				m.Engine.After(10*sim.Millisecond, sample)
			}
		}
		m.Engine.After(0, sample)
		m.Engine.Run()
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		r, err := n.Result()
		if err != nil {
			b.Fatal(err)
		}
		if r.Rx.Bytes != size*packets {
			b.Fatalf("received %d bytes, want %d", r.Rx.Bytes, size*packets)
		}
		m.Close()
	}
	b.ReportMetric(float64(peak)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(packets)*float64(b.N)/b.Elapsed().Seconds(), "packets/s")
}
