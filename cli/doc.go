// Package cli is the dmalab command line as a library: the subcommands
// run, check, list, platform (with from-topo), probe, topo, calibrate,
// validate and merge, their flags, and the exit
// statuses (0 success, 1 findings, 2 bad usage or input). Command
// cmd/dmalab is Main and nothing else. run and check take --numactl,
// numactl(8)'s placement options for every process of the run; the
// text output prints a run's numastat as numastat does. run and check
// take --sweep KEY=V1,V2,... (the cartesian product of any --set keys,
// its points run in parallel and printed in the product's order) and
// --shard I/N (one shard of it); merge joins the shards' documents into
// the whole sweep's, byte for byte.
//
// The scenarios run and check offer are those of the dmalab catalogue:
// the built-in ones of package scenario, and any a program registers
// with dmalab.Register before calling Main. A program that measures its
// own driver thus gets the whole command line for it — --set of its
// parameters, --platform, --json, --trace, check with the diagnostics —
// by registering a scenario and calling cli.Main from its own main.
package cli
