package nic

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/dmadebug"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmaengine"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// platformFor returns a preset; "2s-4gpu-pcie/noncoherent" is that
// preset with nic0 made non-coherent (PCIe No Snoop), so that x86's
// numbers run the non-coherent paths too; "/1g" gives nic0 a 1 Gb/s
// port.
func platformFor(t testing.TB, name string) *platform.Spec {
	t.Helper()
	preset, variant, _ := cutLast(name, "/")
	spec, err := platform.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	switch variant {
	case "noncoherent":
		spec.Devices[0].NonCoherentDMA = true
	case "1g":
		spec.Devices[0].LineRate = platform.P[platform.Rate](1e9/8, "test: a 1 Gb/s port")
	}
	return spec
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

// outcome is a run with what the checker and the engine say about it.
type outcome struct {
	r       Result
	err     error
	diags   []check.Diagnostic
	active  int
	blocked []string
	events  int
}

func run(t testing.TB, platformName string, payload bool, opt Options, setup ...func(*dma.DMA)) outcome {
	t.Helper()
	spec := platformFor(t, platformName)
	m, err := machine.NewWithOptions(spec, 1, machine.Options{Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	memory := m.Mem
	d, err := dma.New(m, memory)
	if err != nil {
		t.Fatal(err)
	}
	ck := check.New(check.Options{})
	pack := dmadebug.Attach(ck, d, memory, dmadebug.Options{})
	for _, f := range setup {
		f(d)
	}
	var o outcome
	o.r, o.err = Run(m, memory, d, opt)
	o.diags, o.active, o.blocked, o.events = ck.Diagnostics(), pack.Active(), m.Engine.Blocked(), int(m.Engine.Fired())
	return o
}

func (o outcome) clean(t *testing.T) {
	t.Helper()
	if o.err != nil {
		t.Fatal(o.err)
	}
	for _, d := range o.diags {
		t.Errorf("checker: %v", d)
	}
	if o.active != 0 {
		t.Errorf("%d mappings left at the end", o.active)
	}
	if len(o.blocked) > 0 {
		t.Errorf("processes left blocked: %v", o.blocked)
	}
}

// TestStreamsVerified receives and transmits at once, in payload mode,
// on coherent and non-coherent platforms, by interrupt and by polling,
// unmapping or syncing rx buffers: every packet arrives with the bytes
// sent, no read is stale, the checker finds nothing, nothing leaks.
func TestStreamsVerified(t *testing.T) {
	for _, plat := range []string{"2s-4gpu-pcie", "2s-4gpu-pcie/noncoherent", "zynq-7000"} {
		for _, polling := range []bool{false, true} {
			for _, sync := range []bool{false, true} {
				name := fmt.Sprintf("%s/polling=%v/sync=%v", plat, polling, sync)
				t.Run(name, func(t *testing.T) {
					const packets = 300
					o := run(t, plat, true, Options{Dir: Both, Packets: packets, Ring: 64, Polling: polling, Sync: sync})
					o.clean(t)
					for _, s := range []struct {
						dir string
						Stream
					}{{"rx", o.r.Rx}, {"tx", o.r.Tx}} {
						if s.Packets != packets || s.Verified != packets || s.Corrupt != 0 || s.Stale != 0 {
							t.Errorf("%s: %d packets, %d verified, %d corrupt, %d stale", s.dir, s.Packets, s.Verified, s.Corrupt, s.Stale)
						}
						if polling != (s.Interrupts == 0) {
							t.Errorf("%s: %d interrupts with polling %v", s.dir, s.Interrupts, polling)
						}
						if s.P50 <= 0 || s.P99 < s.P50 || s.Max < s.P99 || s.Throughput <= 0 || s.CPUPerPacket <= 0 {
							t.Errorf("%s: implausible results %+v", s.dir, s.Stream)
						}
					}
				})
			}
		}
	}
}

// TestNoDiagnosticsWithoutPayload runs every preset that has a NIC with
// versions only (no bytes): still no stale read and no diagnostic.
func TestNoDiagnosticsWithoutPayload(t *testing.T) {
	for _, preset := range platform.Presets() {
		spec, err := platform.Preset(preset)
		if err != nil {
			t.Fatal(err)
		}
		hasNIC := false
		for _, d := range spec.Devices {
			hasNIC = hasNIC || d.Kind == platform.DeviceNIC && d.LineRate.V > 0
		}
		if !hasNIC {
			continue
		}
		t.Run(preset, func(t *testing.T) {
			o := run(t, preset, false, Options{Dir: Both, Packets: 200, PacketSize: 9000})
			o.clean(t)
			if o.r.Rx.Stale+o.r.Tx.Stale != 0 || o.r.Rx.Packets != 200 || o.r.Tx.Packets != 200 {
				t.Errorf("rx %+v\ntx %+v", o.r.Rx, o.r.Tx)
			}
		})
	}
}

// TestDeterministic: two runs with the same inputs give identical
// results and the same number of events.
func TestDeterministic(t *testing.T) {
	opt := Options{Dir: Both, Packets: 200, Ring: 32}
	a := run(t, "2s-4gpu-pcie/noncoherent", true, opt)
	b := run(t, "2s-4gpu-pcie/noncoherent", true, opt)
	a.clean(t)
	if !reflect.DeepEqual(a.r, b.r) || a.events != b.events {
		t.Errorf("runs differ:\n%+v (%d events)\n%+v (%d events)", a.r, a.events, b.r, b.events)
	}
}

// TestRxLineRate: with a driver that only reads headers, 64 KiB packets
// arrive at the wire's rate (400 Gb/s, under the PCIe link's 55.5 GB/s),
// and NAPI takes far fewer interrupts than packets.
func TestRxLineRate(t *testing.T) {
	const packets, size = 2000, 64 << 10
	o := run(t, "2s-4gpu-pcie", false, Options{Packets: packets, PacketSize: size, Touch: 128})
	o.clean(t)
	spec := platformFor(t, "2s-4gpu-pcie")
	line := float64(spec.Devices[0].LineRate.V)
	if got := o.r.Rx.Throughput; got < 0.99*line || got > line {
		t.Errorf("throughput %.4g B/s, want the line rate %.4g", got, line)
	}
	if o.r.Rx.Interrupts >= packets {
		t.Errorf("%d interrupts for %d packets", o.r.Rx.Interrupts, packets)
	}
	// A packet's latency is at least its time on the wire, its DMA
	// write and the interrupt.
	min := sim.TransferTime(size, line) + dmaengine.MSILatency + dmaengine.IRQEntryCost
	if o.r.Rx.P50 < min {
		t.Errorf("p50 latency %v below the floor %v", o.r.Rx.P50, min)
	}
}

// TestPollingBurnsCPU: behind a 1 Gb/s port a Xeon's driver waits most
// of the time; polling spends all of it on the CPU, interrupts little,
// at the price of latency.
func TestPollingBurnsCPU(t *testing.T) {
	irq := run(t, "2s-4gpu-pcie/1g", false, Options{Packets: 100})
	poll := run(t, "2s-4gpu-pcie/1g", false, Options{Packets: 100, Polling: true})
	irq.clean(t)
	poll.clean(t)
	busy := poll.r.Rx.CPU
	span := poll.r.Rx.End - poll.r.Rx.Start
	if busy < span*9/10 {
		t.Errorf("polling: %v of CPU over %v", busy, span)
	}
	if irq.r.Rx.CPU > busy/10 {
		t.Errorf("interrupts: %v of CPU against polling's %v", irq.r.Rx.CPU, busy)
	}
	if irq.r.Rx.P50 <= poll.r.Rx.P50 {
		t.Errorf("interrupt p50 %v not above polling's %v", irq.r.Rx.P50, poll.r.Rx.P50)
	}
}

// TestLossy: a small NIC buffer and a driver that reads every byte of
// small packets cannot keep up with 400 Gb/s: lossy links drop, lossless
// ones slow the wire; either way every packet is accounted for.
func TestLossy(t *testing.T) {
	const packets = 1000
	for _, lossy := range []bool{false, true} {
		o := run(t, "2s-4gpu-pcie", false, Options{Packets: packets, FIFO: 16 << 10, Lossy: lossy})
		o.clean(t)
		rx := o.r.Rx
		if rx.Packets+rx.Dropped != packets || lossy != (rx.Dropped > 0) {
			t.Errorf("lossy %v: %d received, %d dropped", lossy, rx.Packets, rx.Dropped)
		}
	}
}

// TestCores accounts rx and tx to their cores.
func TestCores(t *testing.T) {
	cores := dmaengine.NewCores(4)
	o := run(t, "2s-4gpu-pcie", false, Options{Dir: Both, Packets: 100, RxCore: 2, TxCore: 3, Cores: cores})
	o.clean(t)
	if cores.Busy(0) != 0 || cores.Busy(1) != 0 || cores.Busy(2) < o.r.Rx.CPU || cores.Busy(3) < o.r.Tx.CPU {
		t.Errorf("cores %v %v %v %v; rx %v tx %v", cores.Busy(0), cores.Busy(1), cores.Busy(2), cores.Busy(3), o.r.Rx.CPU, o.r.Tx.CPU)
	}
}

// forceBounce makes nic0 bounce every streaming mapping through swiotlb.
func forceBounce(t testing.TB) func(*dma.DMA) {
	return func(d *dma.DMA) {
		dev, err := d.Device("nic0")
		if err != nil {
			t.Fatal(err)
		}
		if err := dev.SetForceBounce(true); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBounced: with every mapping bounced through swiotlb, where the
// direction decides which copies are made, the driver still gets every
// byte, by unmapping or by syncing. (Coherent only: on a non-coherent
// device the dma package's map of a bounced FROM_DEVICE buffer copies
// into the slot through the cache and then invalidates the slot, so the
// copy-back at an unmap with no device write in between reads DRAM
// behind it, which the checker reports as a stale read in swiotlb's
// copy; that is the dma package's to settle.)
func TestBounced(t *testing.T) {
	for _, sync := range []bool{false, true} {
		o := run(t, "2s-4gpu-pcie", true, Options{Dir: Both, Packets: 100, Ring: 16, Sync: sync}, forceBounce(t))
		o.clean(t)
		if o.r.Rx.Verified != 100 || o.r.Rx.Corrupt != 0 || o.r.Tx.Verified != 100 || o.r.Tx.Corrupt != 0 {
			t.Errorf("sync %v: rx %+v\ntx %+v", sync, o.r.Rx, o.r.Tx)
		}
	}
}

// TestMappingFailure: a bounced mapping over swiotlb's 256 KiB limit
// fails; the driver reports it, and undoes what it had set up.
func TestMappingFailure(t *testing.T) {
	for _, dir := range []Dir{Rx, Tx} {
		o := run(t, "2s-4gpu-pcie", false, Options{Dir: dir, Packets: 10, PacketSize: 512 << 10}, forceBounce(t))
		if o.err == nil {
			t.Errorf("%v: no error", dir)
		}
		o.err = nil
		o.clean(t)
	}
}

func TestBadOptions(t *testing.T) {
	for _, opt := range []Options{
		{PacketSize: 8},
		{Dir: 4},
		{Packets: -1},
		{Device: "gpu0"},
		{Cores: dmaengine.NewCores(1), TxCore: 1},
	} {
		spec := platformFor(t, "2s-4gpu-pcie")
		m, err := machine.New(spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		memory := m.Mem
		d, _ := dma.New(m, memory)
		if _, err := Start(m, memory, d, opt); err == nil {
			t.Errorf("%+v: no error", opt)
		} else if opt.Device == "" && !errors.Is(err, ErrBadOption) {
			t.Errorf("%+v: %v does not wrap ErrBadOption", opt, err)
		}
		m.Close()
	}
}
