package kernel

import (
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/dmalab/dmalab/sim"
)

// firstFD is the lowest descriptor a new file gets: 0, 1 and 2 are
// stdin, stdout and stderr, which the model does not open.
const firstFD = 3

// MaxFDs bounds a process's descriptor table (RLIMIT_NOFILE's usual
// hard limit, fs.nr_open's default); a table that is full refuses new
// descriptors with EMFILE. It is every process's limit until
// SetFDLimit lowers it.
const MaxFDs = 1 << 20

// Process is one process (task_struct and the per-process state it points
// at): pid, name, the NUMA node its threads run on and its CPU affinity,
// its memory policy, its address space, its descriptor table, and the
// callbacks to run at its exit.
type Process struct {
	k    *Kernel
	pid  int
	name string
	node int
	aff  []int
	// Policy is the process's NUMA memory policy (set_mempolicy); the
	// default, MPOL_DEFAULT, places pages on the node of the thread
	// that first touches them.
	Policy MemPolicy
	// MM is the process's address space.
	MM AddressSpace

	fds []*OpenFile
	// nextFD is no more than the lowest free descriptor
	// (files_struct.next_fd), so that opening n files costs n, not n².
	nextFD int
	// nofile is RLIMIT_NOFILE: descriptors are below it.
	nofile int
	// memlock is RLIMIT_MEMLOCK in bytes; locked is mm->locked_vm in
	// pages (memlock.go).
	memlock, locked uint64
	onExit          []exitFn
	exited          bool
	threads         []*sim.Proc

	// NUMA (anon.go): the cpuset's mems and CPUs (nil: all), the CPU
	// each bound thread runs on, the anonymous mappings.
	mems, cpus []int
	threadCPU  map[*sim.Proc]int
	anon       []*anonMap
	// nmm is automatic NUMA balancing's state (autonuma.go), nil until
	// a thread starts with it on.
	nmm *numaMM
	// launchCPUs are the CPUs the launcher allowed (nil: any): a thread
	// nobody bound runs on the first of them on the process's node.
	launchCPUs []int
	// ilNext is the interleave rotation of allocations that have no
	// address (AllocNodes; the task's il_prev).
	ilNext uint64
}

type exitFn struct {
	name string
	fn   func(t *sim.Proc) error
}

// OpenFile is struct file: a File with its reference count (f_count).
// Descriptors in any process and references taken with Get count; the
// last one dropped releases the File. Its exporter may keep the
// *OpenFile (as struct dma_buf keeps its ->file) to read the count or to
// take references of its own.
type OpenFile struct {
	k        *Kernel
	f        File
	refs     int
	released bool
}

// File is what is open.
func (of *OpenFile) File() File { return of.f }

// Refs is the number of references: descriptors in every process plus
// references taken with Get and not yet Put (file_count).
func (of *OpenFile) Refs() int { return of.refs }

// Released reports whether the last reference went and Release ran.
func (of *OpenFile) Released() bool { return of.released }

// Get takes a reference that no descriptor holds (get_file), as an
// importer does with dma_buf_get: the file outlives every descriptor
// until the matching Put. EBADF once the file is released.
func (of *OpenFile) Get() error {
	if of.released {
		return fmt.Errorf("get_file(%s): released: %w", of.f.FileName(), syscall.EBADF)
	}
	of.refs++
	return nil
}

// Put drops a reference taken with Get (fput), in thread t, which runs
// Release if it was the last.
func (of *OpenFile) Put(t *sim.Proc) error {
	if of.refs == 0 {
		return fmt.Errorf("fput(%s): no reference held: %w", of.f.FileName(), syscall.EINVAL)
	}
	return of.k.put(t, nil, of)
}

// PID is the process id.
func (p *Process) PID() int { return p.pid }

// Name is the process's name (comm).
func (p *Process) Name() string { return p.name }

// Node is the NUMA node its threads run on.
func (p *Process) Node() int { return p.node }

// Kernel is the kernel the process runs on.
func (p *Process) Kernel() *Kernel { return p.k }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool { return p.exited }

// Affinity is the set of NUMA nodes whose CPUs may run the process's
// threads (sched_setaffinity, at node granularity).
func (p *Process) Affinity() []int { return slices.Clone(p.aff) }

// SetAffinity is sched_setaffinity to the CPUs of nodes; the first node
// becomes the one its threads run on.
func (p *Process) SetAffinity(nodes ...int) error {
	if len(nodes) == 0 {
		return fmt.Errorf("sched_setaffinity(%d): empty set: %w", p.pid, syscall.EINVAL)
	}
	for _, n := range nodes {
		if n < 0 || n >= p.k.nodes {
			return fmt.Errorf("sched_setaffinity(%d): node %d of %d: %w", p.pid, n, p.k.nodes, syscall.EINVAL)
		}
	}
	p.aff = slices.Clone(nodes)
	p.node = nodes[0]
	return nil
}

// Spawn starts a thread of the process running body (clone with
// CLONE_THREAD); it is named "<process>" for the first thread and
// "<process>/<name>" for the others.
func (p *Process) Spawn(name string, body func(t *sim.Proc)) *sim.Proc {
	full := p.name
	if len(p.threads) > 0 || name != "" && name != p.name {
		full = p.name + "/" + name
	}
	t := p.k.eng.Spawn(full, body)
	p.threads = append(p.threads, t)
	p.threadStarted(t)
	return t
}

// Install gives f the lowest free descriptor (get_unused_fd_flags +
// fd_install) and one reference.
func (p *Process) Install(f File) (int, error) {
	fd, err := p.install(&OpenFile{k: p.k, f: f})
	if err == nil {
		p.k.emit(OpInstall, nil, p, "", fd, f.FileName())
	}
	return fd, err
}

func (p *Process) install(of *OpenFile) (int, error) {
	if p.exited {
		return -1, fmt.Errorf("%s: %w", p.name, ErrExited)
	}
	fd := max(p.nextFD, firstFD)
	for fd < len(p.fds) && p.fds[fd] != nil {
		fd++
	}
	if fd >= p.nofile {
		p.nextFD = fd
		return -1, fmt.Errorf("%s: descriptors 0-%d open: %w", p.name, p.nofile-1, syscall.EMFILE)
	}
	if fd == len(p.fds) {
		p.fds = append(p.fds, nil)
	}
	p.fds[fd] = of
	p.nextFD = fd + 1
	of.refs++
	return fd, nil
}

// SetFDLimit is setrlimit(RLIMIT_NOFILE) to n: descriptors from then on
// are below n (those already open above stay, as in Linux). EINVAL for
// a limit below 3 (stdio's) or above MaxFDs.
func (p *Process) SetFDLimit(n int) error {
	if n < firstFD || n > MaxFDs {
		return fmt.Errorf("setrlimit(RLIMIT_NOFILE, %d) in %s: limits are %d-%d: %w", n, p.name, firstFD, MaxFDs, syscall.EINVAL)
	}
	p.nofile = n
	return nil
}

func (p *Process) open(call string, fd int) (*OpenFile, error) {
	if p.exited {
		return nil, fmt.Errorf("%s(%d) in %s: %w", call, fd, p.name, ErrExited)
	}
	if fd < firstFD || fd >= len(p.fds) || p.fds[fd] == nil {
		return nil, fmt.Errorf("%s(%d) in %s: %w", call, fd, p.name, syscall.EBADF)
	}
	return p.fds[fd], nil
}

// File is the open file fd refers to (fget), or EBADF. call names the
// caller's operation for the message ("dma_buf_get").
func (p *Process) File(call string, fd int) (File, error) {
	of, err := p.open(call, fd)
	if err != nil {
		return nil, err
	}
	return of.f, nil
}

// OpenFile is the struct file fd refers to (fget without the
// reference), or EBADF; call names the caller's operation.
func (p *Process) OpenFile(call string, fd int) (*OpenFile, error) { return p.open(call, fd) }

// Refs is the number of references to the open file fd refers to: its
// descriptors in every process and the references taken with Get (0 for
// a bad descriptor).
func (p *Process) Refs(fd int) int {
	of, err := p.open("refs", fd)
	if err != nil {
		return 0
	}
	return of.refs
}

// FDs lists the open descriptors above stderr, in order.
func (p *Process) FDs() []int {
	var out []int
	for fd := firstFD; fd < len(p.fds); fd++ {
		if p.fds[fd] != nil {
			out = append(out, fd)
		}
	}
	return out
}

// Dup is dup(2): a new descriptor for the same open file.
func (p *Process) Dup(fd int) (int, error) {
	of, err := p.open("dup", fd)
	if err != nil {
		return -1, err
	}
	nfd, err := p.install(of)
	if err == nil {
		p.k.emit(OpDup, nil, p, "", nfd, of.f.FileName())
	}
	return nfd, err
}

// SendFD passes fd to process to as SCM_RIGHTS over a Unix socket does:
// to gets a new descriptor of its own for the same open file. (A
// descriptor number sent as plain data means nothing in the receiver:
// there it is whatever that process has at that number, usually EBADF.)
func (p *Process) SendFD(to *Process, fd int) (int, error) {
	of, err := p.open("sendmsg SCM_RIGHTS", fd)
	if err != nil {
		return -1, err
	}
	nfd, err := to.install(of)
	if err != nil {
		return -1, fmt.Errorf("recvmsg SCM_RIGHTS in %s: %w", to.name, err)
	}
	p.k.emit(OpSend, nil, p, to.name, nfd, of.f.FileName())
	return nfd, nil
}

// Close is close(2) of fd, from thread t. The last reference releases
// the file (file_operations.release, in t).
func (p *Process) Close(t *sim.Proc, fd int) error {
	of, err := p.open("close", fd)
	if err != nil {
		return err
	}
	p.fds[fd] = nil
	p.nextFD = min(p.nextFD, fd)
	p.k.emit(OpClose, t, p, "", fd, of.f.FileName())
	return p.k.put(t, p, of)
}

// put drops one reference to of, releasing it at zero (fput); p is the
// process whose descriptor it was, nil for a reference from Get.
func (k *Kernel) put(t *sim.Proc, p *Process, of *OpenFile) error {
	of.refs--
	if of.refs > 0 {
		return nil
	}
	of.released = true
	k.emit(OpRelease, t, p, "", -1, of.f.FileName())
	if err := of.f.Release(t); err != nil {
		return fmt.Errorf("release of %s: %w", of.f.FileName(), err)
	}
	return nil
}

// OnExit registers fn to run when the process exits, after its files
// are closed, in reverse order of registration (as a driver's cleanup
// on the last mmput or in its file's release). name identifies it in
// errors.
func (p *Process) OnExit(name string, fn func(t *sim.Proc) error) {
	p.onExit = append(p.onExit, exitFn{name: name, fn: fn})
}

// Exit ends the process from thread t (do_exit): every descriptor is
// closed (exit_files), releasing the files whose last reference it held,
// then the exit callbacks run, then every mapping of the address space
// is closed, in address order (exit_mmap), the OnUnmap notifiers told
// of each before it closes (mmu_notifier_release). Linux tears the address
// space down before the files; the model does it last because its
// memory has no page references: pages a driver pinned (registered
// host memory) would be freed under it if the mappings went before the
// driver's callback unpinned them. All of them run even if some fail;
// the errors are joined. A second Exit is ESRCH.
func (p *Process) Exit(t *sim.Proc) error {
	if p.exited {
		return fmt.Errorf("exit of %s: %w", p.name, ErrExited)
	}
	var errs []error
	for fd := firstFD; fd < len(p.fds); fd++ {
		if of := p.fds[fd]; of != nil {
			p.fds[fd] = nil
			if err := p.k.put(t, p, of); err != nil {
				errs = append(errs, err)
			}
		}
	}
	p.exited = true
	for i := len(p.onExit) - 1; i >= 0; i-- {
		x := p.onExit[i]
		if err := x.fn(t); err != nil {
			errs = append(errs, fmt.Errorf("exit callback %s: %w", x.name, err))
		}
	}
	p.onExit = nil
	for _, v := range p.MM.vmas {
		p.MM.notify(t, v)
		if v.Close == nil {
			continue
		}
		if err := v.Close(t); err != nil {
			errs = append(errs, fmt.Errorf("unmap %s at %v: %w", v.Name, v.Start, err))
		}
	}
	p.MM.vmas = nil
	p.k.emit(OpExit, t, p, "", -1, "")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("exit of %s: %w", p.name, err)
	}
	return nil
}
