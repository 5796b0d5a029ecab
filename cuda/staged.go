package cuda

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// StagingBuffers is how many pinned staging buffers a pageable copy
// cycles through: two, so that the CPU fills one while the copy engine
// drains the other (double buffering).
const StagingBuffers = 2

// Staging describes one direction of a pageable copy.
type Staging struct {
	// Name names the flows and processes.
	Name string
	GPU  *machine.GPU
	// DMA is the GPU as a bus master of the DMA layer: the chunks move
	// through its Transfer.
	DMA *dma.Device
	// Host is the memory of the staging buffers (the DMA's end).
	Host machine.Endpoint
	// Node is the NUMA node of the CPU that copies between the pageable
	// buffer and the staging buffers, and of the staging buffers
	// (machine.CPUCopy).
	Node int
	// RemotePages says the pageable buffer lies on node PageNode, not
	// on Node: its memcpy then crosses the socket links
	// (machine.CPUCopyBetween to the device, machine.CPUAccess's
	// streaming stores from it), at a remote access's latency and rate
	// and sharing the links with every other flow on them.
	RemotePages bool
	PageNode    int
	// ToDevice: host to device; otherwise device to host.
	ToDevice bool
	Bytes    int64
	// Overhead is the call's fixed cost (the GPU's CopyOverhead for a
	// cuMemcpy): all of it but Completion before the first chunk.
	Overhead sim.Time
	// Completion is the share of Overhead that is the host observing a
	// DMA's completion (the GPU's CopyCompletion): from the device, paid
	// after each chunk's DMA, before the CPU copies the chunk out (the
	// last chunk's is the call's own); to the device, not paid: the call
	// returns once its data is staged (CUDA Runtime API, "API
	// synchronization behavior": "The function will return once the
	// pageable buffer has been copied to the staging memory for DMA
	// transfer to device memory, but the DMA to final destination may not
	// have completed").
	Completion sim.Time
	// Landed, when not nil, is completed when the last byte has landed:
	// to the device after StagedCopy returns, while the last chunks' DMA
	// finishes; from the device before it returns. LandedErr then holds
	// the error of a DMA that failed after the return.
	Landed    *sim.Completion
	LandedErr *error
	// Chunk is the staging buffers' size; 0 means the GPU's
	// PageableChunk (platform.GPU.Chunk).
	Chunk int64
	// Rate is the driver's copy into the staging buffers, bytes/s of one
	// thread on local memory (the GPU's StagingRate); 0 means the node's
	// memcpy rate.
	Rate float64
	// Buffers are the driver's staging buffers as the GPU addresses
	// them (NewStagingMemory), when its DMA goes through an IOMMU: each
	// chunk's transfer then reads or writes its buffer at its IOVA, so
	// it is translated and its IOTLB misses paid. nil: the transfers
	// carry bytes only (dma-direct, where translating costs nothing).
	Buffers *StagingMemory
}

// StagingMemory is the driver's pinned staging buffers of one GPU:
// StagingBuffers buffers of one chunk each, allocated on a node and
// mapped for the GPU through its IOMMU domain once, when they are made
// (the driver's own pinned memory, mapped as nv_dma_map_sgt maps any:
// open-gpu-kernel-modules, kernel-open/nvidia/nv-dma.c), and kept for
// the driver's life.
type StagingMemory struct {
	pa    mem.PhysAddr
	chunk uint64
	iova  mem.DMAAddr
}

// NewStagingMemory makes dev's staging buffers of chunk bytes each on
// node and maps them for dev, p paying the mapping; nil and no error
// when dev's DMA is not translated by an IOMMU domain (a dma.Mapper):
// then nothing is allocated, and staged copies move bytes only.
func NewStagingMemory(p *sim.Proc, m *machine.Machine, dev *dma.Device, node int, chunk uint64) (*StagingMemory, error) {
	mp, ok := dev.Translator().(dma.Mapper)
	if !ok {
		return nil, nil
	}
	if chunk == 0 || chunk%mem.PageSize != 0 {
		return nil, fmt.Errorf("staging buffers of %d bytes: not whole pages", chunk)
	}
	size := chunk * StagingBuffers
	pa, err := m.Mem.AllocPages(node, size, mem.ZoneNormal)
	if err != nil {
		return nil, fmt.Errorf("staging buffers for %s: %w", dev.Name(), err)
	}
	iova, err := mp.MapSG(p, []mem.PhysRange{{Start: pa, Size: size}}, dma.Bidirectional)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("staging buffers for %s: dma_map_sg: %w", dev.Name(), err), m.Mem.FreePages(pa, size))
	}
	p.Sleep(gpu.IOMMUMapCallCost + sim.Time(gpu.IOMMULeaves(iova, pa, size))*gpu.IOMMUMapLeafCost)
	return &StagingMemory{pa: pa, chunk: chunk, iova: iova}, nil
}

// Chunk is each buffer's size.
func (sm *StagingMemory) Chunk() uint64 { return sm.chunk }

// spans are the GPU's spans of n bytes of staging buffer i (mod
// StagingBuffers); nil without buffers.
func (sm *StagingMemory) spans(i int64, n int64) []dma.Span {
	if sm == nil {
		return nil
	}
	b := mem.DMAAddr(uint64(i%StagingBuffers) * sm.chunk)
	return []dma.Span{dma.PinnedSpan(sm.iova+b, uint64(n))}
}

// StagedCopy is one direction of a pageable copy, as the CUDA driver
// does it (the CUDA C++ Best Practices Guide: pageable transfers go
// through pinned staging buffers): the call's overhead once, then chunks
// of s.Chunk through StagingBuffers pinned buffers. To the device, the
// calling thread copies a chunk from pageable memory into a free
// staging buffer (a CPU memcpy, machine.CPUCopy: CPU time at the node's
// memcpy rate) and hands it to the copy engine, which moves it (a
// dma.Device.Transfer without overhead of its own); from the device, the
// engine fills a staging buffer and the thread copies it out
// (machine.CPUCopyOut: the buffer is still in the caches, so the copy is
// bound by writing DRAM, at the node's stream rate). The two
// stages overlap, so the slower one (usually the one-thread memcpy)
// sets the rate. It blocks p until the last byte has landed.
//
// It moves bytes, not content: Context.Memcpy does the memory effects.
func StagedCopy(p *sim.Proc, m *machine.Machine, s Staging) error {
	if s.Bytes < 0 {
		return fmt.Errorf("staged copy %s: negative size %d", s.Name, s.Bytes)
	}
	if s.GPU == nil || s.DMA == nil {
		return fmt.Errorf("staged copy %s: needs the GPU and its DMA device", s.Name)
	}
	// Checked first, so that no DMA worker is left waiting for a chunk
	// the memcpy cannot make.
	if _, err := m.HostMemory(s.Node); err != nil {
		return fmt.Errorf("staged copy %s: %w", s.Name, err)
	}
	if _, err := m.HostMemory(s.PageNode); s.RemotePages && err != nil {
		return fmt.Errorf("staged copy %s: pageable memory: %w", s.Name, err)
	}
	chunk := s.Chunk
	if chunk <= 0 {
		chunk = int64(s.GPU.Spec.Chunk())
	}
	kind := machine.HostToDevice
	if !s.ToDevice {
		kind = machine.DeviceToHost
	}
	en := s.GPU.CopyEngine(kind)
	name := s.Name
	if s.Completion > s.Overhead {
		return fmt.Errorf("staged copy %s: completion %v exceeds the call's overhead %v", s.Name, s.Completion, s.Overhead)
	}
	p.Sleep(s.Overhead - s.Completion)
	free := StagingBuffers
	var ready []int64 // chunks filled and waiting for the next stage
	cond := sim.NewCond(name + " staging")
	var dmaErr error
	if s.Buffers != nil && uint64(chunk) > s.Buffers.chunk {
		return fmt.Errorf("staged copy %s: chunks of %d bytes in staging buffers of %d", s.Name, chunk, s.Buffers.chunk)
	}
	// moved counts the chunks handed to the copy engine: chunk i is in
	// staging buffer i mod StagingBuffers.
	moved := int64(0)
	// move is one transfer of n bytes through k staging buffers'
	// worth of chunks (one, except in bulkStaged's steady state).
	move := func(q *sim.Proc, n int64) error {
		src, dst := s.Host, s.GPU.Memory()
		if !s.ToDevice {
			src, dst = dst, src
		}
		t := &dma.Transfer{Name: name, Engine: en, Src: src, Dst: dst, Bytes: n}
		var spans []dma.Span
		for left := n; left > 0 && s.Buffers != nil; moved++ {
			k := min(left, chunk)
			spans = append(spans, s.Buffers.spans(moved, k)...)
			left -= k
		}
		if s.ToDevice {
			t.Read = spans
		} else {
			t.Write = spans
		}
		_, err := s.DMA.Transfer(q, t)
		return err
	}
	nchunks := (s.Bytes + chunk - 1) / chunk
	size := func(i int64) int64 { return min(chunk, s.Bytes-i*chunk) }
	landed := func(err error) error {
		if s.LandedErr != nil {
			*s.LandedErr = err
		}
		if s.Landed != nil {
			s.Landed.Complete()
		}
		return err
	}
	if nchunks > MaxStagedChunks {
		err := bulkStaged(p, m, s, name, chunk, size(nchunks-1), move)
		if !s.ToDevice && err == nil {
			p.Sleep(s.Completion)
		}
		return landed(err)
	}
	if s.ToDevice {
		// The copy engine drains filled buffers in order.
		worker := p.Spawn(name+" dma", func(q *sim.Proc) {
			for range nchunks {
				q.WaitUntil(cond, func() bool { return len(ready) > 0 })
				n := ready[0]
				ready = ready[1:]
				if err := move(q, n); err != nil && dmaErr == nil {
					dmaErr = err
				}
				free++
				cond.Broadcast()
			}
		})
		for i := range nchunks {
			p.WaitUntil(cond, func() bool { return free > 0 })
			free--
			if err := s.stage(p, m, name, size(i)); err != nil {
				return err
			}
			ready = append(ready, size(i))
			cond.Broadcast()
		}
		// Staged: the call returns while the engine drains the rest.
		worker.Exited().OnComplete(func() { landed(dmaErr) })
		return nil
	}
	worker := p.Spawn(name+" dma", func(q *sim.Proc) {
		for i := range nchunks {
			q.WaitUntil(cond, func() bool { return free > 0 })
			free--
			if err := move(q, size(i)); err != nil && dmaErr == nil {
				dmaErr = err
			}
			ready = append(ready, size(i))
			cond.Broadcast()
		}
	})
	for range nchunks {
		p.WaitUntil(cond, func() bool { return len(ready) > 0 })
		n := ready[0]
		ready = ready[1:]
		// The host learns of the chunk's DMA by its semaphore.
		p.Sleep(s.Completion)
		if err := s.unstage(p, m, name, n); err != nil {
			return err
		}
		free++
		cond.Broadcast()
	}
	p.Join(worker)
	return landed(dmaErr)
}

// MaxStagedChunks bounds the chunks a staged copy simulates one by one
// (2 GiB at the default 2 MiB chunk), so that the cost of a copy never
// grows with its bytes. Beyond it the pipeline's steady state is modelled
// by its two stages running at once as two flows, between the first
// chunk's fill and the last chunk's drain: the same time as the chunks
// give, less the per-chunk latencies (under 1 % at 2 MiB chunks on the
// presets).
const MaxStagedChunks = 1024

// bulkStaged is a long staged copy as fill, steady state, drain: to the
// device, the first chunk's memcpy, then the memcpy of the rest alongside
// the DMA of all but the last chunk, then the last chunk's DMA; from the
// device the same with the stages swapped.
func bulkStaged(p *sim.Proc, m *machine.Machine, s Staging, name string, chunk, last int64, dma func(*sim.Proc, int64) error) error {
	first := chunk
	memcpy := func(q *sim.Proc, n int64) error { return s.stage(q, m, name, n) }
	lead, follow := memcpy, dma
	if !s.ToDevice {
		memcpy = func(q *sim.Proc, n int64) error { return s.unstage(q, m, name, n) }
		lead, follow = dma, memcpy
	}
	if err := lead(p, first); err != nil {
		return err
	}
	var followErr error
	worker := p.Spawn(name+" steady", func(q *sim.Proc) {
		if !s.ToDevice {
			// The CPU stage waits for each chunk's completion before
			// copying it out: one wait per chunk of the steady state.
			q.Sleep(sim.Time((s.Bytes-last)/chunk) * s.Completion)
		}
		followErr = follow(q, s.Bytes-last)
	})
	leadErr := lead(p, s.Bytes-first)
	p.Join(worker)
	if err := errors.Join(leadErr, followErr); err != nil {
		return err
	}
	return follow(p, last)
}

// stage is the CPU's copy of n bytes from the pageable buffer into a
// staging buffer: within Node's memory, or from PageNode's across the
// socket links.
func (s *Staging) stage(p *sim.Proc, m *machine.Machine, name string, n int64) error {
	if s.RemotePages {
		return m.CPUCopyBetweenAt(p, name+" stage", s.Node, s.PageNode, s.Node, n, s.Rate)
	}
	return m.CPUCopyAt(p, name+" stage", s.Node, n, s.Rate)
}

// unstage is the CPU's copy of n bytes out of a staging buffer, which
// the copy engine has just filled and the caches hold, into the
// pageable buffer with streaming stores: into Node's DRAM, or across
// the socket links into PageNode's, each store's data leaving with its
// request (machine.CPUAccess towards memory at the stream rate).
func (s *Staging) unstage(p *sim.Proc, m *machine.Machine, name string, n int64) error {
	if s.RemotePages {
		rate := float64(m.Nodes[s.Node].Spec.StreamCopyRate())
		return m.CPUAccess(p, name+" unstage", s.Node, s.PageNode, n, true, rate)
	}
	return m.CPUCopyOut(p, name+" unstage", s.Node, n)
}
