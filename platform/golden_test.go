package platform

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestMarshalGolden pins what Marshal writes for each preset.
func TestMarshalGolden(t *testing.T) {
	for _, name := range Presets() {
		t.Run(name, func(t *testing.T) {
			s, err := Preset(name)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if string(got) != string(want) {
				t.Errorf("Marshal(%s) differs from %s (run go test -update if intended):\n%s", name, file, got)
			}
		})
	}
}

// TestDocExample checks that the example in the package documentation
// is a valid platform.
func TestDocExample(t *testing.T) {
	const doc = `name: h200-pcie
nodes:
  - id: 0
    cores: 16
    dram: {value: 128 GiB, source: "measured here"}
    dram_bandwidth: 307.2 GB/s
    memcpy_rate: 10 GB/s
root_complexes:
  - {name: rc0, node: 0, latency: 150ns}
gpus:
  - name: gpu0
    arch: hopper
    parent: rc0
    link: {gen: 5, width: 16, efficiency: 0.8807373046875, latency: 100ns}
    vram: 143771 MiB
    vram_bandwidth: 4384 GB/s
    bar1: 256 GiB
    copy_engines: 3
    copy_overhead: 6.24us
`
	if _, err := Parse("doc.go", []byte(doc)); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkParsePreset(b *testing.B) {
	data, _ := PresetYAML("dgx-h100")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("dgx-h100.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPreset(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Preset("dgx-h100"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSet(b *testing.B) {
	s, _ := Preset("dgx-h100")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Set(s, "gpus.gpu3.copy_overhead", "5us"); err != nil {
			b.Fatal(err)
		}
	}
}
