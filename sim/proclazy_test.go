package sim

import (
	"slices"
	"testing"
)

// TestProcessStartsLazily: a spawned process has no coroutine until it
// first runs, runs in spawn order all the same, and one closed before
// it ran never runs its body.
func TestProcessStartsLazily(t *testing.T) {
	e := New(1)
	var order []string
	a := e.Spawn("a", func(p *Proc) { order = append(order, "a"); p.Sleep(Nanosecond); order = append(order, "a2") })
	b := e.Spawn("b", func(p *Proc) { order = append(order, "b") })
	if a.co != nil || b.co != nil {
		t.Fatal("a process has its coroutine before it ran")
	}
	e.Run()
	if want := []string{"a", "b", "a2"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if !a.Exited().Done() || !b.Exited().Done() {
		t.Error("exits not completed")
	}

	e = New(1)
	ran := false
	e.Spawn("never", func(*Proc) { ran = true })
	e.Close()
	if ran {
		t.Error("a process closed before it ran ran its body")
	}
}

// TestExitName: waiting on another process's exit is reported with the
// exit's name, made on demand.
func TestExitName(t *testing.T) {
	e := New(1)
	child := e.Spawn("child", func(p *Proc) { p.Wait(e.NewNamedCompletion("never")) })
	e.Spawn("parent", func(p *Proc) { p.Join(child) })
	e.Run()
	want := []string{"child (waiting on completion never)", "parent (waiting on completion exit of child)"}
	if got := e.Blocked(); !slices.Equal(got, want) {
		t.Errorf("Blocked() = %q, want %q", got, want)
	}
	e.Close()
}
