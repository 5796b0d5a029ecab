package kernel

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// ErrExited is wrapped by calls on a process that has exited (ESRCH).
var ErrExited = fmt.Errorf("process has exited: %w", syscall.ESRCH)

// File is what an open file is to the kernel: something with a name for
// messages and a release operation, run once, when its last reference
// (descriptor, passed copy, or Get) is dropped. Release runs in the
// thread t that dropped it, which pays its cost.
type File interface {
	// FileName names the file in messages ("dmabuf:3", "/dev/vfio/12").
	FileName() string
	// Release is file_operations.release.
	Release(t *sim.Proc) error
}

// Op is what an event reports.
type Op uint8

const (
	OpSpawn   Op = iota + 1 // a process was created
	OpInstall               // a new open file got a descriptor
	OpDup                   // dup(2)
	OpSend                  // a descriptor passed by SCM_RIGHTS
	OpClose                 // close(2) of a descriptor
	OpRelease               // an open file's last reference went: release ran
	OpExit                  // a process exited
)

var opNames = [...]string{"", "spawn", "install", "dup", "send", "close", "release", "exit"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Event is one process or file event.
type Event struct {
	sim.Header
	Op Op
	// PID and Process name the process acted on (for OpSend, the
	// sender; for OpRelease, the one whose descriptor was the last
	// reference: none, PID 0, when it was a Get's); To is the receiver
	// of OpSend.
	PID     int
	Process string
	To      string
	// FD is the descriptor concerned (for OpSend and OpDup, the new one).
	FD int
	// File names the open file.
	File string
}

// Kernel is the OS of one machine: its processes and open files.
type Kernel struct {
	eng   *sim.Engine
	nodes int
	// faultEntry is the fixed part of an anonymous page fault's cost
	// (SetFaultEntry).
	faultEntry sim.Time
	procs      []*Process
	// nextPID is the pid the next process gets (pid 1 is init, which the
	// model does not run; processes start at 100 as after boot).
	nextPID int
	// files numbers anonymous files for their names.
	files int

	// NUMA placement (numa.go): the memory anonymous pages come from,
	// each CPU's node, each node's fallback order, the weighted
	// interleave weights, numastat, and the pages placed.
	mem       *mem.Memory
	cpuNode   []int
	zonelists [][]int
	weights   []uint8
	stat      []NUMAStat
	placed    uint64
	// Automatic NUMA balancing (autonuma.go): numa_balancing, its
	// tuning, and /proc/vmstat's NUMA counters.
	balancing bool
	autonuma  AutoNUMA
	vm        VMStat
	// launcher is the placement new processes inherit (launch.go).
	launcher *Launcher
	// Hooks receives every Event.
	Hooks sim.Hooks[Event]
}

// New returns the kernel of a machine with nodes NUMA nodes, running on
// eng. Until SetMemory it knows one CPU per node (CPU n on node n) and
// the default SLIT distances, and cannot place anonymous memory.
func New(eng *sim.Engine, nodes int) *Kernel {
	k := &Kernel{eng: eng, nodes: nodes, nextPID: 100, weights: make([]uint8, nodes), stat: make([]NUMAStat, nodes), autonuma: DefaultAutoNUMA(), faultEntry: DefaultFaultEntry}
	for n := range nodes {
		k.cpuNode = append(k.cpuNode, n)
		k.weights[n] = 1
	}
	k.zonelists = zonelists(nodes, defaultDistance)
	return k
}

// nextFile is the next number for an anonymous file's name.
func (k *Kernel) nextFile() int {
	k.files++
	return k.files
}

// Engine is the engine the kernel runs on.
func (k *Kernel) Engine() *sim.Engine { return k.eng }

// Nodes is the number of NUMA nodes.
func (k *Kernel) Nodes() int { return k.nodes }

// Processes lists the processes, live and exited, in creation order.
func (k *Kernel) Processes() []*Process { return append([]*Process(nil), k.procs...) }

// Process finds a process by name.
func (k *Kernel) Process(name string) (*Process, bool) {
	for _, p := range k.procs {
		if p.name == name {
			return p, true
		}
	}
	return nil, false
}

// NewProcess creates a process called name whose threads run on NUMA
// node node (their affinity: CPU accesses and memcpys use that node's
// caches and memory). Names are unique, as the model's messages name
// processes by them.
func (k *Kernel) NewProcess(name string, node int) (*Process, error) {
	if name == "" {
		return nil, errors.New("kernel: a process needs a name")
	}
	if node < 0 || node >= k.nodes {
		return nil, fmt.Errorf("kernel: process %s on node %d: the machine has %d node(s)", name, node, k.nodes)
	}
	if _, dup := k.Process(name); dup {
		return nil, fmt.Errorf("kernel: a process called %s exists", name)
	}
	p := &Process{k: k, pid: k.nextPID, name: name, node: node, fds: make([]*OpenFile, firstFD), nofile: MaxFDs, memlock: DefaultMemlockLimit}
	p.aff = []int{node}
	k.inherit(p)
	k.nextPID++
	k.procs = append(k.procs, p)
	k.emit(OpSpawn, nil, p, "", -1, "")
	return p, nil
}

func (k *Kernel) emit(op Op, t *sim.Proc, p *Process, to string, fd int, file string) {
	if !k.Hooks.Active() {
		return
	}
	e := Event{Header: sim.Header{Time: k.eng.Now(), Component: "kernel", Cause: sim.CauseLifecycle},
		Op: op, To: to, FD: fd, File: file}
	if p != nil {
		e.PID, e.Process = p.pid, p.name
	}
	if t != nil {
		e.Proc = t.Name()
	}
	k.Hooks.Emit(&e)
}
