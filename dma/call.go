package dma

import (
	"hash/maphash"
	"strconv"
)

// callFmt builds Event.Call, "dma_map_single(nic0, va:0xffff888100000000,
// 1500, DMA_FROM_DEVICE)", in a reused buffer, since map/unmap pairs are
// a hot path. Drivers map the same ring buffers over and over, so most
// calls repeat one made before: a small direct-mapped cache of the
// strings made lets those cost no allocation, in bounded memory.
type callFmt struct {
	b     []byte
	cache [256]string
}

var callSeed = maphash.MakeSeed()

func (c *callFmt) begin(fn, dev string) *callFmt {
	c.b = append(c.b[:0], fn...)
	c.b = append(c.b, '(')
	c.b = append(c.b, dev...)
	return c
}

// hex adds an address argument with its space's prefix ("va:", "pa:",
// "dma:"), as the mem address types print.
func (c *callFmt) hex(prefix string, v uint64) *callFmt {
	c.b = append(c.b, ", "...)
	c.b = append(c.b, prefix...)
	c.b = append(c.b, "0x"...)
	c.b = strconv.AppendUint(c.b, v, 16)
	return c
}

func (c *callFmt) dec(v uint64) *callFmt {
	c.b = append(c.b, ", "...)
	c.b = strconv.AppendUint(c.b, v, 10)
	return c
}

func (c *callFmt) int(v int) *callFmt {
	c.b = append(c.b, ", "...)
	c.b = strconv.AppendInt(c.b, int64(v), 10)
	return c
}

func (c *callFmt) str(s string) *callFmt {
	c.b = append(c.b, ", "...)
	c.b = append(c.b, s...)
	return c
}

func (c *callFmt) dir(d Direction) *callFmt { return c.str(d.String()) }

// sgl names a scatterlist argument by its length: "sgl[3]".
func (c *callFmt) sgl(n int) *callFmt {
	c.b = append(c.b, ", sgl["...)
	c.b = strconv.AppendInt(c.b, int64(n), 10)
	c.b = append(c.b, ']')
	return c
}

func (c *callFmt) end() string {
	c.b = append(c.b, ')')
	slot := &c.cache[maphash.Bytes(callSeed, c.b)%uint64(len(c.cache))]
	if *slot != string(c.b) {
		*slot = string(c.b)
	}
	return *slot
}
