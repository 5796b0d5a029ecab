package platform

import (
	"reflect"
	"strings"
	"testing"
)

// seedDocs are the presets' texts and the small documents of the error
// tests: the fuzzers mutate them.
func seedDocs(f *testing.F) [][]byte {
	var docs [][]byte
	for _, name := range Presets() {
		data, err := PresetYAML(name)
		if err != nil {
			f.Fatal(err)
		}
		docs = append(docs, data)
	}
	coherency := strings.Replace(base, "    memcpy_rate: 10 GB/s\n", "    memcpy_rate: 10 GB/s\n"+
		"    cache: {line_size: 32 B, size: 512 KiB, prefetch: 1, writeback_cost: 75ns, invalidate_cost: 60ns, uncached_rate: {value: 110 MB/s, source: x}}\n", 1)
	coherency = strings.Replace(coherency, "    node: 0\n", "    node: 0\n    noncoherent_dma: true\n", 1) +
		"devices:\n  - {name: dma0, kind: dma, parent: rc0, link: {bandwidth: 1.2 GB/s}, dma_engines: 2, noncoherent_dma: false, dma_mask_bits: 32, max_segment: 16 KiB, segment_boundary: 64 KiB}\n" +
		"swiotlb: 128 MiB\n"
	integrated := strings.Replace(soc, "    memcpy_rate: 10 GB/s\n", "    memcpy_rate: 10 GB/s\n"+
		"    cache: {size: 4 MiB, writeback_cost: 20ns, invalidate_cost: 8ns, uncached_rate: 300 MB/s}\n", 1) +
		"    noncoherent_dma: true\n    vram_bandwidth: 100 GB/s\n"
	costs := base + "    kernel_launch: 3.2us\n    alloc_cost: {value: 57us, source: x}\n    pin_cost: 83.4ns\n" +
		"    unpin_cost: 42.6ns\n    pageable_chunk: 2 MiB\n" +
		"    uvm: {fault_batch: 256, max_batches: 20, prefetch_threshold: 51, thrashing_threshold: 3, thrashing_lapse: 500us,\n" +
		"      thrashing_pin_lapses: 300, thrashing_epoch_lapses: 2000, fault_latency: 21.92us}\n"
	return append(docs,
		[]byte(soc),
		[]byte(integrated),
		[]byte(costs),
		[]byte(base),
		[]byte(coherency),
		[]byte(nicFns("    slot: cx7\n    function: 0\n    dma_aliases: [1, 2]\n", "    slot: cx7\n    function: 1\n    acs: true\n")),
		[]byte(base+"distances: [[10]]\nfabric: {cross_traffic: 0.05}\n"),
		[]byte("name: x\nnodes: [{id: 0, cores: 1, dram: 1, dram_bandwidth: 1, memcpy_rate: 1}]\n"),
		[]byte("a: &a [*a]\n"),
		[]byte("{"),
	)
}

// FuzzParse: Parse never panics, and what it accepts survives Marshal and
// Parse unchanged.
func FuzzParse(f *testing.F) {
	for _, d := range seedDocs(f) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Parse accepted a spec that Validate rejects: %v", err)
		}
		out, err := Marshal(s)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back, err := Parse("marshalled.yaml", out)
		if err != nil {
			t.Fatalf("Parse(Marshal(s)): %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back, s) {
			t.Fatalf("Marshal→Parse changed the spec\n%#v\n%#v\n%s", s, back, out)
		}
	})
}

// FuzzSet: Set never panics or changes its input, and what it returns is
// valid and survives Marshal and Parse.
func FuzzSet(f *testing.F) {
	for _, seed := range []struct {
		preset      uint8
		path, value string
	}{
		{0, "gpus.gpu0.copy_overhead", "6us"},
		{1, "gpus.0.link.gen", "4"},
		{1, "nodes.1.dram_bandwidth", "200 GB/s"},
		{2, "fabric.cross_traffic", "0.05"},
		{1, "nvlinks.0.links", "12"},
		{2, "gpus.gpu0.vram.source", "x"},
		{0, "distances", "[[10, 21], [21, 10]]"},
		{2, "root_complexes.rc0.bandwidth", "1 TB/s"},
		{0, "devices.nic1.name", "a.b"},
		{2, "description", "null"},
		{5, "root_complexes.axi.noncoherent_dma", "false"},
		{2, "root_complexes.rc0.noncoherent_dma", "true"},
		{2, "nodes.0.cache.line_size", "128 B"},
		{5, "nodes.0.cache.uncached_rate", "0"},
		{0, "devices.nic2.dma_mask_bits", "24"},
		{1, "devices.nic0.max_segment", "1 MiB"},
		{1, "devices.nic0.segment_boundary", "64 KiB"},
		{5, "devices.axidma0.link.bandwidth", "2 GB/s"},
		{2, "swiotlb", "4 KiB"},
		{2, "gpus.gpu0.uvm.prefetch_threshold", "75"},
		{1, "gpus.gpu3.uvm", "{thrashing_lapse: 1ms, fault_latency: 45us}"},
		{0, "gpus.gpu1.kernel_launch", "5us"},
		{2, "gpus.gpu0.pin_cost.source", "measured here"},
		{2, "gpus.gpu0.pageable_chunk", "64 KiB"},
		{2, "gpus.gpu0.integrated", "true"},
		{3, "gpus.gpu0.noncoherent_dma", "true"},
		{4, "gpus.gpu0.noncoherent_dma", "false"},
		{3, "gpus.gpu0.vram_bandwidth", "100 GB/s"},
		{4, "gpus.gpu0.node", "0"},
		{3, "gpus.gpu0.uvm.thrashing_threshold", "7"},
	} {
		f.Add(seed.preset, seed.path, seed.value)
	}
	names := Presets()
	f.Fuzz(func(t *testing.T, preset uint8, path, value string) {
		in, err := Preset(names[int(preset)%len(names)])
		if err != nil {
			t.Fatal(err)
		}
		orig := in.Clone()
		out, err := Set(in, path, value)
		if !reflect.DeepEqual(in, orig) {
			t.Fatal("Set changed its input")
		}
		if err != nil {
			return
		}
		if err := out.Validate(); err != nil {
			t.Fatalf("Set returned an invalid spec: %v", err)
		}
		data, err := Marshal(out)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back, err := Parse("marshalled.yaml", data)
		if err != nil {
			t.Fatalf("Parse(Marshal(s)): %v\n%s", err, data)
		}
		if !reflect.DeepEqual(back, out) {
			t.Fatalf("Marshal→Parse changed the spec\n%s", data)
		}
	})
}
