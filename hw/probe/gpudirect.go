package probe

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/dmalab/dmalab/hw/cuda"
)

// GPUDirect is a GPU's GPUDirect RDMA capabilities, decoded from its
// device attributes (cuda.h): what a third-party device may do with its
// memory, and what the application must do to order the writes.
type GPUDirect struct {
	// RDMASupported is CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED;
	// RDMAWithVMM is ..._GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED.
	RDMASupported bool `json:"rdma_supported"`
	RDMAWithVMM   bool `json:"rdma_with_cuda_vmm"`
	// FlushWritesOptions decodes
	// CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS: "host"
	// (CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST: cuFlushGPUDirectRDMAWrites
	// works) and "memops" (..._OPTION_MEMOPS: a stream memory operation
	// can flush them).
	FlushWritesOptions []string `json:"flush_writes_options"`
	// WritesOrdering decodes CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING:
	// "none" (0: the application must flush before consuming RDMA
	// writes), "owner" (100: writes are ordered for the GPU's own
	// work), "all_devices" (200: for every device); "unknown" otherwise.
	WritesOrdering string `json:"writes_ordering"`
}

// Values of the attributes, as cuda.h defines them.
const (
	flushOptionHost      = 1 << 0 // CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST
	flushOptionMemops    = 1 << 1 // CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_MEMOPS
	writesOrderingNone   = 0      // CU_GPU_DIRECT_RDMA_WRITES_ORDERING_NONE
	writesOrderingOwner  = 100    // CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER
	writesOrderingAllDev = 200    // CU_GPU_DIRECT_RDMA_WRITES_ORDERING_ALL_DEVICES
)

// GPUDirectOf decodes the attributes (DeviceInfo.Attributes); nil when
// the GPUDirect RDMA attribute was not read.
func GPUDirectOf(attrs map[string]int) *GPUDirect {
	sup, ok := attrs[cuda.AttrGPUDirectRDMASupported.String()]
	if !ok {
		return nil
	}
	g := &GPUDirect{RDMASupported: sup != 0, RDMAWithVMM: attrs[cuda.AttrGPUDirectRDMAWithCUDAVMMSupported.String()] != 0,
		FlushWritesOptions: []string{}}
	opts := attrs[cuda.AttrGPUDirectRDMAFlushWritesOptions.String()]
	if opts&flushOptionHost != 0 {
		g.FlushWritesOptions = append(g.FlushWritesOptions, "host")
	}
	if opts&flushOptionMemops != 0 {
		g.FlushWritesOptions = append(g.FlushWritesOptions, "memops")
	}
	switch attrs[cuda.AttrGPUDirectRDMAWritesOrdering.String()] {
	case writesOrderingNone:
		g.WritesOrdering = "none"
	case writesOrderingOwner:
		g.WritesOrdering = "owner"
	case writesOrderingAllDev:
		g.WritesOrdering = "all_devices"
	default:
		g.WritesOrdering = "unknown"
	}
	return g
}

// PeerMemoryModules are the kernel modules that give RDMA devices
// access to GPU memory, as loaded on the machine: nvidia_peermem (in the
// GPU driver since R470), nv_peer_mem (Mellanox's, before it) and
// gdrdrv (gdrcopy's CPU mappings of BAR1). The probe reads; it never
// builds or loads a module.
type PeerMemoryModules struct {
	// Loaded are the modules found, in the order above.
	Loaded []string `json:"loaded"`
	// Why is the evidence: "proc/modules: nvidia_peermem",
	// "sys/module/gdrdrv".
	Why []string `json:"why"`
}

// peerModuleNames are the modules PeerMemoryModules looks for.
var peerModuleNames = []string{"nvidia_peermem", "nv_peer_mem", "gdrdrv"}

// readPeerMemoryModules reads /proc/modules and /sys/module under root
// ("/" for this machine); nil when neither can be read.
func readPeerMemoryModules(root string) *PeerMemoryModules {
	mods, errMods := os.ReadFile(filepath.Join(root, "proc", "modules"))
	_, errSys := os.Stat(filepath.Join(root, "sys", "module"))
	if errMods != nil && errSys != nil {
		return nil
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(mods), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			listed[f[0]] = true
		}
	}
	m := &PeerMemoryModules{Loaded: []string{}, Why: []string{}}
	for _, name := range peerModuleNames {
		found := false
		if listed[name] {
			m.Why = append(m.Why, "proc/modules: "+name)
			found = true
		}
		if _, err := os.Stat(filepath.Join(root, "sys", "module", name)); err == nil {
			m.Why = append(m.Why, "sys/module/"+name)
			found = true
		}
		if found {
			m.Loaded = append(m.Loaded, name)
		}
	}
	return m
}
