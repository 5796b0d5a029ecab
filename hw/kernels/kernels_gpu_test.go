package kernels_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/dmalab/dmalab/hw/cuda"
	"github.com/dmalab/dmalab/hw/kernels"
)

// gpu runs fn on GPU 0's context with k loaded, skipping only when this
// machine has no CUDA driver or GPU.
func gpu(t *testing.T, k kernels.Kernel, fn func(th *cuda.Thread, f cuda.Function) error) {
	t.Helper()
	if err := cuda.Init(); err != nil {
		if cuda.IsUnavailable(err) {
			t.Skipf("no CUDA here: %v", err)
		}
		t.Fatal(err)
	}
	dev, err := cuda.DeviceGet(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := cuda.NewContext(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	err = ctx.Do(func(th *cuda.Thread) error {
		m, err := th.ModuleLoadData(k.PTX())
		if err != nil {
			return err
		}
		defer th.ModuleUnload(m)
		f, err := th.ModuleGetFunction(m, k.Entry)
		if err != nil {
			return err
		}
		return fn(th, f)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func launch(th *cuda.Thread, k kernels.Kernel, f cuda.Function, grid, block uint32, s cuda.Stream, args ...uint64) error {
	a, err := k.Args(args...)
	if err != nil {
		return err
	}
	return th.LaunchKernel(f, cuda.Dim(grid), cuda.Dim(block), 0, s, a...)
}

func word32(b []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }

func TestGPUCopy(t *testing.T) {
	gpu(t, kernels.Copy, func(th *cuda.Thread, f cuda.Function) error {
		const n = 4<<20 + 48 // not a multiple of the grid
		host, err := th.MemHostAlloc(n, cuda.HostAllocPortable|cuda.HostAllocDeviceMap)
		if err != nil {
			return err
		}
		defer th.FreeHost(host)
		hdev, err := th.HostGetDevicePointer(host.Bytes())
		if err != nil {
			return err
		}
		dev, err := th.MemAlloc(n)
		if err != nil {
			return err
		}
		defer th.MemFree(dev)
		src := host.Bytes()
		for i := range src {
			src[i] = byte(i*131 + i>>12)
		}
		// Zero-copy read of mapped host memory into device memory, with a
		// grid far smaller than the range (grid-stride).
		if err := th.MemsetD8(dev, 0, n); err != nil {
			return err
		}
		if err := launch(th, kernels.Copy, f, 7, 96, 0, uint64(dev), uint64(hdev), n/16); err != nil {
			return err
		}
		if err := th.Synchronize(); err != nil {
			return err
		}
		back := make([]byte, n)
		if err := th.MemcpyDtoH(back, dev); err != nil {
			return err
		}
		if !bytes.Equal(back, src) {
			return fmt.Errorf("h2d copy kernel: data differs at %d", firstDiff(back, src))
		}
		// And back into host memory, zero-copy writes.
		clear(src)
		if err := launch(th, kernels.Copy, f, 264, 512, 0, uint64(hdev), uint64(dev), n/16); err != nil {
			return err
		}
		if err := th.Synchronize(); err != nil {
			return err
		}
		if !bytes.Equal(back, src) {
			return fmt.Errorf("d2h copy kernel: data differs at %d", firstDiff(back, src))
		}
		return nil
	})
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func TestGPUSpin(t *testing.T) {
	gpu(t, kernels.Spin, func(th *cuda.Thread, f cuda.Function) error {
		flag, err := th.MemHostAlloc(4096, cuda.HostAllocPortable|cuda.HostAllocDeviceMap)
		if err != nil {
			return err
		}
		defer th.FreeHost(flag)
		fdev, err := th.HostGetDevicePointer(flag.Bytes())
		if err != nil {
			return err
		}
		s, err := th.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			return err
		}
		defer th.StreamDestroy(s)
		release, status := word32(flag.Bytes(), 0), word32(flag.Bytes(), 4)

		// Released by the host: the stream is held until then.
		if err := launch(th, kernels.Spin, f, 1, 1, s, uint64(fdev), uint64(10*time.Second)); err != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond)
		if atomic.LoadUint32(status) != kernels.SpinRunning {
			return fmt.Errorf("spin ended before release: status %d", atomic.LoadUint32(status))
		}
		atomic.StoreUint32(release, 1)
		if err := th.StreamSynchronize(s); err != nil {
			return err
		}
		if st := atomic.LoadUint32(status); st != kernels.SpinReleased {
			return fmt.Errorf("released spin: status %d", st)
		}

		// Not released: it gives up after its timeout.
		atomic.StoreUint32(release, 0)
		atomic.StoreUint32(status, kernels.SpinRunning)
		t0 := time.Now()
		if err := launch(th, kernels.Spin, f, 1, 1, s, uint64(fdev), uint64(50*time.Millisecond)); err != nil {
			return err
		}
		if err := th.StreamSynchronize(s); err != nil {
			return err
		}
		el := time.Since(t0)
		if st := atomic.LoadUint32(status); st != kernels.SpinTimedOut || el < 40*time.Millisecond || el > 2*time.Second {
			return fmt.Errorf("timed-out spin: status %d after %v", st, el)
		}
		return nil
	})
}

func TestGPUChase(t *testing.T) {
	gpu(t, kernels.Chase, func(th *cuda.Thread, f cuda.Function) error {
		// A random cycle through 4096 nodes, one per 4 KiB page, in mapped
		// host memory: each load crosses the bus.
		const nodes, stride, steps = 4096, 4096, 20000
		host, err := th.MemHostAlloc(nodes*stride, cuda.HostAllocPortable|cuda.HostAllocDeviceMap)
		if err != nil {
			return err
		}
		defer th.FreeHost(host)
		base, err := th.HostGetDevicePointer(host.Bytes())
		if err != nil {
			return err
		}
		out, err := th.MemHostAlloc(4096, cuda.HostAllocPortable|cuda.HostAllocDeviceMap)
		if err != nil {
			return err
		}
		defer th.FreeHost(out)
		outDev, err := th.HostGetDevicePointer(out.Bytes())
		if err != nil {
			return err
		}
		order := rand.New(rand.NewPCG(1, 2)).Perm(nodes)
		mem := host.Bytes()
		for i, n := range order {
			next := order[(i+1)%nodes]
			binary.LittleEndian.PutUint64(mem[n*stride:], uint64(base)+uint64(next*stride))
		}
		// Expected end: start at order[0], steps hops along the cycle.
		want := uint64(base) + uint64(order[steps%nodes]*stride)
		if err := launch(th, kernels.Chase, f, 1, 1, 0, uint64(base)+uint64(order[0]*stride), steps, uint64(outDev)); err != nil {
			return err
		}
		if err := th.Synchronize(); err != nil {
			return err
		}
		o := out.Bytes()
		got, cycles, ns := binary.LittleEndian.Uint64(o), binary.LittleEndian.Uint64(o[8:]), binary.LittleEndian.Uint64(o[16:])
		if got != want {
			return fmt.Errorf("chase ended at %#x, want %#x", got, want)
		}
		perHop := float64(ns) / steps
		if perHop < 100 || perHop > 100000 {
			return fmt.Errorf("host memory latency %.0f ns per load, %d cycles: implausible", perHop, cycles)
		}
		t.Logf("GPU load from mapped host memory: %.0f ns (%.0f cycles) per dependent load", perHop, float64(cycles)/steps)
		return nil
	})
}

func TestGPUTouch(t *testing.T) {
	gpu(t, kernels.Touch, func(th *cuda.Thread, f cuda.Function) error {
		free, _, err := th.MemGetInfo()
		if err != nil {
			return err
		}
		const size = 64 << 20
		if free < 4*size {
			return fmt.Errorf("only %d B free", free)
		}
		p, err := th.MemAllocManaged(size, cuda.MemAttachGlobal)
		if err != nil {
			return err
		}
		defer th.MemFree(p)
		host := cuda.ManagedBytes(p, size)
		for i := 0; i < size; i += 4096 {
			host[i] = 1 // first touch on the CPU: pages live in host memory
		}
		const stride = 64 << 10
		const touches = size / stride
		times, err := th.MemAlloc(touches * 8)
		if err != nil {
			return err
		}
		defer th.MemFree(times)
		// One thread, in order, writing: each touch's time is recorded.
		if err := launch(th, kernels.Touch, f, 1, 1, 0, uint64(p), size, stride, uint64(times), 1); err != nil {
			return err
		}
		if err := th.Synchronize(); err != nil {
			return err
		}
		tb := make([]byte, touches*8)
		if err := th.MemcpyDtoH(tb, times); err != nil {
			return err
		}
		ns := make([]float64, touches)
		for i := range ns {
			ns[i] = float64(binary.LittleEndian.Uint64(tb[i*8:]))
		}
		// The stores landed where the kernel says: word k*stride holds k.
		for k := 0; k < touches; k++ {
			if v := binary.LittleEndian.Uint32(host[k*stride:]); v != uint32(k) {
				return fmt.Errorf("touch %d: word holds %d", k, v)
			}
		}
		sorted := slices.Sorted(slices.Values(ns))
		first := ns[0]
		t.Logf("single-thread write touches at %d KiB stride over %d MiB: first %.1f us, median %.1f us, max %.1f us",
			stride>>10, size>>20, first/1e3, sorted[len(sorted)/2]/1e3, sorted[len(sorted)-1]/1e3)
		var slow []int
		for k, v := range ns {
			if v > 5000 {
				slow = append(slow, k)
			}
		}
		t.Logf("touches over 5 us: %d of %d; first ones: %v", len(slow), touches, slow[:min(len(slow), 16)])
		if first < 1000 {
			return fmt.Errorf("first touch of CPU-resident managed memory took %.0f ns: no fault seen", first)
		}

		// Many threads, reading, back on the host first: timed by events.
		if err := th.MemPrefetchAsync(p, size, cuda.HostLocation(), 0); err != nil {
			return err
		}
		if err := th.Synchronize(); err != nil {
			return err
		}
		e0, _ := th.EventCreate(cuda.EventDefault)
		e1, _ := th.EventCreate(cuda.EventDefault)
		defer th.EventDestroy(e0)
		defer th.EventDestroy(e1)
		th.EventRecord(e0, 0)
		if err := launch(th, kernels.Touch, f, 64, 256, 0, uint64(p), size, 4096, 0, 0); err != nil {
			return err
		}
		th.EventRecord(e1, 0)
		if err := th.Synchronize(); err != nil {
			return err
		}
		el, err := th.EventElapsed(e0, e1)
		if err != nil {
			return err
		}
		t.Logf("fault-driven migration to the GPU, many threads reading every 4 KiB: %d MiB in %v = %.2f GB/s",
			size>>20, el, float64(size)/el.Seconds()/1e9)
		return nil
	})
}
