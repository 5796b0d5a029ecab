package dmaengine

// Phases reports the data phases ch has made and those it holds free:
// every phase over goes back to the channel.
func Phases(ch *Chan) (made, free int) { return ch.phases, len(ch.freePh) }
