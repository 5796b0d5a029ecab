package xfer

// Path names the memory a transfer reads or writes and the way to it.
type Path string

// Paths of copies between host and GPU memory, as cuMemcpy and kernels
// make them.
const (
	// Pinned is page-locked host memory (cuMemAllocHost,
	// cuMemHostAlloc(PORTABLE)): the copy engines read and write it.
	Pinned Path = "pinned"
	// Pageable is ordinary host memory (malloc): the driver stages it
	// through pinned buffers.
	Pageable Path = "pageable"
	// WriteCombined is host memory allocated write-combined
	// (cuMemHostAlloc(WRITECOMBINED)): fast for the CPU to write, slow
	// to read back where write-combining is in effect.
	WriteCombined Path = "writecombined"
	// Registered is pageable memory pinned after the fact
	// (cuMemHostRegister).
	Registered Path = "registered"
	// Mapped is pinned host memory mapped into the GPU
	// (cuMemHostAlloc(DEVICEMAP)): kernels load and store it over the
	// link (zero-copy).
	Mapped Path = "mapped"
	// Managed is managed memory (cuMemAllocManaged) as an allocation,
	// whatever moves it.
	Managed Path = "managed"
	// ManagedPrefetch is managed memory moved by cuMemPrefetchAsync.
	ManagedPrefetch Path = "managed-prefetch"
	// ManagedFault is managed memory migrated by the GPU's page faults.
	ManagedFault Path = "managed-fault"
	// ManagedCPUFault is managed memory the CPU's page faults populate
	// or migrate back.
	ManagedCPUFault Path = "managed-cpu-fault"
	// ManagedRemote is host-resident managed memory the GPU maps
	// (cuMemAdvise AccessedBy) rather than migrates.
	ManagedRemote Path = "managed-remote"
	// ManagedAdvise is managed memory under SetPreferredLocation(GPU) and
	// SetAccessedBy(GPU) advice before the CPU writes it.
	ManagedAdvise Path = "managed-advise"
	// Device is a GPU's own memory (cuMemAlloc).
	Device Path = "device"
	// Peer is another GPU's memory, reached by peer access.
	Peer Path = "peer"
)

// Paths of an I/O device's or a CPU's transfers.
const (
	// Streaming is a device's DMA into or out of buffers mapped with the
	// streaming DMA API (dma_map_single).
	Streaming Path = "streaming"
	// DMAEngine is a copy by a DMA engine (Linux dmaengine).
	DMAEngine Path = "dma"
	// CPU is a copy by a CPU thread (memcpy).
	CPU Path = "cpu"
)

// Direction names which way a transfer goes.
type Direction string

// Directions.
const (
	H2D Direction = "h2d" // host to device
	D2H Direction = "d2h" // device to host
	// Bidir is h2d and d2h at once; a bandwidth is per direction, as
	// nvbandwidth reports it.
	Bidir Direction = "bidir"
	D2D   Direction = "d2d" // within a GPU, or GPU to GPU
	// Kernel is a GPU kernel's own accesses, wherever the data is.
	Kernel Direction = "kernel"
	// RoundTrip is host to device and back: CPU writes, a kernel, CPU
	// reads.
	RoundTrip Direction = "roundtrip"
	// Mem2Mem is a copy from memory to memory (DMA_MEM_TO_MEM).
	Mem2Mem Direction = "mem2mem"
	Rx      Direction = "rx" // a device receiving into memory
	Tx      Direction = "tx" // a device transmitting from memory
)

// CopyPaths are the paths of copies between host and GPU memory, in the
// order results list them.
func CopyPaths() []Path {
	return []Path{Pinned, Pageable, WriteCombined, Registered, Mapped,
		ManagedPrefetch, ManagedFault, ManagedCPUFault, Device, Peer}
}

// CopyDirections are the directions of copies, in the order results list
// them.
func CopyDirections() []Direction { return []Direction{H2D, D2H, Bidir, D2D} }

// HostMemory are the kinds of host memory a program can hand a GPU, from
// the plainest to the most managed.
func HostMemory() []Path {
	return []Path{Pageable, Pinned, WriteCombined, Registered, Mapped, ManagedFault, ManagedPrefetch}
}

// Names returns the names of paths or directions as strings.
func Names[T ~string](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}
