package fabric

import (
	"strings"
	"testing"
)

// TestReleaseReusesFlow: a flow given back is reused by a Start after the
// next recompute, as if new (its name, size, times and rate are the new
// flow's), and a chain of released flows ends when fresh ones would.
func TestReleaseReusesFlow(t *testing.T) {
	run := func(release bool) (ends []int64, reused int) {
		p := newPair(Factors{})
		l := p.fab.Connect("l", p.a, p.b, 10e9, 1*us, FullDuplex)
		seen := map[*Flow]bool{}
		var next func(i int)
		next = func(i int) {
			fl := p.fab.Start("f", route(l, AtoB), int64(1000*(i+1)))
			if seen[fl] {
				reused++
				if fl.Name() != "f" || fl.Bytes() != int64(1000*(i+1)) || fl.Start() != p.eng.Now() || fl.Rate() != 0 || fl.End() != 0 {
					t.Errorf("reused flow %d not reset: bytes %d, start %v (now %v), rate %v, end %v", i, fl.Bytes(), fl.Start(), p.eng.Now(), fl.Rate(), fl.End())
				}
			}
			seen[fl] = true
			fl.Done().OnComplete(func() {
				ends = append(ends, int64(fl.End()))
				if release {
					p.fab.Release(fl)
				}
				if i < 9 {
					next(i + 1)
				}
			})
		}
		next(0)
		p.eng.Run()
		return ends, reused
	}
	fresh, n := run(false)
	if n != 0 {
		t.Fatalf("%d flows reused without Release", n)
	}
	got, n := run(true)
	if n == 0 {
		t.Error("no released flow was reused")
	}
	if len(got) != 10 || len(fresh) != 10 {
		t.Fatalf("ends %v and %v, want 10 each", got, fresh)
	}
	for i := range got {
		if got[i] != fresh[i] {
			t.Errorf("flow %d ends at %d with releases, %d without", i, got[i], fresh[i])
		}
	}
}

// TestReleaseWithHooks: while a hook listens, Release keeps the flow as it
// is (an observer may hold it), so a later Start gets a new one.
func TestReleaseWithHooks(t *testing.T) {
	p := newPair(Factors{})
	l := p.fab.Connect("l", p.a, p.b, 10e9, 1*us, FullDuplex)
	var kept []*Flow
	p.fab.Hooks.Hook(func(ev *Event) {
		if ev.Kind == FlowEnd {
			kept = append(kept, ev.Flow)
		}
	})
	a := p.fab.Start("a", route(l, AtoB), 1000)
	p.eng.Run()
	p.fab.Release(a)
	p.eng.Run()
	b := p.fab.Start("b", route(l, AtoB), 2000)
	p.eng.Run()
	if a == b {
		t.Fatal("a flow a hook saw was reused")
	}
	if kept[0].Name() != "a" || kept[0].Bytes() != 1000 || kept[0].End() == 0 {
		t.Errorf("kept flow changed: %q, %d B, end %v", kept[0].Name(), kept[0].Bytes(), kept[0].End())
	}
}

// TestReleaseMisuse: releasing a flow that is not done, or twice, is a
// model bug.
func TestReleaseMisuse(t *testing.T) {
	p := newPair(Factors{})
	l := p.fab.Connect("l", p.a, p.b, 10e9, 1*us, FullDuplex)
	fl := p.fab.Start("f", route(l, AtoB), 1000)
	mustPanic(t, "not done", func() { p.fab.Release(fl) })
	p.eng.Run()
	p.fab.Release(fl)
	mustPanic(t, "twice", func() { p.fab.Release(fl) })
}

func mustPanic(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, "released while not done") {
			t.Errorf("%s: panic %v, want one about the release", what, r)
		}
	}()
	fn()
}
