// Package ntcopy copies memory with non-temporal (streaming) stores, the
// way a driver's copy out of a cache-resident staging buffer into a large
// destination does: the stores bypass the caches and write whole lines to
// DRAM without reading them first (no read-for-ownership), so such a copy
// is bound by the memory's write path rather than by one thread's
// read latency. On amd64 it uses SSE2 MOVNTDQ, which every amd64 CPU has;
// elsewhere it is Go's copy.
package ntcopy

// Streaming reports whether Copy uses non-temporal stores here.
const Streaming = streaming

// Copy copies min(len(dst), len(src)) bytes from src to dst and returns
// the count. The part of dst that is 16-byte aligned and a multiple of
// 64 bytes long is written with non-temporal stores, the rest with Go's
// copy; the stores are fenced before Copy returns.
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n == 0 {
		return 0
	}
	dst, src = dst[:n], src[:n]
	if !streaming || n < 64 {
		return copy(dst, src)
	}
	head := 0
	if a := addr(dst) & 15; a != 0 {
		head = min(16-int(a), n)
		copy(dst[:head], src[:head])
	}
	body := (n - head) &^ 63
	if body > 0 {
		stream(&dst[head], &src[head], uintptr(body))
	}
	copy(dst[head+body:], src[head+body:])
	return n
}
