package platform

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

func TestSet(t *testing.T) {
	for _, tc := range []struct {
		name, preset, path, value string
		check                     func(t *testing.T, s *Spec)
	}{
		{"by name", "h200-pcie", "gpus.gpu0.copy_overhead", "6us", func(t *testing.T, s *Spec) {
			if p := s.GPUs[0].CopyOverhead; p.V != 6*sim.Microsecond || !strings.HasPrefix(p.Source, "calibrated: 6.6 us") {
				t.Errorf("copy_overhead = %+v, want 6us keeping its source", p)
			}
		}},
		{"by index", "2s-4gpu-pcie", "gpus.2.link.gen", "4", func(t *testing.T, s *Spec) {
			if s.GPUs[2].Link.Gen != 4 || s.GPUs[1].Link.Gen != 5 {
				t.Errorf("gen = %d (gpu1 %d), want only gpu2 at 4", s.GPUs[2].Link.Gen, s.GPUs[1].Link.Gen)
			}
		}},
		{"node by id", "dgx-h100", "nodes.1.dram_bandwidth", "200 GB/s", func(t *testing.T, s *Spec) {
			if s.Nodes[1].DRAMBandwidth.V != 200e9 || s.Nodes[0].DRAMBandwidth.V != 307.2e9 {
				t.Errorf("dram_bandwidth = %v / %v", s.Nodes[1].DRAMBandwidth.V, s.Nodes[0].DRAMBandwidth.V)
			}
		}},
		{"fabric", "h200-pcie", "fabric.cross_traffic", "0.05", func(t *testing.T, s *Spec) {
			if s.Fabric.CrossTraffic.V != 0.05 {
				t.Errorf("cross_traffic = %v", s.Fabric.CrossTraffic.V)
			}
		}},
		{"nvlink by index", "dgx-h100", "nvlinks.0.links", "12", func(t *testing.T, s *Spec) {
			if s.NVLinks[0].Links.V != 12 || s.NVLinks[0].Links.Source == "" {
				t.Errorf("links = %+v", s.NVLinks[0].Links)
			}
		}},
		{"source alone", "h200-pcie", "gpus.gpu0.vram.source", "measured on node 7", func(t *testing.T, s *Spec) {
			if p := s.GPUs[0].VRAM; p != P(Bytes(143771<<20), "measured on node 7") {
				t.Errorf("vram = %+v", p)
			}
		}},
		{"value alone", "h200-pcie", "gpus.gpu0.vram.value", "140 GiB", func(t *testing.T, s *Spec) {
			if p := s.GPUs[0].VRAM; p.V != 140<<30 || p.Source == "" {
				t.Errorf("vram = %+v", p)
			}
		}},
		{"field left out of the file", "h200-pcie", "root_complexes.rc0.bandwidth", "100 GB/s", func(t *testing.T, s *Spec) {
			if p := s.RootComplexes[0].Bandwidth; p != P(Rate(100e9), "") {
				t.Errorf("bandwidth = %+v", p)
			}
		}},
		{"string field", "dgx-h100", "gpus.gpu3.model", "H100 SXM5 94GB", func(t *testing.T, s *Spec) {
			if s.GPUs[3].Model != "H100 SXM5 94GB" {
				t.Errorf("model = %q", s.GPUs[3].Model)
			}
		}},
		{"a whole list as YAML", "2s-4gpu-pcie", "distances", "[[10, 12], [12, 10]]", func(t *testing.T, s *Spec) {
			if !reflect.DeepEqual(s.Distances, [][]int{{10, 12}, {12, 10}}) {
				t.Errorf("distances = %v", s.Distances)
			}
		}},
		{"distance entry", "h200-pcie", "distances.0.0", "10", func(t *testing.T, s *Spec) {}},
		{"cache parameter", "h200-pcie", "nodes.0.cache.prefetch", "2", func(t *testing.T, s *Spec) {
			if p := s.Nodes[0].Cache.Prefetch; p.V != 2 || p.Source == "" {
				t.Errorf("prefetch = %+v, want 2 keeping its source", p)
			}
		}},
		{"cache line size", "zynq-7000", "nodes.0.cache.line_size", "64 B", func(t *testing.T, s *Spec) {
			if got := s.Nodes[0].Cache.Line(); got != 64 {
				t.Errorf("line = %v", got)
			}
		}},
		{"x86 made non-coherent", "h200-pcie", "root_complexes.rc0.noncoherent_dma", "true", func(t *testing.T, s *Spec) {
			if ok, err := s.DeviceCoherent("gpu0"); ok || err != nil {
				t.Errorf("DeviceCoherent(gpu0) = %v, %v; want false", ok, err)
			}
		}},
		{"ACP instead of HP", "zynq-7000", "root_complexes.axi.noncoherent_dma", "false", func(t *testing.T, s *Spec) {
			if s.RootComplexes[0].NonCoherentDMA || !s.Devices[1].NonCoherentDMA {
				t.Errorf("root complex %v, gem0 %v; want false, true", s.RootComplexes[0].NonCoherentDMA, s.Devices[1].NonCoherentDMA)
			}
		}},
		{"device flag", "2s-4gpu-pcie", "devices.nic1.noncoherent_dma", "true", func(t *testing.T, s *Spec) {
			if ok, _ := s.DeviceCoherent("nic1"); ok {
				t.Error("nic1 still coherent")
			}
			if ok, _ := s.DeviceCoherent("nic0"); !ok {
				t.Error("nic0 became non-coherent")
			}
		}},
		{"dma mask", "2s-4gpu-pcie", "devices.nic2.dma_mask_bits", "40", func(t *testing.T, s *Spec) {
			if d, _ := s.Device("nic2"); d.MaskBits() != 40 || d.DMAMaskBits.Source == "" {
				t.Errorf("dma_mask_bits = %+v", d.DMAMaskBits)
			}
		}},
		{"max segment", "dgx-h100", "devices.nic3.max_segment", "1 MiB", func(t *testing.T, s *Spec) {
			if d, _ := s.Device("nic3"); d.MaxSeg() != 1<<20 {
				t.Errorf("max_segment = %v", d.MaxSeg())
			}
		}},
		{"segment boundary", "zynq-7000", "devices.axidma0.segment_boundary", "64 KiB", func(t *testing.T, s *Spec) {
			if d, _ := s.Device("axidma0"); d.SegBoundary() != 64<<10 {
				t.Errorf("segment_boundary = %v", d.SegBoundary())
			}
		}},
		{"swiotlb", "h200-pcie", "swiotlb", "128 MiB", func(t *testing.T, s *Spec) {
			if s.SwiotlbSize() != 128<<20 {
				t.Errorf("swiotlb = %v", s.SWIOTLB)
			}
		}},
		{"link bandwidth", "zynq-7000", "devices.axidma0.link.bandwidth", "2.4 GB/s", func(t *testing.T, s *Spec) {
			if d, _ := s.Device("axidma0"); d.Link.Rate() != 2.4e9 || d.Link.Bandwidth.Source == "" {
				t.Errorf("link = %+v", d.Link)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := Preset(tc.preset)
			if err != nil {
				t.Fatal(err)
			}
			orig := in.Clone()
			out, err := Set(in, tc.path, tc.value)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(in, orig) {
				t.Error("Set changed its input")
			}
			tc.check(t, out)
			if err := out.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestSetNameWithDots(t *testing.T) {
	s, _ := Preset("2s-4gpu-pcie")
	s, err := Set(s, "devices.nic1.name", "0000:17:00.0")
	if err != nil {
		t.Fatal(err)
	}
	s, err = Set(s, "devices.0000:17:00.0.line_rate", "200 Gb/s")
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := s.Device("0000:17:00.0"); d.LineRate.V != 25e9 {
		t.Errorf("line_rate = %v, want 25 GB/s", d.LineRate.V)
	}
}

func TestSetErrors(t *testing.T) {
	for _, tc := range []struct {
		name, path, value, want string
		is                      error
	}{
		{"unknown field", "gpus.gpu0.vramm", "1 GiB",
			`set gpus.gpu0.vramm: bad field path: gpus[0] has no field "vramm" (did you mean "vram"? fields: name, model, arch, integrated, node, parent, link, noncoherent_dma, vram, vram_bandwidth, bar1, copy_engines, copy_overhead, copy_completion, sm_request, kernel_launch, alloc_cost, pin_cost, unpin_cost, pin_call_cost, unpin_call_cost, staging_rate, vram_latency, hub_latency, outstanding_reads, pageable_chunk, uvm)`, ErrBadPath},
		{"unknown top-level field", "gpu.gpu0.vram", "1 GiB",
			`set gpu.gpu0.vram: bad field path: the platform has no field "gpu" (did you mean "gpus"? fields: name, description, nodes, distances, socket_links, root_complexes, switches, gpus, devices, nvswitches, nvlinks, fabric, swiotlb, iommu, numa_balancing)`, ErrBadPath},
		{"unknown element", "gpus.gpu7.vram", "1 GiB",
			`set gpus.gpu7.vram: bad field path: gpus has no element "gpu7" (names gpu0, or indexes 0..0)`, ErrBadPath},
		{"index out of range", "nodes.3.cores", "1",
			`set nodes.3.cores: bad field path: nodes has no element "3" (indexes 0..0)`, ErrBadPath},
		{"empty list", "switches.0.latency", "1ns",
			`set switches.0.latency: bad field path: switches has no element "0" (it is empty)`, ErrBadPath},
		{"past a value", "gpus.gpu0.arch.x", "1",
			`set gpus.gpu0.arch.x: bad field path: gpus[0].arch is a value: it has no field "x"`, ErrBadPath},
		{"past a parameter", "gpus.gpu0.vram.x", "1",
			`set gpus.gpu0.vram.x: bad field path: gpus[0].vram is a parameter: it has only value and source, not "x"`, ErrBadPath},
		{"empty path", "", "1",
			`set : bad field path: empty path (fields: name, description, nodes, distances, socket_links, root_complexes, switches, gpus, devices, nvswitches, nvlinks, fabric, swiotlb, iommu, numa_balancing)`, ErrBadPath},
		{"bad value", "gpus.gpu0.vram", "12 GiX",
			`set gpus.gpu0.vram: gpus[0].vram: bad size "12 GiX": unknown unit "GiX" (want ` + sizeUnitList + `)`, nil},
		{"invalid value", "gpus.gpu0.link.gen", "9",
			`set gpus.gpu0.link.gen: gpus[0].link.gen: want 1..6, got 9`, nil},
		{"payload not a power of two", "gpus.gpu0.link.max_payload", "384 B",
			`set gpus.gpu0.link.max_payload: gpus[0].link.max_payload: want a power of two from 128 B to 4 KiB (PCIe Base Specification), got 384 B`, nil},
		{"read request too big", "gpus.gpu0.link.max_read_request", "8 KiB",
			`set gpus.gpu0.link.max_read_request: gpus[0].link.max_read_request: want a power of two from 128 B to 4 KiB (PCIe Base Specification), got 8 KiB`, nil},
		{"TLP overhead too small", "gpus.gpu0.link.tlp_overhead", "4 B",
			`set gpus.gpu0.link.tlp_overhead: gpus[0].link.tlp_overhead: want 12 B to 64 B (header, framing and CRC of one TLP), got 4 B`, nil},
		{"SM request not a power of two", "gpus.gpu0.sm_request", "100 B",
			`set gpus.gpu0.sm_request: gpus[0].sm_request: want a power of two from 32 B (one L2 sector) to 4 KiB, got 100 B`, nil},
		{"completion past the overhead", "gpus.gpu0.copy_completion", "7us",
			`set gpus.gpu0.copy_completion: gpus[0].copy_completion: want at most copy_overhead (6.24us), got 7us`, nil},
		{"empty value", "gpus.gpu0.bar1", "",
			`set gpus.gpu0.bar1: gpus[0].bar1: missing value: want a size like "141 GiB"`, nil},
		{"breaking a reference", "root_complexes.rc0.name", "rc1",
			"set root_complexes.rc0.name: gpus[0].parent: unknown parent \"rc0\" (root complexes and switches: rc1)\n" +
				`devices[0].parent: unknown parent "rc0" (root complexes and switches: rc1)`, nil},
		{"bad YAML value", "distances", "[[10",
			`set distances: distances: bad YAML value "[[10": did not find expected ',' or ']'`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := Preset("h200-pcie")
			_, err := Set(s, tc.path, tc.value)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error\n got: %v\nwant: %s", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error does not wrap %v", tc.is)
			}
		})
	}
}

// TestSetCoherency: a Set that leaves a non-coherent device's node without
// its cache costs, or gives a flag a non-boolean, is refused.
func TestSetCoherency(t *testing.T) {
	for _, tc := range []struct{ preset, path, value, want string }{
		{"zynq-7000", "nodes.0.cache.writeback_cost", "0",
			`set nodes.0.cache.writeback_cost: nodes[0].cache: missing writeback_cost: device "axidma0" on node 0 does non-coherent DMA (root complex "axi" has noncoherent_dma), so the cost of cache maintenance and uncached access must be given`},
		{"zynq-7000", "nodes.0.cache", "{line_size: 32 B}",
			`set nodes.0.cache: nodes[0].cache: missing size, writeback_cost, invalidate_cost, uncached_rate: device "axidma0" on node 0 does non-coherent DMA (root complex "axi" has noncoherent_dma), so the cost of cache maintenance and uncached access must be given`},
		{"h200-pcie", "nodes.0.cache.line_size", "48",
			`set nodes.0.cache.line_size: nodes[0].cache.line_size: want a power of two from 16 B to 256 B (leave it out for the default 64 B), got 48 B`},
		{"h200-pcie", "root_complexes.rc0.noncoherent_dma", "yes",
			`set root_complexes.rc0.noncoherent_dma: root_complexes[0].noncoherent_dma: bad boolean "yes": want true or false`},
		{"2s-4gpu-pcie", "devices.nic2.dma_mask_bits", "0",
			`set devices.nic2.dma_mask_bits: devices[2].dma_mask_bits: want 24..64 address bits (leave it out for the default 64), got 0`},
		{"zynq-7000", "devices.axidma0.link.gen", "2",
			`set devices.axidma0.link.gen: devices[0].link.gen: want it left out: the link's bandwidth replaces gen x width x efficiency`},
		{"h200-pcie", "swiotlb", "1001",
			`set swiotlb: swiotlb: want a positive multiple of 2 KiB, swiotlb's slot size IO_TLB_SIZE (leave it out for the default 64 MiB), got 1001 B`},
	} {
		t.Run(tc.preset+"/"+tc.path, func(t *testing.T) {
			s, _ := Preset(tc.preset)
			if _, err := Set(s, tc.path, tc.value); err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
}
