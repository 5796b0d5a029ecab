package cuda

import (
	"fmt"
	"runtime"
	"unsafe"
)

// JIT options of cuModuleLoadDataEx (cuda.h, enum CUjit_option_enum).
const (
	jitErrorLogBuffer          int32 = 5
	jitErrorLogBufferSizeBytes int32 = 6
)

// ModuleLoadData loads a module from PTX text or a cubin
// (cuModuleLoadDataEx). PTX is compiled for the device by the driver's JIT;
// when it is rejected the error carries the JIT's log.
func (t *Thread) ModuleLoadData(image []byte) (Module, error) {
	l := t.lib()
	img := make([]byte, len(image)+1) // PTX must be NUL-terminated
	copy(img, image)
	logBuf := make([]byte, 8192)
	opts := []int32{jitErrorLogBuffer, jitErrorLogBufferSizeBytes}
	vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf) - 1)}

	// The driver reads img, opts and vals and writes logBuf during the call;
	// pinning keeps them in place although vals holds a Go pointer.
	var pin runtime.Pinner
	pin.Pin(&img[0])
	pin.Pin(&logBuf[0])
	defer pin.Unpin()

	var m Module
	r := l.cuModuleLoadDataEx(&m, unsafe.Pointer(&img[0]), uint32(len(opts)), &opts[0], &vals[0])
	runtime.KeepAlive(img)
	runtime.KeepAlive(logBuf)
	if r != Success {
		if log := cString(logBuf); log != "" {
			return 0, fmt.Errorf("cuModuleLoadDataEx: %w: %s", r, log)
		}
		return 0, fmt.Errorf("cuModuleLoadDataEx: %w", r)
	}
	return m, nil
}

// ModuleUnload unloads a module (cuModuleUnload).
func (t *Thread) ModuleUnload(m Module) error {
	return check("cuModuleUnload", t.lib().cuModuleUnload(m))
}

// ModuleGetFunction returns a kernel of a module by its entry name
// (cuModuleGetFunction).
func (t *Thread) ModuleGetFunction(m Module, name string) (Function, error) {
	var f Function
	if err := check(fmt.Sprintf("cuModuleGetFunction(%q)", name), t.lib().cuModuleGetFunction(&f, m, name)); err != nil {
		return 0, err
	}
	return f, nil
}

// LaunchKernel queues a kernel on s (cuLaunchKernel). Each argument fills
// one 8-byte slot; the driver reads from each slot as many bytes as the
// kernel's parameter has, so a 32-bit parameter takes the slot's low half
// (little-endian). Pass arguments in the kernel's parameter order.
func (t *Thread) LaunchKernel(f Function, grid, block Dim3, sharedBytes uint32, s Stream, args ...uint64) error {
	l := t.lib()
	var params unsafe.Pointer
	var pin runtime.Pinner
	defer pin.Unpin()
	if len(args) > 0 {
		slots := make([]uint64, len(args))
		copy(slots, args)
		ptrs := make([]unsafe.Pointer, len(args))
		pin.Pin(&slots[0])
		pin.Pin(&ptrs[0])
		for i := range slots {
			ptrs[i] = unsafe.Pointer(&slots[i])
		}
		params = unsafe.Pointer(&ptrs[0])
		defer runtime.KeepAlive(slots)
		defer runtime.KeepAlive(ptrs)
	}
	return check("cuLaunchKernel", l.cuLaunchKernel(f, grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, sharedBytes, s, params, nil))
}
