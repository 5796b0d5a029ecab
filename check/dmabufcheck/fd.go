package dmabufcheck

import (
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/kernel"
)

// Kernel follows the processes' descriptor tables.
func (x *Pack) Kernel(e *kernel.Event) {
	switch e.Op {
	case kernel.OpInstall:
		x.install(e.Process, e.FD, e.File, call{call: fmt.Sprintf("fd_install(%d, %s) in %s", e.FD, e.File, e.Process), t: e.Time, proc: e.Proc})
	case kernel.OpDup:
		x.install(e.Process, e.FD, e.File, call{call: fmt.Sprintf("dup of %s to %d in %s", e.File, e.FD, e.Process), t: e.Time, proc: e.Proc})
	case kernel.OpSend:
		x.install(e.To, e.FD, e.File, call{call: fmt.Sprintf("SCM_RIGHTS of %s from %s to %s as %d", e.File, e.Process, e.To, e.FD), t: e.Time, proc: e.Proc})
		x.sent[[2]string{e.Process, e.To}] = true
		x.sent[[2]string{e.To, e.Process}] = true
	case kernel.OpClose:
		delete(x.fds[e.Process], e.FD)
	case kernel.OpExit:
		delete(x.fds, e.Process)
	}
}

func (x *Pack) install(proc string, n int, file string, c call) {
	if x.fds[proc] == nil {
		x.fds[proc] = map[int]fd{}
	}
	if x.held[proc] == nil {
		x.held[proc] = map[string]bool{}
	}
	x.fds[proc][n] = fd{file: file, made: c}
	x.held[proc][file] = true
}

// others are the processes other than proc whose descriptor n is a
// dma-buf other than file, in name order.
func (x *Pack) others(proc string, n int, file string) []string {
	var out []string
	for p, t := range x.fds {
		if d, ok := t[n]; ok && p != proc && d.file != file && x.bufs[d.file] != nil {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// get checks a dma_buf_get: a descriptor the process does not have, or
// not a dma-buf, is dmabuf-fd-not-owned; one that is a dma-buf here and
// another dma-buf in a process that never passed this one a
// descriptor, dmabuf-fd-aliased.
func (x *Pack) get(e *dmabuf.Event) {
	proc := e.Process
	if e.Failed {
		here := "no descriptor " + fmt.Sprint(e.FD) + " in " + proc
		if d, ok := x.fds[proc][e.FD]; ok {
			here = fmt.Sprintf("descriptor %d in %s is %s, not a dma-buf", e.FD, proc, d.file)
		}
		msg := fmt.Sprintf("dma_buf_get(%d) in %s failed (%s): %s", e.FD, proc, errnoOf(e.Err), here)
		orig := ""
		if ps := x.others(proc, e.FD, ""); len(ps) > 0 {
			d := x.fds[ps[0]][e.FD]
			msg += fmt.Sprintf("; %d is %s in %s: a descriptor number sent as data means nothing in another process; send the descriptor with SCM_RIGHTS", e.FD, d.file, ps[0])
			orig = d.made.origin()
		}
		x.record(cNotOwned, e.Time, e.Proc, "", "", msg, orig)
		return
	}
	for _, p := range x.others(proc, e.FD, e.Buffer) {
		d := x.fds[p][e.FD]
		if x.held[proc][d.file] || x.sent[[2]string{p, proc}] {
			continue
		}
		msg := fmt.Sprintf("dma_buf_get(%d) in %s resolved to %s, but %d is %s in %s, a buffer %s never had, and %s passed %s no descriptor: if the number came from %s as data, this is the wrong buffer; send the descriptor with SCM_RIGHTS",
			e.FD, proc, e.Buffer, e.FD, d.file, p, proc, p, proc, p)
		x.record(cAliased, e.Time, e.Proc, "", e.Buffer, msg, d.made.origin())
		return
	}
}
