package kernel

import (
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/sim"
)

// EventFDWakeup is what a thread blocked in read(2) of an eventfd waits
// after the signal before it runs: the wake-up of a sleeping task
// (try_to_wake_up, the scheduler's pick, the context switch). Assumed
// 2 µs, the order of wake-up latencies cyclictest reports on an idle
// core; a reader that finds the counter already set does not pay it.
const EventFDWakeup = 2 * sim.Microsecond

// eventfdMax is the counter's ceiling (ULLONG_MAX - 1, fs/eventfd.c): a
// write that would pass it blocks in Linux; here it is EAGAIN, as with
// EFD_NONBLOCK.
const eventfdMax = ^uint64(0) - 1

// EventFD is an eventfd (fs/eventfd.c, struct eventfd_ctx): a 64-bit
// counter that write(2) adds to, a driver signals from interrupt context
// (eventfd_signal, as VFIO does for a device's interrupt), and read(2)
// returns and zeroes, blocking the reading thread while it is zero.
type EventFD struct {
	name    string
	count   uint64
	cond    *sim.Cond
	signals uint64
}

// NewEventFD is eventfd2(initval, 0)'s file, not yet installed; Process
// .Eventfd installs one.
func NewEventFD(name string, initval uint64) *EventFD {
	return &EventFD{name: name, count: initval, cond: sim.NewCond(name)}
}

// FileName is "anon_inode:[eventfd]" with the name given.
func (e *EventFD) FileName() string { return e.name }

// Release wakes nobody: a thread blocked in read holds a reference in
// Linux, so the last close cannot come while one waits.
func (e *EventFD) Release(*sim.Proc) error { return nil }

// Count is the counter now.
func (e *EventFD) Count() uint64 { return e.count }

// Signals is how many times Signal was called.
func (e *EventFD) Signals() uint64 { return e.signals }

// Signal is eventfd_signal: the counter gains n and a blocked reader
// wakes. It never blocks (interrupt context); at the ceiling it adds
// what fits.
func (e *EventFD) Signal(n uint64) {
	e.signals++
	e.count += min(n, eventfdMax-e.count)
	e.cond.Broadcast()
}

// Write is write(2) of n: EINVAL for the reserved value ULLONG_MAX,
// EAGAIN when the counter would pass its ceiling.
func (e *EventFD) Write(t *sim.Proc, n uint64) error {
	if n == ^uint64(0) {
		return fmt.Errorf("write(%s, %#x): %w", e.name, n, syscall.EINVAL)
	}
	if n > eventfdMax-e.count {
		return fmt.Errorf("write(%s, %#x): counter %#x: %w", e.name, n, e.count, syscall.EAGAIN)
	}
	e.count += n
	e.cond.Broadcast()
	return nil
}

// Read is read(2): the counter, which it zeroes; while it is zero the
// thread t sleeps until a Signal or Write, and then pays EventFDWakeup.
func (e *EventFD) Read(t *sim.Proc) uint64 {
	if e.count == 0 {
		t.WaitUntil(e.cond, func() bool { return e.count > 0 })
		t.Sleep(EventFDWakeup)
	}
	n := e.count
	e.count = 0
	return n
}

// Eventfd is eventfd2(initval, 0): a new eventfd in the process's
// descriptor table.
func (p *Process) Eventfd(initval uint64) (int, *EventFD, error) {
	e := NewEventFD(fmt.Sprintf("anon_inode:[eventfd]#%d", p.k.nextFile()), initval)
	fd, err := p.Install(e)
	if err != nil {
		return -1, nil, fmt.Errorf("eventfd2 in %s: %w", p.name, err)
	}
	return fd, e, nil
}

// EventFDOf is the eventfd fd refers to: EBADF for a bad descriptor,
// EINVAL for a file that is not an eventfd (eventfd_ctx_fdget). call
// names the caller's operation.
func (p *Process) EventFDOf(call string, fd int) (*EventFD, error) {
	f, err := p.File(call, fd)
	if err != nil {
		return nil, err
	}
	e, ok := f.(*EventFD)
	if !ok {
		return nil, fmt.Errorf("%s(%d) in %s: %s is not an eventfd: %w", call, fd, p.name, f.FileName(), syscall.EINVAL)
	}
	return e, nil
}
