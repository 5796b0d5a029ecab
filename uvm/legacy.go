package uvm

import (
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/sim"
)

// The models without GPU faults.
//
// Pre-Pascal (NVIDIA's "How does NVIDIA implement unified memory on
// PCIe GPUs and Tegra platforms?"; the CUDA programming guide's
// "devices of compute capability lower than 6.0"): managed memory lives
// in the home GPU's memory (every GPU maps it, over peer access when
// there are several), or in system memory when the GPUs cannot all
// peer. The CPU faults pages into system memory (4 KiB each; assumed,
// the legacy driver is not in open-gpu-kernel-modules); a CPU write
// marks a page dirty, and at the next kernel launch every dirty page
// migrates to the home GPU and the CPU loses its copies, so that it
// faults again after the kernel.
//
// Tegra: one physical copy in the SoC's DRAM, never migrated. The CPU
// caches are cleaned of what the CPU wrote at kernel launch and
// invalidated of what the GPU wrote at completion (Env.CacheMaintenance).
//
// In both, the CPU must not touch managed memory while a kernel runs
// (ErrConcurrentAccess), and cuMemPrefetchAsync is not supported.

// KernelLaunch tells the driver that a kernel starts on GPU gpu. On
// pre-Pascal it migrates what the CPU dirtied and unmaps the CPU; on
// Tegra it cleans the CPU caches of what the CPU wrote. It blocks p for
// the work.
func (d *Driver) KernelLaunch(p *sim.Proc, gpu int) error {
	g, err := d.gpu(gpu)
	if err != nil {
		return err
	}
	if d.observed() {
		d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindLaunch, Processor: g.id})
	}
	switch d.gen {
	case PrePascal:
		for _, b := range sortedBlocks(d.dirty) {
			d.lock(p, b)
			if b.cpuDirty != nil && b.alloc.Home != CPU {
				m := *b.cpuDirty
				bytes := int64(m.Count()) * PageSize
				home := b.alloc.Home
				d.move(p, b, CPU, home, m)
				d.stats.Migrations[CauseLaunch]++
				d.stats.MigratedBytes[CauseLaunch] += bytes
				if d.observed() {
					d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindMigration, From: CPU, To: home,
						Addr: b.addr(m.First()), Bytes: bytes, Cause: CauseLaunch})
				}
				b.residentMask(home).Or(&m)
				b.cpuDirty = nil
				delete(d.dirty, b.num)
			}
			d.unlock(b)
		}
		for _, b := range sortedBlocks(d.cpuHeld) {
			if b.alloc.Home != CPU {
				b.resident[CPU] = nil
				delete(d.cpuHeld, b.num)
			}
		}
	case Tegra:
		if bytes := d.tegraDirty(func(b *vaBlock) **PageMask { return &b.cpuDirty }); bytes > 0 {
			d.maintain(p, CacheClean, bytes)
		}
	}
	g.kernels++
	return nil
}

// KernelComplete tells the driver that a kernel on GPU gpu ended. On
// Tegra it invalidates the CPU caches of what the GPU wrote.
func (d *Driver) KernelComplete(p *sim.Proc, gpu int) error {
	g, err := d.gpu(gpu)
	if err != nil {
		return err
	}
	if g.kernels == 0 {
		return fmt.Errorf("kernel completion on %s with none running: %w", g.cfg.Name, ErrInvalidValue)
	}
	if d.gen == Tegra {
		if bytes := d.tegraDirty(func(b *vaBlock) **PageMask { return &b.gpuDirty }); bytes > 0 {
			d.maintain(p, CacheInvalidate, bytes)
		}
	}
	g.kernels--
	if d.observed() {
		d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindComplete, Processor: g.id})
	}
	return nil
}

func (d *Driver) maintain(p *sim.Proc, op CacheOp, bytes int64) {
	d.env.CacheMaintenance(p, op, bytes)
	if d.observed() {
		d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindCacheMaintenance, Processor: CPU, Bytes: bytes})
	}
}

// tegraDirty counts and clears the dirty pages of one side.
func (d *Driver) tegraDirty(side func(*vaBlock) **PageMask) int64 {
	var n int64
	for _, b := range sortedBlocks(d.dirty) {
		m := side(b)
		if *m != nil {
			n += int64((*m).Count()) * PageSize
			*m = nil
		}
		if b.cpuDirty == nil && b.gpuDirty == nil {
			delete(d.dirty, b.num)
		}
	}
	return n
}

func sortedBlocks(m map[uint64]*vaBlock) []*vaBlock {
	out := make([]*vaBlock, 0, len(m))
	for _, b := range m {
		out = append(out, b)
	}
	slices.SortFunc(out, func(x, y *vaBlock) int { return cmpUint(x.num, y.num) })
	return out
}

func (d *Driver) markDirty(b *vaBlock, side **PageMask, lo, hi int) {
	if *side == nil {
		*side = new(PageMask)
	}
	(*side).SetRange(lo, hi)
	d.dirty[b.num] = b
}

// legacyGPUAccess: a pre-Pascal GPU reads and writes the home copy, its
// own memory or a peer's (or system memory), without faults.
func (d *Driver) legacyGPUAccess(p *sim.Proc, g *gpuState, a *Allocation, start, end Addr) (Access, error) {
	if g.kernels == 0 {
		return Access{}, d.fail(p, g.id, start, fmt.Errorf("%v on %s: %w", start, g.cfg.Name, ErrNoKernel))
	}
	home := a.Home
	for num := uint64(start) / BlockSize; num <= (uint64(end)-1)/BlockSize; num++ {
		b := d.block(a, num)
		lo, hi := spanPages(b.start, start, end)
		// Untouched pages are the home copy's zeroes.
		fresh := andNot(rangeMask(lo, hi), b.anyResident())
		b.residentMask(home).Or(&fresh)
	}
	acc := Access{Where: home}
	if home != g.id {
		acc.RemoteBytes = int64(end - start)
	}
	return acc, nil
}

// legacyCPUAccess: the CPU faults each page it has no copy of into
// system memory; a write leaves the page dirty for the next launch.
func (d *Driver) legacyCPUAccess(p *sim.Proc, a *Allocation, start, end Addr, write bool) (Access, error) {
	t0 := p.Now()
	acc := Access{Where: CPU}
	home := a.Home
	for num := uint64(start) / BlockSize; num <= (uint64(end)-1)/BlockSize; num++ {
		b := d.block(a, num)
		lo, hi := spanPages(b.start, start, end)
		if home == CPU {
			// System memory that every processor maps: no faults.
			fresh := andNot(rangeMask(lo, hi), b.anyResident())
			b.residentMask(CPU).Or(&fresh)
			continue
		}
		d.lock(p, b)
		for pg := lo; pg < hi; pg++ {
			if b.residentMask(CPU).Test(pg) {
				continue
			}
			acc.Faults++
			d.stats.CPUFaults++
			if d.observed() {
				d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindFault, Processor: CPU, Addr: b.addr(pg), Write: write})
			}
			p.Sleep(d.p.CPUFaultCost)
			if b.residentMask(home).Test(pg) {
				var one PageMask
				one.Set(pg)
				d.move(p, b, home, CPU, one)
				d.stats.Migrations[CauseFault]++
				d.stats.MigratedBytes[CauseFault] += PageSize
				if d.observed() {
					d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindMigration, From: home, To: CPU,
						Addr: b.addr(pg), Bytes: PageSize, Cause: CauseFault})
				}
			} else {
				p.Sleep(d.p.CPUZeroPageCost)
				d.stats.PopulatedBytes += PageSize
			}
			b.residentMask(CPU).Set(pg)
		}
		d.cpuHeld[b.num] = b
		if write {
			d.markDirty(b, &b.cpuDirty, lo, hi)
			if r := b.resident[home]; r != nil {
				m := rangeMask(lo, hi)
				r.AndNot(&m)
			}
		}
		d.unlock(b)
	}
	acc.Stall = p.Now() - t0
	d.stall(p, CPU, start, end, acc.Stall)
	return acc, nil
}

// tegraGPUAccess: the iGPU reads and writes the one copy in shared DRAM.
func (d *Driver) tegraGPUAccess(p *sim.Proc, g *gpuState, a *Allocation, start, end Addr, write bool) (Access, error) {
	if g.kernels == 0 {
		return Access{}, d.fail(p, g.id, start, fmt.Errorf("%v on %s: %w", start, g.cfg.Name, ErrNoKernel))
	}
	if write {
		for num := uint64(start) / BlockSize; num <= (uint64(end)-1)/BlockSize; num++ {
			b := d.block(a, num)
			lo, hi := spanPages(b.start, start, end)
			d.markDirty(b, &b.gpuDirty, lo, hi)
		}
	}
	return Access{Where: CPU}, nil
}

// tegraCPUAccess: the CPU reads and writes the same copy, cached.
func (d *Driver) tegraCPUAccess(a *Allocation, start, end Addr, write bool) Access {
	if write {
		for num := uint64(start) / BlockSize; num <= (uint64(end)-1)/BlockSize; num++ {
			b := d.block(a, num)
			lo, hi := spanPages(b.start, start, end)
			d.markDirty(b, &b.cpuDirty, lo, hi)
		}
	}
	return Access{Where: CPU}
}
