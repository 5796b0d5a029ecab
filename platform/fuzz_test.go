package platform

import (
	"reflect"
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
	return append(docs,
		[]byte(base),
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
