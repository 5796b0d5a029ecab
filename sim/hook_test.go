package sim

import "testing"

type testEvent struct {
	Header
	N int
}

func TestHooksOrderAndHeader(t *testing.T) {
	var h Hooks[testEvent]
	if h.Active() {
		t.Fatal("zero Hooks is active")
	}
	var got []string
	h.Hook(func(e *testEvent) { got = append(got, "typed") })
	h.HookAll(func(e Event) {
		hd := e.Head()
		got = append(got, hd.Component+"/"+hd.Cause.String())
	})
	if !h.Active() {
		t.Fatal("Hooks with hooks is not active")
	}
	h.Emit(&testEvent{Header: Header{Time: 5, Component: "dma", Cause: CauseTransfer}, N: 1})
	if len(got) != 2 || got[0] != "typed" || got[1] != "dma/transfer" {
		t.Fatalf("hooks ran %q, want [typed dma/transfer]", got)
	}
}

func TestCauseNames(t *testing.T) {
	for c := CauseCall; c < nCauses; c++ {
		if c.String() == "" || c.String() == "cause?" {
			t.Errorf("cause %d has no name", c)
		}
	}
	if Cause(200).String() != "cause?" {
		t.Error("unknown cause not reported")
	}
}
