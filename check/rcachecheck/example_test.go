package rcachecheck_test

import (
	"fmt"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/rcachecheck"
	"github.com/dmalab/dmalab/regcache"
)

// A buffer freed under a cached pin that nothing invalidates is
// reported when the run ends.
func ExampleAttach() {
	chk := check.New(check.Options{})
	x, w := rcachecheck.Attach(chk, &fake{bids: map[uint64]uint64{0x10000: 1}})
	c, _ := regcache.New(w, regcache.Config{})
	r, _ := c.Get(nil, 0x10000, 0x1000)
	x.Got(nil, r)
	_ = c.Put(nil, r)
	x.Put(r)
	x.Freed(nil, regcache.Range{Addr: 0x10000, Len: 0x1000}, "free")
	chk.Finish(0)
	fmt.Println(chk.Count(rcachecheck.FreedPinned))
	// Output: 1
}
