package kernel

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

type testFile struct {
	name     string
	released int
	by       string
}

func (f *testFile) FileName() string { return f.name }
func (f *testFile) Release(t *sim.Proc) error {
	f.released++
	if t != nil {
		f.by = t.Name()
	}
	return nil
}

func TestFDLifecycle(t *testing.T) {
	eng := sim.New(1)
	k := New(eng, 2)
	var ops []string
	k.Hooks.Hook(func(e *Event) { ops = append(ops, e.Op.String()) })
	a, err := k.NewProcess("camera", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := k.NewProcess("gpu-app", 1)
	if _, err := k.NewProcess("camera", 0); err == nil {
		t.Error("a second process called camera was created")
	}
	if _, err := k.NewProcess("x", 2); err == nil {
		t.Error("a process on node 2 of 2 was created")
	}
	f := &testFile{name: "dmabuf:1"}
	eng.Spawn("main", func(p *sim.Proc) {
		fd, err := a.Install(f)
		if err != nil || fd != 3 {
			t.Fatalf("Install = %d, %v; want 3", fd, err)
		}
		fd2, _ := a.Dup(fd)
		bfd, err := a.SendFD(b, fd)
		if err != nil || bfd != 3 || a.Refs(fd) != 3 {
			t.Fatalf("SendFD = %d, %v, refs %d; want 3, nil, 3", bfd, err, a.Refs(fd))
		}
		// The number itself means nothing in the receiver.
		if _, err := b.File("dma_buf_get", fd2); !errors.Is(err, syscall.EBADF) {
			t.Errorf("fd %d sent as an integer: %v, want EBADF", fd2, err)
		}
		if err := a.Close(p, fd); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(p, fd); !errors.Is(err, syscall.EBADF) {
			t.Errorf("second close: %v, want EBADF", err)
		}
		if err := a.Exit(p); err != nil {
			t.Fatal(err)
		}
		if f.released != 0 {
			t.Fatal("released while the receiver still holds it")
		}
		called := false
		b.OnExit("test", func(*sim.Proc) error {
			called = f.released == 1 // after the files
			return nil
		})
		if err := b.Exit(p); err != nil {
			t.Fatal(err)
		}
		if f.released != 1 || f.by != "main" || !called {
			t.Errorf("released %d times by %q, callback after files %v; want 1, main, true", f.released, f.by, called)
		}
		if err := b.Exit(p); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("second exit: %v, want ESRCH", err)
		}
		if _, err := b.Install(f); !errors.Is(err, ErrExited) {
			t.Errorf("install after exit: %v", err)
		}
	})
	eng.Run()
	want := "[spawn spawn install dup send close exit release exit]"
	if got := fmt.Sprint(ops); got != want {
		t.Errorf("events %s, want %s", got, want)
	}
}

func TestAffinityAndPolicy(t *testing.T) {
	k := New(sim.New(1), 2)
	p, _ := k.NewProcess("app", 0)
	if err := p.SetAffinity(1); err != nil || p.Node() != 1 {
		t.Errorf("SetAffinity(1): %v, node %d", err, p.Node())
	}
	if err := p.SetAffinity(2); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("SetAffinity(2): %v", err)
	}
	if err := p.SetMemPolicy(MPOLBind); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("bind with no nodes: %v", err)
	}
	if err := p.SetMemPolicy(MPOLInterleave, 0, 1); err != nil || p.Policy.Mode != MPOLInterleave {
		t.Errorf("interleave: %v %v", err, p.Policy)
	}
}

func TestAddressSpace(t *testing.T) {
	var as AddressSpace
	if err := as.Map(VMA{Start: 0x1000, Size: 0x2000, Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := as.Map(VMA{Start: 0x2000, Size: 0x1000}); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("overlap: %v", err)
	}
	if err := as.Map(VMA{Start: 0x3000, Size: 0x1000, Name: "b"}); err != nil {
		t.Fatal(err)
	}
	if v, ok := as.Find(0x2fff); !ok || v.Name != "a" {
		t.Errorf("Find(0x2fff) = %v %v", v, ok)
	}
	if _, err := as.Unmap(mem.VirtAddr(0x1000)); err != nil || len(as.VMAs()) != 1 {
		t.Errorf("Unmap: %v, %d left", err, len(as.VMAs()))
	}
}

// TestOpenFileGet: a reference taken with Get (an importer's
// dma_buf_get) keeps the file past its last descriptor, even past its
// process's exit; the Put that drops it releases the file.
func TestOpenFileGet(t *testing.T) {
	eng := sim.New(1)
	k := New(eng, 1)
	var rel []Event
	k.Hooks.Hook(func(e *Event) {
		if e.Op == OpRelease {
			rel = append(rel, *e)
		}
	})
	a, _ := k.NewProcess("exporter", 0)
	f := &testFile{name: "dmabuf:7"}
	eng.Spawn("main", func(p *sim.Proc) {
		fd, err := a.Install(f)
		if err != nil {
			t.Fatal(err)
		}
		of, err := a.OpenFile("dma_buf_get", fd)
		if err != nil || of.File() != f {
			t.Fatalf("OpenFile = %v, %v", of, err)
		}
		if _, err := a.OpenFile("dma_buf_get", fd+1); !errors.Is(err, syscall.EBADF) {
			t.Errorf("OpenFile of a closed fd: %v, want EBADF", err)
		}
		if err := of.Get(); err != nil {
			t.Fatal(err)
		}
		if of.Refs() != 2 || a.Refs(fd) != 2 {
			t.Errorf("refs %d (by fd %d), want 2", of.Refs(), a.Refs(fd))
		}
		if err := a.Exit(p); err != nil {
			t.Fatal(err)
		}
		if f.released != 0 || of.Released() || of.Refs() != 1 {
			t.Fatalf("after exit: released %d, %v, refs %d; want 0, false, 1", f.released, of.Released(), of.Refs())
		}
		if err := of.Put(p); err != nil {
			t.Fatal(err)
		}
		if f.released != 1 || !of.Released() || of.Refs() != 0 {
			t.Errorf("after put: released %d, %v, refs %d; want 1, true, 0", f.released, of.Released(), of.Refs())
		}
		if err := of.Put(p); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("put with no reference: %v, want EINVAL", err)
		}
		if err := of.Get(); !errors.Is(err, syscall.EBADF) {
			t.Errorf("get of a released file: %v, want EBADF", err)
		}
	})
	eng.Run()
	if len(rel) != 1 || rel[0].PID != 0 || rel[0].Proc != "main" || rel[0].File != "dmabuf:7" {
		t.Errorf("release events %+v, want one, by main, of no process", rel)
	}
}

// TestFDAllocation: a new descriptor is the lowest free one, however
// the table got its holes; RLIMIT_NOFILE bounds it (EMFILE), and a
// lowered limit leaves descriptors above it open.
func TestFDAllocation(t *testing.T) {
	k := New(sim.New(1), 1)
	p, _ := k.NewProcess("app", 0)
	f := &testFile{name: "f"}
	install := func() int {
		t.Helper()
		fd, err := p.Install(f)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	for want := 3; want < 10; want++ {
		if fd := install(); fd != want {
			t.Fatalf("install %d, want %d", fd, want)
		}
	}
	for _, fd := range []int{7, 4, 8} {
		if err := p.Close(nil, fd); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []int{4, 7, 8, 10} {
		if fd := install(); fd != want {
			t.Errorf("after closes: install %d, want %d", fd, want)
		}
	}
	for _, c := range []struct {
		limit int
		ok    bool
	}{{2, false}, {MaxFDs + 1, false}, {3, true}, {MaxFDs, true}, {12, true}} {
		if err := p.SetFDLimit(c.limit); (err == nil) != c.ok || err != nil && !errors.Is(err, syscall.EINVAL) {
			t.Errorf("SetFDLimit(%d): %v, want ok %v", c.limit, err, c.ok)
		}
	}
	if fd := install(); fd != 11 {
		t.Errorf("install %d below the limit 12, want 11", fd)
	}
	if _, err := p.Install(f); !errors.Is(err, syscall.EMFILE) {
		t.Errorf("install past the limit: %v, want EMFILE", err)
	}
	p.SetFDLimit(5)
	if got := p.FDs(); len(got) != 9 || got[8] != 11 {
		t.Errorf("descriptors after lowering the limit: %v, want 3-11 still open", got)
	}
	if err := p.Close(nil, 3); err != nil {
		t.Fatal(err)
	}
	if fd := install(); fd != 3 {
		t.Errorf("install %d below the lowered limit, want 3", fd)
	}
	if _, err := p.Dup(3); !errors.Is(err, syscall.EMFILE) {
		t.Errorf("dup past the lowered limit: %v, want EMFILE", err)
	}
}

// TestExitOrder: exit closes the descriptors, then runs the callbacks
// (newest first), then closes the mappings left (address order), and
// runs them all even when some fail.
func TestExitOrder(t *testing.T) {
	eng := sim.New(1)
	k := New(eng, 1)
	p, _ := k.NewProcess("app", 0)
	var order []string
	f := &testFile{name: "f"}
	if _, err := p.Install(f); err != nil {
		t.Fatal(err)
	}
	vma := func(start mem.VirtAddr, name string, fail bool) VMA {
		return VMA{Start: start, Size: 0x1000, Name: name, Close: func(*sim.Proc) error {
			order = append(order, name)
			if fail {
				return errors.New("bad page")
			}
			return nil
		}}
	}
	for _, v := range []VMA{vma(0x3000, "heap2", false), vma(0x1000, "heap1", true), {Start: 0x5000, Size: 0x1000, Name: "no-close"}} {
		if err := p.MM.Map(v); err != nil {
			t.Fatal(err)
		}
	}
	p.OnExit("first", func(*sim.Proc) error {
		order = append(order, "first")
		return nil
	})
	p.OnExit("second", func(*sim.Proc) error {
		order = append(order, fmt.Sprintf("second(released %d)", f.released))
		return errors.New("device gone")
	})
	var err error
	eng.Spawn("main", func(tp *sim.Proc) { err = p.Exit(tp) })
	eng.Run()
	if got, want := fmt.Sprint(order), "[second(released 1) first heap1 heap2]"; got != want {
		t.Errorf("exit order %s, want %s", got, want)
	}
	if err == nil || !strings.Contains(err.Error(), "device gone") || !strings.Contains(err.Error(), "bad page") {
		t.Errorf("exit error %v, want both failures", err)
	}
	if len(p.MM.VMAs()) != 0 {
		t.Errorf("mappings after exit: %v", p.MM.VMAs())
	}
}

// OnUnmap hears of munmap (no thread) and of each mapping exit_mmap
// closes (the exiting thread), before the mapping's close runs.
func TestOnUnmapNotifies(t *testing.T) {
	eng := sim.New(1)
	k := New(eng, 1)
	p, err := k.NewProcess("app", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	closed := 0
	p.MM.OnUnmap(func(t *sim.Proc, v VMA) {
		by := "-"
		if t != nil {
			by = t.Name()
		}
		got = append(got, fmt.Sprintf("%v+%#x by %s closed %d", v.Start, v.Size, by, closed))
	})
	for _, va := range []mem.VirtAddr{0x10000, 0x20000} {
		if err := p.MM.Map(VMA{Start: va, Size: 0x1000, Name: "anon", Close: func(*sim.Proc) error { closed++; return nil }}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.MM.Unmap(0x10000); err != nil {
		t.Fatal(err)
	}
	eng.Spawn("main", func(t *sim.Proc) {
		if err := p.Exit(t); err != nil {
			panic(err)
		}
	})
	eng.Run()
	want := []string{"va:0x10000+0x1000 by - closed 0", "va:0x20000+0x1000 by main closed 0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("notified %q, want %q", got, want)
	}
	if closed != 1 {
		t.Fatalf("%d closes at exit, want 1", closed)
	}
}
