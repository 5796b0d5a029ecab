package scenario

import "github.com/dmalab/dmalab"

// ErrModel is dmalab.ErrModel: a model that deadlocked.
var ErrModel = dmalab.ErrModel

// runEngine runs the scenario's system to the end under the front door's
// guard (dmalab.System.RunEngine); sizes names the parameters to make
// smaller when the run cannot end.
func runEngine(c *Context, sizes ...string) error { return c.RunEngine(sizes...) }
