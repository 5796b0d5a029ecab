package sim

import (
	"syscall"
	"testing"
)

// BenchmarkEvents measures plain events: each event schedules the next
// one a little later while a backlog of 1,000 pending events keeps the
// heap realistic. Goal (issue 2): ≥ 5 million events per second on one core.
func BenchmarkEvents(b *testing.B) {
	e := New(1)
	for i := range 1000 {
		e.At(Time(i)*Second, func() {})
	}
	var tick func()
	tick = func() { e.After(Nanosecond, tick) }
	e.At(0, tick)
	stepLoop(b, e, "events/s")
}

// BenchmarkProcessSwitch measures a process blocking and being resumed
// (Sleep: one event plus two coroutine switches). Goal: ≥ 2 million
// process switches per second.
func BenchmarkProcessSwitch(b *testing.B) {
	e := New(1)
	e.Spawn("sleeper", func(p *Proc) {
		for {
			p.Sleep(Nanosecond)
		}
	})
	stepLoop(b, e, "switches/s")
	e.Close()
}

// BenchmarkCompletionPingPong: two processes hand a token back and forth
// through completions, the pattern of a driver waiting for a DMA.
func BenchmarkCompletionPingPong(b *testing.B) {
	e := New(1)
	var ping, pong *Completion
	ping, pong = e.NewCompletion(), e.NewCompletion()
	e.Spawn("a", func(p *Proc) {
		for {
			c := ping
			p.Wait(c)
			ping = e.NewCompletion()
			pong.Complete()
		}
	})
	e.Spawn("b", func(p *Proc) {
		for {
			ping.Complete()
			c := pong
			p.Wait(c)
			pong = e.NewCompletion()
		}
	})
	stepLoop(b, e, "switches/s")
	e.Close()
}

// BenchmarkStepSwitch is BenchmarkProcessSwitch with a StepProc: one
// event and a call of its step, no coroutine switch.
func BenchmarkStepSwitch(b *testing.B) {
	e := New(1)
	e.SpawnStep("sleeper", func(*StepProc) Next { return SleepFor(Nanosecond) })
	stepLoop(b, e, "switches/s")
	e.Close()
}

// BenchmarkSpawnReturn: a chain of short processes, each spawned by the
// one before it and returning after one sleep (a driver's bottom half
// per interrupt); ns/op is per process.
func BenchmarkSpawnReturn(b *testing.B) {
	e := New(1)
	defer e.Close()
	n := 0
	var body func(p *Proc)
	body = func(p *Proc) {
		p.Sleep(Nanosecond)
		if n++; n < b.N {
			e.Spawn("short", body)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	e.Spawn("short", body)
	e.Run()
}

// stepLoop runs one event of e per iteration (Step, which never takes
// a sleep's shortcut) and reports the events per second as unit and the
// CPU time (user + system) per event, which other processes on the
// machine disturb less than the wall clock.
func stepLoop(b *testing.B, e *Engine, unit string) {
	b.ReportAllocs()
	n := 0
	cpu0 := cpuNow()
	for b.Loop() {
		e.Step()
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), unit)
	b.ReportMetric(float64(cpuNow()-cpu0)/float64(n), "cpu-ns/event")
}

// BenchmarkEventsSmallQueue measures events through a heap of about 8,
// the queue of a NIC packet's path: 7 chains, each scheduling its next
// event a pseudo-random 1-64 ns later, and a timer re-armed (cancelled
// and scheduled again) by every 4th event, as the fabric's completion
// timer is on a recompute.
func BenchmarkEventsSmallQueue(b *testing.B) {
	e := New(1)
	x := uint64(1)
	delay := func() Time {
		x = x*6364136223846793005 + 1442695040888963407
		return Time(1 + x>>58)
	}
	var timer Handle
	n := 0
	timerFn := func() {}
	var tick func()
	tick = func() {
		if n++; n%4 == 0 {
			e.Cancel(timer)
			timer = e.After(delay()+32, timerFn)
		}
		e.After(delay(), tick)
	}
	for range 7 {
		e.After(delay(), tick)
	}
	timer = e.After(100, timerFn)
	stepLoop(b, e, "events/s")
}

// cpuNow is the process's user + system CPU time in ns.
func cpuNow() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkRunAheadSleep: a process that runs ahead (Proc.RunAhead)
// sleeps 10 ns at a time while a chain of events fires every 3 ns and
// a second chain every 7 ns, so that each sleep runs two to four events
// on the sleeper's coroutine before it goes on: a NIC driver's sleeps
// between the device's and the fabric's events. cpu-ns/sleep includes
// those events.
func BenchmarkRunAheadSleep(b *testing.B) {
	e := New(1)
	defer e.Close()
	done := false
	e.Spawn("driver", func(p *Proc) {
		p.RunAhead()
		for b.Loop() {
			p.Sleep(10 * Nanosecond)
		}
		done = true
	})
	chain := func(d Time) {
		var tick func()
		tick = func() {
			if !done {
				e.After(d, tick)
			}
		}
		e.After(d, tick)
	}
	chain(3 * Nanosecond)
	chain(7 * Nanosecond)
	b.ReportAllocs()
	cpu0 := cpuNow()
	e.Run()
	b.ReportMetric(float64(cpuNow()-cpu0)/float64(b.N), "cpu-ns/sleep")
}
