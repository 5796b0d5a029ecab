package platform_test

import (
	"fmt"

	"github.com/dmalab/dmalab/platform"
)

func ExamplePreset() {
	s, err := platform.Preset("h200-pcie")
	if err != nil {
		panic(err)
	}
	g, _ := s.GPU("gpu0")
	fmt.Printf("%s: PCIe Gen%d x%d, raw %v, payload %v\n", g.Model, g.Link.Gen, g.Link.Width, g.Link.RawRate(), g.Link.Rate())
	fmt.Println("efficiency source:", g.Link.Efficiency.Source)
	// Output:
	// H200: PCIe Gen5 x16, raw 63.01538461538461 GB/s, payload 55.5 GB/s
	// efficiency source: calibrated: 55.5 GB/s pinned host-to-device copy measured here 2026-11-21 (nvbandwidth 55.54, cuMemcpyHtoD 55.4) / RawRate(Gen5 x16) 63.015 GB/s
}

func ExampleSet() {
	s, _ := platform.Preset("2s-4gpu-pcie")
	s, err := platform.Set(s, "gpus.gpu2.link.gen", "4")
	if err != nil {
		panic(err)
	}
	g, _ := s.GPU("gpu2")
	fmt.Println(g.Link.RawRate())

	_, err = platform.Set(s, "gpus.gpu2.vram", "80 GiX")
	fmt.Println(err)
	// Output:
	// 31.507692307692307 GB/s
	// set gpus.gpu2.vram: gpus[2].vram: bad size "80 GiX": unknown unit "GiX" (want B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB)
}

func ExampleParse() {
	_, err := platform.Parse("mine.yaml", []byte(`name: mine
nodes:
  - {id: 0, cores: 8, dram: 64 GiB, dram_bandwidth: 100 GB/s, memcpy_rate: 8 GB/s}
root_complexes:
  - {name: rc0, node: 0}
gpus:
  - name: gpu0
    arch: hopper
    parent: rc1
    link: {gen: 5, width: 16, efficiency: 0.88}
    vram: 80 GiB
    vram_bandwidth: 3.35 TB/s
    bar1: 128 GiB
    copy_engines: 3
`))
	fmt.Println(err)
	// Output:
	// mine.yaml:9: gpus[0].parent: unknown parent "rc1" (root complexes and switches: rc0)
}

// Tegra's I/O coherence decides whether pinned memory is cached on the
// CPU: from Xavier on the integrated GPU snoops the CPU caches, before it
// does not.
func ExampleSpec_DeviceCoherent() {
	for _, name := range []string{"jetson-tx2", "jetson-orin"} {
		s, _ := platform.Preset(name)
		g := s.GPUs[0]
		coherent, _ := s.DeviceCoherent(g.Name)
		bw, _ := s.GPUMemoryBandwidth(g.Name)
		fmt.Printf("%s: %s GPU, integrated %v, coherent %v, memory %v shared with the CPUs\n", name, g.Arch, g.Integrated, coherent, bw)
	}
	// Output:
	// jetson-tx2: pascal GPU, integrated true, coherent false, memory 59.7 GB/s shared with the CPUs
	// jetson-orin: ampere GPU, integrated true, coherent true, memory 204.8 GB/s shared with the CPUs
}

// A core on node 0 of a two-socket Sapphire Rapids reading node 1's
// memory: the idle load latency adds the UPI round trip, and one
// thread's bandwidth falls in proportion (Little's law over the line
// fills it keeps in flight); the link itself carries 4 × 32 GB/s × 8/9.
func ExampleSpec_ThreadRate() {
	s, err := platform.Preset("2s-4gpu-pcie")
	if err != nil {
		panic(err)
	}
	local := s.Nodes[0].MemcpyRate.V
	fmt.Println("latency:", s.LoadLatency(0, 0), "local,", s.LoadLatency(0, 1), "remote")
	fmt.Printf("one thread: %.1f GB/s local, %.2f GB/s remote\n", float64(local)/1e9, float64(s.ThreadRate(0, 1, local))/1e9)
	fmt.Printf("UPI: %.1f GB/s per direction\n", float64(s.SocketLinks[0].Rate())/1e9)
	// Output:
	// latency: 110ns local, 190ns remote
	// one thread: 10.0 GB/s local, 5.79 GB/s remote
	// UPI: 113.8 GB/s per direction
}
