package cuda

import (
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// MemRangeHandleTypeDMABufFD is CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
// the one handle type of cuMemGetHandleForAddressRange.
const MemRangeHandleTypeDMABufFD = 0x1

// MemRangeFlagDMABufMappingTypePCIe is
// CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE: importers map the pages
// through BAR1 on PCIe. Accepted; the model's dma-buf lists VRAM pages
// either way.
const MemRangeFlagDMABufMappingTypePCIe = 0x1

// DMABufPageSize is the granule of an exported range: the host page
// (cuMemGetHandleForAddressRange wants the range aligned to it).
const DMABufPageSize = mem.PageSize

// DMABuf is a dma-buf the GPU driver exported (struct dma_buf, with
// nvidia.ko as its exporter): its size, the GPU memory it covers as
// physical ranges of VRAM, and its file references. It is released when
// the last file descriptor referring to it is closed; until then it
// keeps the exported memory allocated, even if the program frees it
// (the exporter holds a reference). The importer side (attach, map to a
// device's addresses, fences) belongs to a dmabuf package that does not
// exist yet.
type DMABuf struct {
	// Exporter is the exporting driver's name ("nvidia").
	Exporter string
	// Device is the GPU whose memory it is.
	Device string
	// Addr and Size are the exported range.
	Addr mem.GPUAddr
	Size uint64
	// Pages are the VRAM behind the range, in address order.
	Pages []mem.PhysRange
	// Origin is the export call, with its time and thread.
	Origin string

	d        *Driver
	a        *alloc
	refs     int
	released bool
}

// Refs is the number of file descriptors referring to the dma-buf.
func (b *DMABuf) Refs() int { return b.refs }

// Released reports whether the last reference was closed.
func (b *DMABuf) Released() bool { return b.released }

// MemGetHandleForAddressRange is cuMemGetHandleForAddressRange with
// CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD: it exports [addr, addr+size) of
// device memory as a dma-buf and returns a new file descriptor of the
// process referring to it (the lowest free, as open(2) gives). The range
// must lie in one allocation of device memory and be aligned to the
// host page; other memory, handle types or flags are
// CUDA_ERROR_INVALID_VALUE; an integrated GPU CUDA_ERROR_NOT_SUPPORTED
// (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0 there). The host pays
// gpu.EnqueueCost (assumed: one ioctl into nvidia.ko).
func (c *Context) MemGetHandleForAddressRange(p *sim.Proc, addr mem.GPUAddr, size uint64, handleType int, flags uint64) (int, error) {
	const call = "cuMemGetHandleForAddressRange"
	if err := c.check(call); err != nil {
		return -1, err
	}
	p.Sleep(gpu.EnqueueCost)
	pl := c.d.resolve(addr, size)
	var err error
	switch {
	case handleType != MemRangeHandleTypeDMABufFD || flags&^MemRangeFlagDMABufMappingTypePCIe != 0:
		err = failf(call, ErrorInvalidValue, "handle type %d, flags %#x", handleType, flags)
	case c.dev.GPU.Spec.Integrated:
		err = failf(call, ErrorNotSupported, "%s is integrated: no dma-buf export", c.dev.Name)
	case pl.t.Kind == MemFreed:
		err = failf(call, ErrorInvalidValue, "%v was freed by %s", addr, pl.t.Freed)
	case c.foreign(pl):
		err = failf(call, ErrorInvalidValue, "%v belongs to process %s", addr, pl.t.Process)
	case pl.t.Kind != MemDevice || !pl.inside:
		err = failf(call, ErrorInvalidValue, "[%v +%#x] is not inside one allocation of device memory", addr, size)
	case uint64(addr)%DMABufPageSize != 0 || size%DMABufPageSize != 0:
		err = failf(call, ErrorInvalidValue, "[%v +%#x] is not aligned to %d B pages", addr, size, DMABufPageSize)
	}
	c.observe(p, OpExport, call, addr, size, false, pl, err)
	if err != nil {
		return -1, err
	}
	_, phys, rerr := c.d.sys.Resolve(addr, size)
	if rerr != nil {
		return -1, wrap(call, rerr)
	}
	b := &DMABuf{
		Exporter: "nvidia", Device: c.d.sys.Devices[pl.t.Device].Name, Addr: addr, Size: size, Pages: phys,
		Origin: origin(call, p.Now(), p), d: c.d, a: pl.a,
	}
	pl.a.exports++
	return c.proc.install(b), nil
}

// install gives b the lowest free descriptor, taking a reference.
func (pr *Process) install(b *DMABuf) int {
	b.refs++
	for fd := 3; fd < len(pr.fds); fd++ {
		if pr.fds[fd] == nil {
			pr.fds[fd] = b
			return fd
		}
	}
	pr.fds = append(pr.fds, b)
	return len(pr.fds) - 1
}

// file is the dma-buf behind fd, or EBADF.
func (pr *Process) file(call string, fd int) (*DMABuf, error) {
	if fd < 3 || fd >= len(pr.fds) || pr.fds[fd] == nil {
		return nil, fmt.Errorf("cuda: %s(%d) in %s: %w", call, fd, pr.name, syscall.EBADF)
	}
	return pr.fds[fd], nil
}

// DMABuf is the dma-buf fd refers to (what dma_buf_get does with an
// fd), or syscall.EBADF.
func (pr *Process) DMABuf(fd int) (*DMABuf, error) { return pr.file("dma_buf_get", fd) }

// FDs lists the process's open descriptors above stderr, in order.
func (pr *Process) FDs() []int {
	var out []int
	for fd := 3; fd < len(pr.fds); fd++ {
		if pr.fds[fd] != nil {
			out = append(out, fd)
		}
	}
	return out
}

// Dup is dup(2): a new descriptor for the same dma-buf.
func (pr *Process) Dup(fd int) (int, error) {
	b, err := pr.file("dup", fd)
	if err != nil {
		return -1, err
	}
	return pr.install(b), nil
}

// SendFD passes fd to process to, as SCM_RIGHTS over a Unix socket
// does: to gets a new descriptor of its own for the same dma-buf.
func (pr *Process) SendFD(to *Process, fd int) (int, error) {
	b, err := pr.file("sendmsg SCM_RIGHTS", fd)
	if err != nil {
		return -1, err
	}
	return to.install(b), nil
}

// Close is close(2) of fd. The last close releases the dma-buf (the
// exporter's release op); memory the program freed while it was
// exported is freed then, by p (gpu.System.Free: its wait and cost).
func (pr *Process) Close(p *sim.Proc, fd int) error {
	b, err := pr.file("close", fd)
	if err != nil {
		return err
	}
	pr.fds[fd] = nil
	b.refs--
	if b.refs > 0 {
		return nil
	}
	b.released = true
	a := b.a
	a.exports--
	if a.exports == 0 && a.freedBy != "" {
		if err := pr.d.sys.Free(p, a.a.Addr); err != nil {
			return fmt.Errorf("cuda: dma-buf release: freeing %v: %w", a.a.Addr, err)
		}
		pr.d.forget(a, a.freedBy)
	}
	return nil
}
