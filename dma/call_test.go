package dma

import "testing"

func TestCallFormat(t *testing.T) {
	var c callFmt
	for range 2 { // the second round comes from the cache
		for _, tc := range []struct{ got, want string }{
			{c.begin("dma_map_single", "nic0").hex("va:", 0xffff888100000000).dec(1500).dir(FromDevice).end(),
				"dma_map_single(nic0, va:0xffff888100000000, 1500, DMA_FROM_DEVICE)"},
			{c.begin("dma_map_sg", "gem0").sgl(4).int(3).dir(Direction(7)).end(),
				"dma_map_sg(gem0, sgl[4], 3, DMA_DIRECTION(7))"},
			{c.begin("device_release_driver", "nic1").end(), "device_release_driver(nic1)"},
		} {
			if tc.got != tc.want {
				t.Errorf("got %s, want %s", tc.got, tc.want)
			}
		}
	}
	// Every distinct call keeps its own text, whatever the cache holds.
	seen := map[string]bool{}
	for i := range uint64(2000) {
		s := c.begin("dma_unmap_page", "nic0").hex("dma:", i).end()
		if seen[s] {
			t.Fatalf("%s twice", s)
		}
		seen[s] = true
	}
}
