package kernels

import (
	"embed"
	"fmt"
)

//go:embed ptx/*.ptx
var files embed.FS

// Param is one kernel parameter: its PTX name and size in bytes.
type Param struct {
	Name  string
	Bytes int
}

// Kernel is one PTX module with one entry point.
type Kernel struct {
	Entry  string  // the .entry name, for cuModuleGetFunction
	File   string  // the PTX file under ptx/
	Params []Param // in cuLaunchKernel order
}

// PTX returns the module's PTX text.
func (k Kernel) PTX() []byte {
	b, err := files.ReadFile("ptx/" + k.File)
	if err != nil {
		// The files are embedded at build time; a missing one is a build bug.
		panic(fmt.Sprintf("kernels: %s not embedded: %v", k.File, err))
	}
	return b
}

// Args checks an argument list against the parameter list and returns it.
func (k Kernel) Args(vals ...uint64) ([]uint64, error) {
	if len(vals) != len(k.Params) {
		return nil, fmt.Errorf("kernels: %s takes %d arguments, got %d", k.Entry, len(k.Params), len(vals))
	}
	for i, p := range k.Params {
		if p.Bytes == 4 && vals[i]>>32 != 0 {
			return nil, fmt.Errorf("kernels: %s argument %s = %#x does not fit 32 bits", k.Entry, p.Name, vals[i])
		}
	}
	return vals, nil
}

// Copy is the streaming copy kernel: thread i of T copies the 16-byte
// elements i, i+T, i+2T, ... < n16 from src to dst with ld/st.global.cg.v4.u32
// (grid-stride, so any grid covers the range). dst and src are device
// addresses — device memory, mapped page-locked host memory (zero-copy) or
// managed memory — 16-byte aligned. Used for SM copies.
//
//	dmalab_copy(u64 dst, u64 src, u64 n16)
var Copy = Kernel{
	Entry: "dmalab_copy",
	File:  "copy.ptx",
	Params: []Param{
		{"dmalab_copy_dst", 8},
		{"dmalab_copy_src", 8},
		{"dmalab_copy_n16", 8},
	},
}

// Chase is the pointer-chase latency kernel, launched as one thread: it
// follows next = *p (64-bit device addresses, loads that bypass cached copies
// of system memory) steps times from start and writes ChaseOutWords u64 to
// out: the final pointer, the loop's clock64 cycles and its %globaltimer
// nanoseconds.
//
//	dmalab_chase(u64 start, u64 steps, u64 out)
var Chase = Kernel{
	Entry: "dmalab_chase",
	File:  "chase.ptx",
	Params: []Param{
		{"dmalab_chase_start", 8},
		{"dmalab_chase_steps", 8},
		{"dmalab_chase_out", 8},
	},
}

// ChaseOutWords is the number of u64 the chase kernel writes to out.
const ChaseOutWords = 3

// Touch is the page-touch kernel for unified-memory faults: touch k accesses
// the u32 at base + k*stride for all k*stride < bytes; thread i of T does
// touches i, i+T, ... (one thread: in order, one at a time). write != 0 stores
// then reads back; write = 0 reads. If times != 0, times[k] (u64) receives the
// touch's %globaltimer nanoseconds, so faults show as slow touches.
//
//	dmalab_touch(u64 base, u64 bytes, u64 stride, u64 times, u32 write)
var Touch = Kernel{
	Entry: "dmalab_touch",
	File:  "touch.ptx",
	Params: []Param{
		{"dmalab_touch_base", 8},
		{"dmalab_touch_bytes", 8},
		{"dmalab_touch_stride", 8},
		{"dmalab_touch_times", 8},
		{"dmalab_touch_write", 4},
	},
}

// Spin holds a stream (nvbandwidth's method): one thread polls the u32 at
// flag (mapped host memory) until it is non-zero or timeout_ns have passed,
// then writes SpinReleased or SpinTimedOut to the u32 at flag+4.
//
//	dmalab_spin(u64 flag, u64 timeout_ns)
var Spin = Kernel{
	Entry: "dmalab_spin",
	File:  "spin.ptx",
	Params: []Param{
		{"dmalab_spin_flag", 8},
		{"dmalab_spin_timeout_ns", 8},
	},
}

// Status words the spin kernel writes to flag+4.
const (
	SpinRunning  uint32 = 0 // not yet finished (the host's initial value)
	SpinReleased uint32 = 1
	SpinTimedOut uint32 = 2
)

// All lists the kernels.
var All = []Kernel{Copy, Chase, Touch, Spin}
