// Package xfer is the vocabulary of data movement that the model and the
// hardware share: the names of paths (what kind of memory a transfer
// reads or writes, and how it gets there) and of directions. The
// scenarios print them in their rows and "dmalab probe" in its
// measurements, so that a prediction and a measurement of the same
// transfer carry the same names and can be put side by side.
//
// The names are those of the CUDA driver API's memory kinds
// (cuMemAllocHost, cuMemHostAlloc with CU_MEMHOSTALLOC_WRITECOMBINED or
// CU_MEMHOSTALLOC_DEVICEMAP, cuMemHostRegister, cuMemAllocManaged,
// cuMemAlloc, peer access) and the direction names nvbandwidth uses
// (host_to_device, device_to_host, bidirectional, device_to_device).
//
// The package imports nothing of the model nor of hw/, so both can use it
// without one importing the other.
package xfer
