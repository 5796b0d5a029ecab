package platform

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBounds: every count a platform gives has an upper bound, checked
// in validation, so --set copy_engines=100000000 is an error at once
// rather than 14 GB of copy engines.
func TestBounds(t *testing.T) {
	for _, tt := range []struct {
		preset, path, value string
		want                string
	}{
		{"h200-pcie", "gpus.gpu0.copy_engines", "100000000", "gpus[0].copy_engines: want at most 64 copy engines"},
		{"h200-pcie", "gpus.gpu0.copy_engines", "65", "want at most 64"},
		{"h200-pcie", "nodes.0.cores", "1000000", "nodes[0].cores: want at most 8192 cores"},
		{"2s-4gpu-pcie", "devices.nic0.dma_engines", "10000000", "devices[0].dma_engines: want at most 65536"},
		{"dgx-h100", "nvlinks.0.links", "1000", "nvlinks[0].links: want at most 64 links"},
	} {
		t.Run(tt.path+"="+tt.value, func(t *testing.T) {
			s, err := Preset(tt.preset)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Set(s, tt.path, tt.value)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Set(%s=%s) = %v, want an error saying %q", tt.path, tt.value, err, tt.want)
			}
		})
	}
	// At the bound itself, the platform is valid.
	s, _ := Preset("h200-pcie")
	if _, err := Set(s, "gpus.gpu0.copy_engines", fmt.Sprint(MaxCopyEngines)); err != nil {
		t.Errorf("copy_engines=%d: %v", MaxCopyEngines, err)
	}
}

// TestListBounds: lists longer than their bound are reported by length,
// in a Go spec and in a file.
func TestListBounds(t *testing.T) {
	s, _ := Preset("h200-pcie")
	g := s.GPUs[0]
	for i := range MaxGPUs + 1 {
		g.Name = fmt.Sprintf("g%d", i)
		s.GPUs = append(s.GPUs, g)
	}
	s.GPUs = s.GPUs[1:]
	err := s.Validate()
	if err == nil || !strings.Contains(err.Error(), "gpus: 33 entries: want at most 32 GPUs") {
		t.Errorf("33 GPUs: %v", err)
	}
	var b strings.Builder
	b.WriteString(base)
	for i := range MaxGPUs {
		fmt.Fprintf(&b, "  - {name: x%d, arch: hopper, parent: rc0, link: {gen: 5, width: 16, efficiency: 0.9}, vram: 1 GiB, vram_bandwidth: 1 TB/s, bar1: 1 GiB, copy_engines: 1}\n", i)
	}
	_, err = Parse("t.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "t.yaml:12: gpus: 33 entries") {
		t.Errorf("a file with 33 GPUs: %v", err)
	}
}

// TestLoadRefuses: Load reads only regular files of at most MaxFileSize,
// and refuses anything else before reading it (platform check
// /dev/zero read until it ran out of memory).
func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, append([]byte(base), make([]byte, MaxFileSize)...), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(ok, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ path, want string }{
		{dir, "a directory, not a regular file"},
		{big, "larger than the 16 MiB"},
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		cases = append(cases, struct{ path, want string }{"/dev/zero", "a character device, not a regular file"})
	}
	for _, c := range cases {
		if _, err := Load(c.path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%s) = %v, want an error saying %q", c.path, err, c.want)
		}
	}
	if _, err := Load(ok); err != nil {
		t.Errorf("Load of a small regular file: %v", err)
	}
}
