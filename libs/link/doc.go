// Package link lowers a plan to an object: tile code for every kernel
// (libs/codegen), exchange phases scheduled to the cycle (libs/sched),
// tile memory placement, the host program and the device program's cycle
// cost.
//
// # Program shape
//
// Every tile with work runs the same superstep sequence (tiles without
// work in a superstep only sync):
//
//	rt_start: hsync            startup ends; wait for the host's call
//	supervisor:
//	  fetch     host     every tile fetches its input blocks (hin)
//	  per node, in node order:
//	    a matrix product:
//	      cast      compute  (cast before the exchange) source tiles cast
//	                         their row pieces to the AMP type; (an operand
//	                         another node computed, fed.go) the tiles
//	                         holding it pack it into panels ("pack:")
//	      operands  exchange the cast pieces travel to the product blocks
//	      matmul    compute  casts after the exchange, the AMP product,
//	                         the Gemm epilogue, the output cast
//	      reduce    exchange (k split) partial sums to their owners
//	      reduce-add compute (k split) sums of the partial products
//	    any other node (elementwise.go): an exchange superstep when an
//	      operand is not where the node runs, then its kernels, in the
//	      compute superstep of the previous node when nothing moved
//	  result    host     every tile writes its output blocks (hout),
//	                     then br rt_loop (hsync; br supervisor)
//
// # Tile runtime
//
// compile_runtime assembles the tile runtime once for the architecture
// (runtime.go): a launch-and-join routine per worker count, the host
// command loops (hin or hout per command of a table), rt_loop and
// rt_start, position-independent, with a relocation list. link_runtime
// links into each tile program the routines it uses and resolves their
// references. Layout of a tile's code: its kernels, its host command
// tables, its runtime (rt_start last), then the supervisor program: per
// launch the kernel's entry loaded and the launch routine rt_launch_<w>
// expanded in place (its runs and join, without its return: no call
// cycles), host command loops called, syncs, exchange code and branch
// tests.
//
// # Layouts
//
// Product operands live in the kernel's panel layouts (codegen.MatMul):
// A blocks in groups of 4 rows, B blocks in panels of 16 columns, both
// k-major. Blocks of M and N start at multiples of 4 and 16
// (cost.Split.MBlock, NBlock), so a block is whole groups or panels, and
// a source piece of a cast-before operand (rows of the root, aligned as
// planner.SourceAlign says) reaches a block as runs of whole groups:
// one run when both hold the same k extent, else one per group. A graph
// input is delivered by the host already in its block layout (the
// object's host tensor blocks: one contiguous page range per block);
// constants are in the tile images. Every buffer of a product has the
// same address on every tile of the product (sized for the largest
// block), so a multicast lands at one address.
//
// # Cost
//
// final_cycles counts the supersteps from the first compute or exchange
// superstep to the last, each as its longest tile plus the preset's sync:
// a compute superstep's tile runs its launches back to back (codegen's
// exact CyclesAt), an exchange superstep lasts sched's makespan. The
// host supersteps are reported separately.
//
// # Reused exchange schedules
//
// Exchange supersteps that move the same pattern (the same transfers'
// tiles and word counts, in the same order: a repeated layer's moves at
// its own buffers' addresses) are scheduled once. The first of each
// pattern in program order is scheduled; every later one relocates that
// schedule (sched.Relocate: the same instructions and cycles, each
// register load of an old address loading the new one) and validates it
// (sched.Validate). The relocation is refused when it would change what
// the scheduler's decisions depend on: which operand values of a tile
// are equal, which are zero, how many instructions each value's load
// takes. A refused or invalid relocation is scheduled from scratch. A
// relocated schedule is the one scheduling would make, so the object is
// the same with Options.NoExchangeReuse; only a reused superstep logs
// `reused exchange optimization after validating relocated rows` (phase,
// from: the superstep whose schedule it reuses), and Stats counts them.
package link
