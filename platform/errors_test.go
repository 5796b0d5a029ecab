package platform

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// base is a small valid platform; the error cases edit it, so the line
// numbers in their expectations count from here.
const base = `name: test
nodes:
  - id: 0
    cores: 4
    dram: 16 GiB
    dram_bandwidth: 50 GB/s
    memcpy_rate: 10 GB/s
root_complexes:
  - name: rc0
    node: 0
gpus:
  - name: gpu0
    arch: hopper
    parent: rc0
    link: {gen: 5, width: 16, efficiency: 0.9}
    vram: 80 GiB
    vram_bandwidth: 2 TB/s
    bar1: 128 GiB
    copy_engines: 2
`

func TestBaseIsValid(t *testing.T) {
	s, err := Parse("t.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if s.GPUs[0].VRAM.V != 80<<30 || s.GPUs[0].VRAMBandwidth.V != 2e12 || s.GPUs[0].Link.Efficiency.V != 0.9 {
		t.Errorf("decoded %+v", s.GPUs[0])
	}
}

// edit replaces old (which must occur once) in base by new.
func edit(t *testing.T, old, new string) string {
	t.Helper()
	if strings.Count(base, old) != 1 {
		t.Fatalf("%q is not in base exactly once", old)
	}
	return strings.Replace(base, old, new, 1)
}

// withCache adds a cache mapping to base's node, on line 8.
func withCache(t *testing.T, cache string) string {
	return edit(t, "    memcpy_rate: 10 GB/s\n", "    memcpy_rate: 10 GB/s\n    cache: "+cache+"\n")
}

// withDevice adds a coherent NIC to base, on line 21, with more fields.
func withDevice(fields string) string {
	return base + "devices:\n  - {name: nic0, kind: nic, parent: rc0, link: {gen: 3, width: 4, efficiency: 0.8}, dma_engines: 1, " + fields + "}\n"
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  func(t *testing.T) string
		want string
	}{
		{"unknown field", func(t *testing.T) string { return edit(t, "    vram: 80 GiB", "    vramm: 80 GiB") },
			`t.yaml:16: gpus[0].vramm: unknown field (did you mean "vram"?); fields here: name, model, arch, integrated, node, parent, link, noncoherent_dma, vram, vram_bandwidth, bar1, copy_engines, copy_overhead, copy_completion, sm_request, kernel_launch, alloc_cost, pin_cost, unpin_cost, pin_call_cost, unpin_call_cost, staging_rate, vram_latency, hub_latency, outstanding_reads, pageable_chunk, uvm`},
		{"unknown field in a parameter", func(t *testing.T) string { return edit(t, "    vram: 80 GiB", "    vram: {value: 80 GiB, sauce: x}") },
			`t.yaml:16: gpus[0].vram.sauce: unknown field; a parameter has value and source`},
		{"bad unit", func(t *testing.T) string { return edit(t, "80 GiB", "12 GiX") },
			`t.yaml:16: gpus[0].vram: bad size "12 GiX": unknown unit "GiX" (want B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB)`},
		{"fractional bytes", func(t *testing.T) string { return edit(t, "80 GiB", "1.5 B") },
			`t.yaml:16: gpus[0].vram: bad size "1.5 B": not a whole number of bytes`},
		{"bad rate unit", func(t *testing.T) string { return edit(t, "2 TB/s", "2 TB") },
			`t.yaml:17: gpus[0].vram_bandwidth: bad rate "2 TB": unknown unit "TB" (want ` + rateUnitList + `)`},
		{"bad duration in a parameter mapping", func(t *testing.T) string {
			return edit(t, "efficiency: 0.9}", "efficiency: 0.9, latency: {value: 5 parsecs, source: x}}")
		}, `t.yaml:15: gpus[0].link.latency: bad duration "5 parsecs": unknown unit "parsecs" (want ps, ns, us, ms or s)`},
		{"wrong kind: list for mapping", func(t *testing.T) string { return base + "fabric: [1, 2]\n" },
			`t.yaml:20: fabric: want a mapping, got a list`},
		{"wrong kind: mapping for list", func(t *testing.T) string { return base + "switches: {name: sw0}\n" },
			`t.yaml:20: switches: want a list, got a mapping`},
		{"wrong kind: list for a size", func(t *testing.T) string { return edit(t, "80 GiB", "[80, GiB]") },
			`t.yaml:16: gpus[0].vram: want a size like "141 GiB", got a list`},
		{"missing value", func(t *testing.T) string { return edit(t, "    vram: 80 GiB", "    vram:") },
			`t.yaml:16: gpus[0].vram: missing value: want a size like "141 GiB"`},
		{"missing field", func(t *testing.T) string { return edit(t, "    vram: 80 GiB\n", "") },
			`t.yaml:12: gpus[0].vram: missing: want a size like "141 GiB"`},
		{"missing parent", func(t *testing.T) string { return edit(t, "parent: rc0", "parent: rc9") },
			`t.yaml:14: gpus[0].parent: unknown parent "rc9" (root complexes and switches: rc0)`},
		{"parent of the wrong kind", func(t *testing.T) string {
			return base + "devices:\n  - {name: nic0, kind: nic, parent: gpu0, link: {gen: 4, width: 8, efficiency: 0.8}, dma_engines: 1}\n"
		}, `t.yaml:21: devices[0].parent: parent "gpu0" is a GPU; want a root complex or a switch`},
		{"duplicate name", func(t *testing.T) string { return edit(t, "  - name: gpu0", "  - name: rc0") },
			`t.yaml:12: gpus[0].name: duplicate name "rc0" (first at root_complexes[0].name, line 9)`},
		{"duplicate key", func(t *testing.T) string {
			return edit(t, "    arch: hopper\n", "    arch: hopper\n    arch: ampere\n")
		},
			`t.yaml:14: gpus[0].arch: duplicate key (first at line 13)`},
		{"bad gen", func(t *testing.T) string { return edit(t, "gen: 5", "gen: 7") },
			`t.yaml:15: gpus[0].link.gen: want 1..6, got 7`},
		{"bad width", func(t *testing.T) string { return edit(t, "width: 16", "width: 12") },
			`t.yaml:15: gpus[0].link.width: want 1, 2, 4, 8, 16 or 32 lanes, got 12`},
		{"efficiency above 1", func(t *testing.T) string { return edit(t, "efficiency: 0.9", "efficiency: 1.2") },
			`t.yaml:15: gpus[0].link.efficiency: want a number in (0, 1], got 1.2`},
		{"unknown arch", func(t *testing.T) string { return edit(t, "arch: hopper", "arch: hoper") },
			`t.yaml:13: gpus[0].arch: unknown arch "hoper" (known: kepler, maxwell, pascal, volta, turing, ampere, ada, hopper, blackwell)`},
		{"non-square distances", func(t *testing.T) string { return base + "distances:\n  - [10, 21]\n" },
			`t.yaml:21: distances[0]: want 1 entries, one per node, got 2`},
		{"too many distance rows", func(t *testing.T) string { return base + "distances:\n  - [10]\n  - [10]\n" },
			`t.yaml:21: distances: want 1 rows, one per node, got 2`},
		{"distance diagonal", func(t *testing.T) string { return base + "distances: [[11]]\n" },
			`t.yaml:20: distances[0][0]: want 10 on the diagonal (local), got 11`},
		{"negative latency", func(t *testing.T) string { return edit(t, "    node: 0\n", "    node: 0\n    latency: -5ns\n") },
			`t.yaml:11: root_complexes[0].latency: must not be negative, got -5ns`},
		{"no such node", func(t *testing.T) string { return edit(t, "    node: 0\n", "    node: 3\n") },
			`t.yaml:10: root_complexes[0].node: no node 3 (nodes are 0..0)`},
		{"explicit zero factor", func(t *testing.T) string { return base + "fabric: {bandwidth_factor: 0}\n" },
			`t.yaml:20: fabric.bandwidth_factor: must be positive (leave it out for the default 1), got 0`},
		{"unknown sharing", func(t *testing.T) string { return base + "fabric: {sharing: fair}\n" },
			`t.yaml:20: fabric.sharing: unknown sharing "fair": want max-min or lv08 (or leave it out for max-min)`},
		{"weight_s without lv08", func(t *testing.T) string { return base + "fabric: {weight_s: 100}\n" },
			`t.yaml:20: fabric.weight_s: applies to lv08 sharing only (set fabric.sharing: lv08)`},
		{"negative weight_s", func(t *testing.T) string { return base + "fabric: {sharing: lv08, weight_s: -1}\n" },
			`t.yaml:20: fabric.weight_s: must be positive (leave it out for SimGrid's 20537), got -1`},
		{"nvlink to a root complex", func(t *testing.T) string {
			return base + "nvlinks:\n  - {a: gpu0, b: rc0, links: 2, link_rate: 25 GB/s, efficiency: 1}\n"
		},
			`t.yaml:21: nvlinks[0].b: "rc0" is a root complex; NVLink joins GPUs and NVSwitches`},
		{"integer out of range", func(t *testing.T) string { return edit(t, "cores: 4", "cores: 99999999999999999999") },
			`t.yaml:4: nodes[0].cores: bad integer "99999999999999999999": out of range`},
		{"merge key", func(t *testing.T) string { return edit(t, "    arch: hopper\n", "    <<: {arch: hopper}\n") },
			`t.yaml:13: gpus[0]: merge keys (<<) are not supported: alias a whole value instead`},
		{"malformed YAML", func(t *testing.T) string { return edit(t, "arch: hopper", "arch: [hopper") },
			`t.yaml:13: malformed YAML: did not find expected ',' or ']'`},
		{"tab indentation", func(t *testing.T) string { return edit(t, "    arch: hopper", "\tarch: hopper") },
			`t.yaml:13: malformed YAML: found a tab character that violates indentation`},
		{"empty document", func(t *testing.T) string { return "# nothing here\n" },
			`t.yaml: empty document: want a mapping with name, nodes, root_complexes, ...`},
		{"null document", func(t *testing.T) string { return "---\n~\n" },
			`t.yaml:2: empty document: want a mapping with name, nodes, root_complexes, ...`},
		{"not a mapping", func(t *testing.T) string { return "- a\n- b\n" },
			`t.yaml:1: want a mapping with name, nodes, root_complexes, ..., got a list`},
		{"two documents", func(t *testing.T) string { return base + "---\nname: other\n" },
			`t.yaml:20: a second YAML document: a platform file holds one`},
		{"undefined alias", func(t *testing.T) string { return edit(t, "80 GiB", "*nope") },
			`t.yaml:16: malformed YAML: unknown anchor 'nope' referenced`},
		{"bad line size", func(t *testing.T) string { return withCache(t, "{line_size: 48 B}") },
			`t.yaml:8: nodes[0].cache.line_size: want a power of two from 16 B to 256 B (leave it out for the default 64 B), got 48 B`},
		{"line size too large", func(t *testing.T) string { return withCache(t, "{line_size: 512 B}") },
			`t.yaml:8: nodes[0].cache.line_size: want a power of two from 16 B to 256 B (leave it out for the default 64 B), got 512 B`},
		{"cache smaller than a line", func(t *testing.T) string { return withCache(t, "{line_size: 128, size: 64}") },
			`t.yaml:8: nodes[0].cache.size: want at least one line (128 B), got 64 B`},
		{"prefetch out of range", func(t *testing.T) string { return withCache(t, "{prefetch: 65}") },
			`t.yaml:8: nodes[0].cache.prefetch: want 0..64 lines, got 65`},
		{"negative maintenance cost", func(t *testing.T) string { return withCache(t, "{invalidate_cost: -1ns}") },
			`t.yaml:8: nodes[0].cache.invalidate_cost: must not be negative, got -1ns`},
		{"zero uncached rate", func(t *testing.T) string { return withCache(t, "{uncached_rate: 0}") },
			`t.yaml:8: nodes[0].cache.uncached_rate: must be positive, got 0`},
		{"unknown cache field", func(t *testing.T) string { return withCache(t, "{linesize: 64}") },
			`t.yaml:8: nodes[0].cache.linesize: unknown field (did you mean "line_size"?); fields here: line_size, size, prefetch, writeback_cost, invalidate_cost, uncached_rate`},
		{"bad mask bits", func(t *testing.T) string { return withDevice("dma_mask_bits: 16") },
			`t.yaml:21: devices[0].dma_mask_bits: want 24..64 address bits (leave it out for the default 64), got 16`},
		{"zero mask bits written", func(t *testing.T) string { return withDevice("dma_mask_bits: {value: 0, source: x}") },
			`t.yaml:21: devices[0].dma_mask_bits: want 24..64 address bits (leave it out for the default 64), got 0`},
		{"short max segment", func(t *testing.T) string { return withDevice("max_segment: 256") },
			`t.yaml:21: devices[0].max_segment: want at least 512 B (leave it out for the default 64 KiB), got 256 B`},
		{"segment boundary not a power of two", func(t *testing.T) string { return withDevice("segment_boundary: 12 KiB") },
			`t.yaml:21: devices[0].segment_boundary: want a power of two of at least 4 KiB (leave it out for the default 4 GiB), got 12 KiB`},
		{"segment boundary below a page", func(t *testing.T) string { return withDevice("segment_boundary: 2 KiB") },
			`t.yaml:21: devices[0].segment_boundary: want a power of two of at least 4 KiB (leave it out for the default 4 GiB), got 2 KiB`},
		{"unknown device kind", func(t *testing.T) string {
			return strings.Replace(withDevice("max_segment: 4 KiB"), "kind: nic", "kind: dmaa", 1)
		},
			`t.yaml:21: devices[0].kind: unknown kind "dmaa" (known: nic, nvme, dma, camera, isp, display)`},
		{"camera without line rate", func(t *testing.T) string {
			return base + "devices:\n  - {name: cam0, kind: camera, parent: rc0, link: {bandwidth: 4 GB/s}, dma_engines: 1}\n"
		}, `t.yaml:21: devices[0].line_rate: missing`},
		{"camera with zero line rate", func(t *testing.T) string {
			return base + "devices:\n  - {name: cam0, kind: camera, parent: rc0, link: {bandwidth: 4 GB/s}, line_rate: 0, dma_engines: 1}\n"
		}, `t.yaml:21: devices[0].line_rate: a camera needs its input link's rate`},
		{"isp without pixel rate", func(t *testing.T) string {
			return base + "devices:\n  - {name: isp0, kind: isp, parent: rc0, link: {bandwidth: 4 GB/s}, dma_engines: 1}\n"
		}, `t.yaml:21: devices[0].pixel_rate: missing: want a number`},
		{"display with negative pixel rate", func(t *testing.T) string {
			return base + "devices:\n  - {name: dc0, kind: display, parent: rc0, link: {bandwidth: 4 GB/s}, pixel_rate: -1, dma_engines: 1}\n"
		}, `t.yaml:21: devices[0].pixel_rate: must be positive, got -1`},
		{"pixel rate on a nic", func(t *testing.T) string { return withDevice("pixel_rate: 1e9") },
			`t.yaml:21: devices[0].pixel_rate: only a device of kind isp or display has one, not "nic"`},
		{"swiotlb not a whole number of slots", func(t *testing.T) string { return base + "swiotlb: 3 KiB\n" },
			`t.yaml:20: swiotlb: want a positive multiple of 2 KiB, swiotlb's slot size IO_TLB_SIZE (leave it out for the default 64 MiB), got 3 KiB`},
		{"link bandwidth with gen", func(t *testing.T) string {
			return base + "devices:\n  - {name: dma0, kind: dma, parent: rc0, link: {gen: 2, bandwidth: 1 GB/s}, dma_engines: 1}\n"
		}, `t.yaml:21: devices[0].link.gen: want it left out: the link's bandwidth replaces gen x width x efficiency`},
		{"link bandwidth zero", func(t *testing.T) string {
			return base + "devices:\n  - {name: dma0, kind: dma, parent: rc0, link: {bandwidth: 0}, dma_engines: 1}\n"
		}, `t.yaml:21: devices[0].link.bandwidth: must be positive, got 0`},
		{"bad boolean", func(t *testing.T) string { return edit(t, "    node: 0\n", "    node: 0\n    noncoherent_dma: yes\n") },
			`t.yaml:11: root_complexes[0].noncoherent_dma: bad boolean "yes": want true or false`},
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

func TestParseCycle(t *testing.T) {
	doc := base + `switches:
  - name: sw0
    parent: sw1
    link: {gen: 5, width: 16, efficiency: 0.9}
  - name: sw1
    parent: sw0
    link: {gen: 5, width: 16, efficiency: 0.9}
`
	_, err := Parse("t.yaml", []byte(doc))
	want := `t.yaml:22: switches[0].parent: cycle among switches: sw0 -> sw1 -> sw0`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestParseSeveralErrors(t *testing.T) {
	doc := edit(t, "parent: rc0", "parent: rc9")
	doc = strings.Replace(doc, "gen: 5", "gen: 9", 1)
	doc = strings.Replace(doc, "cores: 4", "cores: 0", 1)
	_, err := Parse("t.yaml", []byte(doc))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %T, want an ErrorList: %v", err, err)
	}
	want := strings.Join([]string{
		`t.yaml:4: nodes[0].cores: must be positive, got 0`,
		`t.yaml:14: gpus[0].parent: unknown parent "rc9" (root complexes and switches: rc0)`,
		`t.yaml:15: gpus[0].link.gen: want 1..6, got 9`,
	}, "\n")
	if err.Error() != want {
		t.Errorf("error\n got: %s\nwant: %s", err, want)
	}
}

func TestParseErrorCap(t *testing.T) {
	var b strings.Builder
	b.WriteString(base)
	b.WriteString("nvswitches:\n")
	for i := range MaxErrors + 5 {
		fmt.Fprintf(&b, "  - {name: nv%d, bogus: 1}\n", i)
	}
	_, err := Parse("t.yaml", []byte(b.String()))
	var list ErrorList
	if !errors.As(err, &list) || len(list) != MaxErrors+1 {
		t.Fatalf("got %d errors, want %d and a count: %v", len(list), MaxErrors+1, err)
	}
	if got := list[MaxErrors].Error(); got != "t.yaml: too many errors: 5 more not shown" {
		t.Errorf("last error = %s", got)
	}
}

func TestValidateGoSpec(t *testing.T) {
	s, _ := Preset("h200-pcie")
	s.GPUs[0].Parent = "nowhere"
	s.GPUs[0].Link.Gen = 0
	s.Switches = append(s.Switches, Switch{Name: "gpu0", Parent: "rc0", Link: PCIeLink{Gen: 5, Width: 16, Efficiency: P(1.0, "")}})
	err := s.Validate()
	want := strings.Join([]string{
		`h200-pcie: gpus[0].name: duplicate name "gpu0" (first at switches[0].name)`,
		`h200-pcie: gpus[0].parent: unknown parent "nowhere" (root complexes and switches: rc0, gpu0)`,
		`h200-pcie: gpus[0].link.gen: missing`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("error\n got: %v\nwant: %s", err, want)
	}
	if _, err := Marshal(s); err == nil {
		t.Error("Marshal wrote an invalid spec")
	}
	if err := (&Spec{}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "spec: name: missing") {
		t.Errorf("empty spec: %v", err)
	}
}

func TestAliases(t *testing.T) {
	doc := edit(t, "    vram: 80 GiB", "    vram: &v {value: 80 GiB, source: shared}") +
		"  - {name: gpu1, arch: ampere, parent: rc0, link: {gen: 4, width: 16, efficiency: 0.9}, vram: *v, vram_bandwidth: 1 TB/s, bar1: 1 GiB, copy_engines: 1}\n"
	s, err := Parse("t.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if s.GPUs[1].VRAM != P(Bytes(80<<30), "shared") {
		t.Errorf("aliased vram = %+v", s.GPUs[1].VRAM)
	}
}

func TestAliasBomb(t *testing.T) {
	// 1000 aliases of a 1000-entry row: a few kilobytes that expand to a
	// million values.
	var b strings.Builder
	b.WriteString(base)
	b.WriteString("distances:\n  - &r [10")
	for range 999 {
		b.WriteString(", 21")
	}
	b.WriteString("]\n")
	for range 999 {
		b.WriteString("  - *r\n")
	}
	_, err := Parse("t.yaml", []byte(b.String()))
	want := "t.yaml:21: distances[199][773]: document too large: more than 200000 values (aliases expanded)"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}
