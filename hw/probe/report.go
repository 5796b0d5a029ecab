package probe

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dmalab/dmalab/xfer"
)

// Schema names the JSON layout written by WriteJSON. Field names are stable
// snake_case; a change that removes or renames one changes the version.
const Schema = "dmalab.probe/v1"

// Measurement families: the value of Measurement.Family.
const (
	// FamilyCE: copy-engine copies (cuMemcpy*Async) of pinned,
	// write-combined and registered host memory and device-to-device,
	// queued behind the spin kernel and timed with CUDA events. Bandwidth.
	FamilyCE = "ce_copy"
	// FamilySM: the copy kernel reading and writing mapped host memory
	// (zero-copy) or device memory, queued behind the spin kernel and
	// timed with CUDA events. Bandwidth.
	FamilySM = "sm_copy"
	// FamilySync: synchronous copies (cuMemcpyHtoD/DtoH), including
	// pageable memory, timed with the host clock. Bandwidth.
	FamilySync = "sync_copy"
	// FamilyCallTime: the time of one synchronous small copy, per call,
	// host clock. Microseconds.
	FamilyCallTime = "sync_call"
	// FamilyCallOverhead: one trivial driver call through the binding
	// (cuDriverGetVersion), host clock. Microseconds.
	FamilyCallOverhead = "call_overhead"
	// FamilyHostMemcpy: one CPU thread copying, host clock. Bandwidth.
	// Operation memcpy: the C library's memcpy, pageable to pinned memory
	// (what C programs and the CUDA driver's staging copies get; absent
	// when the C library cannot be loaded). go_copy: Go's copy, the same
	// copy. stream_out: a staging ring's copy-out, 1 MiB pieces from two
	// cache-resident 1 MiB halves of pinned memory into the whole pageable
	// buffer with Go's copy (non-temporal stores on amd64).
	FamilyHostMemcpy = "host_memcpy"
	// FamilyPin: cuMemHostRegister and cuMemHostUnregister of pageable
	// memory, per call, host clock. Microseconds.
	FamilyPin = "pin"
	// FamilyLatency: one GPU thread chasing pointers through mapped host
	// memory (a round trip over the bus per load) and through device
	// memory, timed inside the kernel. Nanoseconds per load.
	FamilyLatency = "latency"
	// FamilyUnified: managed memory (cuMemAllocManaged): CPU first touch,
	// prefetch each way, GPU fault-driven migration (page-touch kernel,
	// read and write), single-thread per-fault latency by stride with the
	// slow touches of each 2 MiB block, CPU fault-back after GPU residency,
	// and GPU access to host-resident pages under AccessedBy and
	// PreferredLocation(CPU).
	FamilyUnified = "unified"
	// FamilyRegcache: the regcache package over cuMemHostRegister of
	// resident pageable memory, per Get, host clock: a miss, a hit, a
	// miss that merges, a hit after the merge, the invalidation of freed
	// memory and a Get after munmap and mmap at the same address.
	// Microseconds.
	FamilyRegcache = "regcache"
	// FamilyCapabilities is not a measurement: it selects the capability
	// checks (dma-buf export, buffer ids) in Options.Families.
	FamilyCapabilities = "capabilities"
)

// Unified-memory paths: the value of Measurement.Path for FamilyUnified.
const (
	PathManagedPrefetch = string(xfer.ManagedPrefetch) // cuMemPrefetchAsync
	PathManagedFault    = string(xfer.ManagedFault)    // GPU page faults migrate the data
	PathManagedCPUFault = string(xfer.ManagedCPUFault) // CPU page faults populate or migrate it back
	PathManagedRemote   = string(xfer.ManagedRemote)   // the GPU maps host-resident pages (advice)
)

// Families lists every family in the order Run measures them.
var Families = []string{
	FamilyCapabilities, FamilyCallOverhead, FamilyLatency, FamilyCE, FamilySM, FamilySync,
	FamilyCallTime, FamilyHostMemcpy, FamilyPin, FamilyUnified,
}

// OptInFamilies are families Run measures only when Options.Families names
// them: regcache frees and maps its memory again every sample, which at
// 256 MiB takes longer than a default run should.
var OptInFamilies = []string{FamilyRegcache}

// Measurement methods: the value of Measurement.Method.
const (
	// MethodSpinEvents: the operations are queued on a stream held by the
	// spin kernel (so their enqueue cost is excluded), Warmup of them
	// untimed, then Repetitions between two CUDA events; the spin is then
	// released (nvbandwidth's method).
	MethodSpinEvents = "spin_events"
	// MethodHostTimer: Warmup untimed calls, then Repetitions calls timed
	// with the host's monotonic clock; for paths synchronous by nature.
	MethodHostTimer = "host_timer"
	// MethodEvents: the operation is queued on an idle stream between two
	// CUDA events, for work that cannot wait behind a spin kernel (the
	// driver may act on it when it is queued).
	MethodEvents = "events"
	// MethodKernelTimer: the kernel times itself with %globaltimer.
	MethodKernelTimer = "kernel_timer"
)

// Directions: the value of Measurement.Direction.
const (
	H2D   = string(xfer.H2D)
	D2H   = string(xfer.D2H)
	Bidir = string(xfer.Bidir) // h2d and d2h at once, on two streams
	D2D   = string(xfer.D2D)
)

// Units: the value of Measurement.Unit.
const (
	UnitGBps = "GB/s" // 10^9 bytes per second
	UnitUs   = "us"   // microseconds per operation
	UnitNs   = "ns"   // nanoseconds per operation
)

// Report is the result of Run: the machine and, per GPU, every measurement.
type Report struct {
	Schema  string      `json:"schema"`
	Started time.Time   `json:"started"`
	Machine Machine     `json:"machine"`
	Options ReportOpts  `json:"options"`
	GPUs    []GPUReport `json:"gpus"`
}

// ReportOpts records the options a report was measured with.
type ReportOpts struct {
	Sizes       []int64 `json:"sizes_bytes"`
	SmallSizes  []int64 `json:"small_sizes_bytes"`
	Samples     int     `json:"samples"`
	Warmup      int     `json:"warmup"`
	Repetitions int     `json:"repetitions"`
}

// GPUReport holds one GPU's results.
type GPUReport struct {
	Device       DeviceInfo    `json:"device"`
	MemFreeBytes int64         `json:"mem_free_bytes"`
	Capabilities *Capabilities `json:"capabilities,omitempty"`
	Measurements []Measurement `json:"measurements"`
	// Errors lists the families that failed, with why.
	Errors []string `json:"errors,omitempty"`
}

// Capabilities holds what the GPU was seen to do, beyond its attributes.
type Capabilities struct {
	// DMABufExport: cuMemGetHandleForAddressRange returned a dma-buf fd
	// for device memory. DMABufError says why not.
	DMABufExport bool   `json:"dma_buf_export"`
	DMABufError  string `json:"dma_buf_error,omitempty"`
	// DMABufFDInfo is what the kernel said of the first export's fd
	// (/proc/self/fdinfo); DMABufFDInfoError why it could not be read
	// or parsed.
	DMABufFDInfo      *DMABufFDInfo `json:"dma_buf_fdinfo,omitempty"`
	DMABufFDInfoError string        `json:"dma_buf_fdinfo_error,omitempty"`
	// DMABufExportMicros is the export call's time in microseconds over
	// DMABufExportValues, one per export (the fd closed between them).
	DMABufExportMicros *Stat     `json:"dma_buf_export_us,omitempty"`
	DMABufExportValues []float64 `json:"dma_buf_export_us_values,omitempty"`
	// BufferIDs: CU_POINTER_ATTRIBUTE_BUFFER_ID of an allocation, and of
	// the next allocation of the same size after it was freed.
	BufferIDFirst      uint64 `json:"buffer_id_first"`
	BufferIDReallocate uint64 `json:"buffer_id_reallocated"`
	BufferIDChanges    bool   `json:"buffer_id_changes"`
	// PeerAccess lists the GPUs this one and that one can each map.
	PeerAccess []int `json:"peer_access,omitempty"`
	// GPUDirect summarises the GPUDirect RDMA attributes; nil in
	// reports written before it was recorded.
	GPUDirect *GPUDirect `json:"gpudirect,omitempty"`
}

// Measurement is one measured quantity with its method and statistics.
type Measurement struct {
	Family    string `json:"family"`
	Path      string `json:"path"`                // a MemKind name, or "null_call"
	Direction string `json:"direction,omitempty"` // h2d, d2h, bidir, d2d
	Operation string `json:"operation,omitempty"` // pin: register or unregister; host_memcpy: memcpy, go_copy or stream_out; unified: first_touch, read, write, ...
	Method    string `json:"method"`
	SizeBytes int64  `json:"size_bytes"`
	// Repetitions is the number of operations per sample, Warmup the
	// untimed ones before them, Samples the number of samples.
	Repetitions int    `json:"repetitions"`
	Warmup      int    `json:"warmup"`
	Samples     int    `json:"samples"`
	Unit        string `json:"unit"`
	Stat
	// Values holds each sample, in the order measured.
	Values []float64 `json:"values"`
	// Verified: the data was checked against the source pattern after
	// every sample (a failed check fails the measurement instead).
	Verified bool `json:"verified"`
	// PerDirection, for bidir: each direction's own bandwidth over its own
	// span while the other ran. The plain keys (h2d, d2h; write, read)
	// are nvbandwidth's method, the other direction given twice the work
	// so that it runs for the whole measured span; the keys ending in
	// SameSizeSuffix are the equal-work run the value comes from, where
	// the slower direction's figure includes its tail alone (higher than
	// nvbandwidth's). Reports written before both were recorded have
	// only the plain keys, measured with equal work.
	PerDirection map[string]Stat `json:"per_direction,omitempty"`
	// StrideBytes is the distance between accesses of touch and chase
	// measurements.
	StrideBytes int64 `json:"stride_bytes,omitempty"`
	// PeerGPU is the other GPU of a peer measurement: "write" copies go
	// from this GPU's memory to the peer's, "read" copies the other way,
	// both in this GPU's context.
	PeerGPU *int `json:"peer_gpu,omitempty"`
	// Regcache, on the regcache family's stale_get measurement: whether
	// the freed memory came back at its address and was registered
	// again, and the cache's statistics.
	Regcache *RegcacheCheck `json:"regcache,omitempty"`
	// Blocks, for single-thread fault latency: per 2 MiB block, which
	// touches (by index within the block, in the order made) were slow
	// (over SlowTouch), from the last sample.
	Blocks []FaultBlock `json:"fault_blocks,omitempty"`
}

// FaultBlock lists the slow touches of one 2 MiB block of managed memory.
type FaultBlock struct {
	Block       int   `json:"block"`
	SlowTouches []int `json:"slow_touches"`
}

// Key names a measurement in progress lines and errors.
func (m *Measurement) Key() string {
	s := m.Family + " " + m.Path
	if m.Direction != "" {
		s += " " + m.Direction
	}
	if m.Operation != "" {
		s += " " + m.Operation
	}
	if m.PeerGPU != nil {
		s += fmt.Sprintf(" gpu%d", *m.PeerGPU)
	}
	return fmt.Sprintf("%s %s", s, formatSize(m.SizeBytes))
}

// Find returns the measurements of a GPU report that match family, path and
// direction ("" matches any).
func (g *GPUReport) Find(family, path, direction string) []Measurement {
	var out []Measurement
	for _, m := range g.Measurements {
		if (family == "" || m.Family == family) && (path == "" || m.Path == path) && (direction == "" || m.Direction == direction) {
			out = append(out, m)
		}
	}
	return out
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// Bounds on what a report may hold. The writers allocate by them (the
// nvbandwidth layout is a matrix of GPUs by GPUs), so a report read from
// a file is checked against them before anything is written.
const (
	// MaxGPUs is NV_MAX_DEVICES, "the maximum number of GPUs supported
	// in a single system" (open-gpu-kernel-modules, nvlimits.h): GPU
	// ordinals, peer GPUs and gpu_count stay below or at it.
	MaxGPUs = 32
	// MaxReportSize bounds the JSON ReadJSON reads: a full run on eight
	// GPUs writes well under a megabyte.
	MaxReportSize = 64 << 20
)

// ReadJSON parses a report written by WriteJSON and checks it. It reads
// at most MaxReportSize bytes.
func ReadJSON(rd io.Reader) (*Report, error) {
	var r Report
	lr := &io.LimitedReader{R: rd, N: MaxReportSize + 1}
	dec := json.NewDecoder(lr)
	dec.DisallowUnknownFields()
	err := dec.Decode(&r)
	if lr.N <= 0 {
		return nil, fmt.Errorf("probe report: larger than %d MiB", MaxReportSize>>20)
	}
	if err != nil {
		return nil, fmt.Errorf("probe report: %w", err)
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Validate checks the invariants every report written by Run holds.
func (r *Report) Validate() error {
	if r.Schema != Schema {
		return fmt.Errorf("probe report: schema %q, want %q", r.Schema, Schema)
	}
	var errs []error
	mc := r.Machine
	if mc.GPUCount < 0 || mc.GPUCount > MaxGPUs || mc.CPUs < 0 || mc.NUMANodes < 0 {
		errs = append(errs, fmt.Errorf("machine: gpu_count %d, cpus %d, numa_nodes %d: want 0..%d GPUs (NV_MAX_DEVICES) and no negative count",
			mc.GPUCount, mc.CPUs, mc.NUMANodes, MaxGPUs))
	}
	if io := mc.IOMMU; io != nil {
		if !slices.Contains(iommuModes, io.Mode) {
			errs = append(errs, fmt.Errorf("machine.iommu.mode: %q, want one of %s", io.Mode, strings.Join(iommuModes, ", ")))
		}
		if len(io.Kinds) != len(io.Units) {
			errs = append(errs, fmt.Errorf("machine.iommu: %d kinds for %d units", len(io.Kinds), len(io.Units)))
		}
	}
	if len(r.GPUs) > MaxGPUs {
		errs = append(errs, fmt.Errorf("gpus: %d of them, want at most %d (NV_MAX_DEVICES)", len(r.GPUs), MaxGPUs))
	}
	for gi, g := range r.GPUs {
		if o := g.Device.Ordinal; o < 0 || o >= MaxGPUs {
			errs = append(errs, fmt.Errorf("gpus[%d].device.ordinal: %d, want 0..%d", gi, o, MaxGPUs-1))
		}
		for mi, m := range g.Measurements {
			where := fmt.Sprintf("gpus[%d].measurements[%d] (%s)", gi, mi, m.Key())
			switch {
			case m.PeerGPU != nil && (*m.PeerGPU < 0 || *m.PeerGPU >= MaxGPUs):
				errs = append(errs, fmt.Errorf("%s: peer_gpu %d, want 0..%d", where, *m.PeerGPU, MaxGPUs-1))
			case m.Family == "" || m.Path == "" || m.Method == "" || m.Unit == "":
				errs = append(errs, fmt.Errorf("%s: family, path, method and unit are required", where))
			case m.SizeBytes < 0 || m.Repetitions < 1 || m.Samples < 1 || m.Warmup < 0:
				errs = append(errs, fmt.Errorf("%s: sizes and counts must be positive", where))
			case len(m.Values) != m.Samples:
				errs = append(errs, fmt.Errorf("%s: %d values for %d samples", where, len(m.Values), m.Samples))
			case !finite(m.Median, m.Min, m.Max) || m.Min > m.Median || m.Median > m.Max:
				errs = append(errs, fmt.Errorf("%s: statistics out of order: min %g median %g max %g", where, m.Min, m.Median, m.Max))
			}
		}
	}
	return errors.Join(errs...)
}

func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// formatSize writes a byte count with a binary unit when it is exact.
func formatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
