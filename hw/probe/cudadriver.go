package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dmalab/dmalab/hw/cuda"
	"github.com/dmalab/dmalab/hw/kernels"
	"github.com/dmalab/dmalab/hw/nvml"
)

// CUDADriver is the real Driver: the CUDA driver API through package cuda,
// and NVML, when present, for BAR1 and PCIe link state.
type CUDADriver struct {
	nvmlErr error // why NVML is not used; nil when it is
}

// OpenCUDA loads and initialises the CUDA driver. Without one it returns, at
// once, an error matching cuda.ErrNoDriver (no libcuda.so.1) or
// cuda.ErrNoDevice (a driver but no GPU). NVML is optional.
func OpenCUDA() (*CUDADriver, error) {
	if err := cuda.Init(); err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	return &CUDADriver{nvmlErr: nvml.Init()}, nil
}

// Close releases NVML.
func (c *CUDADriver) Close() error {
	if c.nvmlErr == nil {
		return nvml.Shutdown()
	}
	return nil
}

// Machine implements Driver.
func (c *CUDADriver) Machine() (Machine, error) {
	m := hostMachine()
	v, err := cuda.DriverVersion()
	if err != nil {
		return m, err
	}
	m.CUDAVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	if c.nvmlErr == nil {
		if s, err := nvml.DriverVersion(); err == nil {
			m.DriverVersion = s
		}
	}
	n, err := cuda.DeviceCount()
	m.GPUCount = n
	return m, err
}

// DeviceCount implements Driver.
func (c *CUDADriver) DeviceCount() (int, error) { return cuda.DeviceCount() }

// WithDevice implements Driver: fn runs on the device's context thread, with
// the kernels loaded.
func (c *CUDADriver) WithDevice(ordinal int, fn func(Device) error) error {
	dev, err := cuda.DeviceGet(ordinal)
	if err != nil {
		return err
	}
	info, err := c.deviceInfo(ordinal, dev)
	if err != nil {
		return err
	}
	ctx, err := cuda.NewContext(dev)
	if err != nil {
		return err
	}
	defer ctx.Close()
	return ctx.Do(func(t *cuda.Thread) error {
		d := &cudaDevice{t: t, info: info, start: time.Now()}
		if err := d.setup(); err != nil {
			return errors.Join(err, d.teardown())
		}
		return errors.Join(fn(d), d.teardown())
	})
}

// infoAttributes are the device attributes a report records.
var infoAttributes = []cuda.Attribute{
	cuda.AttrManagedMemory, cuda.AttrConcurrentManagedAccess, cuda.AttrPageableMemoryAccess,
	cuda.AttrPageableMemoryAccessUsesHostPageTables, cuda.AttrDirectManagedMemAccessFromHost,
	cuda.AttrHostNativeAtomicSupported, cuda.AttrDMABufSupported, cuda.AttrGPUDirectRDMASupported,
	cuda.AttrGPUDirectRDMAWithCUDAVMMSupported, cuda.AttrGPUDirectRDMAFlushWritesOptions,
	cuda.AttrGPUDirectRDMAWritesOrdering, cuda.AttrAsyncEngineCount, cuda.AttrCanMapHostMemory,
	cuda.AttrUnifiedAddressing, cuda.AttrHostRegisterSupported, cuda.AttrReadOnlyHostRegisterSupported,
	cuda.AttrCanUseHostPointerForRegisteredMem, cuda.AttrVirtualMemoryManagementSupported,
	cuda.AttrComputeCapabilityMajor, cuda.AttrComputeCapabilityMinor, cuda.AttrMultiprocessorCount,
	cuda.AttrClockRate, cuda.AttrMemoryClockRate, cuda.AttrGlobalMemoryBusWidth, cuda.AttrL2CacheSize,
	cuda.AttrIntegrated, cuda.AttrNUMAConfig, cuda.AttrNUMAID, cuda.AttrHostNUMAID,
}

func (c *CUDADriver) deviceInfo(ordinal int, dev cuda.Device) (DeviceInfo, error) {
	info := DeviceInfo{Ordinal: ordinal, Attributes: map[string]int{}}
	var err error
	if info.Name, err = dev.Name(); err != nil {
		return info, err
	}
	if info.PCIBusID, err = dev.PCIBusID(); err != nil {
		return info, err
	}
	if info.TotalMemory, err = dev.TotalMem(); err != nil {
		return info, err
	}
	for _, a := range infoAttributes {
		v, err := dev.Attribute(a)
		if errors.Is(err, cuda.ErrorInvalidValue) {
			continue // an attribute newer than this driver
		}
		if err != nil {
			return info, err
		}
		info.Attributes[a.String()] = v
	}
	info.Multiprocessors = info.Attributes[cuda.AttrMultiprocessorCount.String()]
	info.ComputeCapability = fmt.Sprintf("%d.%d", info.Attributes[cuda.AttrComputeCapabilityMajor.String()],
		info.Attributes[cuda.AttrComputeCapabilityMinor.String()])
	if c.nvmlErr != nil {
		info.NVMLError = c.nvmlErr.Error()
		return info, nil
	}
	nd, err := nvml.DeviceByPCIBusID(info.PCIBusID)
	if err != nil {
		info.NVMLError = err.Error()
		return info, nil
	}
	if bar, err := nd.BAR1(); err == nil {
		info.BAR1 = &BAR1{TotalBytes: bar.Total, UsedBytes: bar.Used}
	} else {
		info.NVMLError = err.Error()
	}
	if l, err := nd.PCIeLink(); err == nil {
		info.PCIe = &PCIeLink{CurrentGen: l.CurrentGen, CurrentWidth: l.CurrentWidth, MaxGen: l.MaxGen, MaxWidth: l.MaxWidth}
	} else {
		info.NVMLError = err.Error()
	}
	return info, nil
}

// spinSlots is the number of spin kernels that can be armed or awaiting
// Settle at once; each has 8 bytes of the flag page.
const spinSlots = 512

// cudaDevice implements Device on a cuda.Thread.
type cudaDevice struct {
	t       *cuda.Thread
	info    DeviceInfo
	start   time.Time
	modules []cuda.Module
	copyFn  cuda.Function
	spinFn  cuda.Function
	chaseFn cuda.Function
	touchFn cuda.Function
	aux     cuda.Stream   // for Chase
	out     *cuda.HostMem // Chase's output words, mapped
	outDev  cuda.DevicePtr

	flags     *cuda.HostMem // spinSlots × {release u32, status u32}, mapped
	flagsDev  cuda.DevicePtr
	peers     map[int]*cuda.Context // other GPUs' contexts, opened by AllocPeer
	freeSlots []int                 // spin slots not in use
	armed     []int                 // blocked, not released
	released  []int                 // released, not settled
}

// realBuf is the cudaDevice's handle of a Buffer.
type realBuf struct {
	dev  cuda.DevicePtr
	host *cuda.HostMem // cuMemHostAlloc'd kinds
	mmap []byte        // pageable and registered kinds
	pin  bool          // mmap is registered
	peer *cuda.Context // the context of the GPU that holds MemPeer memory
}

func (d *cudaDevice) setup() error {
	for _, k := range []struct {
		k  kernels.Kernel
		fn *cuda.Function
	}{{kernels.Copy, &d.copyFn}, {kernels.Spin, &d.spinFn}, {kernels.Chase, &d.chaseFn}, {kernels.Touch, &d.touchFn}} {
		mod, err := d.t.ModuleLoadData(k.k.PTX())
		if err != nil {
			return fmt.Errorf("load %s: %w", k.k.File, err)
		}
		d.modules = append(d.modules, mod)
		f, err := d.t.ModuleGetFunction(mod, k.k.Entry)
		if err != nil {
			return err
		}
		*k.fn = f
	}
	var err error
	if d.aux, err = d.t.StreamCreate(cuda.StreamNonBlocking); err != nil {
		return err
	}
	if d.out, err = d.t.MemHostAlloc(4096, cuda.HostAllocPortable|cuda.HostAllocDeviceMap); err != nil {
		return err
	}
	if d.outDev, err = d.t.HostGetDevicePointer(d.out.Bytes()); err != nil {
		return err
	}
	if d.flags, err = d.t.MemHostAlloc(spinSlots*8, cuda.HostAllocPortable|cuda.HostAllocDeviceMap); err != nil {
		return err
	}
	if d.flagsDev, err = d.t.HostGetDevicePointer(d.flags.Bytes()); err != nil {
		return err
	}
	for i := range spinSlots {
		d.freeSlots = append(d.freeSlots, i)
	}
	return nil
}

func (d *cudaDevice) teardown() error {
	var errs []error
	if len(d.armed) > 0 {
		errs = append(errs, d.Release(), d.t.Synchronize())
	}
	for _, m := range d.modules {
		errs = append(errs, d.t.ModuleUnload(m))
	}
	for _, h := range []*cuda.HostMem{d.flags, d.out} {
		if h != nil && h.Len() > 0 {
			errs = append(errs, d.t.FreeHost(h))
		}
	}
	if d.aux != 0 {
		errs = append(errs, d.t.StreamDestroy(d.aux))
	}
	for _, c := range d.peers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

func (d *cudaDevice) Info() DeviceInfo   { return d.info }
func (d *cudaDevice) Now() time.Duration { return time.Since(d.start) }

func (d *cudaDevice) MemInfo() (int64, int64, error) { return d.t.MemGetInfo() }

func mmapAnon(size int64) ([]byte, error) {
	b, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("mmap %d B: %w", size, err)
	}
	return b, nil
}

func (d *cudaDevice) Alloc(kind MemKind, size int64) (*Buffer, error) {
	b := &Buffer{Kind: kind, Size: size}
	rb := &realBuf{}
	b.impl = rb
	var err error
	switch kind {
	case MemDevice:
		rb.dev, err = d.t.MemAlloc(size)
	case MemManaged:
		if rb.dev, err = d.t.MemAllocManaged(size, cuda.MemAttachGlobal); err == nil {
			b.Host = cuda.ManagedBytes(rb.dev, int(size))
		}
	case MemPinned, MemWriteCombined, MemMapped:
		flags := cuda.HostAllocPortable
		switch kind {
		case MemWriteCombined:
			flags |= cuda.HostAllocWriteCombined
		case MemMapped:
			flags |= cuda.HostAllocDeviceMap
		}
		if rb.host, err = d.t.MemHostAlloc(int(size), flags); err != nil {
			break
		}
		b.Host = rb.host.Bytes()
		if kind == MemMapped {
			if rb.dev, err = d.t.HostGetDevicePointer(b.Host); err != nil {
				err = errors.Join(err, d.t.FreeHost(rb.host))
			}
		}
	case MemPageable, MemRegistered:
		if rb.mmap, err = mmapAnon(size); err != nil {
			break
		}
		b.Host = rb.mmap
		if kind == MemRegistered {
			if err = d.t.HostRegister(rb.mmap, cuda.HostRegisterPortable|cuda.HostRegisterDeviceMap); err == nil {
				rb.pin = true
				rb.dev, err = d.t.HostGetDevicePointer(rb.mmap)
			}
			if err != nil {
				err = errors.Join(err, d.free(b))
			}
		}
	default:
		err = fmt.Errorf("alloc of %v: %w", kind, cuda.ErrNotSupported)
	}
	if err != nil {
		return nil, err
	}
	b.DevAddr = rb.dev
	return b, nil
}

func (d *cudaDevice) Free(b *Buffer) error { return d.free(b) }

func (d *cudaDevice) free(b *Buffer) error {
	rb := b.impl.(*realBuf)
	var errs []error
	switch {
	case rb.peer != nil:
		errs = append(errs, rb.peer.Do(func(t *cuda.Thread) error { return t.MemFree(rb.dev) }))
	case rb.host != nil:
		errs = append(errs, d.t.FreeHost(rb.host))
	case rb.mmap != nil:
		if rb.pin {
			errs = append(errs, d.t.HostUnregister(rb.mmap))
		}
		errs = append(errs, syscall.Munmap(rb.mmap))
	case rb.dev != 0:
		errs = append(errs, d.t.MemFree(rb.dev))
	}
	return errors.Join(errs...)
}

// contextOf returns the context whose GPU holds device memory b.
func (d *cudaDevice) contextOf(b *Buffer) *cuda.Context {
	if rb, ok := b.impl.(*realBuf); ok && rb.peer != nil {
		return rb.peer
	}
	return d.t.Context()
}

func (d *cudaDevice) Peers() ([]int, error) {
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, err
	}
	self := d.t.Context().Device()
	var out []int
	for i := range n {
		if i == d.info.Ordinal {
			continue
		}
		other, err := cuda.DeviceGet(i)
		if err != nil {
			return nil, err
		}
		there, err1 := self.CanAccessPeer(other)
		back, err2 := other.CanAccessPeer(self)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		if there && back {
			out = append(out, i)
		}
	}
	return out, nil
}

// peerContext opens GPU ordinal's primary context, once, and enables peer
// access from this GPU to it and back.
func (d *cudaDevice) peerContext(ordinal int) (*cuda.Context, error) {
	if c, ok := d.peers[ordinal]; ok {
		return c, nil
	}
	dev, err := cuda.DeviceGet(ordinal)
	if err != nil {
		return nil, err
	}
	c, err := cuda.NewContext(dev)
	if err != nil {
		return nil, err
	}
	self := d.t.Context()
	err = errors.Join(d.t.EnablePeerAccess(c), c.Do(func(t *cuda.Thread) error { return t.EnablePeerAccess(self) }))
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if d.peers == nil {
		d.peers = map[int]*cuda.Context{}
	}
	d.peers[ordinal] = c
	return c, nil
}

func (d *cudaDevice) AllocPeer(ordinal int, size int64) (*Buffer, error) {
	if ordinal == d.info.Ordinal || size <= 0 {
		return nil, fmt.Errorf("peer alloc of %d B on GPU %d from GPU %d: %w", size, ordinal, d.info.Ordinal, cuda.ErrorInvalidValue)
	}
	c, err := d.peerContext(ordinal)
	if err != nil {
		return nil, err
	}
	var p cuda.DevicePtr
	if err := c.Do(func(t *cuda.Thread) (err error) { p, err = t.MemAlloc(size); return err }); err != nil {
		return nil, err
	}
	return &Buffer{Kind: MemPeer, Size: size, Peer: ordinal, DevAddr: p, impl: &realBuf{dev: p, peer: c}}, nil
}

func (d *cudaDevice) Pin(b *Buffer) error {
	rb := b.impl.(*realBuf)
	if b.Kind != MemPageable || rb.pin {
		return fmt.Errorf("pin %v: %w", b, cuda.ErrorHostAlreadyRegistered)
	}
	if err := d.t.HostRegister(rb.mmap, 0); err != nil {
		return err
	}
	rb.pin = true
	return nil
}

func (d *cudaDevice) Unpin(b *Buffer) error {
	rb := b.impl.(*realBuf)
	if b.Kind != MemPageable || !rb.pin {
		return fmt.Errorf("unpin %v: %w", b, cuda.ErrorInvalidValue)
	}
	if err := d.t.HostUnregister(rb.mmap); err != nil {
		return err
	}
	rb.pin = false
	return nil
}

func (d *cudaDevice) PinRange(b *Buffer, off, size int64) error {
	rb := b.impl.(*realBuf)
	if b.Kind != MemPageable || rb.pin || off < 0 || size <= 0 || off+size > b.Size {
		return fmt.Errorf("pin %d B at %d of %v: %w", size, off, b, cuda.ErrorInvalidValue)
	}
	return d.t.HostRegister(rb.mmap[off:off+size], 0)
}

func (d *cudaDevice) UnpinRange(b *Buffer, off, size int64) error {
	rb := b.impl.(*realBuf)
	if b.Kind != MemPageable || off < 0 || size <= 0 || off+size > b.Size {
		return fmt.Errorf("unpin %d B at %d of %v: %w", size, off, b, cuda.ErrorInvalidValue)
	}
	return d.t.HostUnregister(rb.mmap[off : off+size])
}

func (d *cudaDevice) Upload(b *Buffer, src []byte) error {
	if int64(len(src)) > b.Size {
		return fmt.Errorf("upload of %d B to %v: %w", len(src), b, cuda.ErrorInvalidValue)
	}
	if b.Host != nil {
		copy(b.Host, src)
		return nil
	}
	rb := b.impl.(*realBuf)
	if rb.peer != nil {
		return rb.peer.Do(func(t *cuda.Thread) error { return t.MemcpyHtoD(rb.dev, src) })
	}
	return d.t.MemcpyHtoD(rb.dev, src)
}

func (d *cudaDevice) Download(b *Buffer, dst []byte) error {
	if int64(len(dst)) > b.Size {
		return fmt.Errorf("download of %d B from %v: %w", len(dst), b, cuda.ErrorInvalidValue)
	}
	if b.Host != nil {
		copy(dst, b.Host)
		return nil
	}
	rb := b.impl.(*realBuf)
	if rb.peer != nil {
		return rb.peer.Do(func(t *cuda.Thread) error { return t.MemcpyDtoH(dst, rb.dev) })
	}
	return d.t.MemcpyDtoH(dst, rb.dev)
}

func (d *cudaDevice) NewStream() (Stream, error) {
	s, err := d.t.StreamCreate(cuda.StreamNonBlocking)
	return Stream(s), err
}

func (d *cudaDevice) DestroyStream(s Stream) error { return d.t.StreamDestroy(cuda.Stream(s)) }
func (d *cudaDevice) Synchronize(s Stream) error   { return d.t.StreamSynchronize(cuda.Stream(s)) }

func (d *cudaDevice) NewEvent() (Event, error) {
	e, err := d.t.EventCreate(cuda.EventDefault)
	return Event(e), err
}

func (d *cudaDevice) DestroyEvent(e Event) error { return d.t.EventDestroy(cuda.Event(e)) }
func (d *cudaDevice) Record(e Event, s Stream) error {
	return d.t.EventRecord(cuda.Event(e), cuda.Stream(s))
}
func (d *cudaDevice) WaitEvent(s Stream, e Event) error {
	return d.t.StreamWaitEvent(cuda.Stream(s), cuda.Event(e))
}

func (d *cudaDevice) Elapsed(start, end Event) (time.Duration, error) {
	return d.t.EventElapsed(cuda.Event(start), cuda.Event(end))
}

// checkCopy validates a copy and tells whether each end is host memory.
func checkCopy(dst, src *Buffer, size int64) (srcHost, dstHost bool, err error) {
	if size <= 0 || size > dst.Size || size > src.Size {
		return false, false, fmt.Errorf("copy of %d B from %v to %v: %w", size, src, dst, cuda.ErrorInvalidValue)
	}
	srcHost, dstHost = src.Kind.IsHost(), dst.Kind.IsHost()
	if srcHost && dstHost {
		return false, false, fmt.Errorf("copy from %v to %v: host to host: %w", src, dst, cuda.ErrorInvalidValue)
	}
	return srcHost, dstHost, nil
}

func (d *cudaDevice) CopyAsync(dst, src *Buffer, size int64, s Stream) error {
	srcHost, dstHost, err := checkCopy(dst, src, size)
	if err != nil {
		return err
	}
	if src.Kind == MemPageable || dst.Kind == MemPageable {
		// Staged synchronously by the driver: behind a held stream it
		// would wait for the spin kernel.
		return fmt.Errorf("async copy with %v: %w", MemPageable, cuda.ErrNotSupported)
	}
	cs := cuda.Stream(s)
	if src.Kind == MemPeer || dst.Kind == MemPeer {
		if srcHost || dstHost {
			return fmt.Errorf("async copy between %v and %v: %w", src, dst, cuda.ErrNotSupported)
		}
		return d.t.MemcpyPeerAsync(dst.DevAddr, d.contextOf(dst), src.DevAddr, d.contextOf(src), size, cs)
	}
	switch {
	case srcHost:
		return d.t.MemcpyHtoDAsync(dst.impl.(*realBuf).dev, src.Host[:size], cs)
	case dstHost:
		return d.t.MemcpyDtoHAsync(dst.Host[:size], src.impl.(*realBuf).dev, cs)
	}
	return d.t.MemcpyDtoDAsync(dst.impl.(*realBuf).dev, src.impl.(*realBuf).dev, size, cs)
}

func (d *cudaDevice) Copy(dst, src *Buffer, size int64) error {
	srcHost, dstHost, err := checkCopy(dst, src, size)
	if err != nil {
		return err
	}
	if src.Kind == MemPeer || dst.Kind == MemPeer {
		return fmt.Errorf("synchronous copy with %v memory: %w", MemPeer, cuda.ErrNotSupported)
	}
	switch {
	case srcHost:
		return d.t.MemcpyHtoD(dst.impl.(*realBuf).dev, src.Host[:size])
	case dstHost:
		return d.t.MemcpyDtoH(dst.Host[:size], src.impl.(*realBuf).dev)
	}
	return d.t.MemcpyDtoD(dst.impl.(*realBuf).dev, src.impl.(*realBuf).dev, size)
}

// copyBlock is the copy kernel's block size; the grid is up to
// copyBlocksPerSM blocks per SM, enough loads in flight to cover the bus's
// latency-bandwidth product.
const (
	copyBlock       = 512
	copyBlocksPerSM = 4
)

func (d *cudaDevice) CopyKernel(dst, src *Buffer, size int64, s Stream) error {
	if dst.DevAddr == 0 || src.DevAddr == 0 || size%16 != 0 || size <= 0 || size > dst.Size || size > src.Size {
		return fmt.Errorf("copy kernel over %d B from %v to %v: %w", size, src, dst, cuda.ErrorInvalidValue)
	}
	n16 := uint64(size / 16)
	blocks := min(uint64(max(d.info.Multiprocessors, 1)*copyBlocksPerSM), (n16+copyBlock-1)/copyBlock)
	args, err := kernels.Copy.Args(uint64(dst.DevAddr), uint64(src.DevAddr), n16)
	if err != nil {
		return err
	}
	return d.t.LaunchKernel(d.copyFn, cuda.Dim(uint32(blocks)), cuda.Dim(copyBlock), 0, cuda.Stream(s), args...)
}

func (d *cudaDevice) Block(s Stream, timeout time.Duration) error {
	if len(d.freeSlots) == 0 {
		return fmt.Errorf("block: all %d spin slots in use (Settle not called?)", spinSlots)
	}
	slot := d.freeSlots[len(d.freeSlots)-1]
	release, status := d.slot(slot)
	atomic.StoreUint32(release, 0)
	atomic.StoreUint32(status, kernels.SpinRunning)
	args, err := kernels.Spin.Args(uint64(d.flagsDev)+uint64(slot)*8, uint64(timeout.Nanoseconds()))
	if err != nil {
		return err
	}
	if err := d.t.LaunchKernel(d.spinFn, cuda.Dim(1), cuda.Dim(1), 0, cuda.Stream(s), args...); err != nil {
		return err
	}
	d.freeSlots = d.freeSlots[:len(d.freeSlots)-1]
	d.armed = append(d.armed, slot)
	return nil
}

func (d *cudaDevice) Release() error {
	for _, slot := range d.armed {
		release, _ := d.slot(slot)
		atomic.StoreUint32(release, 1)
	}
	d.released = append(d.released, d.armed...)
	d.armed = d.armed[:0]
	return nil
}

func (d *cudaDevice) Settle() (int, error) {
	timedOut := 0
	var running []int
	for _, slot := range d.released {
		_, status := d.slot(slot)
		switch atomic.LoadUint32(status) {
		case kernels.SpinReleased:
		case kernels.SpinTimedOut:
			timedOut++
		default:
			running = append(running, slot)
			continue
		}
		d.freeSlots = append(d.freeSlots, slot)
	}
	d.released = running
	if len(running) > 0 {
		return timedOut, fmt.Errorf("settle: %d released spin kernels still running (synchronize first)", len(running))
	}
	return timedOut, nil
}

func (d *cudaDevice) Chase(b *Buffer, start cuda.DevicePtr, steps int) (cuda.DevicePtr, time.Duration, error) {
	if b.DevAddr == 0 || start < b.DevAddr || start >= b.DevAddr+cuda.DevicePtr(b.Size) || steps < 1 {
		return 0, 0, fmt.Errorf("chase from %#x through %v: %w", start, b, cuda.ErrorInvalidValue)
	}
	args, err := kernels.Chase.Args(uint64(start), uint64(steps), uint64(d.outDev))
	if err != nil {
		return 0, 0, err
	}
	clear(d.out.Bytes()[:kernels.ChaseOutWords*8])
	if err := d.t.LaunchKernel(d.chaseFn, cuda.Dim(1), cuda.Dim(1), 0, d.aux, args...); err != nil {
		return 0, 0, err
	}
	if err := d.t.StreamSynchronize(d.aux); err != nil {
		return 0, 0, err
	}
	o := d.out.Bytes()
	return cuda.DevicePtr(binary.LittleEndian.Uint64(o)), time.Duration(binary.LittleEndian.Uint64(o[16:])), nil
}

func (d *cudaDevice) managed(b *Buffer) (cuda.DevicePtr, error) {
	if b.Kind != MemManaged {
		return 0, fmt.Errorf("%v is not managed memory: %w", b, cuda.ErrorInvalidValue)
	}
	return b.impl.(*realBuf).dev, nil
}

func (d *cudaDevice) Prefetch(b *Buffer, toGPU bool, s Stream) error {
	p, err := d.managed(b)
	if err != nil {
		return err
	}
	loc := cuda.HostLocation()
	if toGPU {
		loc = cuda.DeviceLocation(d.t.Context().Device())
	}
	return d.t.MemPrefetchAsync(p, b.Size, loc, cuda.Stream(s))
}

func (d *cudaDevice) AdviseRemote(b *Buffer, on bool) error {
	p, err := d.managed(b)
	if err != nil {
		return err
	}
	pref, by := cuda.AdviseSetPreferredLocation, cuda.AdviseSetAccessedBy
	if !on {
		pref, by = cuda.AdviseUnsetPreferredLocation, cuda.AdviseUnsetAccessedBy
	}
	return errors.Join(d.t.MemAdvise(p, b.Size, pref, cuda.HostLocation()),
		d.t.MemAdvise(p, b.Size, by, cuda.DeviceLocation(d.t.Context().Device())))
}

// touchBlock is the page-touch kernel's block size when it runs many threads.
const touchBlock = 256

func (d *cudaDevice) Touch(b *Buffer, size, stride int64, write bool, threads int, times *Buffer, s Stream) error {
	if b.DevAddr == 0 || size <= 0 || size > b.Size || stride < 4 || threads < 1 {
		return fmt.Errorf("touch of %d B every %d B of %v by %d threads: %w", size, stride, b, threads, cuda.ErrorInvalidValue)
	}
	var timesAddr uint64
	if times != nil {
		if times.DevAddr == 0 || times.Size < (size+stride-1)/stride*8 {
			return fmt.Errorf("touch times buffer %v too small: %w", times, cuda.ErrorInvalidValue)
		}
		timesAddr = uint64(times.DevAddr)
	}
	var w uint64
	if write {
		w = 1
	}
	args, err := kernels.Touch.Args(uint64(b.DevAddr), uint64(size), uint64(stride), timesAddr, w)
	if err != nil {
		return err
	}
	block := min(threads, touchBlock)
	grid := (threads + block - 1) / block
	return d.t.LaunchKernel(d.touchFn, cuda.Dim(uint32(grid)), cuda.Dim(uint32(block)), 0, cuda.Stream(s), args...)
}

func (d *cudaDevice) HostTouch(b *Buffer, size, stride int64, write bool) error {
	if b.Host == nil || size <= 0 || size > b.Size || stride < 1 {
		return fmt.Errorf("host touch of %d B every %d B of %v: %w", size, stride, b, cuda.ErrorInvalidValue)
	}
	hostTouch(b.Host[:size], stride, write)
	return nil
}

func (d *cudaDevice) NullCall() error {
	_, err := cuda.DriverVersion()
	return err
}

func (d *cudaDevice) ExportDMABuf(b *Buffer) (DMABufExport, error) {
	if b.Kind != MemDevice {
		return DMABufExport{}, fmt.Errorf("dma-buf export of %v: %w", b, cuda.ErrorInvalidValue)
	}
	t0 := d.Now()
	fd, err := d.t.DMABufFD(b.impl.(*realBuf).dev, b.Size)
	el := d.Now() - t0
	if err != nil {
		return DMABufExport{}, err
	}
	// Read while the descriptor is open: count is then this one.
	info, rerr := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	if cerr := syscall.Close(fd); cerr != nil {
		return DMABufExport{}, fmt.Errorf("closing dma-buf fd %d: %w", fd, cerr)
	}
	if rerr != nil {
		return DMABufExport{}, fmt.Errorf("dma-buf fdinfo: %w", rerr)
	}
	return DMABufExport{Elapsed: el, FDInfo: string(info)}, nil
}

func (d *cudaDevice) BufferID(b *Buffer) (uint64, error) {
	if b.DevAddr == 0 {
		return 0, fmt.Errorf("buffer id of %v: %w", b, cuda.ErrorInvalidValue)
	}
	return d.t.PointerBufferID(b.DevAddr)
}

// hostMachine reads the host's identity from /proc and /sys.
func hostMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU()}
	m.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.CPU = cpuModel("/proc/cpuinfo")
	nodes, _ := filepath.Glob("/sys/devices/system/node/node[0-9]*")
	m.NUMANodes = max(len(nodes), 1)
	m.IOMMU = readMachineIOMMU("/")
	m.PeerMemory = readPeerMemoryModules("/")
	return m
}

// cpuModel returns the first "model name" of a cpuinfo file.
func cpuModel(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
