package probe

// touchSink receives what host read touches read, so that the compiler
// cannot drop the loads.
var touchSink byte

// hostTouch accesses one byte every stride bytes of b; a write stores
// byte(k) at touch k.
func hostTouch(b []byte, stride int64, write bool) {
	var acc byte
	for k, off := 0, int64(0); off < int64(len(b)); k, off = k+1, off+stride {
		if write {
			b[off] = byte(k)
		} else {
			acc += b[off]
		}
	}
	touchSink += acc
}
