package mem

import "testing"

// TestLatestIn: a range's newest version moves when any byte of it is
// written, and only then.
func TestLatestIn(t *testing.T) {
	m := newMem(t, testSpec(64*miB), Options{})
	pa, _ := buf(t, m, 0, 16*kiB)
	v1 := m.DeviceWrite("dev", true, pa+100, 8)
	v2 := m.DeviceWrite("dev", true, pa+8*kiB+3, 1)
	for _, c := range []struct {
		name string
		off  PhysAddr
		size uint64
		want Version
	}{
		{"never written", 0, 100, 0},
		{"one byte of the first write", 107, 1, v1},
		{"both writes", 0, 16 * kiB, v2},
		{"between them", 108, 8*kiB - 105, 0},
		{"the second's single byte", 8*kiB + 3, 1, v2},
	} {
		if got := m.LatestIn(pa+c.off, c.size); got != c.want {
			t.Errorf("%s: LatestIn = %d, want %d", c.name, got, c.want)
		}
	}
}
