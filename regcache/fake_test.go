package regcache

import (
	"errors"
	"fmt"
	"sync"
)

// fakePinner pins nothing: it records live pins, refuses past a byte
// budget with ErrNoSpace, and names buffer IDs by a function the test
// sets.
type fakePinner struct {
	mu       sync.Mutex
	tr       Traits
	next     int
	live     map[int]Range
	unpinned []Range
	pins     int
	budget   uint64 // 0: unlimited
	bytes    uint64
	failWith error // every pin fails with it
	bid      func(uint64) uint64
	onPin    func(Range) // after a pin succeeds, before it returns
	inCB     bool        // a callback is running: Unpin must not come
	cbUnpin  int         // Unpins seen while inCB
}

func newFake(page uint64) *fakePinner {
	return &fakePinner{tr: Traits{PageSize: page}, live: map[int]Range{}}
}

func (f *fakePinner) Traits() Traits { return f.tr }

func (f *fakePinner) Pin(_ any, r Range, _ func(Range)) (any, error) {
	f.mu.Lock()
	if f.failWith != nil {
		f.mu.Unlock()
		return nil, f.failWith
	}
	if f.budget > 0 && f.bytes+r.Len > f.budget {
		b := f.bytes
		f.mu.Unlock()
		return nil, fmt.Errorf("%w: %d bytes pinned of %d", ErrNoSpace, b, f.budget)
	}
	f.next++
	h := f.next
	f.live[h] = r
	f.bytes += r.Len
	f.pins++
	hook := f.onPin
	f.mu.Unlock()
	if hook != nil {
		hook(r)
	}
	return h, nil
}

func (f *fakePinner) Unpin(_ any, r Range, h any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inCB {
		f.cbUnpin++
	}
	got, ok := f.live[h.(int)]
	if !ok || got != r {
		return errors.New("fake: unpin of a pin not live")
	}
	delete(f.live, h.(int))
	f.bytes -= r.Len
	f.unpinned = append(f.unpinned, r)
	return nil
}

func (f *fakePinner) BufferID(_ any, addr uint64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bid == nil {
		return 1, nil
	}
	return f.bid(addr), nil
}

func (f *fakePinner) liveCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live)
}
