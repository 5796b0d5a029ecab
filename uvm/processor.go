package uvm

import (
	"fmt"
	"math/bits"
	"strings"
)

// Processor is a processor of the VA space that can fault on, hold and
// map managed memory: the CPU or a GPU (uvm_processor_id_t, where the CPU
// is id 0 and GPUs follow).
type Processor int8

// CPU is the CPU; GPU(i) is GPU i.
const CPU Processor = 0

// NoProcessor is UVM_ID_INVALID: an unset preferred location, no
// residency.
const NoProcessor Processor = -1

// MaxGPUs is the most GPUs a Driver models (a ProcSet is one word).
const MaxGPUs = 63

// GPU is GPU i.
func GPU(i int) Processor { return Processor(i + 1) }

// IsCPU reports whether p is the CPU.
func (p Processor) IsCPU() bool { return p == CPU }

// IsGPU reports whether p is a GPU.
func (p Processor) IsGPU() bool { return p > CPU }

// GPUIndex is i for GPU(i); -1 for the CPU or NoProcessor.
func (p Processor) GPUIndex() int {
	if p <= CPU {
		return -1
	}
	return int(p) - 1
}

func (p Processor) String() string {
	switch {
	case p == CPU:
		return "cpu"
	case p > CPU:
		return fmt.Sprintf("gpu%d", p.GPUIndex())
	}
	return "none"
}

// ProcSet is a set of processors (uvm_processor_mask_t).
type ProcSet uint64

// Has reports whether p is in s.
func (s ProcSet) Has(p Processor) bool { return p >= 0 && s&(1<<uint(p)) != 0 }

// With is s plus p.
func (s ProcSet) With(p Processor) ProcSet { return s | 1<<uint(p) }

// Without is s less p.
func (s ProcSet) Without(p Processor) ProcSet { return s &^ (1 << uint(p)) }

// Count is the number of processors in s.
func (s ProcSet) Count() int { return bits.OnesCount64(uint64(s)) }

// First is the lowest processor in s, or NoProcessor.
func (s ProcSet) First() Processor {
	if s == 0 {
		return NoProcessor
	}
	return Processor(bits.TrailingZeros64(uint64(s)))
}

// SubsetOf reports whether every processor of s is in t.
func (s ProcSet) SubsetOf(t ProcSet) bool { return s&^t == 0 }

func (s ProcSet) String() string {
	var names []string
	for p := Processor(0); p < 64; p++ {
		if s.Has(p) {
			names = append(names, p.String())
		}
	}
	return "{" + strings.Join(names, ",") + "}"
}

// Generation is how a GPU takes part in unified memory. The CUDA
// programming guide and NVIDIA's "How does NVIDIA implement unified
// memory on PCIe GPUs and Tegra platforms?" split GPUs into three
// models.
type Generation int

const (
	// PascalPlus: Pascal and later discrete GPUs (pascal, volta, turing,
	// ampere, ada, hopper, blackwell). The GPU faults on managed memory,
	// the driver migrates pages on demand, CPU and GPU may access
	// managed memory concurrently (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS
	// = 1, measured on the H200 here).
	PascalPlus Generation = iota + 1
	// PrePascal: Kepler and Maxwell (and Windows, per NVIDIA's unified
	// memory note above). No GPU page faults: every managed page the
	// CPU dirtied migrates to the GPU at kernel launch, and the CPU
	// must not touch managed memory while a kernel runs (a segmentation
	// fault).
	PrePascal
	// Tegra: an integrated GPU (Jetson). Managed memory is one
	// allocation in the SoC's shared DRAM, cached on both sides and kept
	// coherent by cache maintenance at kernel launch; no migration and no
	// concurrent access (the same NVIDIA note).
	Tegra
)

func (g Generation) String() string {
	switch g {
	case PascalPlus:
		return "pascal-plus"
	case PrePascal:
		return "pre-pascal"
	case Tegra:
		return "tegra"
	}
	return fmt.Sprintf("Generation(%d)", int(g))
}

// ConcurrentAccess is CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: may
// the CPU touch managed memory while a kernel runs on the GPU?
func (g Generation) ConcurrentAccess() bool { return g == PascalPlus }

// GenerationOf maps a platform's GPU arch (kepler ... blackwell) and its
// integrated flag to the unified-memory model.
func GenerationOf(arch string, integrated bool) (Generation, error) {
	if integrated {
		return Tegra, nil
	}
	switch arch {
	case "kepler", "maxwell":
		return PrePascal, nil
	case "pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell":
		return PascalPlus, nil
	}
	return 0, fmt.Errorf("GPU arch %q: %w", arch, ErrInvalidValue)
}

// PinnedCacheability says how pinned host memory (cuMemHostAlloc) is
// mapped: cached on the CPU and on the GPU or not. NVIDIA's "How does
// NVIDIA implement unified memory on PCIe GPUs and Tegra platforms?":
// on Tegra, pinned memory is uncached on the iGPU, and uncached on the
// CPU too before Xavier (no I/O coherence); from Xavier on (ioCoherent)
// it is cacheable on the CPU. A discrete GPU reaches pinned memory over
// PCIe, which snoops the CPU caches: cacheable on the CPU, not cached
// by the GPU.
func PinnedCacheability(g Generation, ioCoherent bool) (cpuCached, gpuCached bool) {
	if g == Tegra {
		return ioCoherent, false
	}
	return true, false
}

// Link is how one processor reaches another's memory.
type Link int

const (
	// LinkNone: no mapping of the other's memory (peer access off).
	LinkNone Link = iota
	// LinkPCIe: mapped over PCIe (GPU to system memory, peer GPUs below
	// a common switch or root complex). No native atomics.
	LinkPCIe
	// LinkNVLink: NVLink (GPU peers; NVLink-C2C or NVLink to a POWER9
	// or Grace CPU): fast, with native atomics, and the CPU can map GPU
	// memory.
	LinkNVLink
)

func (l Link) String() string {
	switch l {
	case LinkNone:
		return "none"
	case LinkPCIe:
		return "pcie"
	case LinkNVLink:
		return "nvlink"
	}
	return fmt.Sprintf("Link(%d)", int(l))
}
