// Package kernels holds dmalab's GPU kernels as hand-written PTX, embedded in
// the binary and loaded at run time with cuModuleLoadDataEx (cuModuleLoadData
// with the JIT error log), so that building
// dmalab needs no CUDA toolkit. The PTX is written for PTX ISA 7.0 and sm_70
// with 64-bit addresses; the driver's JIT compiles it for the GPU at hand
// (Volta through Hopper and later).
//
// Each Kernel documents its exact parameter list: the order and sizes that
// cuLaunchKernel must be given (every value is passed in its own 8-byte slot;
// a 32-bit parameter takes the low half of its slot). The PTX files in ptx/
// carry the same description next to the code.
package kernels
