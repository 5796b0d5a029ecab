package dmaengine

import "testing"

func TestDescriptorLayout(t *testing.T) {
	d := Descriptor{Src: 0x1122334455667788, Dst: 0x99aabbccddeeff00, Len: 0xfedcba98, Flags: FlagIRQ | FlagFence}
	b := make([]byte, DescSize)
	for i := range b {
		b[i] = 0xff
	}
	d.encode(b)
	if got := decodeDescriptor(b); got != d {
		t.Errorf("decode(encode(%+v)) = %+v", d, got)
	}
	if s := decodeStatus(b[StatusOffset:]); s != (Status{}) {
		t.Errorf("a written descriptor's status is %+v, want cleared", s)
	}
	for _, s := range []Status{{Done: true, Bytes: 1500}, {Done: true, Error: true, Bytes: 7}, {}} {
		s.encode(b[StatusOffset:])
		if got := decodeStatus(b[StatusOffset:]); got != s {
			t.Errorf("status %+v round-trips to %+v", s, got)
		}
	}
	if got := (FlagIRQ | FlagFence | 8).String(); got != "IRQ|FENCE|0x8" {
		t.Errorf("flags %q", got)
	}
}
