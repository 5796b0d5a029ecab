package platform

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// dmaDoc is base with every cache, coherency and DMA-limit field, each
// value written by val: bare or as {value, source}.
func dmaDoc(t *testing.T, val func(string) string) string {
	doc := edit(t, "    memcpy_rate: 10 GB/s\n", "    memcpy_rate: 10 GB/s\n    cache:\n"+
		"      line_size: "+val("32 B")+"\n"+
		"      size: "+val("512 KiB")+"\n"+
		"      prefetch: "+val("1")+"\n"+
		"      writeback_cost: "+val("75ns")+"\n"+
		"      invalidate_cost: "+val("60ns")+"\n"+
		"      uncached_rate: "+val("110 MB/s")+"\n")
	doc = strings.Replace(doc, "    node: 0\n", "    node: 0\n    noncoherent_dma: true\n", 1)
	return doc + "devices:\n" +
		"  - name: dma0\n" +
		"    kind: dma\n" +
		"    parent: rc0\n" +
		"    link: {bandwidth: " + val("1.2 GB/s") + "}\n" +
		"    dma_engines: 2\n" +
		"    noncoherent_dma: true\n" +
		"    dma_mask_bits: " + val("32") + "\n" +
		"    max_segment: " + val("16 KiB") + "\n" +
		"    segment_boundary: " + val("64 KiB") + "\n" +
		"swiotlb: " + val("128 MiB") + "\n"
}

func TestDMAFieldsYAML(t *testing.T) {
	for _, tc := range []struct {
		name string
		val  func(string) string
		src  string
	}{
		{"bare", func(v string) string { return v }, ""},
		{"with source", func(v string) string { return "{value: " + v + `, source: "UG585"}` }, "UG585"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(dmaDoc(t, tc.val)))
			if err != nil {
				t.Fatal(err)
			}
			want := CPUCache{
				LineSize: P(Bytes(32), tc.src), Size: P(Bytes(512<<10), tc.src), Prefetch: P(1, tc.src),
				WritebackCost: P(75*sim.Nanosecond, tc.src), InvalidateCost: P(60*sim.Nanosecond, tc.src),
				UncachedRate: P(Rate(110e6), tc.src),
			}
			if got := s.Nodes[0].Cache; got != want {
				t.Errorf("cache = %+v, want %+v", got, want)
			}
			if !s.RootComplexes[0].NonCoherentDMA {
				t.Error("root complex noncoherent_dma = false, want true")
			}
			d := s.Devices[0]
			if d.Kind != DeviceDMA || !d.NonCoherentDMA || d.Link.Bandwidth != P(Rate(1.2e9), tc.src) ||
				d.DMAMaskBits != P(32, tc.src) || d.MaxSegment != P(Bytes(16<<10), tc.src) ||
				d.SegmentBoundary != P(Bytes(64<<10), tc.src) {
				t.Errorf("device = %+v", d)
			}
			if s.SWIOTLB != P(Bytes(128<<20), tc.src) {
				t.Errorf("swiotlb = %+v", s.SWIOTLB)
			}
			out, err := Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse("marshalled.yaml", out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !reflect.DeepEqual(back, s) {
				t.Errorf("Marshal→Parse changed the spec:\n%s", out)
			}
			if _, devs, _ := strings.Cut(string(out), "devices:"); strings.Contains(devs, " gen:") || strings.Contains(devs, " width:") {
				t.Errorf("Marshal wrote a bandwidth link's gen or width:\n%s", out)
			}
		})
	}
}

func TestBooleans(t *testing.T) {
	for _, tc := range []struct {
		text string
		want bool
		err  string
	}{
		{"true", true, ""},
		{"True", true, ""},
		{"TRUE", true, ""},
		{"false", false, ""},
		{"FALSE", false, ""},
		{`"true"`, true, ""},
		{"yes", false, `t.yaml:12: root_complexes[0].noncoherent_dma: bad boolean "yes": want true or false`},
		{"1", false, `t.yaml:12: root_complexes[0].noncoherent_dma: bad boolean "1": want true or false`},
		{"", false, `t.yaml:12: root_complexes[0].noncoherent_dma: missing value: want true or false`},
		{"[true]", false, `t.yaml:12: root_complexes[0].noncoherent_dma: want true or false, got a list`},
	} {
		t.Run(tc.text, func(t *testing.T) {
			// A flag on the root complex alone: the GPU below it is then
			// non-coherent, so the node gets its cache parameters.
			doc := edit(t, "    memcpy_rate: 10 GB/s\n", "    memcpy_rate: 10 GB/s\n    cache: {size: 1 MiB, writeback_cost: 5ns, invalidate_cost: 5ns, uncached_rate: 100 MB/s}\n")
			doc = strings.Replace(doc, "    node: 0\n", "    node: 0\n    noncoherent_dma: "+tc.text+"\n", 1)
			s, err := Parse("t.yaml", []byte(doc))
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.RootComplexes[0].NonCoherentDMA != tc.want {
				t.Errorf("noncoherent_dma = %v, want %v", s.RootComplexes[0].NonCoherentDMA, tc.want)
			}
		})
	}
}

func TestDMADefaults(t *testing.T) {
	if got := (CPUCache{}).Line(); got != 64 {
		t.Errorf("Line() = %v, want 64", got)
	}
	var d Device
	if d.MaskBits() != 64 || d.MaxSeg() != 65536 || d.SegBoundary() != 1<<32 {
		t.Errorf("defaults: mask %d bits, max segment %v, boundary %v; want 64, 65536, 4 GiB", d.MaskBits(), d.MaxSeg(), d.SegBoundary())
	}
	if got := (&Spec{}).SwiotlbSize(); got != 64<<20 {
		t.Errorf("SwiotlbSize() = %v, want 64 MiB", got)
	}
	d = Device{DMAMaskBits: P(32, ""), MaxSegment: P(Bytes(4096), ""), SegmentBoundary: P(Bytes(65536), "")}
	if d.MaskBits() != 32 || d.MaxSeg() != 4096 || d.SegBoundary() != 65536 {
		t.Errorf("set: mask %d bits, max segment %v, boundary %v; want 32, 4096, 65536", d.MaskBits(), d.MaxSeg(), d.SegBoundary())
	}
	if got := (&Spec{SWIOTLB: P(Bytes(4<<10), "")}).SwiotlbSize(); got != 4<<10 {
		t.Errorf("SwiotlbSize() = %v, want 4 KiB", got)
	}
	zynq, _ := Preset("zynq-7000")
	if got := zynq.Nodes[0].Cache.Line(); got != 32 {
		t.Errorf("zynq-7000 line = %v, want 32", got)
	}
	s2, _ := Preset("2s-4gpu-pcie")
	if nic2, _ := s2.Device("nic2"); nic2.MaskBits() != 32 || nic2.MaxSeg() != 65536 {
		t.Errorf("2s-4gpu-pcie nic2: mask %d bits, max segment %v; want 32, 64 KiB", nic2.MaskBits(), nic2.MaxSeg())
	}
	if nic0, _ := s2.Device("nic0"); nic0.MaskBits() != 64 {
		t.Errorf("2s-4gpu-pcie nic0: mask %d bits, want 64", nic0.MaskBits())
	}
}

func TestDeviceCoherent(t *testing.T) {
	zynq, _ := Preset("zynq-7000")
	acp, err := Set(zynq, "root_complexes.axi.noncoherent_dma", "false")
	if err != nil {
		t.Fatal(err)
	}
	h200, _ := Preset("h200-pcie")
	s2, _ := Preset("2s-4gpu-pcie")
	dgx, _ := Preset("dgx-h100")
	for _, tc := range []struct {
		spec *Spec
		name string
		want bool
		err  string
	}{
		{zynq, "axidma0", false, ""},
		{zynq, "gem0", false, ""},
		{acp, "axidma0", true, ""}, // an AXI master on the ACP
		{acp, "gem0", false, ""},   // non-coherent on its own account
		{h200, "gpu0", true, ""},
		{s2, "nic2", true, ""},
		{dgx, "gpu7", true, ""},
		{zynq, "axi", false, `platform zynq-7000: root complex "axi" does no DMA of its own: want a device or GPU`},
		{dgx, "nvswitch", false, `platform dgx-h100: NVSwitch "nvswitch" does no DMA of its own: want a device or GPU`},
		{zynq, "dma9", false, `platform zynq-7000 has no component "dma9": not found`},
	} {
		t.Run(tc.spec.Name+"/"+tc.name, func(t *testing.T) {
			got, err := tc.spec.DeviceCoherent(tc.name)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("DeviceCoherent error = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("DeviceCoherent = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if _, err := zynq.DeviceCoherent("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown name: error %v does not wrap ErrNotFound", err)
	}
}

func TestZynqPreset(t *testing.T) {
	s, err := Preset("zynq-7000")
	if err != nil {
		t.Fatal(err)
	}
	dma, err := s.Device("axidma0")
	if err != nil {
		t.Fatal(err)
	}
	if dma.Kind != DeviceDMA || dma.Link.Rate() != 1.2e9 || dma.Link.RawRate() != 1.2e9 || dma.Link.Gen != 0 {
		t.Errorf("axidma0: kind %s, link %+v (rate %v); want a dma engine on a 1.2 GB/s AXI port", dma.Kind, dma.Link, dma.Link.Rate())
	}
	gem, _ := s.Device("gem0")
	if gem.Kind != DeviceNIC || gem.LineRate.V != 125e6 || !gem.NonCoherentDMA {
		t.Errorf("gem0 = %+v, want a non-coherent 1 Gb/s NIC", gem)
	}
	n := s.Nodes[0]
	if n.Cores.V != 2 || n.DRAM.V != 1<<30 || n.DRAMBandwidth.V != 4.264e9 || n.Cache.Size.V != 512<<10 {
		t.Errorf("node 0 = %+v", n)
	}
	if len(s.GPUs) != 0 || len(s.Devices) != 2 {
		t.Errorf("%d GPUs, %d devices; want 0 and 2", len(s.GPUs), len(s.Devices))
	}
}

func TestCoherencyNeedsCache(t *testing.T) {
	withRC := strings.Replace(base, "    node: 0\n", "    node: 0\n    noncoherent_dma: true\n", 1)
	device := "devices:\n  - {name: dma0, kind: dma, parent: rc0, link: {bandwidth: 1 GB/s}, dma_engines: 1}\n"
	ownFlag := "devices:\n  - {name: nic0, kind: nic, parent: rc0, link: {gen: 3, width: 4, efficiency: 0.8}, dma_engines: 1, noncoherent_dma: true}\n"
	partial := edit(t, "    memcpy_rate: 10 GB/s\n", "    memcpy_rate: 10 GB/s\n    cache: {size: 2 MiB, invalidate_cost: 0ns}\n")
	for _, tc := range []struct{ name, doc, want string }{
		{"device under a non-coherent root complex", withRC + device,
			`t.yaml:3: nodes[0].cache: missing size, writeback_cost, invalidate_cost, uncached_rate: device "dma0" on node 0 does non-coherent DMA (root complex "rc0" has noncoherent_dma), so the cost of cache maintenance and uncached access must be given`},
		{"GPU under a non-coherent root complex", withRC,
			`t.yaml:3: nodes[0].cache: missing size, writeback_cost, invalidate_cost, uncached_rate: GPU "gpu0" on node 0 does non-coherent DMA (root complex "rc0" has noncoherent_dma), so the cost of cache maintenance and uncached access must be given`},
		{"device with its own flag, cache in part", partial + ownFlag,
			`t.yaml:8: nodes[0].cache: missing writeback_cost, invalidate_cost, uncached_rate: device "nic0" on node 0 does non-coherent DMA (it has noncoherent_dma), so the cost of cache maintenance and uncached access must be given`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.doc))
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
	// The same spec built in Go: the error names no line.
	s, _ := Preset("h200-pcie")
	s.RootComplexes[0].NonCoherentDMA = true
	s.Nodes[0].Cache = CPUCache{}
	s.Devices = nil // the capture card would be named first
	want := `h200-pcie: nodes[0].cache: missing size, writeback_cost, invalidate_cost, uncached_rate: GPU "gpu0" on node 0 does non-coherent DMA (root complex "rc0" has noncoherent_dma), so the cost of cache maintenance and uncached access must be given`
	if err := s.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate error\n got: %v\nwant: %s", err, want)
	}
	// Coherent devices need no cache parameters.
	if _, err := Parse("t.yaml", []byte(base+device)); err != nil {
		t.Errorf("coherent device: %v", err)
	}
}

// TestCoherencyThroughSwitches: the root complex of a device is found
// through any number of switches, in time linear in the spec (a chain of
// 2000 switches with 2000 devices below it would take PathToRoot, once
// per device, minutes).
func TestCoherencyThroughSwitches(t *testing.T) {
	const n = 2000
	var b strings.Builder
	b.WriteString(strings.Replace(base, "    node: 0\n", "    node: 0\n    noncoherent_dma: true\n", 1))
	b.WriteString("switches:\n  - {name: sw0, parent: rc0, link: {gen: 3, width: 4, efficiency: 0.8}}\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "  - {name: sw%d, parent: sw%d, link: {gen: 3, width: 4, efficiency: 0.8}}\n", i, i-1)
	}
	b.WriteString("devices:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: nic%d, kind: nic, parent: sw%d, link: {gen: 3, width: 4, efficiency: 0.8}, dma_engines: 1}\n", i, n-1)
	}
	_, err := Parse("t.yaml", []byte(b.String()))
	want := `t.yaml:3: nodes[0].cache: missing size, writeback_cost, invalidate_cost, uncached_rate: device "nic0" on node 0 does non-coherent DMA (root complex "rc0" has noncoherent_dma), so the cost of cache maintenance and uncached access must be given`
	if err == nil || err.Error() != want {
		t.Errorf("error\n got: %v\nwant: %s", err, want)
	}
}
