package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestEventOrder pins the (time, sequence) order: earlier times first,
// and at one instant, the order of scheduling, including events that an
// event schedules for its own instant.
func TestEventOrder(t *testing.T) {
	e := New(1)
	var got []string
	log := func(s string) func() { return func() { got = append(got, fmt.Sprintf("%v:%s", e.Now(), s)) } }
	e.At(30, log("c"))
	e.At(10, log("a1"))
	e.At(20, func() {
		log("b")()
		e.At(20, log("b-child"))
		e.After(5, log("b+5"))
	})
	e.At(10, log("a2"))
	e.At(20, log("b2"))
	h := e.At(25, log("cancelled"))
	if !e.Cancel(h) {
		t.Fatal("Cancel of a pending event reported false")
	}
	if e.Cancel(h) {
		t.Fatal("second Cancel reported true")
	}
	e.Run()
	want := []string{"10ps:a1", "10ps:a2", "20ps:b", "20ps:b2", "20ps:b-child", "25ps:b+5", "30ps:c"}
	if !slices.Equal(got, want) {
		t.Fatalf("event order\n got %v\nwant %v", got, want)
	}
	if e.Fired() != uint64(len(want)) {
		t.Errorf("Fired() = %d, want %d", e.Fired(), len(want))
	}
}

func TestHeapOrderUnderCancel(t *testing.T) {
	// Many events at pseudo-random times, a third cancelled: the rest must
	// run sorted by (time, seq).
	e := New(7)
	type rec struct {
		at  Time
		seq int
	}
	var got []rec
	var hs []Handle
	for i := range 2000 {
		at := Time(e.Rand().IntN(500))
		hs = append(hs, e.At(at, func() { got = append(got, rec{e.Now(), i}) }))
	}
	for i := 0; i < len(hs); i += 3 {
		e.Cancel(hs[i])
	}
	e.Run()
	if len(got) != 2000-667 {
		t.Fatalf("ran %d events, want %d", len(got), 2000-667)
	}
	for i := 1; i < len(got); i++ {
		a, b := got[i-1], got[i]
		if a.at > b.at || a.at == b.at && a.seq > b.seq {
			t.Fatalf("events out of order at %d: %v then %v", i, a, b)
		}
		if b.seq%3 == 0 {
			t.Fatalf("cancelled event %d ran", b.seq)
		}
	}
}

func TestPastPanics(t *testing.T) {
	e := New(1)
	e.At(100, func() {})
	e.Run()
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "in the past") {
			t.Fatalf("scheduling into the past: recover() = %v, want a panic about the past", r)
		}
	}()
	e.At(99, func() {})
}

func TestRunUntil(t *testing.T) {
	e := New(1)
	var ran []Time
	for _, at := range []Time{5, 10, 15} {
		e.At(at, func() { ran = append(ran, e.Now()) })
	}
	e.RunUntil(10)
	if !slices.Equal(ran, []Time{5, 10}) || e.Now() != 10 {
		t.Fatalf("RunUntil(10): ran %v now %v", ran, e.Now())
	}
	e.RunUntil(12)
	if e.Now() != 12 {
		t.Fatalf("RunUntil(12) left now at %v", e.Now())
	}
	e.Run()
	if !slices.Equal(ran, []Time{5, 10, 15}) {
		t.Fatalf("after Run: %v", ran)
	}
}

// TestProcesses pins how processes interleave: sleeps, a completion, a
// condition, a child joined by its parent.
func TestProcesses(t *testing.T) {
	e := New(1)
	var got []string
	logf := func(format string, a ...any) {
		got = append(got, fmt.Sprintf("%v ", e.Now())+fmt.Sprintf(format, a...))
	}
	dma := e.NewNamedCompletion("dma")
	cond := NewCond("queue")
	queued := 0
	e.Spawn("driver", func(p *Proc) {
		logf("driver start")
		p.Sleep(Microsecond)
		logf("driver submits")
		e.After(2*Microsecond, dma.Complete)
		p.Wait(dma)
		logf("driver sees completion")
		queued = 2
		cond.Broadcast()
	})
	e.Spawn("app", func(p *Proc) {
		logf("app start")
		child := p.Spawn("worker", func(c *Proc) {
			c.WaitUntil(cond, func() bool { return queued > 0 })
			logf("worker got %d", queued)
			c.Sleep(Nanosecond)
		})
		p.Join(child)
		logf("app joined worker")
	})
	e.Run()
	want := []string{
		"0s driver start",
		"0s app start",
		"1us driver submits",
		"3us driver sees completion",
		"3us worker got 2",
		"3.001us app joined worker",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("process trace\n got %q\nwant %q", got, want)
	}
	if b := e.Blocked(); len(b) != 0 {
		t.Fatalf("Blocked() = %v after a clean run", b)
	}
}

// TestCPUTime: Sleep is computing, Wait is idle.
func TestCPUTime(t *testing.T) {
	e := New(1)
	done := e.NewCompletion()
	var p *Proc
	e.Spawn("worker", func(q *Proc) {
		p = q
		q.Sleep(3 * Microsecond)
		q.Wait(done)
		q.Sleep(2 * Microsecond)
	})
	e.At(10*Microsecond, done.Complete)
	e.Run()
	if p.CPUTime() != 5*Microsecond || e.Now() != 12*Microsecond {
		t.Fatalf("CPU time %v at %v, want 5us of 12us", p.CPUTime(), e.Now())
	}
}

func TestDeadlockReportAndClose(t *testing.T) {
	e := New(1)
	never := e.NewNamedCompletion("irq")
	unwound := false
	e.Spawn("stuck", func(p *Proc) {
		defer func() { unwound = true }()
		p.Wait(never)
		t.Error("stuck process resumed")
	})
	e.Run()
	b := e.Blocked()
	if len(b) != 1 || b[0] != "stuck (waiting on completion irq)" {
		t.Fatalf("Blocked() = %q", b)
	}
	e.Close()
	if !unwound {
		t.Fatal("Close did not unwind the blocked process")
	}
}

func TestBlockingOutsideProcessPanics(t *testing.T) {
	e := New(1)
	var p *Proc
	e.Spawn("p", func(q *Proc) { p = q; q.Sleep(10) })
	e.RunUntil(1)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "not running") {
			t.Fatalf("recover() = %v, want a panic about a process that is not running", r)
		}
		e.Close()
	}()
	p.Sleep(1)
}

func TestCompletionCallbacks(t *testing.T) {
	e := New(1)
	c := e.NewCompletion()
	var order []int
	c.OnComplete(func() { order = append(order, 1) })
	c.OnComplete(func() { order = append(order, 2) })
	e.At(7, c.Complete)
	e.Run()
	c.OnComplete(func() { order = append(order, 3) })
	if !slices.Equal(order, []int{1, 2, 3}) || c.At() != 7 || !c.Done() {
		t.Fatalf("order %v at %v done %v", order, c.At(), c.Done())
	}
}

// TestCompletionCallbacksAddedWhileRunning: the first callback is kept
// apart from the rest; a callback that adds another while the completion
// runs its callbacks sees it run at once, after the ones before it, and
// the one callback of a completion runs once.
func TestCompletionCallbacksAddedWhileRunning(t *testing.T) {
	e := New(1)
	c := e.NewCompletion()
	var order []int
	c.OnComplete(func() {
		order = append(order, 1)
		c.OnComplete(func() { order = append(order, 4) })
	})
	c.OnComplete(func() { order = append(order, 2) })
	c.OnComplete(func() { order = append(order, 3) })
	single := e.NewCompletion()
	n := 0
	single.OnComplete(func() { n++ })
	e.At(1, c.Complete)
	e.At(2, single.Complete)
	e.Run()
	if !slices.Equal(order, []int{1, 4, 2, 3}) || n != 1 {
		t.Fatalf("order %v, single callback ran %d times", order, n)
	}
}

// TestLabelledCompletionInReports: a labelled completion reports as
// prefix + name, to a waiter and when completed twice.
func TestLabelledCompletionInReports(t *testing.T) {
	e := New(1)
	never := e.NewLabelledCompletion("flow ", "rx7")
	e.Spawn("stuck", func(p *Proc) { p.Wait(never) })
	e.Run()
	if b := e.Blocked(); len(b) != 1 || b[0] != "stuck (waiting on completion flow rx7)" {
		t.Fatalf("Blocked() = %q", b)
	}
	e.Close()
	var twice Completion
	e.InitCompletion(&twice, "flow ", "tx1")
	twice.Complete()
	defer func() {
		if r := fmt.Sprint(recover()); r != "sim: completion flow tx1 completed twice" {
			t.Fatalf("recover() = %q", r)
		}
	}()
	twice.Complete()
}

func TestSeededRandIsDeterministic(t *testing.T) {
	a, b, c := New(42), New(42), New(43)
	same, diff := true, false
	for range 100 {
		x, y, z := a.Rand().Uint64(), b.Rand().Uint64(), c.Rand().Uint64()
		same = same && x == y
		diff = diff || x != z
	}
	if !same || !diff {
		t.Fatalf("same seed equal: %v, different seed differs: %v", same, diff)
	}
}

func TestTimeStringParse(t *testing.T) {
	cases := []struct {
		in   string
		want Time
		str  string
	}{
		{"6.6us", 6600 * Nanosecond, "6.6us"},
		{"6.6µs", 6600 * Nanosecond, "6.6us"},
		{"150ns", 150 * Nanosecond, "150ns"},
		{"1.5 s", 1500 * Millisecond, "1.5s"},
		{"3ps", 3, "3ps"},
		{"0", 0, "0s"},
		{"0.000000001ms", Picosecond, "1ps"},
		{"0.000001ms", Nanosecond, "1ns"},
		{"2.50ms", 2500 * Microsecond, "2.5ms"},
		{"-4ns", -4 * Nanosecond, "-4ns"},
		{"1.000000000001s", Second + 1, "1.000000000001s"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseTime(c.in)
			if err != nil || got != c.want {
				t.Fatalf("ParseTime(%q) = %v, %v; want %v", c.in, int64(got), err, int64(c.want))
			}
			if s := got.String(); s != c.str {
				t.Fatalf("String() = %q, want %q", s, c.str)
			}
			back, err := ParseTime(got.String())
			if err != nil || back != got {
				t.Fatalf("round trip %q -> %v, %v", got.String(), back, err)
			}
		})
	}
	for _, bad := range []string{"", "us", "5", "5 parsecs", "1.2.3us", "0.1ps", "99999999999s", "1.0000000000001s"} {
		if _, err := ParseTime(bad); err == nil {
			t.Errorf("ParseTime(%q) succeeded, want an error", bad)
		}
	}
}

func TestTransferTimeNeverEarly(t *testing.T) {
	if got := TransferTime(1e9, 10e9); got != 100*Millisecond {
		t.Fatalf("1 GB at 10 GB/s = %v, want 100ms", got)
	}
	if got := TransferTime(1, 3); got != 333333333334 {
		t.Fatalf("1 B at 3 B/s = %d ps, want ceil", got)
	}
	if TransferTime(0, 1) != 0 {
		t.Fatal("0 bytes take time")
	}
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"6.6us", "150ns", "1.5s", "0", "3ps", "-2ms", "1e3us"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseTime(s)
		if err != nil {
			return
		}
		back, err := ParseTime(v.String())
		if err != nil || back != v {
			t.Fatalf("ParseTime(%q) = %d; String %q parses back to %d, %v", s, v, v.String(), back, err)
		}
	})
}

// TestCompletionWaiterOrder: processes and step processes that wait on
// one completion wake in the order they began to wait (the first kept
// apart from the rest, as Completion.waiter), and a completion waited
// on by one process, then by several, wakes each once.
func TestCompletionWaiterOrder(t *testing.T) {
	for n := 1; n <= 5; n++ {
		e := New(1)
		c := e.NewCompletion()
		var order []int
		for i := range n {
			start := Time(10 - i) // the last spawned begins to wait first
			if i%2 == 0 {
				e.Spawn("p", func(p *Proc) {
					p.Sleep(start)
					p.Wait(c)
					order = append(order, i)
				})
				continue
			}
			waited := false
			e.SpawnStep("s", func(s *StepProc) Next {
				if !waited {
					waited = true
					if s.Now() < start {
						waited = false
						return SleepFor(start - s.Now())
					}
					return WaitFor(c)
				}
				order = append(order, i)
				return Exit()
			})
		}
		e.At(20, c.Complete)
		e.Run()
		want := make([]int, 0, n)
		for i := n - 1; i >= 0; i-- {
			want = append(want, i)
		}
		if !slices.Equal(order, want) {
			t.Fatalf("%d waiters woke in order %v, want %v", n, order, want)
		}
	}
}
