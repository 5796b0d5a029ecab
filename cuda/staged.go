package cuda

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
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
	// Node is the NUMA node whose memory the CPU memcpy between the
	// pageable buffer and the staging buffers runs in (machine.CPUCopy).
	Node int
	// ToDevice: host to device; otherwise device to host.
	ToDevice bool
	Bytes    int64
	// Overhead is the call's fixed cost, paid once before the first
	// chunk (the GPU's CopyOverhead for a cuMemcpy).
	Overhead sim.Time
	// Chunk is the staging buffers' size; 0 means the GPU's
	// PageableChunk (platform.GPU.Chunk).
	Chunk int64
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
	p.Sleep(s.Overhead)
	free := StagingBuffers
	var ready []int64 // chunks filled and waiting for the next stage
	cond := sim.NewCond(name + " staging")
	var dmaErr error
	move := func(q *sim.Proc, n int64) error {
		src, dst := s.Host, s.GPU.Memory()
		if !s.ToDevice {
			src, dst = dst, src
		}
		_, err := s.DMA.Transfer(q, &dma.Transfer{Name: name, Engine: en, Src: src, Dst: dst, Bytes: n})
		return err
	}
	nchunks := (s.Bytes + chunk - 1) / chunk
	size := func(i int64) int64 { return min(chunk, s.Bytes-i*chunk) }
	if nchunks > MaxStagedChunks {
		return bulkStaged(p, m, s, name, chunk, size(nchunks-1), move)
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
			if err := m.CPUCopy(p, name+" stage", s.Node, size(i)); err != nil {
				return err
			}
			ready = append(ready, size(i))
			cond.Broadcast()
		}
		p.Join(worker)
		return dmaErr
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
		if err := m.CPUCopyOut(p, name+" unstage", s.Node, n); err != nil {
			return err
		}
		free++
		cond.Broadcast()
	}
	p.Join(worker)
	return dmaErr
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
func bulkStaged(p *sim.Proc, m *machine.Machine, s Staging, name string, first, last int64, dma func(*sim.Proc, int64) error) error {
	memcpy := func(q *sim.Proc, n int64) error { return m.CPUCopy(q, name+" stage", s.Node, n) }
	lead, follow := memcpy, dma
	if !s.ToDevice {
		memcpy = func(q *sim.Proc, n int64) error { return m.CPUCopyOut(q, name+" unstage", s.Node, n) }
		lead, follow = dma, memcpy
	}
	if err := lead(p, first); err != nil {
		return err
	}
	var followErr error
	worker := p.Spawn(name+" steady", func(q *sim.Proc) { followErr = follow(q, s.Bytes-last) })
	leadErr := lead(p, s.Bytes-first)
	p.Join(worker)
	if err := errors.Join(leadErr, followErr); err != nil {
		return err
	}
	return follow(p, last)
}
