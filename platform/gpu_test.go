package platform

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// soc is a small valid SoC with an integrated GPU; the error cases edit
// it, so the line numbers in their expectations count from here.
const soc = `name: soc
nodes:
  - id: 0
    cores: 12
    dram: 64 GiB
    dram_bandwidth: 204.8 GB/s
    memcpy_rate: 10 GB/s
gpus:
  - name: gpu0
    arch: ampere
    integrated: true
    node: 0
    copy_engines: 2
`

// editSoC replaces old (which must occur once) in soc by new.
func editSoC(t *testing.T, old, new string) string {
	t.Helper()
	if strings.Count(soc, old) != 1 {
		t.Fatalf("%q is not in soc exactly once", old)
	}
	return strings.Replace(soc, old, new, 1)
}

// gpuDoc is base with every optional GPU cost and unified-memory
// parameter, each value written by val: bare or as {value, source}.
func gpuDoc(t *testing.T, val func(string) string) string {
	return edit(t, "    copy_engines: 2\n", "    copy_engines: 2\n"+
		"    kernel_launch: "+val("3.2us")+"\n"+
		"    alloc_cost: "+val("57us")+"\n"+
		"    pin_cost: "+val("83.4ns")+"\n"+
		"    unpin_cost: "+val("42.6ns")+"\n"+
		"    pageable_chunk: "+val("1 MiB")+"\n"+
		"    uvm:\n"+
		"      fault_batch: "+val("128")+"\n"+
		"      max_batches: "+val("10")+"\n"+
		"      prefetch_threshold: "+val("75")+"\n"+
		"      thrashing_threshold: "+val("7")+"\n"+
		"      thrashing_lapse: "+val("1ms")+"\n"+
		"      thrashing_pin_lapses: "+val("30")+"\n"+
		"      thrashing_epoch_lapses: "+val("200")+"\n"+
		"      fault_latency: "+val("45us")+"\n")
}

// roundTrip checks that Marshal writes s so that Parse reads it back equal.
func roundTrip(t *testing.T, s *Spec) string {
	t.Helper()
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
	return string(out)
}

func TestGPUFieldsYAML(t *testing.T) {
	for _, tc := range []struct {
		name string
		val  func(string) string
		src  string
	}{
		{"bare", func(v string) string { return v }, ""},
		{"with source", func(v string) string { return "{value: " + v + `, source: "measured"}` }, "measured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(gpuDoc(t, tc.val)))
			if err != nil {
				t.Fatal(err)
			}
			g := s.GPUs[0]
			if g.KernelLaunch != P(3200*sim.Nanosecond, tc.src) || g.AllocCost != P(57*sim.Microsecond, tc.src) ||
				g.PinCost != P(83400*sim.Picosecond, tc.src) || g.UnpinCost != P(42600*sim.Picosecond, tc.src) ||
				g.PageableChunk != P(Bytes(1<<20), tc.src) {
				t.Errorf("gpu = %+v", g)
			}
			want := UVM{
				FaultBatch: P(128, tc.src), MaxBatches: P(10, tc.src), PrefetchThreshold: P(75, tc.src),
				ThrashingThreshold: P(7, tc.src), ThrashingLapse: P(sim.Millisecond, tc.src),
				ThrashingPinLapses: P(30, tc.src), ThrashingEpochLapses: P(200, tc.src),
				FaultLatency: P(45*sim.Microsecond, tc.src),
			}
			if g.UVM != want {
				t.Errorf("uvm = %+v, want %+v", g.UVM, want)
			}
			if g.Integrated || g.NonCoherentDMA || g.Node != 0 {
				t.Errorf("integrated %v, noncoherent %v, node %d; want a coherent discrete GPU", g.Integrated, g.NonCoherentDMA, g.Node)
			}
			out := roundTrip(t, s)
			if strings.Contains(out, "node: 0\n    parent") || strings.Contains(out, "integrated") {
				t.Errorf("Marshal wrote a discrete GPU's node or integrated flag:\n%s", out)
			}
		})
	}
}

func TestIntegratedGPUYAML(t *testing.T) {
	doc := editSoC(t, "    copy_engines: 2\n", "    noncoherent_dma: true\n    vram_bandwidth: {value: 150 GB/s, source: x}\n    copy_engines: 2\n")
	doc = strings.Replace(doc, "    memcpy_rate: 10 GB/s\n", "    memcpy_rate: 10 GB/s\n"+
		"    cache: {size: 4 MiB, writeback_cost: 20ns, invalidate_cost: 8ns, uncached_rate: 300 MB/s}\n", 1)
	s, err := Parse("t.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	g := s.GPUs[0]
	if !g.Integrated || !g.NonCoherentDMA || g.Node != 0 || g.Parent != "" || g.VRAM.V != 0 || g.VRAMBandwidth != P(Rate(150e9), "x") {
		t.Errorf("gpu = %+v", g)
	}
	out := roundTrip(t, s)
	for _, want := range []string{"integrated: true\n", "node: 0\n", "noncoherent_dma: true\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("Marshal left out %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "link") || strings.Contains(out, "parent") {
		t.Errorf("Marshal wrote a link or parent for an integrated GPU:\n%s", out)
	}
}

func TestGPUErrors(t *testing.T) {
	gpuField := func(field string) func(t *testing.T) string {
		return func(t *testing.T) string { return base + "    " + field + "\n" }
	}
	uvm := func(fields string) func(t *testing.T) string {
		return func(t *testing.T) string { return base + "    uvm: {" + fields + "}\n" }
	}
	socField := func(field string) func(t *testing.T) string {
		return func(t *testing.T) string { return soc + "    " + field + "\n" }
	}
	const shares = "want it left out: an integrated GPU is not on PCIe: it shares node 0's DRAM"
	for _, tc := range []struct {
		name string
		doc  func(t *testing.T) string
		want string
	}{
		{"integrated GPU with a PCIe parent", socField("parent: rc0"), `t.yaml:14: gpus[0].parent: ` + shares},
		{"integrated GPU with a link", socField("link: {gen: 4, width: 8, efficiency: 0.9}"), `t.yaml:14: gpus[0].link: ` + shares},
		{"integrated GPU with an empty link", socField("link:"), `t.yaml:14: gpus[0].link: ` + shares},
		{"integrated GPU with VRAM", socField("vram: 8 GiB"),
			`t.yaml:14: gpus[0].vram: want it left out: an integrated GPU has no memory of its own; it allocates from node 0's DRAM`},
		{"integrated GPU with a BAR1", socField("bar1: 256 MiB"), `t.yaml:14: gpus[0].bar1: ` + shares + `, so it has no BAR`},
		{"integrated GPU faster than its DRAM", socField("vram_bandwidth: 300 GB/s"),
			`t.yaml:14: gpus[0].vram_bandwidth: want at most node 0's dram_bandwidth (204.8 GB/s), which an integrated GPU shares, got 300 GB/s`},
		{"integrated GPU with zero bandwidth", socField("vram_bandwidth: 0"), `t.yaml:14: gpus[0].vram_bandwidth: must be positive, got 0`},
		{"integrated GPU on no node", func(t *testing.T) string { return editSoC(t, "    node: 0\n", "    node: 2\n") },
			`t.yaml:12: gpus[0].node: no node 2 (nodes are 0..0)`},
		{"integrated GPU without its node", func(t *testing.T) string { return editSoC(t, "    node: 0\n", "") },
			`t.yaml:9: gpus[0].node: missing: want the NUMA node whose DRAM the integrated GPU shares`},
		{"discrete GPU with a node", func(t *testing.T) string { return edit(t, "    arch: hopper\n", "    arch: hopper\n    node: 0\n") },
			`t.yaml:14: gpus[0].node: want it left out: a discrete GPU is on the node of its root complex (node is for an integrated GPU)`},
		{"discrete GPU without parent", func(t *testing.T) string { return edit(t, "    parent: rc0\n", "") },
			`t.yaml:12: gpus[0].parent: missing: want the name of a root complex or switch`},
		{"non-coherent integrated GPU without cache costs", socField("noncoherent_dma: true"),
			`t.yaml:3: nodes[0].cache: missing size, writeback_cost, invalidate_cost, uncached_rate: GPU "gpu0" on node 0 does non-coherent DMA (it has noncoherent_dma), so the cost of cache maintenance and uncached access must be given`},
		{"discrete GPU with No Snoop without cache costs", gpuField("noncoherent_dma: true"),
			`t.yaml:3: nodes[0].cache: missing size, writeback_cost, invalidate_cost, uncached_rate: GPU "gpu0" on node 0 does non-coherent DMA (it has noncoherent_dma), so the cost of cache maintenance and uncached access must be given`},
		{"kernel launch written as zero", gpuField("kernel_launch: 0"),
			`t.yaml:20: gpus[0].kernel_launch: must be positive (leave it out for the default 3.2us), got 0s`},
		{"negative pin cost", gpuField("pin_cost: -1ns"), `t.yaml:20: gpus[0].pin_cost: must be positive (leave it out for the default 133.5ns), got -1ns`},
		{"zero unpin cost with a source", gpuField("unpin_cost: {value: 0s, source: x}"),
			`t.yaml:20: gpus[0].unpin_cost: must be positive (leave it out for the default 53.4ns), got 0s`},
		{"alloc cost not a duration", gpuField("alloc_cost: 57"),
			`t.yaml:20: gpus[0].alloc_cost: bad duration "57": want a number and a unit (ps, ns, us, ms, s)`},
		{"pageable chunk not whole pages", gpuField("pageable_chunk: 3 KiB"),
			`t.yaml:20: gpus[0].pageable_chunk: want a positive multiple of 4 KiB, a host page (leave it out for the default 2 MiB), got 3 KiB`},
		{"prefetch threshold above 100", uvm("prefetch_threshold: 101"),
			`t.yaml:20: gpus[0].uvm.prefetch_threshold: want 1..100 percent (uvm_perf_prefetch_threshold; leave it out for the driver's default 51), got 101`},
		{"prefetch threshold zero", uvm("prefetch_threshold: 0"),
			`t.yaml:20: gpus[0].uvm.prefetch_threshold: want 1..100 percent (uvm_perf_prefetch_threshold; leave it out for the driver's default 51), got 0`},
		{"thrashing threshold past its 3 bits", uvm("thrashing_threshold: 8"),
			`t.yaml:20: gpus[0].uvm.thrashing_threshold: want 1..7 migrations (uvm_perf_thrashing_threshold, a 3-bit count; leave it out for the driver's default 3), got 8`},
		{"empty fault batch", uvm("fault_batch: 0"),
			`t.yaml:20: gpus[0].uvm.fault_batch: want 1..4294967295 faults (uvm_perf_fault_batch_count; leave it out for the driver's default 256), got 0`},
		{"batches past a uint", uvm("max_batches: 4294967296"),
			`t.yaml:20: gpus[0].uvm.max_batches: want 1..4294967295 batches (uvm_perf_fault_max_batches_per_service; leave it out for the driver's default 20), got 4294967296`},
		{"pinned for ever", uvm("thrashing_pin_lapses: 0"),
			`t.yaml:20: gpus[0].uvm.thrashing_pin_lapses: want 1..4294967295 lapses (uvm_perf_thrashing_pin; leave it out for the driver's default 300), got 0`},
		{"negative epoch", uvm("thrashing_epoch_lapses: -1"),
			`t.yaml:20: gpus[0].uvm.thrashing_epoch_lapses: want 1..4294967295 lapses (uvm_perf_thrashing_epoch; leave it out for the driver's default 2000), got -1`},
		{"lapse below a microsecond", uvm("thrashing_lapse: 500ns"),
			`t.yaml:20: gpus[0].uvm.thrashing_lapse: want a whole number of microseconds, 1us..4294967295us (uvm_perf_thrashing_lapse_usec; leave it out for the driver's default 500us), got 500ns`},
		{"lapse not whole microseconds", uvm("thrashing_lapse: 1.5us"),
			`t.yaml:20: gpus[0].uvm.thrashing_lapse: want a whole number of microseconds, 1us..4294967295us (uvm_perf_thrashing_lapse_usec; leave it out for the driver's default 500us), got 1.5us`},
		{"fault latency written as zero", uvm("fault_latency: 0s"),
			`t.yaml:20: gpus[0].uvm.fault_latency: must be positive (leave it out for the default 21.92us), got 0s`},
		{"unknown uvm field", uvm("fault_batches: 256"),
			`t.yaml:20: gpus[0].uvm.fault_batches: unknown field (did you mean "fault_batch"?); fields here: fault_batch, max_batches, prefetch_threshold, thrashing_threshold, thrashing_lapse, thrashing_pin_lapses, thrashing_epoch_lapses, fault_latency, fault_entry_cost, fault_page_cost, cpu_map_cost`},
		{"uvm as a list", gpuField("uvm: [256]"), `t.yaml:20: gpus[0].uvm: want a mapping, got a list`},
		{"bad integrated flag", func(t *testing.T) string { return editSoC(t, "integrated: true", "integrated: yes") },
			`t.yaml:11: gpus[0].integrated: bad boolean "yes": want true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.doc(t)))
			if err == nil {
				t.Fatalf("Parse succeeded, want %s", tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error %T is not an *Error", err)
			}
		})
	}
}

// TestIntegratedGPUGoSpec: the same rules for a spec built in Go, where
// nothing says which fields were written: non-zero means given.
func TestIntegratedGPUGoSpec(t *testing.T) {
	s, _ := Preset("jetson-orin")
	s.GPUs[0].Parent = "rc0"
	s.GPUs[0].BAR1 = P(Bytes(1<<30), "")
	s.GPUs[0].UVM.ThrashingThreshold.V = 9
	want := strings.Join([]string{
		`jetson-orin: gpus[0].parent: want it left out: an integrated GPU is not on PCIe: it shares node 0's DRAM`,
		`jetson-orin: gpus[0].bar1: want it left out: an integrated GPU is not on PCIe: it shares node 0's DRAM, so it has no BAR`,
		`jetson-orin: gpus[0].uvm.thrashing_threshold: want 1..7 migrations (uvm_perf_thrashing_threshold, a 3-bit count; leave it out for the driver's default 3), got 9`,
	}, "\n")
	if err := s.Validate(); err == nil || err.Error() != want {
		t.Errorf("error\n got: %v\nwant: %s", err, want)
	}
	h, _ := Preset("h200-pcie")
	h.GPUs[0].Node = 1
	want = `h200-pcie: gpus[0].node: want it left out: a discrete GPU is on the node of its root complex (node is for an integrated GPU)`
	if err := h.Validate(); err == nil || err.Error() != want {
		t.Errorf("error\n got: %v\nwant: %s", err, want)
	}
}

func TestSetGPU(t *testing.T) {
	for _, tc := range []struct {
		name, preset, path, value string
		check                     func(t *testing.T, s *Spec)
	}{
		{"uvm parameter keeps its source", "h200-pcie", "gpus.gpu0.uvm.prefetch_threshold", "75", func(t *testing.T, s *Spec) {
			if p := s.GPUs[0].UVM.PrefetchThreshold; p.V != 75 || !strings.Contains(p.Source, "uvm_perf_prefetch_threshold") {
				t.Errorf("prefetch_threshold = %+v", p)
			}
		}},
		{"uvm parameter left out of the file", "jetson-orin", "gpus.gpu0.uvm.thrashing_lapse", "1ms", func(t *testing.T, s *Spec) {
			if u := s.GPUs[0].UVM; u.Lapse() != sim.Millisecond || u.PinTime() != 300*sim.Millisecond {
				t.Errorf("lapse %v, pin time %v; want 1ms, 300ms", u.Lapse(), u.PinTime())
			}
		}},
		{"a whole uvm mapping", "2s-4gpu-pcie", "gpus.gpu1.uvm", "{fault_batch: 64}", func(t *testing.T, s *Spec) {
			if u := s.GPUs[1].UVM; u != (UVM{FaultBatch: P(64, "")}) || u.Prefetch() != 51 {
				t.Errorf("uvm = %+v", u)
			}
			if s.GPUs[0].UVM.FaultBatch.V != 256 {
				t.Errorf("gpu0's uvm changed: %+v", s.GPUs[0].UVM)
			}
		}},
		{"kernel launch", "dgx-h100", "gpus.gpu5.kernel_launch", "4us", func(t *testing.T, s *Spec) {
			if g, _ := s.GPU("gpu5"); g.Launch() != 4*sim.Microsecond || g.KernelLaunch.Source == "" {
				t.Errorf("kernel_launch = %+v", g.KernelLaunch)
			}
		}},
		{"pin cost source", "h200-pcie", "gpus.gpu0.pin_cost.source", "measured here: 35 ms per GiB", func(t *testing.T, s *Spec) {
			if p := s.GPUs[0].PinCost; p != P(133500*sim.Picosecond, "measured here: 35 ms per GiB") {
				t.Errorf("pin_cost = %+v", p)
			}
		}},
		{"pageable chunk", "h200-pcie", "gpus.gpu0.pageable_chunk", "64 KiB", func(t *testing.T, s *Spec) {
			if c := s.GPUs[0].Chunk(); c != 64<<10 {
				t.Errorf("chunk = %v", c)
			}
		}},
		{"Orin made pre-Xavier", "jetson-orin", "gpus.gpu0.noncoherent_dma", "true", func(t *testing.T, s *Spec) {
			if ok, err := s.DeviceCoherent("gpu0"); ok || err != nil {
				t.Errorf("DeviceCoherent = %v, %v; want false", ok, err)
			}
		}},
		{"TX2 made I/O coherent", "jetson-tx2", "gpus.gpu0.noncoherent_dma", "false", func(t *testing.T, s *Spec) {
			if ok, err := s.DeviceCoherent("gpu0"); !ok || err != nil {
				t.Errorf("DeviceCoherent = %v, %v; want true", ok, err)
			}
		}},
		{"an integrated GPU's share of DRAM", "jetson-orin", "gpus.gpu0.vram_bandwidth", "150 GB/s", func(t *testing.T, s *Spec) {
			if r, err := s.GPUMemoryBandwidth("gpu0"); r != 150e9 || err != nil {
				t.Errorf("GPUMemoryBandwidth = %v, %v", r, err)
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
			roundTrip(t, out)
		})
	}
}

func TestSetGPUErrors(t *testing.T) {
	for _, tc := range []struct{ preset, path, value, want string }{
		{"h200-pcie", "gpus.gpu0.uvm.thrashing_threshold", "8",
			`set gpus.gpu0.uvm.thrashing_threshold: gpus[0].uvm.thrashing_threshold: want 1..7 migrations (uvm_perf_thrashing_threshold, a 3-bit count; leave it out for the driver's default 3), got 8`},
		{"h200-pcie", "gpus.gpu0.uvm.prefetch", "51",
			`set gpus.gpu0.uvm.prefetch: bad field path: gpus[0].uvm has no field "prefetch" (fields: fault_batch, max_batches, prefetch_threshold, thrashing_threshold, thrashing_lapse, thrashing_pin_lapses, thrashing_epoch_lapses, fault_latency, fault_entry_cost, fault_page_cost, cpu_map_cost)`},
		{"h200-pcie", "gpus.gpu0.integrated", "true", strings.Join([]string{
			`set gpus.gpu0.integrated: gpus[0].node: missing: want the NUMA node whose DRAM the integrated GPU shares`,
			`gpus[0].parent: want it left out: an integrated GPU is not on PCIe: it shares node 0's DRAM`,
			`gpus[0].link: want it left out: an integrated GPU is not on PCIe: it shares node 0's DRAM`,
			`gpus[0].vram: want it left out: an integrated GPU has no memory of its own; it allocates from node 0's DRAM`,
			`gpus[0].bar1: want it left out: an integrated GPU is not on PCIe: it shares node 0's DRAM, so it has no BAR`,
			`gpus[0].vram_bandwidth: want at most node 0's dram_bandwidth (307.2 GB/s), which an integrated GPU shares, got 4.384 TB/s`,
		}, "\n")},
		{"h200-pcie", "gpus.gpu0.node", "0",
			`set gpus.gpu0.node: gpus[0].node: want it left out: a discrete GPU is on the node of its root complex (node is for an integrated GPU)`},
		{"jetson-orin", "gpus.gpu0.node", "1", `set gpus.gpu0.node: gpus[0].node: no node 1 (nodes are 0..0)`},
		{"jetson-tx2", "nodes.0.cache.uncached_rate", "0",
			"set nodes.0.cache.uncached_rate: nodes[0].cache.uncached_rate: must be positive, got 0\n" +
				`nodes[0].cache: missing uncached_rate: GPU "gpu0" on node 0 does non-coherent DMA (it has noncoherent_dma), so the cost of cache maintenance and uncached access must be given`},
		{"jetson-tx2", "nodes.0.cache", "{line_size: 64 B}",
			`set nodes.0.cache: nodes[0].cache: missing size, writeback_cost, invalidate_cost, uncached_rate: GPU "gpu0" on node 0 does non-coherent DMA (it has noncoherent_dma), so the cost of cache maintenance and uncached access must be given`},
		{"jetson-orin", "gpus.gpu0.parent", "rc0",
			`set gpus.gpu0.parent: gpus[0].parent: want it left out: an integrated GPU is not on PCIe: it shares node 0's DRAM`},
	} {
		t.Run(tc.preset+"/"+tc.path, func(t *testing.T) {
			s, _ := Preset(tc.preset)
			if _, err := Set(s, tc.path, tc.value); err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
}

func TestGPUDefaults(t *testing.T) {
	var g GPU
	if g.Launch() != 3200*sim.Nanosecond || g.Alloc() != 57*sim.Microsecond || g.Pin() != 133500*sim.Picosecond ||
		g.Unpin() != 53400*sim.Picosecond || g.Chunk() != 2<<20 {
		t.Errorf("defaults: launch %v, alloc %v, pin %v, unpin %v, chunk %v", g.Launch(), g.Alloc(), g.Pin(), g.Unpin(), g.Chunk())
	}
	var u UVM
	if u.Batch() != 256 || u.Batches() != 20 || u.Prefetch() != 51 || u.Thrashing() != 3 || u.Lapse() != 500*sim.Microsecond ||
		u.PinLapses() != 300 || u.EpochLapses() != 2000 || u.Fault() != 21920*sim.Nanosecond {
		t.Errorf("uvm defaults: %d %d %d %d %v %d %d %v", u.Batch(), u.Batches(), u.Prefetch(), u.Thrashing(), u.Lapse(), u.PinLapses(), u.EpochLapses(), u.Fault())
	}
	// The driver's pin_ns and epoch_ns: lapse × multiplier.
	if u.PinTime() != 150*sim.Millisecond || u.EpochTime() != sim.Second {
		t.Errorf("pin time %v, epoch %v; want 150ms, 1s", u.PinTime(), u.EpochTime())
	}
	u = UVM{ThrashingLapse: P(maxUint*sim.Microsecond, ""), ThrashingEpochLapses: P(maxUint, "")}
	if u.EpochTime() != sim.Forever {
		t.Errorf("epoch of 2^32-1 lapses of 2^32-1 us = %v, want sim.Forever rather than an overflow", u.EpochTime())
	}
	g = GPU{KernelLaunch: P(sim.Microsecond, ""), PageableChunk: P(Bytes(64<<10), ""), UVM: UVM{FaultBatch: P(64, ""), ThrashingLapse: P(sim.Millisecond, "")}}
	if g.Launch() != sim.Microsecond || g.Chunk() != 64<<10 || g.UVM.Batch() != 64 || g.UVM.PinTime() != 300*sim.Millisecond {
		t.Errorf("set: launch %v, chunk %v, batch %d, pin time %v", g.Launch(), g.Chunk(), g.UVM.Batch(), g.UVM.PinTime())
	}
	// A file written before these fields existed still loads, with the
	// defaults.
	s, err := Parse("old.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if g := s.GPUs[0]; g.Launch() != DefaultKernelLaunch || g.UVM.Prefetch() != DefaultPrefetchThreshold || g.Integrated {
		t.Errorf("old file: %+v", g)
	}
}

// TestUVMPresetsAreDriverDefaults: the measured machine runs nvidia_uvm
// with its defaults, and the presets say so value for value.
func TestUVMPresetsAreDriverDefaults(t *testing.T) {
	for _, name := range []string{"h200-pcie", "2s-4gpu-pcie", "dgx-h100"} {
		s, _ := Preset(name)
		for _, g := range s.GPUs {
			u := g.UVM
			if u.FaultBatch.V != DefaultFaultBatch || u.MaxBatches.V != DefaultMaxBatches || u.PrefetchThreshold.V != DefaultPrefetchThreshold ||
				u.ThrashingThreshold.V != DefaultThrashingThreshold || u.ThrashingLapse.V != DefaultThrashingLapse ||
				u.ThrashingPinLapses.V != DefaultThrashingPinLapses || u.ThrashingEpochLapses.V != DefaultThrashingEpochLapses ||
				u.FaultLatency.V != DefaultFaultLatency {
				t.Errorf("%s %s: uvm %+v", name, g.Name, u)
			}
			if g.Launch() != DefaultKernelLaunch || g.Alloc() != DefaultAllocCost || g.Pin() != DefaultPinCost || g.Unpin() != DefaultUnpinCost {
				t.Errorf("%s %s: costs differ from the measured defaults", name, g.Name)
			}
		}
	}
}

func TestJetsonPresets(t *testing.T) {
	orin, err := Preset("jetson-orin")
	if err != nil {
		t.Fatal(err)
	}
	tx2, err := Preset("jetson-tx2")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec      *Spec
		arch      string
		cores     int
		dram      Bytes
		bandwidth Rate
		engines   int
		coherent  bool
		// rcs is the number of root complexes: Orin's SoC fabric
		// carries its camera, ISP and display devices.
		rcs int
	}{
		{orin, "ampere", 12, 64 << 30, 204.8e9, 2, true, 1},
		{tx2, "pascal", 6, 8 << 30, 59.7e9, 1, false, 0},
	} {
		t.Run(tc.spec.Name, func(t *testing.T) {
			s := tc.spec
			if len(s.GPUs) != 1 || len(s.Nodes) != 1 || len(s.RootComplexes) != tc.rcs {
				t.Fatalf("%d GPUs, %d nodes, %d root complexes; want 1, 1, %d", len(s.GPUs), len(s.Nodes), len(s.RootComplexes), tc.rcs)
			}
			g, n := s.GPUs[0], s.Nodes[0]
			if !g.Integrated || g.Arch != tc.arch || g.Node != 0 || g.CopyEngines.V != tc.engines {
				t.Errorf("gpu0 = %+v", g)
			}
			if n.Cores.V != tc.cores || n.DRAM.V != tc.dram || n.DRAMBandwidth.V != tc.bandwidth || n.Cache.Line() != 64 {
				t.Errorf("node 0 = %+v", n)
			}
			if ok, err := s.DeviceCoherent("gpu0"); ok != tc.coherent || err != nil {
				t.Errorf("DeviceCoherent = %v, %v; want %v", ok, err, tc.coherent)
			}
			if node, err := s.NodeOf("gpu0"); node != 0 || err != nil {
				t.Errorf("NodeOf = %d, %v", node, err)
			}
			if r, err := s.GPUMemoryBandwidth("gpu0"); r != tc.bandwidth || err != nil {
				t.Errorf("GPUMemoryBandwidth = %v, %v; want the node's DRAM bandwidth", r, err)
			}
			wantErr := `platform ` + s.Name + `: GPU "gpu0" is integrated: it has no upstream PCIe link (it shares node 0's DRAM)`
			if _, err := s.PathToRoot("gpu0"); err == nil || err.Error() != wantErr {
				t.Errorf("PathToRoot error = %v, want %s", err, wantErr)
			}
			if _, _, err := s.Uplink("gpu0"); err == nil || err.Error() != wantErr {
				t.Errorf("Uplink error = %v, want %s", err, wantErr)
			}
		})
	}
	// Pre-Xavier the node must say what cache maintenance costs.
	if c := tx2.Nodes[0].Cache; c.Size.V == 0 || c.WritebackCost.V == 0 || c.InvalidateCost.V == 0 || c.UncachedRate.V == 0 {
		t.Errorf("tx2 cache = %+v", c)
	}
	h, _ := Preset("h200-pcie")
	if r, _ := h.GPUMemoryBandwidth("gpu0"); r != 4384e9 {
		t.Errorf("h200 GPUMemoryBandwidth = %v, want its VRAM bandwidth", r)
	}
	if _, err := h.GPUMemoryBandwidth("gpu9"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GPUMemoryBandwidth(gpu9) error = %v, want ErrNotFound", err)
	}
}
