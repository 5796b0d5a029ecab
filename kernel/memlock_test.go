package kernel

import (
	"errors"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// TestMemlock: locked pages count up to RLIMIT_MEMLOCK (8 MiB by
// default), one more is ENOMEM with nothing counted, and a lower limit
// leaves what is locked.
func TestMemlock(t *testing.T) {
	k := New(sim.New(1), 1)
	p, err := k.NewProcess("p", 0)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		what  string
		pages uint64
		inc   bool
		limit uint64 // set first when not zero
		want  syscall.Errno
		after uint64 // LockedVM after, bytes
	}{
		{"half the default", 1024, true, 0, 0, 4 << 20},
		{"up to the limit", 1024, true, 0, 0, 8 << 20},
		{"one page past", 1, true, 0, syscall.ENOMEM, 8 << 20},
		{"give some back", 512, false, 0, 0, 6 << 20},
		{"lower the limit below", 0, true, 1 << 20, 0, 6 << 20},
		{"nothing fits under it", 1, true, 0, syscall.ENOMEM, 6 << 20},
		{"give back more than held", 4096, false, 0, 0, 0},
	}
	if p.MemlockLimit() != DefaultMemlockLimit {
		t.Fatalf("limit %d, want %d", p.MemlockLimit(), DefaultMemlockLimit)
	}
	for _, s := range steps {
		if s.limit != 0 {
			if err := p.SetMemlockLimit(s.limit); err != nil {
				t.Fatal(err)
			}
		}
		err := p.AccountLockedVM("test", s.pages, s.inc)
		if s.want == 0 && err != nil || s.want != 0 && !errors.Is(err, s.want) {
			t.Errorf("%s: %v, want %v", s.what, err, s.want)
		}
		if p.LockedVM() != s.after {
			t.Errorf("%s: locked %d, want %d", s.what, p.LockedVM(), s.after)
		}
	}
}

// TestEventFD: write adds, read returns and zeroes; a reader of zero
// sleeps until a signal and then pays the wake-up; the reserved value
// and a full counter are refused.
func TestEventFD(t *testing.T) {
	eng := sim.New(1)
	k := New(eng, 1)
	p, _ := k.NewProcess("p", 0)
	fd, e, err := p.Eventfd(2)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.EventFDOf("read", fd); got != e || err != nil {
		t.Fatalf("EventFDOf: %v, %v", got, err)
	}
	var reads []uint64
	var at []sim.Time
	p.Spawn("", func(th *sim.Proc) {
		reads = append(reads, e.Read(th)) // 2, at once
		at = append(at, th.Now())
		if err := e.Write(th, 3); err != nil {
			t.Error(err)
		}
		reads = append(reads, e.Read(th)) // 3, at once
		at = append(at, th.Now())
		reads = append(reads, e.Read(th)) // blocks until the signal
		at = append(at, th.Now())
		if err := e.Write(th, ^uint64(0)); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("write of ULLONG_MAX: %v, want EINVAL", err)
		}
		if err := e.Write(th, ^uint64(0)-1); err != nil {
			t.Error(err)
		}
		if err := e.Write(th, 1); !errors.Is(err, syscall.EAGAIN) {
			t.Errorf("write past the ceiling: %v, want EAGAIN", err)
		}
	})
	eng.Spawn("irq", func(th *sim.Proc) {
		th.Sleep(10 * sim.Microsecond)
		e.Signal(1)
	})
	eng.Run()
	if len(reads) != 3 || reads[0] != 2 || reads[1] != 3 || reads[2] != 1 {
		t.Errorf("reads %v, want [2 3 1]", reads)
	}
	if len(at) != 3 || at[0] != 0 || at[1] != 0 || at[2] != 10*sim.Microsecond+EventFDWakeup {
		t.Errorf("reads at %v, want 0, 0, 10us+wake-up", at)
	}
	if _, err := p.EventFDOf("read", 77); !errors.Is(err, syscall.EBADF) {
		t.Errorf("bad fd: %v", err)
	}
}
