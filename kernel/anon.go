package kernel

import (
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// MbindFlags are mbind's and move_pages's flags
// (include/uapi/linux/mempolicy.h).
type MbindFlags uint8

const (
	// MPOLMFStrict (MPOL_MF_STRICT): EIO if a page of the range is on a
	// node the policy does not allow and is not moved.
	MPOLMFStrict MbindFlags = 1 << 0
	// MPOLMFMove (MPOL_MF_MOVE): migrate the pages of the range that
	// only this process maps and that the policy does not allow.
	MPOLMFMove MbindFlags = 1 << 1
	// MPOLMFMoveAll (MPOL_MF_MOVE_ALL): migrate shared pages too. The
	// model never shares anonymous pages between processes, so it
	// moves what MPOL_MF_MOVE does.
	MPOLMFMoveAll MbindFlags = 1 << 2
)

// GetFlags are get_mempolicy's flags.
type GetFlags uint8

const (
	MPOLFNode        GetFlags = 1 << 0 // MPOL_F_NODE: a node, not the policy
	MPOLFAddr        GetFlags = 1 << 1 // MPOL_F_ADDR: the policy (or node) at addr
	MPOLFMemsAllowed GetFlags = 1 << 2 // MPOL_F_MEMS_ALLOWED: the cpuset's mems
)

// anonMap is one anonymous mapping of a process: its pages' range
// policies (mbind; nil: the process's policy), by page index. The
// index is the page's offset in the mapping, what interleaving counts
// (interleave_nid with vma->vm_pgoff, which a VMA split carries on:
// Linux starts an anonymous VMA's vm_pgoff at its address's page
// number, so its rotation starts elsewhere; the model starts each
// mapping's at node 0 of the mask).
type anonMap struct {
	start  mem.VirtAddr
	npages uint64
	pols   []*MemPolicy
	// last is each page's last_cpupid (autonuma.go), nil until the
	// first NUMA hinting fault.
	last []cpupid
}

func (am *anonMap) policy(i uint64, p *Process) *MemPolicy {
	if am.pols != nil && am.pols[i] != nil {
		return am.pols[i]
	}
	return &p.Policy
}

// Mems is the nodes the process's cpuset allows (cpuset.mems), all of
// them when none was set.
func (p *Process) Mems() []int {
	if p.mems != nil {
		return slices.Clone(p.mems)
	}
	out := make([]int, p.k.nodes)
	for i := range out {
		out[i] = i
	}
	return out
}

// CPUsAllowed is the CPUs the process's cpuset allows, all when none
// was set.
func (p *Process) CPUsAllowed() []int {
	if p.cpus != nil {
		return slices.Clone(p.cpus)
	}
	out := make([]int, len(p.k.cpuNode))
	for i := range out {
		out[i] = i
	}
	return out
}

// SetCpuset moves the process into a cpuset with mems and cpus (nil:
// all). Its policies are rebound to the new mems (mpol_rebind_task and
// the VMAs' mpol_rebind_mm): no flag remaps the nodes by position,
// MPOL_F_STATIC_NODES intersects the nodes given with the mems,
// MPOL_F_RELATIVE_NODES folds them onto the mems. Threads bound to a CPU
// the cpuset leaves out move to its first CPU, as does the process's
// node. EINVAL for an empty set or a node or CPU the machine lacks.
func (p *Process) SetCpuset(mems, cpus []int) error {
	for _, n := range mems {
		if n < 0 || n >= p.k.nodes {
			return fmt.Errorf("cpuset.mems %v for %s: node %d: %w", mems, p.name, n, syscall.EINVAL)
		}
	}
	for _, c := range cpus {
		if p.k.NodeOfCPU(c) < 0 {
			return fmt.Errorf("cpuset.cpus %v for %s: cpu %d: %w", cpus, p.name, c, syscall.EINVAL)
		}
	}
	if mems != nil && len(mems) == 0 || cpus != nil && len(cpus) == 0 {
		return fmt.Errorf("cpuset for %s: empty set: %w", p.name, syscall.EINVAL)
	}
	if mems != nil {
		p.mems = normalize(mems)
	} else {
		p.mems = nil
	}
	if cpus != nil {
		p.cpus = normalize(cpus)
	} else {
		p.cpus = nil
	}
	all := p.Mems()
	p.Policy.rebind(all)
	for _, am := range p.anon {
		for _, pol := range am.pols {
			if pol != nil {
				pol.rebind(all)
			}
		}
	}
	allowed := p.CPUsAllowed()
	for t, c := range p.threadCPU {
		if !slices.Contains(allowed, c) {
			p.threadCPU[t] = allowed[0]
		}
	}
	if !slices.ContainsFunc(allowed, func(c int) bool { return p.k.NodeOfCPU(c) == p.node }) {
		p.node = p.k.NodeOfCPU(allowed[0])
		p.aff = []int{p.node}
	}
	return nil
}

// SetThreadAffinity is sched_setaffinity(2) of thread t to cpus: the
// model runs it on the lowest of them (it does not schedule), and its
// node (ThreadNode) is that CPU's. EINVAL for an empty set, a CPU the
// machine lacks or none the cpuset allows.
func (p *Process) SetThreadAffinity(t *sim.Proc, cpus ...int) error {
	allowed := p.CPUsAllowed()
	var ok []int
	for _, c := range cpus {
		if p.k.NodeOfCPU(c) < 0 {
			return fmt.Errorf("sched_setaffinity(%s, %v): cpu %d: %w", t.Name(), cpus, c, syscall.EINVAL)
		}
		if slices.Contains(allowed, c) {
			ok = append(ok, c)
		}
	}
	if len(ok) == 0 {
		return fmt.Errorf("sched_setaffinity(%s, %v): no CPU the cpuset allows: %w", t.Name(), cpus, syscall.EINVAL)
	}
	if p.threadCPU == nil {
		p.threadCPU = map[*sim.Proc]int{}
	}
	p.threadCPU[t] = slices.Min(ok)
	return nil
}

// ThreadCPU is the CPU thread t runs on: the one SetThreadAffinity
// chose, else the first CPU of the process's node that the launcher
// allowed (SetLauncher), else the node's first CPU.
func (p *Process) ThreadCPU(t *sim.Proc) int {
	if c, ok := p.threadCPU[t]; ok {
		return c
	}
	for _, c := range p.launchCPUs {
		if p.k.NodeOfCPU(c) == p.node {
			return c
		}
	}
	if cs := p.k.CPUsOfNode(p.node); len(cs) > 0 {
		return cs[0]
	}
	return -1
}

// ThreadNode is the node thread t runs on (numa_node_id() in it): its
// bound CPU's node, else the process's node. A CPU access by t passes it
// to mem, which places the pages t touches first there.
func (p *Process) ThreadNode(t *sim.Proc) int {
	if c, ok := p.threadCPU[t]; ok {
		return p.k.NodeOfCPU(c)
	}
	return p.node
}

// MmapAnon is mmap(2) of size bytes of private anonymous memory: a VMA
// named "anon" whose pages are absent until first touched. A CPU access
// (mem.Read, Write, ...) by a CPU of node n, or a pin (Populate) faults
// each absent page in: the kernel places it by the policy of its range
// (Mbind) or else the process's (SetMemPolicy), counted in numastat.
// A page no allowed node has room for fails the access with ENOMEM:
// Linux's fault would invoke the OOM killer (VM_FAULT_OOM) or, for a
// constrained policy, kill the task; the model reports the access's
// error instead and places nothing. Unmapping (or exit) frees the pages.
func (p *Process) MmapAnon(size uint64) (mem.VirtAddr, error) {
	if p.exited {
		return 0, fmt.Errorf("mmap anon(%#x) in %s: %w", size, p.name, ErrExited)
	}
	if p.k.mem == nil {
		return 0, fmt.Errorf("mmap anon(%#x) in %s: the kernel has no memory (SetMemory): %w", size, p.name, syscall.ENODEV)
	}
	am := &anonMap{}
	va, err := p.k.mem.MapAnon(size, func(va mem.VirtAddr, node int) (mem.PhysAddr, error) {
		i := uint64(va-am.start) / mem.PageSize
		if node < 0 {
			node = p.node
		}
		return p.k.allocPage(am.policy(i, p), i, node, p.mems)
	})
	if err != nil {
		return 0, fmt.Errorf("mmap anon(%#x) in %s: %w", size, p.name, errors.Join(err, syscall.ENOMEM))
	}
	am.start, am.npages = va, (size+mem.PageSize-1)/mem.PageSize
	// The kernel handles the NUMA hinting faults automatic NUMA
	// balancing sets up in the mapping (do_numa_page).
	if err := p.k.mem.SetHintHandler(va, func(t *sim.Proc, node int, at mem.VirtAddr) { p.numaHintFault(am, t, node, at) }); err != nil {
		return 0, errors.Join(fmt.Errorf("mmap anon(%#x) in %s: %w", size, p.name, err), p.k.mem.UnmapAnon(va))
	}
	p.anon = append(p.anon, am)
	err = p.MM.Map(VMA{Start: va, Size: am.npages * mem.PageSize, Name: "anon", Close: func(*sim.Proc) error {
		p.anon = slices.DeleteFunc(p.anon, func(x *anonMap) bool { return x == am })
		return p.k.mem.UnmapAnon(va)
	}})
	if err != nil {
		return 0, errors.Join(fmt.Errorf("mmap anon(%#x) in %s: %w", size, p.name, err), p.k.mem.UnmapAnon(va))
	}
	return va, nil
}

// Munmap is munmap(2) of the whole mapping at va, from thread t: the
// mapping's Close runs (an anonymous one frees its pages).
func (p *Process) Munmap(t *sim.Proc, va mem.VirtAddr) error {
	v, err := p.MM.Unmap(va)
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	if v.Close != nil {
		if err := v.Close(t); err != nil {
			return fmt.Errorf("munmap(%v) in %s: %w", va, p.name, err)
		}
	}
	return nil
}

// Populate faults in the absent pages of [va, va+size) for thread t, as
// get_user_pages does for a pinner (cuMemHostRegister, VFIO's
// MAP_DMA): each is placed by policy for t's node (ThreadNode; a nil t
// is the process's node), t paying each fault (FaultCost).
func (p *Process) Populate(t *sim.Proc, va mem.VirtAddr, size uint64) error {
	node := p.node
	if t != nil {
		node = p.ThreadNode(t)
	}
	if err := p.k.mem.FaultIn(t, va, size, node); err != nil {
		return fmt.Errorf("get_user_pages in %s: %w", p.name, err)
	}
	return nil
}

// PinPages is pin_user_pages(FOLL_LONGTERM) of [va, va+size) for a
// driver that will DMA to the pages (cuMemHostRegister, VFIO's MAP_DMA,
// ibv_reg_mr), after Populate placed them: until the pin is released
// (unpin_user_pages) no migration path moves them — mbind's
// MPOL_MF_MOVE leaves them (EIO with MPOL_MF_STRICT), move_pages says
// -EBUSY, migrate_pages counts them not moved, and AutoNUMA's
// migrate_misplaced_folio fails (pgmigrate_fail) — because the device
// would otherwise DMA to a freed page. Memory that is not anonymous is
// not counted (it never migrates).
func (p *Process) PinPages(va mem.VirtAddr, size uint64) (*mem.PagePin, error) {
	pin, err := p.k.mem.PinPages(va, size)
	if err != nil {
		return nil, fmt.Errorf("pin_user_pages in %s: %w", p.name, err)
	}
	return pin, nil
}

// anonAt is the anonymous mapping holding va and va's page index.
func (p *Process) anonAt(va mem.VirtAddr) (*anonMap, uint64, bool) {
	for _, am := range p.anon {
		if am.start <= va && va < am.start+mem.VirtAddr(am.npages*mem.PageSize) {
			return am, uint64(va-am.start) / mem.PageSize, true
		}
	}
	return nil, 0, false
}

// Mbind is mbind(2) from thread t: the policy mode/nodes (with mode
// flags) for the pages of [start, start+length) of one anonymous mapping
// (the VMA policy; MPOL_DEFAULT removes it, so that the process's
// applies). EINVAL for a start not page-aligned or bad flags, EFAULT
// for a range outside an anonymous mapping. flags:
//
//   - MPOLMFStrict alone: EIO if a placed page is on a node outside the
//     nodes given (every placed page for MPOL_LOCAL); the policy is set
//     all the same, as in do_mbind.
//   - MPOLMFMove, MPOLMFMoveAll: such pages migrate where the new policy
//     places them (alloc_migration_target_by_mpol: the interleave index
//     for interleaving), t paying each page's copy; with MPOLMFStrict,
//     EIO if one could not move. For MPOL_DEFAULT and MPOL_LOCAL
//     (no nodes) every page is a candidate, and those already where the
//     policy would put them stay.
func (p *Process) Mbind(t *sim.Proc, start mem.VirtAddr, length uint64, mode PolicyMode, mflags ModeFlags, nodes []int, flags MbindFlags) error {
	call := fmt.Sprintf("mbind(%v, %#x, %v, %v, %#x) in %s", start, length, mode, nodes, flags, p.name)
	if flags&^(MPOLMFStrict|MPOLMFMove|MPOLMFMoveAll) != 0 || uint64(start)%mem.PageSize != 0 || length == 0 {
		return fmt.Errorf("%s: %w", call, syscall.EINVAL)
	}
	am, first, ok := p.anonAt(start)
	n := (length + mem.PageSize - 1) / mem.PageSize
	if !ok || first+n > am.npages {
		return fmt.Errorf("%s: not inside one anonymous mapping: %w", call, syscall.EFAULT)
	}
	var pol *MemPolicy
	if mode != MPOLDefault || len(nodes) > 0 || mflags != 0 {
		np, err := p.newPolicy(mode, mflags, nodes)
		if err != nil {
			return fmt.Errorf("%s: %w", call, err)
		}
		pol = &np
	}
	if am.pols == nil && pol != nil {
		am.pols = make([]*MemPolicy, am.npages)
	}
	for i := first; i < first+n && am.pols != nil; i++ {
		am.pols[i] = pol
	}
	if mode == MPOLDefault {
		flags &^= MPOLMFStrict
	}
	mask := normalize(nodes)
	failed := 0
	for i := first; i < first+n; i++ {
		va := am.start + mem.VirtAddr(i*mem.PageSize)
		cur, present, err := p.k.mem.PageNode(va)
		if err != nil || !present || slices.Contains(mask, cur) {
			continue
		}
		if flags&(MPOLMFMove|MPOLMFMoveAll) == 0 {
			failed++
			continue
		}
		cpu := p.ThreadNode(t)
		if pl := p.k.place(am.policy(i, p), i, cpu, p.mems); len(pl.order) > 0 && pl.order[0] == cur {
			continue
		}
		if err := p.migrateBy(t, p, va, func() (mem.PhysAddr, error) { return p.k.allocPage(am.policy(i, p), i, cpu, p.mems) }); err != nil {
			failed++
		}
	}
	if failed > 0 && flags&MPOLMFStrict != 0 {
		return fmt.Errorf("%s: %d page(s) misplaced: %w", call, failed, syscall.EIO)
	}
	return nil
}

// allocOn allocates one page on exactly node (__GFP_THISNODE, as
// alloc_migration_target does for move_pages and migrate_pages),
// counting it for a CPU of node cpu.
func (k *Kernel) allocOn(node, cpu int) (mem.PhysAddr, error) {
	pa, err := k.mem.AllocPages(node, mem.PageSize, mem.ZoneNormal)
	if err != nil {
		return 0, err
	}
	k.count(node, node, cpu, -1)
	return pa, nil
}

// MovePages is move_pages(2) of process target's pages, called from
// thread t of process p (p may be target). With nodes nil it only
// queries: status[i] is the node of pages[i], -ENOENT if it is not
// placed yet, -EFAULT if no mapping of target holds it. Otherwise page i
// moves to nodes[i] (exactly there: no fallback), t paying the copy, and
// status[i] is the node it is on after, or -ENOENT, -EFAULT, -EBUSY for a
// page the model cannot migrate (not anonymous memory, or pinned:
// PinPages), -ENOMEM when
// nodes[i] is full. The call itself fails with EINVAL for bad flags or
// lengths, ENODEV for a node the machine lacks, EACCES for one target's
// cpuset forbids.
func (p *Process) MovePages(t *sim.Proc, target *Process, pages []mem.VirtAddr, nodes []int, flags MbindFlags) ([]int, error) {
	call := fmt.Sprintf("move_pages(%d, %d pages) from %s", target.pid, len(pages), p.name)
	if flags&^(MPOLMFMove|MPOLMFMoveAll) != 0 || nodes != nil && len(nodes) != len(pages) {
		return nil, fmt.Errorf("%s: %w", call, syscall.EINVAL)
	}
	mems := target.Mems()
	for _, n := range nodes {
		if n < 0 || n >= p.k.nodes {
			return nil, fmt.Errorf("%s: node %d: %w", call, n, syscall.ENODEV)
		}
		if !slices.Contains(mems, n) {
			return nil, fmt.Errorf("%s: node %d outside cpuset mems %v: %w", call, n, mems, syscall.EACCES)
		}
	}
	status := make([]int, len(pages))
	for i, va := range pages {
		va = mem.VirtAddr(uint64(va) &^ (mem.PageSize - 1))
		if _, ok := target.MM.Find(va); !ok {
			status[i] = -int(syscall.EFAULT)
			continue
		}
		cur, present, err := p.k.mem.PageNode(va)
		switch {
		case err != nil:
			status[i] = -int(syscall.EFAULT)
			continue
		case !present:
			status[i] = -int(syscall.ENOENT)
			continue
		}
		status[i] = cur
		if nodes == nil || nodes[i] == cur {
			continue
		}
		if _, _, anon := target.anonAt(va); !anon {
			status[i] = -int(syscall.EBUSY)
			continue
		}
		to, cpu := nodes[i], p.ThreadNode(t)
		if err := target.migrateBy(t, p, va, func() (mem.PhysAddr, error) { return p.k.allocOn(to, cpu) }); errors.Is(err, mem.ErrBusy) {
			status[i] = -int(syscall.EBUSY)
			continue
		} else if err != nil {
			status[i] = -int(syscall.ENOMEM)
			continue
		}
		status[i] = to
	}
	return status, nil
}

// migrateBy is migrate of target's page at va by thread t of process by
// (which pays the copy on its node).
func (target *Process) migrateBy(t *sim.Proc, by *Process, va mem.VirtAddr, alloc func() (mem.PhysAddr, error)) error {
	// A pinned page fails before a target page is taken: its refcount
	// never matches what migration expects (ErrBusy).
	if n := by.k.mem.Pinned(va); n > 0 {
		by.k.vm.PgmigrateFail++
		return fmt.Errorf("migrate %v: %d pin(s): %w", va, n, mem.ErrBusy)
	}
	dst, err := alloc()
	if err != nil {
		return err
	}
	old, err := by.k.mem.MovePage(t, by.ThreadNode(t), va, dst)
	if err != nil {
		return errors.Join(err, by.k.mem.FreePages(dst, mem.PageSize))
	}
	by.k.vm.PgmigrateSuccess++
	return by.k.mem.FreePages(old, mem.PageSize)
}

// MigratePages is migrate_pages(2) from thread t of p: every placed
// anonymous page of target on a node of from moves to the node at the
// same position of to (modulo its length, as do_migrate_pages maps
// nodes), exactly there; a page already there stays. It returns how
// many pages could not be moved (their target node full). EINVAL for an
// empty or bad node list.
func (p *Process) MigratePages(t *sim.Proc, target *Process, from, to []int) (int, error) {
	for _, n := range append(slices.Clone(from), to...) {
		if n < 0 || n >= p.k.nodes {
			return 0, fmt.Errorf("migrate_pages(%d, %v, %v): node %d: %w", target.pid, from, to, n, syscall.EINVAL)
		}
	}
	if len(from) == 0 || len(to) == 0 {
		return 0, fmt.Errorf("migrate_pages(%d, %v, %v): empty node list: %w", target.pid, from, to, syscall.EINVAL)
	}
	left := 0
	cpu := p.ThreadNode(t)
	for _, am := range target.anon {
		for i := range am.npages {
			va := am.start + mem.VirtAddr(i*mem.PageSize)
			cur, present, err := p.k.mem.PageNode(va)
			k := slices.Index(from, cur)
			if err != nil || !present || k < 0 {
				continue
			}
			dest := to[k%len(to)]
			if dest == cur {
				continue
			}
			if err := target.migrateBy(t, p, va, func() (mem.PhysAddr, error) { return p.k.allocOn(dest, cpu) }); err != nil {
				left++
			}
		}
	}
	return left, nil
}

// GetMemPolicy is get_mempolicy(2): with no flag, the process's policy
// (addr must be 0); MPOLFAddr: the policy of the mapping at addr
// (MPOL_DEFAULT where it has none, as do_get_mempolicy's default_policy);
// MPOLFNode|MPOLFAddr: as mode, the node of the page at addr, faulting it
// in for the process's node when absent (lookup_node's
// get_user_pages_fast); MPOLFNode alone: for an interleave policy, its
// first node, else EINVAL; MPOLFMemsAllowed (alone): the cpuset's mems
// as nodes. EFAULT for an address no mapping holds.
func (p *Process) GetMemPolicy(flags GetFlags, addr mem.VirtAddr) (mode int, nodes []int, err error) {
	call := fmt.Sprintf("get_mempolicy(%#x, %v) in %s", flags, addr, p.name)
	if flags&^(MPOLFNode|MPOLFAddr|MPOLFMemsAllowed) != 0 {
		return 0, nil, fmt.Errorf("%s: %w", call, syscall.EINVAL)
	}
	if flags&MPOLFMemsAllowed != 0 {
		if flags != MPOLFMemsAllowed {
			return 0, nil, fmt.Errorf("%s: %w", call, syscall.EINVAL)
		}
		return 0, p.Mems(), nil
	}
	if flags&MPOLFAddr == 0 {
		if addr != 0 {
			return 0, nil, fmt.Errorf("%s: %w", call, syscall.EINVAL)
		}
		if flags&MPOLFNode != 0 {
			if p.Policy.Mode != MPOLInterleave && p.Policy.Mode != MPOLWeightedInterleave {
				return 0, nil, fmt.Errorf("%s: not interleaving: %w", call, syscall.EINVAL)
			}
			return p.Policy.Nodes[0], nil, nil
		}
		return int(p.Policy.Mode), slices.Clone(p.Policy.Nodes), nil
	}
	if _, ok := p.MM.Find(addr); !ok {
		return 0, nil, fmt.Errorf("%s: %w", call, syscall.EFAULT)
	}
	if flags&MPOLFNode != 0 {
		if err := p.Populate(nil, mem.VirtAddr(uint64(addr)&^(mem.PageSize-1)), mem.PageSize); err != nil {
			return 0, nil, fmt.Errorf("%s: %w", call, err)
		}
		n, _, err := p.k.mem.PageNode(addr)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %w", call, syscall.EFAULT)
		}
		return n, nil, nil
	}
	if am, i, ok := p.anonAt(addr); ok && am.pols != nil && am.pols[i] != nil {
		return int(am.pols[i].Mode), slices.Clone(am.pols[i].Nodes), nil
	}
	return int(MPOLDefault), nil, nil
}
