package sim

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestGuard(t *testing.T) {
	for _, tt := range []struct {
		name   string
		limits Limits
		build  func(e *Engine)
		// want is nil, ErrStalled or ErrLimit.
		want    error
		at      Time
		blocked []string
	}{
		{
			name: "clean end",
			build: func(e *Engine) {
				e.Spawn("app", func(p *Proc) { p.Sleep(5 * Microsecond) })
			},
			at: 5 * Microsecond,
		},
		{
			name: "deadlock",
			build: func(e *Engine) {
				irq := e.NewNamedCompletion("irq")
				e.Spawn("idle", func(p *Proc) { p.Sleep(Microsecond) })
				e.Spawn("driver", func(p *Proc) { p.Sleep(2 * Microsecond); p.Wait(irq) })
				cond := NewCond("ring not full")
				e.Spawn("producer", func(p *Proc) { p.WaitUntil(cond, func() bool { return false }) })
			},
			want:    ErrStalled,
			at:      2 * Microsecond,
			blocked: []string{"driver (waiting on completion irq)", "producer (waiting on condition ring not full)"},
		},
		{
			name:   "past the horizon",
			limits: Limits{Horizon: Millisecond},
			build: func(e *Engine) {
				e.Spawn("copy", func(p *Proc) {
					p.Sleep(999 * Microsecond)
					p.Sleep(2 * Microsecond)
				})
			},
			want:    ErrLimit,
			at:      999 * Microsecond,
			blocked: []string{"copy (waiting on sleep)"},
		},
		{
			name: "past the default horizon",
			build: func(e *Engine) {
				e.Spawn("copy", func(p *Proc) { p.Sleep(Forever - 1) })
			},
			want:    ErrLimit,
			blocked: []string{"copy (waiting on sleep)"},
		},
		{
			name:   "event budget",
			limits: Limits{Events: 100},
			build: func(e *Engine) {
				var tick func()
				tick = func() { e.After(0, tick) } // a livelock: time never moves
				e.At(0, tick)
			},
			want: ErrLimit,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := New(1)
			defer e.Close()
			tt.build(e)
			err := e.Guard(tt.limits)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("Guard() = %v, want nil", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("Guard() = %v, want %v", err, tt.want)
			}
			if e.Now() != tt.at {
				t.Errorf("stopped at %v, want %v", e.Now(), tt.at)
			}
			var got []string
			var se *StallError
			var le *LimitError
			switch {
			case errors.As(err, &se):
				got = se.Blocked
			case errors.As(err, &le):
				got = le.Blocked
				if le.Events == 0 && le.Next <= le.Horizon {
					t.Errorf("LimitError next event %v within the horizon %v", le.Next, le.Horizon)
				}
			}
			if !slices.Equal(got, tt.blocked) {
				t.Errorf("blocked %q, want %q", got, tt.blocked)
			}
		})
	}
}

func TestGuardEventBudgetCountsFromTheCall(t *testing.T) {
	e := New(1)
	for i := range 10 {
		e.At(Time(i), func() {})
	}
	e.RunUntil(4) // 5 events fired before the guarded run
	if err := e.Guard(Limits{Events: 5}); err != nil {
		t.Fatalf("Guard with a budget of exactly the 5 events left = %v", err)
	}
}

// A process that Close unwinds may block again in a deferred cleanup (a
// driver freeing its buffers, which takes time): Close must finish it,
// not panic. host-memory at 1 B/s of DRAM bandwidth panicked here.
func TestCloseUnwindsCleanupThatBlocks(t *testing.T) {
	e := New(1)
	never := e.NewNamedCompletion("flow")
	cleaned := false
	e.Spawn("app", func(p *Proc) {
		defer func() { cleaned = true }()
		defer p.Sleep(Microsecond)
		defer p.Wait(never)
		p.Wait(never)
	})
	if err := e.Guard(Limits{}); !errors.Is(err, ErrStalled) {
		t.Fatalf("Guard() = %v, want a stall", err)
	}
	e.Close()
	if !cleaned {
		t.Fatal("Close did not run the process's deferred functions")
	}
}

func ExampleEngine_Guard() {
	e := New(1)
	defer e.Close()
	done := e.NewNamedCompletion("dma done")
	e.Spawn("driver", func(p *Proc) {
		p.Sleep(3 * Microsecond)
		p.Wait(done) // nothing completes it
	})
	err := e.Guard(Limits{})
	fmt.Println(err)
	fmt.Println(errors.Is(err, ErrStalled))
	// Output:
	// model stalled at 3us: 1 process(es) blocked with no event left to wake them: driver (waiting on completion dma done)
	// true
}
