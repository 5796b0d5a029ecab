package nvme

// namespace is namespace 1's content: a sparse map of the blocks
// written. A block never written reads as zeros, as Identify's DLFEAT
// (001b) says a deallocated block does.
type namespace struct {
	lbaSize, blocks uint64
	data            map[uint64][]byte
}

func newNamespace(lbaSize, blocks uint64) *namespace {
	return &namespace{lbaSize: lbaSize, blocks: blocks, data: map[uint64][]byte{}}
}

// read returns nlb blocks from slba.
func (ns *namespace) read(slba, nlb uint64) []byte {
	out := make([]byte, nlb*ns.lbaSize)
	for k := range nlb {
		if b, ok := ns.data[slba+k]; ok {
			copy(out[k*ns.lbaSize:], b)
		}
	}
	return out
}

// write stores data (whole blocks) from slba.
func (ns *namespace) write(slba uint64, data []byte) {
	for k := uint64(0); k*ns.lbaSize < uint64(len(data)); k++ {
		ns.data[slba+k] = append([]byte(nil), data[k*ns.lbaSize:(k+1)*ns.lbaSize]...)
	}
}
