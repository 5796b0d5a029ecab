// Package scenario holds dmalab's built-in scenarios: programs that run
// on a modelled machine and fill a report, each with named parameters
// (set with --set key=value) and a default platform.
//
// A scenario is the model's counterpart of a benchmark on real hardware:
// "transfers" is what nvbandwidth and CUDA's bandwidthTest measure, with
// the path and direction names "dmalab probe" uses, so the model's
// predictions and the hardware's measurements print side by side.
package scenario
