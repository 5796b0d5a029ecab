// Package cli is the dmalab command line as a library: the subcommands
// run, check, list, platform (with from-topo), probe, topo, calibrate,
// validate, merge, report, version and completion, their flags, and the
// exit statuses (0 success, 1 findings, 2 bad usage or input, 3 an
// internal error). Command cmd/dmalab is Main and nothing else. run and
// check take --numactl, numactl(8)'s placement options for every process
// of the run; the text output prints a run's numastat as numastat does.
// run and check take --sweep KEY=V1,V2,... (the cartesian product of any
// --set keys, its points run in parallel and printed in the product's
// order) and --shard I/N (one shard of it); merge joins the shards'
// documents into the whole sweep's, byte for byte.
//
// The scenarios run and check offer are those of the dmalab catalogue:
// the built-in ones of package scenario, and any a program registers
// with dmalab.Register before calling Main. A program that measures its
// own driver thus gets the whole command line for it — --set of its
// parameters, --platform, --json, --csv, --trace, check with the
// diagnostics — by registering a scenario and calling cli.Main from its
// own main.
//
// Every table goes through report.Table, so that its text (aligned),
// its --csv (RFC 4180) and the HTML report show the same cells. The text
// output of a run explains itself: a note defines its GB/s, the time's
// phases come with their shares, and "next:" says what to try (hints.go).
//
// # Why no CLI library
//
// The parser is the standard flag package with a thin layer
// (parseArgs, printFlags), not cobra, urfave/cli or kong, because what
// those would bring already works here and what they would change is
// what users depend on:
//
//   - flags anywhere on the line ("dmalab run --json transfers" and
//     "dmalab run transfers --json"), "--" to end them, both -json and
//     --json accepted, --help (and -h, help CMD) on every command, help
//     on stdout with exit 0;
//   - exit statuses 0/1/2/3 chosen per command (a finding is 1, bad
//     usage 2, a panic 3): cobra's RunE maps every error to 1 and prints
//     its own usage on error, which would have to be undone everywhere;
//   - help in GNU style, each default once (printFlags), a scenario's
//     parameters after the flags ("dmalab run SCENARIO --help");
//   - completion (completion.go), generated from the commands' own
//     --help, so that it cannot drift from the flags; cobra's generated
//     scripts would also complete scenario names only through a custom
//     ValidArgsFunction, the same work as here.
//
// A library would add a dependency tree and a different help layout
// for no new behaviour; the parser is about 200 lines and tested
// (main_test.go, output_test.go, exit_test.go).
package cli
