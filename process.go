package dmalab

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/sim"
)

// Process is a program running on the system: a kernel process and the
// thread that runs the program's function.
type Process struct {
	*kernel.Process
	// Thread is the running thread: every model call that takes time
	// takes it.
	Thread *sim.Proc
	// System is the system the program runs on.
	System *System
}

// Now is the current virtual time.
func (p *Process) Now() sim.Time { return p.Thread.Now() }

// CUDA is the CUDA driver's state for this process (cuInit in it): its
// contexts belong to the process and are reclaimed at its exit. The error
// is System.CUDA's when the platform's GPUs cannot be driven.
func (p *Process) CUDA() (*cuda.Process, error) {
	d, err := p.System.CUDA()
	if err != nil {
		return nil, err
	}
	return d.Attach(p.Process)
}

// Run runs prog as process name on NUMA node 0 until virtual time ends
// (every thread finished or blocked for good), and returns prog's error.
// The process exits when prog returns: its files are closed and its exit
// callbacks run.
func (s *System) Run(name string, prog func(p *Process) error) error {
	return s.RunOn(0, name, prog)
}

// RunOn is Run with the process on NUMA node node.
func (s *System) RunOn(node int, name string, prog func(p *Process) error) error {
	kp, err := s.Kernel.NewProcess(name, node)
	if err != nil {
		return fmt.Errorf("run %s: %w", name, err)
	}
	var progErr error
	done := false
	kp.Spawn(name, func(t *sim.Proc) {
		progErr = prog(&Process{Process: kp, Thread: t, System: s})
		progErr = errors.Join(progErr, kp.Exit(t))
		done = true
	})
	err = s.RunEngine()
	// A program left waiting with nothing to wake it is the program's
	// deadlock, not the model's.
	if !done && (err == nil || errors.Is(err, ErrModel)) {
		return fmt.Errorf("run %s: the program never finished: blocked for good: %s", name, strings.Join(s.Engine.Blocked(), "; "))
	}
	if err != nil {
		return errors.Join(progErr, fmt.Errorf("run %s: %w", name, err))
	}
	return progErr
}
