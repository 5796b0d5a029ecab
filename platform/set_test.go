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
			`set gpus.gpu0.vramm: bad field path: gpus[0] has no field "vramm" (did you mean "vram"? fields: name, model, arch, parent, link, vram, vram_bandwidth, bar1, copy_engines, copy_overhead)`, ErrBadPath},
		{"unknown top-level field", "gpu.gpu0.vram", "1 GiB",
			`set gpu.gpu0.vram: bad field path: the platform has no field "gpu" (did you mean "gpus"? fields: name, description, nodes, distances, socket_links, root_complexes, switches, gpus, devices, nvswitches, nvlinks, fabric)`, ErrBadPath},
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
			`set : bad field path: empty path (fields: name, description, nodes, distances, socket_links, root_complexes, switches, gpus, devices, nvswitches, nvlinks, fabric)`, ErrBadPath},
		{"bad value", "gpus.gpu0.vram", "12 GiX",
			`set gpus.gpu0.vram: gpus[0].vram: bad size "12 GiX": unknown unit "GiX" (want ` + sizeUnitList + `)`, nil},
		{"invalid value", "gpus.gpu0.link.gen", "9",
			`set gpus.gpu0.link.gen: gpus[0].link.gen: want 1..6, got 9`, nil},
		{"empty value", "gpus.gpu0.bar1", "",
			`set gpus.gpu0.bar1: gpus[0].bar1: missing value: want a size like "141 GiB"`, nil},
		{"breaking a reference", "root_complexes.rc0.name", "rc1",
			`set root_complexes.rc0.name: gpus[0].parent: unknown parent "rc0" (root complexes and switches: rc1)`, nil},
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
