// Command ipu-report turns a plan, an object and a profile into what
// people look at:
//
//	ipu-report [--plan P.plan] [--object O.ipuobj] [--profile P.capnp] -o DIR
//
// From whatever artifacts it is given it writes into DIR:
//
//   - trace.json (with a profile): the Chrome trace-event JSON format that
//     ui.perfetto.dev and chrome://tracing open. Process "tiles" has a
//     track per group of tiles that ran with identical cycles (the track
//     name lists the tiles, args.count says how many; past 60000 tile
//     slices, tiles within 1, 5 or 20% of each superstep's longest, else
//     bands by total cycles), and one track for the idle tiles; each track has a slice per compute, exchange or
//     host period of every superstep and one per sync. Process "nodes"
//     has a track per plan node with the node's supersteps, and process
//     "supersteps" one track with every superstep. Times are
//     microseconds at the preset's clock; args.cycles keeps the cycles.
//   - memory.png (with an object): bytes per tile by category against the
//     usable memory, the worst tiles labelled.
//   - timeline.png and tiles.png (with a profile): the BSP supersteps
//     stacked compute, exchange, host and sync; a heat map of each tile's
//     cycles on the chip's tile grid (columns of TilesPerColumn tiles).
//   - liveness.png (with a plan): the bytes of tensors live at each step
//     of the program, on the worst tile and on average.
//   - index.html: one static page (no script, no network; the plots are
//     embedded as data: URIs and also stored beside it) with the summary,
//     the plots, the nodes' table and the worst tiles' memory.
//
// The inputs are read and checked against each other (the object must
// have been linked from the plan, the profile must be of the same
// architecture) before anything is written; DIR is then written beside
// itself under a temporary name and renamed into place, so that a failed
// run leaves no half-written DIR.
package main
