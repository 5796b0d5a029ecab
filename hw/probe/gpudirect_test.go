package probe

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestGPUDirectOf(t *testing.T) {
	tests := []struct {
		name  string
		attrs map[string]int
		want  *GPUDirect
	}{
		{"not read", map[string]int{"dma_buf_supported": 1}, nil},
		// The H200 measured 2026-11-21 (testdata/h200-2026-11-21.json):
		// supported, flush by the host call, ordering owner.
		{"h200", map[string]int{"gpu_direct_rdma_supported": 1, "gpu_direct_rdma_with_cuda_vmm_supported": 1,
			"gpu_direct_rdma_flush_writes_options": 1, "gpu_direct_rdma_writes_ordering": 100},
			&GPUDirect{RDMASupported: true, RDMAWithVMM: true, FlushWritesOptions: []string{"host"}, WritesOrdering: "owner"}},
		{"host and memops", map[string]int{"gpu_direct_rdma_supported": 1, "gpu_direct_rdma_flush_writes_options": 3, "gpu_direct_rdma_writes_ordering": 100},
			&GPUDirect{RDMASupported: true, FlushWritesOptions: []string{"host", "memops"}, WritesOrdering: "owner"}},
		{"none", map[string]int{"gpu_direct_rdma_supported": 0, "gpu_direct_rdma_flush_writes_options": 0, "gpu_direct_rdma_writes_ordering": 0},
			&GPUDirect{FlushWritesOptions: []string{}, WritesOrdering: "none"}},
		{"all devices", map[string]int{"gpu_direct_rdma_supported": 1, "gpu_direct_rdma_flush_writes_options": 1, "gpu_direct_rdma_writes_ordering": 200},
			&GPUDirect{RDMASupported: true, FlushWritesOptions: []string{"host"}, WritesOrdering: "all_devices"}},
		{"odd ordering", map[string]int{"gpu_direct_rdma_supported": 1, "gpu_direct_rdma_writes_ordering": 7},
			&GPUDirect{RDMASupported: true, FlushWritesOptions: []string{}, WritesOrdering: "unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := GPUDirectOf(tt.attrs); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("GPUDirectOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPeerMemoryModules(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  *PeerMemoryModules
	}{
		{"nothing readable", map[string]string{"etc/": ""}, nil},
		{"none loaded", map[string]string{
			"proc/modules":        "nvidia 1 0 - Live 0x0\nib_core 1 0 - Live 0x0\n",
			"sys/module/nvidia/x": "",
		}, &PeerMemoryModules{Loaded: []string{}, Why: []string{}}},
		{"nvidia_peermem", map[string]string{
			"proc/modules":                "nvidia_peermem 16384 0 - Live 0x0\nnvidia 1 1 nvidia_peermem, Live 0x0\n",
			"sys/module/nvidia_peermem/x": "",
		}, &PeerMemoryModules{Loaded: []string{"nvidia_peermem"}, Why: []string{"proc/modules: nvidia_peermem", "sys/module/nvidia_peermem"}}},
		{"nv_peer_mem and gdrdrv from sysfs only", map[string]string{
			"sys/module/nv_peer_mem/x": "",
			"sys/module/gdrdrv/x":      "",
		}, &PeerMemoryModules{Loaded: []string{"nv_peer_mem", "gdrdrv"}, Why: []string{"sys/module/nv_peer_mem", "sys/module/gdrdrv"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, c := range tt.files {
				p = filepath.Join(root, p)
				if strings.HasSuffix(p, string(filepath.Separator)) || strings.HasSuffix(p, "/") {
					if err := os.MkdirAll(p, 0o755); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := readPeerMemoryModules(root); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("readPeerMemoryModules = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestGPUDirectInTable(t *testing.T) {
	r := &Report{GPUs: []GPUReport{{Capabilities: &Capabilities{GPUDirect: &GPUDirect{RDMASupported: true, FlushWritesOptions: []string{"host"}, WritesOrdering: "owner"}}}}}
	r.Machine.PeerMemory = &PeerMemoryModules{Loaded: []string{"nvidia_peermem"}}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"peer-memory modules: nvidia_peermem", "gpudirect rdma: supported true, with cuda vmm false, flush options [host], writes ordering owner"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
